"""The step loop: one model step after another until the run finishes, waits or hits its limit. A
step (``model_step``) returns its commit; the loop hands it to ``commit.apply``, the only code that
writes it and moves the run. And ``StepBuilder``, the ``ModelOutput`` of one step (live deltas out,
the message assembled).
"""

from __future__ import annotations

from collections.abc import Container
from typing import Any

from awaken.core.errors import RunFailure
from awaken.core.events import (
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunFinished,
    StepFinished,
    StepStarted,
    TextDelta,
    TextEnd,
    TextStart,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
)
from awaken.core.messages import IncompletePart, Message, ReasoningPart, TextPart, ToolCallPart, Usage
from awaken.engine.commit import apply
from awaken.engine.outcome import finish_waiting
from awaken.engine.policy import run_tools
from awaken.engine.rundata import RunBase
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, model_window
from awaken.models import ModelRequest
from awaken.runtime.tuning import JOIN_EVERY
from awaken.telemetry import tracing
from awaken.telemetry.conventions import GEN_AI_INPUT_MESSAGES, GEN_AI_OUTPUT_MESSAGES
from awaken.wires.protocol import Sink, new_id, result_id


async def step_loop(run: RunBase, sink: Sink) -> None:
    """Run model steps, committing each one (``commit.apply``), until the run completes or waits.

    The limit counts every step of the run, across resumes (a run resumed after step 3 of 8 has 5
    left), so a model that keeps asking for client tools or approvals still stops.
    """
    agent = run.agent
    for _ in range(max(0, agent.config.max_steps - run.steps_done)):
        step = run.steps_done + 1
        with tracing.step(step):
            sink(StepStarted(step))
            made = await model_step(run, sink)
            await apply(run, sink, made)
            sink(StepFinished(step, made.usage))
        if made.status is RunStatus.WAITING:
            finish_waiting(run, sink, made.pending)
            return
        if made.status is RunStatus.COMPLETED:
            sink(RunFinished(run.thread_id, run.run_id, "completed", run.usage))
            return
        await run.step_boundary()
    raise RunFailure(f"the agent reached its step limit ({agent.config.max_steps}) without finishing",
                     code="STEP_LIMIT")


async def model_step(run: RunBase, sink: Sink) -> Commit:
    """One model step, streamed into ``sink``, and its tools: the commit it makes (not written; the
    status it moves the run to is ``waiting`` with pending calls, ``running`` after tool results,
    ``completed`` after a final answer)."""
    agent = run.agent
    builder = StepBuilder(sink, run.answer_message_id if run.steps_done == 0 else new_id("msg"),
                          used_call_ids(run))
    run.progress.streaming = builder  # an early end commits what it streamed (outcome.commit_final)
    request = ModelRequest(agent.config.system_prompt, model_window(model_history(run), agent.config.history_messages),
                           agent.tools + run.client_tools, context=run.request.context, state=run.state)
    with tracing.chat(agent.config.model) as chat:
        tracing.capture(chat, GEN_AI_INPUT_MESSAGES, lambda: tracing.messages_json(request.messages))
        with run.runstate.metrics.model_call(builder):
            await agent.model.stream(request, builder)
        builder.close()
        usage = builder.step_usage
        tracing.chat_result(chat, usage.input_tokens, usage.output_tokens, builder.has_calls)
        tracing.capture(chat, GEN_AI_OUTPUT_MESSAGES, lambda: tracing.messages_json([builder.message(run.run_id)]))
    calls = await fresh_call_ids(run, builder, builder.finish_calls())
    # The run's first write (started beside this step) must be in before anything names the
    # run: the ledger may have given it a fresh id if the client's was taken.
    if not await run.started():
        assert run.start_error is not None
        raise run.start_error
    assistant = builder.message(run.run_id)
    results, pending, state = await run_tools(run, calls, assistant.id, sink)
    return Commit(
        status=RunStatus.WAITING if pending else RunStatus.RUNNING if calls else RunStatus.COMPLETED,
        messages=((assistant,) if assistant.parts else ()) + tuple(results),
        pending=tuple(pending),
        state=state if state != run.state else None,
        usage=builder.step_usage,
        steps=1,
    )


def model_history(run: RunBase) -> list[Message]:
    """The history the model reads: the run's, without the answers cut off by an early end unless the
    agent keeps them (``keep_partial_answers``, the default)."""
    if run.agent.config.keep_partial_answers:
        return run.history
    return [m for m in run.history if m.incomplete is None]


def used_call_ids(run: RunBase) -> UsedCallIds:
    """Tool call ids already on the thread as far as the run read it (its history budget): a provider
    that reuses ids (``call_0`` every turn) gets fresh ones, because results, pending calls and
    clients key on them thread-wide. (An id reused from beyond the budget is caught before the step
    commits: see ``fresh_call_ids``.)"""
    return UsedCallIds(run.history)


class UsedCallIds:
    """The tool call ids of ``history``, collected at the first question: a step that calls no tool
    (most of them) never walks the history."""

    __slots__ = ("_history", "_ids")

    def __init__(self, history: list[Message]) -> None:
        self._history = history
        self._ids: set[str] | None = None

    def __contains__(self, call_id: object) -> bool:
        if self._ids is None:
            self._ids = {c.tool_call_id for m in self._history for c in m.tool_calls}
        return call_id in self._ids


async def fresh_call_ids(run: RunBase, builder: StepBuilder, calls: list[ToolCallPart]) -> list[ToolCallPart]:
    """Calls whose id the thread already holds beyond the run's history budget get fresh ids before
    the step commits (one indexed ledger read, only for steps with calls). The live stream already
    named the reused id; the committed step, its results and everything after use the fresh one, so
    the thread never holds two calls with one id."""
    if not calls:
        return calls
    taken = await run.ledger.committed_ids(run.thread_id, [result_id(c.tool_call_id) for c in calls])
    if not taken:
        return calls
    return builder.rename_calls({c.tool_call_id for c in calls if result_id(c.tool_call_id) in taken})




class Pieces:
    """A string that arrives in many small deltas, kept as a few blocks: every ``JOIN_EVERY`` deltas are
    joined into one string. A long step (50,000 words) would otherwise hold one small object per word
    until it commits, scattered through the small-object arenas, which the process keeps after the run
    if anything that outlives it was allocated among them (see awaken/streams/replay.py)."""

    __slots__ = ("_blocks", "tail")

    def __init__(self) -> None:
        self._blocks: list[str] = []
        #: the deltas since the last block (a caller on a hot path appends here itself, then ``seal``s)
        self.tail: list[str] = []

    def add(self, delta: str) -> None:
        self.tail.append(delta)
        self.seal()

    def seal(self) -> None:
        """Join the tail into a block once it holds ``JOIN_EVERY`` deltas."""
        if len(self.tail) >= JOIN_EVERY:
            self._blocks.append("".join(self.tail))
            self.tail.clear()

    def __bool__(self) -> bool:
        return bool(self.tail or self._blocks)

    def __str__(self) -> str:
        return "".join(self._blocks) + "".join(self.tail)


class StepBuilder:
    """The ``ModelOutput`` of one step: forwards live deltas to the sink and assembles the message.

    Open text/reasoning blocks are closed before a tool call starts, so every encoder sees blocks
    in a legal order.
    """

    __slots__ = ("_calls", "_reasoning", "_reasoning_id", "_text", "_text_open", "message_id", "sink",
                 "step_usage", "used_call_ids")

    def __init__(self, sink: Sink, message_id: str, used_call_ids: Container[str] = frozenset()) -> None:
        self.sink = sink
        self.message_id = message_id
        self.used_call_ids = used_call_ids
        self.step_usage = Usage()
        self._text = Pieces()
        self._text_open = False
        self._reasoning_id: str | None = None
        self._reasoning: list[tuple[str, Pieces]] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, Pieces of the arguments]

    def text(self, delta: str) -> None:
        if not delta:
            return
        self._close_reasoning()
        if not self._text_open:
            self._text_open = True
            self.sink(TextStart(self.message_id))
        tail = self._text.tail  # Pieces.add, inlined: this runs for every delta of every run
        tail.append(delta)
        if len(tail) >= JOIN_EVERY:
            self._text.seal()
        self.sink(TextDelta(self.message_id, delta))

    def reasoning(self, delta: str) -> None:
        if not delta:
            return
        self._close_text()
        if self._reasoning_id is None:
            self._reasoning_id = new_id("rsn")
            self._reasoning.append((self._reasoning_id, Pieces()))
            self.sink(ReasoningStart(self._reasoning_id))
        self._reasoning[-1][1].add(delta)
        self.sink(ReasoningDelta(self._reasoning_id, delta))

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        call = self._calls.get(index)
        if call is None:
            self._close_text()
            self._close_reasoning()
            if not call_id or call_id in self.used_call_ids or any(c[0] == call_id for c in self._calls.values()):
                call_id = new_id("call")
            call = [call_id, name or "", Pieces()]
            self._calls[index] = call
            self.sink(ToolCallStart(call[0], call[1], self.message_id))
        elif name and not call[1]:
            call[1] = name
        if arguments:
            call[2].add(arguments)
            self.sink(ToolCallArgs(call[0], arguments))

    def usage(self, usage: Usage) -> None:
        self.step_usage = usage

    @property
    def has_calls(self) -> bool:
        """Whether the step called a tool (so far)."""
        return bool(self._calls)

    def _close_text(self) -> None:
        if self._text_open:
            self._text_open = False
            self.sink(TextEnd(self.message_id))

    def _close_reasoning(self) -> None:
        if self._reasoning_id is not None:
            self.sink(ReasoningEnd(self._reasoning_id))
            self._reasoning_id = None

    def close(self) -> None:
        self._close_text()
        self._close_reasoning()

    def finish_calls(self) -> list[ToolCallPart]:
        parts = []
        for index in sorted(self._calls):
            call_id, name, fragments = self._calls[index]
            arguments = str(fragments) or "{}"
            self.sink(ToolCallEnd(call_id, name, arguments))
            parts.append(ToolCallPart(call_id, name, arguments))
        return parts

    def rename_calls(self, reused: set[str]) -> list[ToolCallPart]:
        """Give the calls in ``reused`` fresh ids; the step's calls, in order."""
        for call in self._calls.values():
            if call[0] in reused:
                call[0] = new_id("call")
        return [ToolCallPart(cid, name, str(fr) or "{}") for cid, name, fr in
                (self._calls[i] for i in sorted(self._calls))]

    def partial(self, run_id: str, reason: str) -> Message | None:
        """The step cut off for ``reason``: its reasoning and text so far, marked incomplete (its tool
        calls never ran, so they are left out); None when it streamed neither."""
        parts: list[Any] = [ReasoningPart(rid, str(chunks)) for rid, chunks in self._reasoning if chunks]
        if self._text:
            parts.append(TextPart(str(self._text)))
        if not parts:
            return None
        return Message(self.message_id, "assistant", (*parts, IncompletePart(reason)), run_id)

    def message(self, run_id: str) -> Message:
        parts: list[Any] = [ReasoningPart(rid, str(chunks)) for rid, chunks in self._reasoning]
        if self._text:
            parts.append(TextPart(str(self._text)))
        parts.extend(ToolCallPart(cid, name, str(fr) or "{}") for cid, name, fr in
                     (self._calls[i] for i in sorted(self._calls)))
        return Message(self.message_id, "assistant", tuple(parts), run_id)
