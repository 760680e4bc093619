"""RunApplication: the only execution authority.

It admits runs (one active run per thread), drives the step loop over a model, executes server
tools, applies permission gates, suspends a run as committed ``waiting`` state, resumes it from
tool results or decisions, and commits every outcome to the ledger. Adapters hand it a
``RunRequest`` and a synchronous event sink; they never run models or decide run state.

Usage, from a connection handler that owns the nursery::

    async with app.admit(thread_id, agent_id, build) as run:  # InputRejected (THREAD_BUSY…) before any byte
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run.execute, sink, nursery)  # a disconnect cancels this nursery

Cancellation: a ``Cancelled`` anywhere in ``execute`` commits ``interrupted`` (shielded, bounded to
two seconds) and releases the thread before it propagates. Nothing half-done is committed: a step
is written in one ``Commit`` or not at all.
"""

from __future__ import annotations

import contextlib
import logging
import time
import uuid
from collections.abc import AsyncIterator, Callable, Sequence
from typing import Any, Literal

import attrs
import jsonpatch
import trio

from .agents import Agent, AgentRegistry
from .errors import AwakenError, InputRejected, RunFailure, StoreUnavailable
from .events import (
    AgentEvent,
    ReasoningDelta,
    ReasoningEnd,
    ReasoningStart,
    RunFailed,
    RunFinished,
    RunStarted,
    StateChanged,
    StepFinished,
    StepStarted,
    TextDelta,
    TextEnd,
    TextStart,
    ToolApprovalRequested,
    ToolCallArgs,
    ToolCallEnd,
    ToolCallStart,
    ToolResult,
)
from .ledger import Commit, DuplicateRun, Ledger, PendingCall, RunRecord, ThreadView
from .messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, Usage
from .models import ModelRequest
from .runstate import RunStatus, check_transition
from .tools import ToolContext, ToolRegistry

log = logging.getLogger("awaken.engine")

Sink = Callable[[AgentEvent], None]
#: how long a shielded final commit may take before we give up on it
FINAL_COMMIT_TIMEOUT = 2.0
SUPERSEDED = "cancelled: new input arrived before this call was answered"
DENIED = "denied: the user did not allow this call"


def now_ms() -> int:
    return int(time.time() * 1000)


def new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


def result_id(tool_call_id: str) -> str:
    """The message id of a tool result the server commits (stable, so a replayed decision is found)."""
    return f"tr_{tool_call_id}"


@attrs.frozen
class ToolDecision:
    """An answer to a pending call, as an adapter parsed it.

    ``kind``: ``ok`` (a result without error), ``error`` (a result flagged as an error), ``approve``
    or ``deny`` (an explicit permission decision). At a permission gate ``ok``/``approve`` allow the
    call and ``error``/``deny`` deny it; for a client tool ``ok``/``error`` are its result.
    """

    tool_call_id: str
    kind: Literal["ok", "error", "approve", "deny"]
    content: str = ""
    #: the client's tool message id: a client tool's result is committed under it (a permission gate's
    #: result is the server's own and always gets ``result_id``)
    message_id: str | None = None


@attrs.frozen
class RunRequest:
    thread_id: str
    agent_id: str | None
    #: new input messages (already deduplicated against the ledger)
    inputs: tuple[Message, ...] = ()
    decisions: tuple[ToolDecision, ...] = ()
    #: the run id the client proposed; used for a new run when it is free
    run_id: str | None = None


class RunApplication:
    def __init__(self, ledger: Ledger, agents: AgentRegistry, tools: ToolRegistry) -> None:
        self.ledger = ledger
        self.agents = agents
        self.tools = tools
        self._active: dict[str, AdmittedRun] = {}

    def is_active(self, thread_id: str) -> bool:
        return thread_id in self._active

    @contextlib.asynccontextmanager
    async def admit(
        self, thread_id: str, agent_id: str | None, build: Callable[[ThreadView], RunRequest]
    ) -> AsyncIterator[AdmittedRun]:
        """Admit a request or raise ``InputRejected``/``StoreUnavailable`` having changed nothing.

        The thread is reserved first; then its committed view is read once and handed to ``build``
        (the adapter's pure dedup: replayed history out, new input and decisions in); then the run is
        prepared against that same view. A fresh run costs one ledger read and one write before its
        first byte. On exit, a run that never reached a committed outcome is committed ``interrupted``.
        """
        agent = self.agents.get(agent_id)
        if thread_id in self._active:
            raise InputRejected(
                f"thread {thread_id!r} already has an active run; send the next input when it ends",
                code="THREAD_BUSY",
            )
        run = AdmittedRun(self, agent, thread_id)
        self._active[thread_id] = run
        try:
            view = await self.ledger.thread_view(thread_id)
            await run.prepare(build(view), view)
            yield run
        finally:
            try:
                await run.ensure_closed()
            finally:
                run.release()


class AdmittedRun:
    """One admitted run (fresh or resumed) and the state it needs while it executes."""

    __slots__ = ("_decided", "_released", "_remaining", "_start", "_start_error", "agent", "answer_message_id",
                 "app", "history", "ledger", "request", "resumed", "run_id", "state", "status", "steps_done",
                 "thread_id", "usage")

    def __init__(self, app: RunApplication, agent: Agent, thread_id: str) -> None:
        self.app = app
        self.ledger = app.ledger
        self.agent = agent
        self.request = RunRequest(thread_id, agent.id)
        self.thread_id = thread_id
        self.run_id = ""
        self.status = RunStatus.RUNNING
        self.resumed = False
        self.history: list[Message] = []
        self.state: dict[str, Any] = {}
        self.usage = Usage()
        self.steps_done = 0
        self.answer_message_id = ""
        #: set once a fresh run's record and input are written (None: nothing to write, e.g. a resume)
        self._start: trio.Event | None = None
        self._start_error: AwakenError | None = None
        #: the decided calls of a resume, in pending order, applied when the stream starts
        self._decided: list[tuple[PendingCall, ToolDecision]] = []
        self._remaining: list[PendingCall] = []
        self._released = False

    # -- admission ------------------------------------------------------------------------------

    async def prepare(self, request: RunRequest, view: ThreadView) -> None:
        """Admission: everything that can refuse the request happens here, before any byte is sent.

        A fresh run's record and input are written by ``execute`` beside its first step; a resume
        only validates its decisions here (``execute`` applies them, so a slow tool never delays the
        response head). Only superseding a waiting run writes before the stream starts.
        """
        self.request = request
        self.state = dict(view.thread.state) if view.thread else {}
        self.history = list(view.messages)
        pending = list(view.pending)
        if request.decisions:
            await self._prepare_resume(pending)
        elif request.inputs:
            if pending:
                await self._supersede(pending)
            self._prepare_fresh()
        else:
            raise InputRejected("the request carries no new input: every message is already committed",
                                code="NO_NEW_INPUT")

    def _prepare_fresh(self) -> None:
        """A new run: its record and input are written by ``execute`` while the first step streams
        (see ``_commit_start``), so the write is off the path to the first delta."""
        run_id = self.request.run_id or new_id("run")
        self.run_id = run_id
        self.history.extend(attrs.evolve(m, run_id=run_id) for m in self.request.inputs)
        self.answer_message_id = new_id("msg")
        self._start = trio.Event()

    async def _commit_start(self) -> None:
        """Write the run record and its input (shielded: a disconnect cannot tear it). The first step
        waits for this before it names the run; if the store fails, the error is kept and raised
        there."""
        assert self._start is not None
        inputs = tuple(m for m in self.history if m.run_id == self.run_id and m.seq == 0)
        try:
            with trio.CancelScope(shield=True):
                now = now_ms()
                for _attempt in range(3):
                    record = RunRecord(self.run_id, self.thread_id, self.agent.id, RunStatus.RUNNING, now, now)
                    try:
                        committed = await self.ledger.start_run(record, inputs)
                        break
                    except DuplicateRun:  # the client reused a run id: the ledger gets a fresh one
                        self.run_id = new_id("run")
                        inputs = tuple(attrs.evolve(m, run_id=self.run_id) for m in inputs)
                else:  # pragma: no cover - three uuid4 collisions
                    raise RunFailure("could not allocate a run id")
            by_id = {m.id: m for m in committed}
            self.history = [by_id.get(m.id, m) if m.seq == 0 else m for m in self.history]
        except (AwakenError, ValueError) as exc:
            self._start_error = exc if isinstance(exc, AwakenError) else RunFailure(str(exc))
        finally:
            self._start.set()

    async def _started(self) -> bool:
        """Wait until the run record is written; False if it could not be."""
        if self._start is not None:
            await self._start.wait()
        return self._start_error is None

    async def _supersede(self, pending: list[PendingCall]) -> None:
        """New input while a run waits: its open calls are closed as cancelled, the run interrupted."""
        run_id = pending[0].run_id
        check_transition(RunStatus.WAITING, RunStatus.INTERRUPTED)
        committed = await self.ledger.commit(
            self.thread_id,
            run_id,
            Commit(
                status=RunStatus.INTERRUPTED,
                messages=_superseded(pending, run_id),
                resolved=tuple(p.tool_call_id for p in pending),
                error_code=None,
                error_message="superseded by new input",
            ),
        )
        self.history.extend(committed)

    async def _prepare_resume(self, pending: list[PendingCall]) -> None:
        if not pending:
            raise InputRejected("a tool result or decision arrived but nothing on this thread is waiting",
                                code="NO_PENDING_RUN")
        by_id = {p.tool_call_id: p for p in pending}
        decided: dict[str, ToolDecision] = {}
        for decision in self.request.decisions:
            call = by_id.get(decision.tool_call_id)
            if call is None:
                raise InputRejected(
                    f"tool call {decision.tool_call_id!r} is not pending; pending: {', '.join(by_id)}",
                    code="TOOL_CALL_NOT_PENDING",
                )
            if call.kind == "client" and decision.kind in ("approve", "deny"):
                raise InputRejected(
                    f"tool call {decision.tool_call_id!r} waits for the client's result, not an approval",
                    code="TOOL_CALL_NOT_PENDING",
                )
            decided[call.tool_call_id] = decision
        self.run_id = pending[0].run_id
        run = await self.ledger.get_run(self.run_id)
        if run is None or run.status is not RunStatus.WAITING:
            raise InputRejected("the waiting run is gone", code="NO_PENDING_RUN")
        # The run continues under the agent that started it, whichever route the decision came by.
        self.agent = self.app.agents.get(run.agent_id)
        self.resumed = True
        self.status = RunStatus.WAITING
        self.usage = run.usage
        self.steps_done = run.steps
        self.answer_message_id = next(
            (m.id for m in self.history if m.run_id == self.run_id and m.role == "assistant"), new_id("msg")
        )
        self._decided = [(p, decided[p.tool_call_id]) for p in pending if p.tool_call_id in decided]
        self._remaining = [p for p in pending if p.tool_call_id not in decided]

    async def _apply_decisions(self, sink: Sink) -> None:
        """Run approved calls, then commit every decided result in one step (a resume's first commit).

        Until that commit the run stays ``waiting``: a crash or a disconnect while an approved tool
        runs leaves the same calls pending, to be decided again. New input in the same request closes
        any call it leaves undecided (as new input always does) and is committed after the results.
        """
        state = dict(self.state)
        results: list[Message] = []
        for call, decision in self._decided:
            if call.kind == "client":
                status = "ok" if decision.kind == "ok" else "error"
                part = ToolResultPart(call.tool_call_id, call.name, decision.content, status)
            elif decision.kind in ("ok", "approve"):
                outcome = await self.app.tools.execute(
                    call.name, call.arguments, ToolContext(self.thread_id, self.run_id, state)
                )
                part = ToolResultPart(call.tool_call_id, call.name, outcome.content,
                                      "ok" if outcome.ok else "error", "approved")
            else:
                reason = decision.content.strip()
                part = ToolResultPart(call.tool_call_id, call.name, f"{DENIED}: {reason}" if reason else DENIED,
                                      "denied", "denied")
            # A client tool's result is the client's own tool message, committed under its id; a gate's
            # result is the server's (the client's message only carried the decision), so it gets the
            # server's stable id and the client can receive it as a new message.
            message_id = decision.message_id if call.kind == "client" else None
            results.append(Message(message_id or result_id(call.tool_call_id), "tool", (part,), self.run_id))
        inputs = tuple(attrs.evolve(m, run_id=self.run_id) for m in self.request.inputs)
        closed: tuple[Message, ...] = ()
        if inputs and self._remaining:
            closed, self._remaining = _superseded(self._remaining, self.run_id), []
        new_status = RunStatus.WAITING if self._remaining else RunStatus.RUNNING
        check_transition(self.status, new_status)
        changed = state != self.state
        committed = await self.ledger.commit(
            self.thread_id,
            self.run_id,
            Commit(
                status=new_status,
                messages=tuple(results) + closed + (inputs if not self._remaining else ()),
                resolved=tuple(c.tool_call_id for c, _ in self._decided) + tuple(m.tool_result.tool_call_id
                                                                               for m in closed),
                state=state if changed else None,
            ),
        )
        self.status = new_status
        self.history.extend(committed)
        for message in committed:
            if message.role == "tool":
                sink(_tool_result_event(message))
        if changed:
            sink(_state_change(self.state, state))
            self.state = state

    # -- execution ------------------------------------------------------------------------------

    async def execute(self, sink: Sink, nursery: trio.Nursery) -> None:
        """Stream the run into ``sink`` and commit its outcome. Never raises except ``Cancelled``.

        ``nursery`` is the connection's: it hosts a fresh run's first write beside its first step
        (the write is shielded; a failure is noticed where the first step waits for it).
        """
        try:
            if self._start is not None:
                nursery.start_soon(self._commit_start)
            await self._body(sink)
        except trio.Cancelled:
            await self._commit_final(RunStatus.INTERRUPTED, None, "the client disconnected")
            raise
        except AwakenError as exc:
            code = exc.code if not isinstance(exc, InputRejected) else "INTERNAL_ERROR"
            await self._fail(sink, code, exc.message)
        except Exception:
            log.exception("run %s failed", self.run_id)
            await self._fail(sink, "INTERNAL_ERROR", "the server failed while running the agent")
        finally:
            self.release()

    async def _body(self, sink: Sink) -> None:
        sink(RunStarted(self.thread_id, self.run_id, self.answer_message_id, self.resumed, self.state))
        if self.resumed:
            await self._apply_decisions(sink)
        if self._remaining:
            self._finish_waiting(sink, self._remaining)
            return
        await self._step_loop(sink)

    async def _step_loop(self, sink: Sink) -> None:
        agent = self.agent
        # The limit counts every step of the run, across resumes (a run resumed after step 3 of 8
        # has 5 left), so a model that keeps asking for client tools or approvals still stops.
        for _ in range(max(0, agent.config.max_steps - self.steps_done)):
            step = self.steps_done + 1
            sink(StepStarted(step))
            builder = StepBuilder(sink, self.answer_message_id if self.steps_done == 0 else new_id("msg"),
                                  self._used_call_ids())
            request = ModelRequest(agent.config.system_prompt, tuple(self.history), agent.tools)
            await agent.model.stream(request, builder)
            builder.close()
            calls = builder.finish_calls()
            # The run's first write (started beside this step) must be in before anything names the
            # run: the ledger may have given it a fresh id if the client's was taken.
            if not await self._started():
                assert self._start_error is not None
                raise self._start_error
            assistant = builder.message(self.run_id)
            results, pending, state = await self._run_tools(calls, assistant.id)
            status = RunStatus.WAITING if pending else RunStatus.RUNNING if calls else RunStatus.COMPLETED
            check_transition(self.status, status)
            changed = state != self.state
            committed = await self.ledger.commit(
                self.thread_id,
                self.run_id,
                Commit(
                    status=status,
                    messages=((assistant,) if assistant.parts else ()) + tuple(results),
                    pending=tuple(pending),
                    state=state if changed else None,
                    usage=builder.step_usage,
                    steps=1,
                ),
            )
            self.status = status
            self.steps_done = step
            self.usage = self.usage + builder.step_usage
            self.history.extend(committed)
            for message in committed:
                if message.role == "tool":
                    sink(_tool_result_event(message))
            for call in pending:
                if call.kind == "approval":
                    sink(ToolApprovalRequested(call.tool_call_id))
            if changed:
                sink(_state_change(self.state, state))
                self.state = state
            sink(StepFinished(step, builder.step_usage))
            if status is RunStatus.WAITING:
                self._finish_waiting(sink, pending)
                return
            if status is RunStatus.COMPLETED:
                sink(RunFinished(self.thread_id, self.run_id, "completed", self.usage))
                return
        raise RunFailure(f"the agent reached its step limit ({agent.config.max_steps}) without finishing",
                         code="STEP_LIMIT")

    def _used_call_ids(self) -> set[str]:
        """Tool call ids already on the thread: a provider that reuses ids (``call_0`` every turn)
        gets fresh ones, because results, pending calls and clients key on them thread-wide."""
        return {c.tool_call_id for m in self.history for c in m.tool_calls}

    async def _run_tools(
        self, calls: list[ToolCallPart], message_id: str
    ) -> tuple[list[Message], list[PendingCall], dict[str, Any]]:
        """Execute allowed server tools concurrently; deny or park the rest. Results keep call order."""
        state = dict(self.state)
        outcomes: dict[str, ToolResultPart] = {}
        pending: list[PendingCall] = []
        runnable: list[ToolCallPart] = []
        for call in calls:
            if self.agent.is_client_tool(call.name):
                pending.append(PendingCall(call.tool_call_id, self.run_id, self.thread_id, call.name,
                                           call.arguments, "client", message_id))
            elif call.name not in {t.name for t in self.agent.server_tools}:
                outcomes[call.tool_call_id] = ToolResultPart(call.tool_call_id, call.name,
                                                             f"unknown tool {call.name!r}", "error")
            elif (policy := self.agent.permission(call.name)) == "deny":
                outcomes[call.tool_call_id] = ToolResultPart(
                    call.tool_call_id, call.name, f"denied: the policy does not allow {call.name}", "denied"
                )
            elif policy == "ask":
                pending.append(PendingCall(call.tool_call_id, self.run_id, self.thread_id, call.name,
                                           call.arguments, "approval", message_id))
            else:
                runnable.append(call)

        async def run_one(call: ToolCallPart) -> None:
            outcome = await self.app.tools.execute(call.name, call.arguments,
                                                   ToolContext(self.thread_id, self.run_id, state))
            outcomes[call.tool_call_id] = ToolResultPart(call.tool_call_id, call.name, outcome.content,
                                                         "ok" if outcome.ok else "error")

        if len(runnable) == 1:
            await run_one(runnable[0])
        elif runnable:
            async with trio.open_nursery() as nursery:
                for call in runnable:
                    nursery.start_soon(run_one, call)
        results = [
            Message(result_id(c.tool_call_id), "tool", (outcomes[c.tool_call_id],), self.run_id)
            for c in calls
            if c.tool_call_id in outcomes
        ]
        return results, pending, state

    def _finish_waiting(self, sink: Sink, pending: Sequence[PendingCall]) -> None:
        sink(RunFinished(self.thread_id, self.run_id, "waiting", self.usage,
                         tuple(p.tool_call_id for p in pending)))

    async def _fail(self, sink: Sink, code: str, message: str) -> None:
        committed = await self._commit_final(RunStatus.FAILED, code, message)
        if not committed and code != "STORE_UNAVAILABLE":
            code, message = "STORE_UNAVAILABLE", f"{message} (and the failure could not be committed)"
        sink(RunFailed(code, message))

    async def _commit_final(self, status: RunStatus, code: str | None, message: str | None) -> bool:
        """Commit a terminal status, shielded and bounded. Returns whether it was committed."""
        if self.status not in (RunStatus.RUNNING,) or not self.run_id:
            return True
        with trio.move_on_after(FINAL_COMMIT_TIMEOUT, shield=True):
            if not await self._started():
                return False  # the run record was never written: there is nothing to close
            try:
                await self.ledger.commit(
                    self.thread_id, self.run_id, Commit(status=status, error_code=code, error_message=message)
                )
            except StoreUnavailable:
                log.warning("run %s: could not commit %s", self.run_id, status.value)
                return False
            self.status = status
            return True
        return False

    async def ensure_closed(self) -> None:
        """Called when the admitting scope exits: a run left ``running`` is committed interrupted."""
        if self.status is RunStatus.RUNNING and self.run_id:
            await self._commit_final(RunStatus.INTERRUPTED, None, "the client disconnected")

    def release(self) -> None:
        if not self._released:
            self._released = True
            if self.app._active.get(self.thread_id) is self:
                del self.app._active[self.thread_id]


def _superseded(pending: Sequence[PendingCall], run_id: str) -> tuple[Message, ...]:
    return tuple(
        Message(result_id(p.tool_call_id), "tool", (ToolResultPart(p.tool_call_id, p.name, SUPERSEDED, "error"),),
                run_id)
        for p in pending
    )


def _tool_result_event(message: Message) -> ToolResult:
    part = message.tool_result
    assert part is not None
    return ToolResult(part.tool_call_id, message.id, part.name, part.content, part.status, part.approval)


def _state_change(old: dict[str, Any], new: dict[str, Any]) -> StateChanged:
    return StateChanged(new, jsonpatch.make_patch(old, new).patch)


class StepBuilder:
    """The ``ModelOutput`` of one step: forwards live deltas to the sink and assembles the message.

    Open text/reasoning blocks are closed before a tool call starts, so every encoder sees blocks
    in a legal order.
    """

    __slots__ = ("_calls", "_reasoning", "_reasoning_id", "_text", "_text_open", "message_id", "sink",
                 "step_usage", "used_call_ids")

    def __init__(self, sink: Sink, message_id: str, used_call_ids: set[str] | frozenset[str] = frozenset()) -> None:
        self.sink = sink
        self.message_id = message_id
        self.used_call_ids = used_call_ids
        self.step_usage = Usage()
        self._text: list[str] = []
        self._text_open = False
        self._reasoning_id: str | None = None
        self._reasoning: list[tuple[str, list[str]]] = []
        self._calls: dict[int, list[Any]] = {}  # index -> [id, name, [fragments]]

    def text(self, delta: str) -> None:
        if not delta:
            return
        self._close_reasoning()
        if not self._text_open:
            self._text_open = True
            self.sink(TextStart(self.message_id))
        self._text.append(delta)
        self.sink(TextDelta(self.message_id, delta))

    def reasoning(self, delta: str) -> None:
        if not delta:
            return
        self._close_text()
        if self._reasoning_id is None:
            self._reasoning_id = new_id("rsn")
            self._reasoning.append((self._reasoning_id, []))
            self.sink(ReasoningStart(self._reasoning_id))
        self._reasoning[-1][1].append(delta)
        self.sink(ReasoningDelta(self._reasoning_id, delta))

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        call = self._calls.get(index)
        if call is None:
            self._close_text()
            self._close_reasoning()
            if not call_id or call_id in self.used_call_ids or any(c[0] == call_id for c in self._calls.values()):
                call_id = new_id("call")
            call = [call_id, name or "", []]
            self._calls[index] = call
            self.sink(ToolCallStart(call[0], call[1], self.message_id))
        elif name and not call[1]:
            call[1] = name
        if arguments:
            call[2].append(arguments)
            self.sink(ToolCallArgs(call[0], arguments))

    def usage(self, usage: Usage) -> None:
        self.step_usage = usage

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
            arguments = "".join(fragments) or "{}"
            self.sink(ToolCallEnd(call_id, name, arguments))
            parts.append(ToolCallPart(call_id, name, arguments))
        return parts

    def message(self, run_id: str) -> Message:
        parts: list[Any] = [ReasoningPart(rid, "".join(chunks)) for rid, chunks in self._reasoning]
        if self._text:
            parts.append(TextPart("".join(self._text)))
        parts.extend(ToolCallPart(cid, name, "".join(fr) or "{}") for cid, name, fr in
                     (self._calls[i] for i in sorted(self._calls)))
        return Message(self.message_id, "assistant", tuple(parts), run_id)
