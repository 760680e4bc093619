"""AgentEvents: what RunApplication tells the encoders, live and from committed history.

Events are nouns for what happened. Live deltas (``TextDelta``, ``ReasoningDelta``,
``ToolCallArgs``) are best-effort; everything else is emitted only after the ledger has committed
it (tool results, state, the run's outcome). Encoders turn these into wire events; they never see
the ledger or the model.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from awaken.core.messages import Message, Usage


@attrs.frozen
class RunStarted:
    thread_id: str
    run_id: str
    #: the id of the assistant message this run's answer belongs to (reused by a continuation)
    message_id: str
    resumed: bool = False
    #: the thread's agent state when the run starts
    state: dict[str, Any] | None = None


@attrs.frozen
class StepStarted:
    step: int


@attrs.frozen
class StepFinished:
    step: int
    usage: Usage = Usage()


@attrs.frozen
class TextStart:
    message_id: str


@attrs.frozen
class TextDelta:
    message_id: str
    delta: str


@attrs.frozen
class TextEnd:
    message_id: str


@attrs.frozen
class ReasoningStart:
    message_id: str


@attrs.frozen
class ReasoningDelta:
    message_id: str
    delta: str


@attrs.frozen
class ReasoningEnd:
    message_id: str


@attrs.frozen
class ToolCallStart:
    tool_call_id: str
    name: str
    parent_message_id: str


@attrs.frozen
class ToolCallArgs:
    tool_call_id: str
    delta: str


@attrs.frozen
class ToolCallEnd:
    tool_call_id: str
    name: str
    #: the complete argument text
    arguments: str


@attrs.frozen
class ToolApprovalRequested:
    """A committed permission gate: the call waits for a person's decision."""

    tool_call_id: str


@attrs.frozen
class ToolResult:
    """A committed tool outcome. ``status`` is ok / error / denied."""

    tool_call_id: str
    message_id: str
    name: str
    content: str
    status: Literal["ok", "error", "denied"] = "ok"
    approval: Literal["approved", "denied"] | None = None


@attrs.frozen
class ToolProgress:
    """A server tool's progress while it runs (``ctx.progress``): live only, never committed; the
    committed ``ToolResult`` follows (or the run's end)."""

    tool_call_id: str
    name: str
    #: any JSON value the tool sent
    data: Any


@attrs.frozen
class StateChanged:
    """The committed agent state after a step, with the RFC 6902 patch from the previous one."""

    state: dict[str, Any]
    patch: list[dict[str, Any]]


@attrs.frozen
class Gate:
    """A call waiting at a permission gate, as a waiting run's end describes it."""

    tool_call_id: str
    name: str
    #: the model's JSON arguments
    arguments: str
    #: the tool's JSON-schema parameters (what edited arguments must satisfy)
    parameters: dict[str, Any]


@attrs.frozen
class RunFinished:
    """The committed outcome ``completed`` or ``waiting`` (with the pending call ids).

    A waiting run also names its permission ``gates`` and carries the thread as the run read it
    (``history``, ``state``), for a protocol that ends such a run with snapshots (AG-UI 1.0 interrupts).
    ``history_whole`` says whether ``history`` is the whole thread (a run reads only its history
    budget's tail of a long one).
    """

    thread_id: str
    run_id: str
    outcome: Literal["completed", "waiting"]
    usage: Usage = Usage()
    pending: tuple[str, ...] = ()
    gates: tuple[Gate, ...] = ()
    history: tuple[Message, ...] = ()
    state: dict[str, Any] | None = None
    history_whole: bool = True


@attrs.frozen
class RunStopped:
    """The run was stopped on request (``POST /v1/threads/{id}/stop``) and is committed ``interrupted``
    with ``cause``; the stream ends with the protocol's terminal event for a stop."""

    cause: str
    message: str


@attrs.frozen
class RunFailed:
    """The run failed (or was refused). ``code`` is from the catalogue in ``awaken.core.errors``."""

    code: str
    message: str
    #: what the run used before it failed (zero for a refusal)
    usage: Usage = Usage()


AgentEvent = (
    RunStarted
    | StepStarted
    | StepFinished
    | TextStart
    | TextDelta
    | TextEnd
    | ReasoningStart
    | ReasoningDelta
    | ReasoningEnd
    | ToolCallStart
    | ToolCallArgs
    | ToolCallEnd
    | ToolApprovalRequested
    | ToolResult
    | ToolProgress
    | StateChanged
    | RunFinished
    | RunStopped
    | RunFailed
)
