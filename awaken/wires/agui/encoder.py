"""AG-UI encoder: AgentEvents → AG-UI events, in the subset both client generations accept.

Rules from ``reference/agui.md`` §9: explicit START/CONTENT/END triads (never CHUNK events), no
``null`` and no absent-valued keys, no empty deltas, ``RUN_STARTED`` first with
``protocolVersion: "1.0"``, everything closed before ``RUN_FINISHED``, nothing after the terminal
event. 1.0-only material is sent only to a client that declared ``protocolVersion >= 1.0``: a run
waiting at permission gates ends with ``STATE_SNAPSHOT``, ``MESSAGES_SNAPSHOT`` (the whole thread)
and ``RUN_FINISHED.outcome = {type: "interrupt", interrupts}`` (``interrupts.py``); one waiting only
on client tools with ``{type: "success", pendingToolCallIds}``; ``usage`` on ``RUN_FINISHED`` and
``RUN_ERROR``. Tool results are strings; a server tool's progress is a ``CUSTOM`` event ``tool_progress``. State: ``STATE_SNAPSHOT`` first, then
RFC 6902 ``STATE_DELTA`` against it.
"""

from __future__ import annotations

from typing import Any

from awaken.core import events as ev
from awaken.core.messages import Message, Usage
from awaken.wires.agui.history import project_history
from awaken.wires.agui.interrupts import interrupt
from awaken.wires.encoding import EncoderBase, EncoderMisuse, WireEvent

PROTOCOL_VERSION = "1.0"


def messages_snapshot(messages: list[Message]) -> list[WireEvent]:
    """The committed ``messages`` as one ``MESSAGES_SNAPSHOT`` (a rejoin whose position is gone, a replay)."""
    return [{"type": "MESSAGES_SNAPSHOT", "messages": project_history(messages)}]


def stopped_event(message: str) -> WireEvent:
    """The ``RUN_ERROR`` that ends a stopped run's stream (and that CopilotKit's ``stop`` answer carries)."""
    return {"type": "RUN_ERROR", "message": message, "code": "STOPPED"}


_NO_CALLS: frozenset[str] = frozenset()


class AguiEncoder(EncoderBase):
    """One run's stream. ``thread_id``/``run_id`` are the request's (echoed on the boundary events)."""

    def __init__(self, thread_id: str, run_id: str, *, modern: bool = False,
                 client_held: frozenset[str] = frozenset()) -> None:
        super().__init__()
        self.thread_id = thread_id
        self.run_id = run_id
        self.modern = modern
        #: ids of tool messages the client sent in this request: their results are not echoed back
        self.client_held = client_held
        self.started = False
        self.snapshot_sent = False
        self.open_text: str | None = None
        self.open_reasoning: str | None = None
        #: the tool calls open now (an empty frozenset until the first: most runs call no tool)
        self.open_tools: set[str] | frozenset[str] = _NO_CALLS
        self.open_steps: list[str] = []

    def on_run_started(self, e: ev.RunStarted) -> list[WireEvent]:
        if self.started:
            raise EncoderMisuse("a second RunStarted")
        self.started = True
        out: list[WireEvent] = [
            {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
             "protocolVersion": PROTOCOL_VERSION}
        ]
        if e.state:
            self.snapshot_sent = True
            out.append({"type": "STATE_SNAPSHOT", "snapshot": e.state})
        return out

    def _need_run(self, what: str) -> None:
        if not self.started:
            raise EncoderMisuse(f"{what} before RunStarted")

    def on_step_started(self, e: ev.StepStarted) -> list[WireEvent]:
        self._need_run("StepStarted")
        name = f"step-{e.step}"
        self.open_steps.append(name)
        return [{"type": "STEP_STARTED", "stepName": name}]

    def on_step_finished(self, e: ev.StepFinished) -> list[WireEvent]:
        name = f"step-{e.step}"
        if name not in self.open_steps:
            raise EncoderMisuse(f"StepFinished for {name}, which is not open")
        self.open_steps.remove(name)
        return [{"type": "STEP_FINISHED", "stepName": name}]

    def on_text_start(self, e: ev.TextStart) -> list[WireEvent]:
        self._need_run("TextStart")
        if self.open_text is not None:
            raise EncoderMisuse("TextStart while a text message is open")
        self.open_text = e.message_id
        return [{"type": "TEXT_MESSAGE_START", "messageId": e.message_id, "role": "assistant"}]

    def on_text_delta(self, e: ev.TextDelta) -> list[WireEvent]:
        if self.open_text != e.message_id:
            raise EncoderMisuse("TextDelta without an open text message")
        if not e.delta:
            return []
        return [{"type": "TEXT_MESSAGE_CONTENT", "messageId": e.message_id, "delta": e.delta}]

    def on_text_end(self, e: ev.TextEnd) -> list[WireEvent]:
        if self.open_text != e.message_id:
            raise EncoderMisuse("TextEnd without an open text message")
        self.open_text = None
        return [{"type": "TEXT_MESSAGE_END", "messageId": e.message_id}]

    def on_reasoning_start(self, e: ev.ReasoningStart) -> list[WireEvent]:
        self._need_run("ReasoningStart")
        if self.open_reasoning is not None:
            raise EncoderMisuse("ReasoningStart while reasoning is open")
        self.open_reasoning = e.message_id
        return [
            {"type": "REASONING_START", "messageId": e.message_id},
            {"type": "REASONING_MESSAGE_START", "messageId": e.message_id, "role": "reasoning"},
        ]

    def on_reasoning_delta(self, e: ev.ReasoningDelta) -> list[WireEvent]:
        if self.open_reasoning != e.message_id:
            raise EncoderMisuse("ReasoningDelta without open reasoning")
        if not e.delta:
            return []
        return [{"type": "REASONING_MESSAGE_CONTENT", "messageId": e.message_id, "delta": e.delta}]

    def on_reasoning_end(self, e: ev.ReasoningEnd) -> list[WireEvent]:
        if self.open_reasoning != e.message_id:
            raise EncoderMisuse("ReasoningEnd without open reasoning")
        self.open_reasoning = None
        return [
            {"type": "REASONING_MESSAGE_END", "messageId": e.message_id},
            {"type": "REASONING_END", "messageId": e.message_id},
        ]

    def on_tool_call_start(self, e: ev.ToolCallStart) -> list[WireEvent]:
        self._need_run("ToolCallStart")
        if e.tool_call_id in self.open_tools:
            raise EncoderMisuse(f"ToolCallStart for open call {e.tool_call_id}")
        if type(self.open_tools) is frozenset:
            self.open_tools = set()
        self.open_tools.add(e.tool_call_id)  # type: ignore[union-attr]
        return [{"type": "TOOL_CALL_START", "toolCallId": e.tool_call_id, "toolCallName": e.name,
                 "parentMessageId": e.parent_message_id}]

    def on_tool_call_args(self, e: ev.ToolCallArgs) -> list[WireEvent]:
        if e.tool_call_id not in self.open_tools:
            raise EncoderMisuse(f"ToolCallArgs for call {e.tool_call_id}, which is not open")
        if not e.delta:
            return []
        return [{"type": "TOOL_CALL_ARGS", "toolCallId": e.tool_call_id, "delta": e.delta}]

    def on_tool_call_end(self, e: ev.ToolCallEnd) -> list[WireEvent]:
        if e.tool_call_id not in self.open_tools:
            raise EncoderMisuse(f"ToolCallEnd for call {e.tool_call_id}, which is not open")
        self.open_tools.discard(e.tool_call_id)  # type: ignore[union-attr]  # a set: the call is in it
        return [{"type": "TOOL_CALL_END", "toolCallId": e.tool_call_id}]

    def on_tool_result(self, e: ev.ToolResult) -> list[WireEvent]:
        self._need_run("ToolResult")
        if e.message_id in self.client_held:
            return []
        return [{"type": "TOOL_CALL_RESULT", "messageId": e.message_id, "toolCallId": e.tool_call_id,
                 "content": e.content, "role": "tool"}]

    def on_tool_progress(self, e: ev.ToolProgress) -> list[WireEvent]:
        """A server tool's progress: ``CUSTOM{name: "tool_progress", value: {toolCallId, toolName, data}}``
        (both client generations pass CUSTOM to ``onCustomEvent``; it changes no message)."""
        self._need_run("ToolProgress")
        return [{"type": "CUSTOM", "name": "tool_progress",
                 "value": {"toolCallId": e.tool_call_id, "toolName": e.name, "data": e.data}}]

    def on_state_changed(self, e: ev.StateChanged) -> list[WireEvent]:
        self._need_run("StateChanged")
        if not self.snapshot_sent:
            self.snapshot_sent = True
            return [{"type": "STATE_SNAPSHOT", "snapshot": e.state}]
        if not e.patch:
            return []
        return [{"type": "STATE_DELTA", "delta": e.patch}]

    def on_run_finished(self, e: ev.RunFinished) -> list[WireEvent]:
        self._need_run("RunFinished")
        if self.open_text or self.open_reasoning or self.open_tools or self.open_steps:
            raise EncoderMisuse("RunFinished with open messages, tool calls or steps")
        out: WireEvent = {"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id}
        if not self.modern:
            return [out]
        before: list[WireEvent] = []
        if e.gates:
            # interrupts.mdx "State at the interrupt boundary": what a resume needs, before the outcome
            # (a MESSAGES_SNAPSHOT replaces the client's messages: it is sent only when the run holds the
            # whole thread, never a history budget's tail of a long one)
            before = [{"type": "STATE_SNAPSHOT", "snapshot": e.state or {}}]
            if e.history_whole:
                before += messages_snapshot(list(e.history))
            out["outcome"] = {"type": "interrupt", "interrupts": [interrupt(g) for g in e.gates]}
        elif e.outcome == "waiting":
            out["outcome"] = {"type": "success", "pendingToolCallIds": list(e.pending)}
        self._usage(out, e.usage)
        return [*before, out]

    def on_run_stopped(self, e: ev.RunStopped) -> list[WireEvent]:
        """``RUN_ERROR`` with code ``STOPPED``: legal with messages, calls or steps still open, accepted by
        0.0.x and 1.0 clients alike (``runAgent`` resolves; ``onRunErrorEvent`` says why)."""
        self._need_run("RunStopped")
        return [stopped_event(e.message)]

    def on_run_failed(self, e: ev.RunFailed) -> list[WireEvent]:
        out: WireEvent = {"type": "RUN_ERROR", "message": e.message, "code": e.code}
        if self.modern:
            self._usage(out, e.usage)
        return [out]

    def replay(self, messages: list[Message], state: dict[str, Any] | None) -> list[WireEvent]:
        """The whole stream of one replay of committed history (CopilotKit's ``connect``): ``RUN_STARTED``,
        the messages as one ``MESSAGES_SNAPSHOT``, ``STATE_SNAPSHOT`` when there is state, ``RUN_FINISHED``
        (for this encoder's thread and run). Nothing may follow it."""
        if self.started or self.closed:
            raise EncoderMisuse("a replay is a whole stream: this encoder has streamed already")
        self.started = self.closed = True
        out: list[WireEvent] = [
            {"type": "RUN_STARTED", "threadId": self.thread_id, "runId": self.run_id,
             "protocolVersion": PROTOCOL_VERSION},
            *messages_snapshot(messages),
        ]
        if state:
            out.append({"type": "STATE_SNAPSHOT", "snapshot": state})
        out.append({"type": "RUN_FINISHED", "threadId": self.thread_id, "runId": self.run_id})
        return out

    @staticmethod
    def _usage(out: WireEvent, usage: Usage) -> None:
        """``usage: TokenUsage[]`` (1.0 only), when the run used any tokens."""
        if usage.total_tokens:
            out["usage"] = [{"inputTokens": usage.input_tokens, "outputTokens": usage.output_tokens,
                             "totalTokens": usage.total_tokens}]
