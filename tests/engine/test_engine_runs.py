"""The run engine without sockets: ``RunApplication`` driven with the scripted model and a temporary
SQLite ledger. Each test states one promise of the engine and checks both the events it streamed and
what the ledger holds afterwards.

The tests named ``…records_its_cause…`` read ``RunRecord.cause`` back from the ledger; they need a
backend that stores the cause (``Commit.cause``).
"""

from __future__ import annotations

import itertools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import pytest
import trio

from awaken.core import events as ev
from awaken.core.errors import StoreUnavailable
from awaken.core.principal import ANONYMOUS
from awaken.engine import RunApplication
from awaken.engine import state as runstate
from awaken.engine.state import Cause, IllegalTransition, RunStatus, transition
from awaken.http.context import ServerContext
from awaken.wires.protocol import DENIED, SUPERSEDED, RunRequest, ToolDecision, result_id
from tests.builders import default_config_data, make_config, user_message


@asynccontextmanager
async def engine(tmp_path, **agents: dict[str, Any]) -> AsyncIterator[ServerContext]:
    """The repo's config (agents overridden key by key) over a fresh SQLite ledger under ``tmp_path``."""
    data = default_config_data()["agents"]
    for agent_id, overrides in agents.items():
        data[agent_id] = {**data[agent_id], **overrides}
    ctx = ServerContext.build(make_config(tmp_path, agents=data))
    await ctx.open()
    try:
        yield ctx
    finally:
        await ctx.aclose()


_ids = itertools.count(1)


def ask(thread_id: str, text: str, agent: str | None = None, run_id: str | None = None):
    """A ``build`` for ``admit``: one new user message."""
    return lambda view: RunRequest(thread_id, agent, (user_message(text, id=f"u{next(_ids)}"),), (), run_id)


def decide(thread_id: str, *decisions: ToolDecision):
    return lambda view: RunRequest(thread_id, None, (), decisions)


async def run_once(app: RunApplication, thread_id: str, build, agent: str | None = None,
                   on_event=None) -> tuple[list[Any], RunStatus]:
    """Admit and execute one request; the events it streamed and the status ``execute`` returned."""
    events: list[Any] = []

    def sink(event: Any) -> None:
        events.append(event)
        if on_event is not None:
            on_event(event)

    async with app.admit(thread_id, agent, build, principal=ANONYMOUS) as run:
        status = await run.execute(sink)
    return events, status


def kinds(events: list[Any]) -> list[str]:
    return [type(e).__name__ for e in events]


def text_of(events: list[Any]) -> str:
    return "".join(e.delta for e in events if isinstance(e, ev.TextDelta))


async def only_run(ctx: ServerContext, thread_id: str):
    runs = await ctx.ledger.list_runs(thread_id)
    assert len(runs) == 1
    return runs[0]


# -- runs that finish ------------------------------------------------------------------------------


async def test_a_text_run_streams_its_answer_and_commits_completed(tmp_path):
    async with engine(tmp_path) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", "hello there", run_id="r1"))
        assert status is RunStatus.COMPLETED
        assert kinds(events) == ["RunStarted", "StepStarted", "TextStart"] + ["TextDelta"] * 4 + [
            "TextEnd", "StepFinished", "RunFinished"]
        assert text_of(events) == 'You said: "hello there".'
        assert events[-1].outcome == "completed" and events[-1].run_id == "r1"
        run = await only_run(ctx, "t1")
        assert (run.run_id, run.status, run.steps, run.error_message, run.cause) == (
            "r1", RunStatus.COMPLETED, 1, None, None)
        messages = (await ctx.ledger.thread_view("t1")).messages
        assert [(m.role, m.text) for m in messages] == [("user", "hello there"),
                                                        ("assistant", 'You said: "hello there".')]
        assert not ctx.app.is_active("t1")


async def test_a_server_tool_runs_and_its_result_is_committed_before_the_answer(tmp_path):
    async with engine(tmp_path) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", '/call calculator {"expression": "2 + 3 * 4"}'))
        assert status is RunStatus.COMPLETED
        results = [e for e in events if isinstance(e, ev.ToolResult)]
        assert [(r.name, r.content, r.status) for r in results] == [("calculator", '{"result":14}', "ok")]
        assert kinds(events).count("StepStarted") == 2
        messages = (await ctx.ledger.thread_view("t1")).messages
        assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
        assert messages[2].id == result_id(results[0].tool_call_id)
        assert (await only_run(ctx, "t1")).steps == 2


# -- permission gates and client tools ---------------------------------------------------------------


async def test_a_gate_parks_the_call_and_an_approval_runs_it(tmp_path):
    async with engine(tmp_path) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", '/call calculator {"expression": "6 * 7"}'),
                                        agent="guarded")
        assert status is RunStatus.WAITING
        (gate,) = [e for e in events if isinstance(e, ev.ToolApprovalRequested)]
        view = await ctx.ledger.thread_view("t1")
        parameters = ctx.app.tools.get("calculator").parameters
        assert events[-1] == ev.RunFinished(
            "t1", events[-1].run_id, "waiting", events[-1].usage, (gate.tool_call_id,),
            (ev.Gate(gate.tool_call_id, "calculator", '{"expression": "6 * 7"}', parameters),), view.messages, {})
        assert [p.kind for p in await ctx.ledger.pending_calls("t1")] == ["approval"]
        assert not ctx.app.is_active("t1")  # a waiting run is committed state, not a task

        events, status = await run_once(ctx.app, "t1", decide("t1", ToolDecision(gate.tool_call_id, "approve")))
        assert status is RunStatus.COMPLETED
        (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
        assert (result.content, result.status, result.approval) == ('{"result":42}', "ok", "approved")
        assert events[0].resumed is True and events[-1].outcome == "completed"
        assert await ctx.ledger.pending_calls("t1") == []
        assert (await only_run(ctx, "t1")).status is RunStatus.COMPLETED


async def test_a_denied_gate_commits_a_denied_result_and_the_run_answers(tmp_path):
    async with engine(tmp_path) as ctx:
        events, _ = await run_once(ctx.app, "t1", ask("t1", '/call calculator {"expression": "1 + 1"}'),
                                   agent="guarded")
        (gate,) = [e for e in events if isinstance(e, ev.ToolApprovalRequested)]
        events, status = await run_once(ctx.app, "t1",
                                        decide("t1", ToolDecision(gate.tool_call_id, "deny", "not now")))
        assert status is RunStatus.COMPLETED
        (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
        assert (result.content, result.status, result.approval) == (f"{DENIED}: not now", "denied", "denied")


async def test_a_client_tool_waits_and_its_result_resumes_the_run(tmp_path):
    async with engine(tmp_path) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", '/call ask_user {"question": "colour?"}'),
                                        agent="frontend")
        assert status is RunStatus.WAITING
        (call,) = [e for e in events if isinstance(e, ev.ToolCallEnd)]
        assert "ToolApprovalRequested" not in kinds(events)
        assert [(p.kind, p.name) for p in await ctx.ledger.pending_calls("t1")] == [("client", "ask_user")]

        events, status = await run_once(
            ctx.app, "t1", decide("t1", ToolDecision(call.tool_call_id, "ok", '"blue"', "client-tool-msg")))
        assert status is RunStatus.COMPLETED
        (result,) = [e for e in events if isinstance(e, ev.ToolResult)]
        assert (result.message_id, result.content, result.status) == ("client-tool-msg", '"blue"', "ok")
        assert "blue" in text_of(events)
        assert (await only_run(ctx, "t1")).status is RunStatus.COMPLETED


async def test_new_input_supersedes_a_waiting_run(tmp_path):
    async with engine(tmp_path) as ctx:
        events, _ = await run_once(ctx.app, "t1", ask("t1", '/call ask_user {"question": "?"}', run_id="r1"),
                                   agent="frontend")
        (call,) = [e for e in events if isinstance(e, ev.ToolCallEnd)]
        events, status = await run_once(ctx.app, "t1", ask("t1", "never mind", run_id="r2"), agent="frontend")
        assert status is RunStatus.COMPLETED
        assert text_of(events) == 'You said: "never mind".'
        first, second = await ctx.ledger.list_runs("t1")
        assert (first.run_id, first.status, first.error_message) == ("r1", RunStatus.INTERRUPTED,
                                                                     "superseded by new input")
        assert (second.run_id, second.status) == ("r2", RunStatus.COMPLETED)
        closed = [m for m in (await ctx.ledger.thread_view("t1")).messages if m.role == "tool"]
        assert [(m.id, m.tool_result.content) for m in closed] == [(result_id(call.tool_call_id), SUPERSEDED)]
        assert await ctx.ledger.pending_calls("t1") == []


async def test_a_superseded_run_records_its_cause(tmp_path):
    async with engine(tmp_path) as ctx:
        await run_once(ctx.app, "t1", ask("t1", '/call ask_user {"question": "?"}', run_id="r1"), agent="frontend")
        await run_once(ctx.app, "t1", ask("t1", "never mind", run_id="r2"), agent="frontend")
        assert (await ctx.ledger.get_run("r1")).cause == "superseded"


async def test_the_step_limit_fails_the_run_with_step_limit(tmp_path):
    async with engine(tmp_path, assistant={"max_steps": 1}) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", '/call calculator {"expression": "1"}'))
        assert status is RunStatus.FAILED
        run = await only_run(ctx, "t1")
        assert events[-1] == ev.RunFailed(
            "STEP_LIMIT", "the agent reached its step limit (1) without finishing", run.usage)
        assert run.usage.total_tokens > 0  # the failure reports what the run used
        assert (run.status, run.error_code, run.steps, run.cause) == (RunStatus.FAILED, "STEP_LIMIT", 1, None)


# -- interruptions and their causes ------------------------------------------------------------------


async def cancel_at_first_delta(ctx: ServerContext, cancel) -> tuple[list[Any], RunStatus]:
    """A run of many words, ``cancel(run)`` called from its sink at its first text delta (the run is
    held by nothing but its own progress: the cancellation lands at its next checkpoint)."""
    holder: dict[str, Any] = {}
    events: list[Any] = []

    def sink(event: Any) -> None:
        events.append(event)
        if isinstance(event, ev.TextDelta) and len([e for e in events if isinstance(e, ev.TextDelta)]) == 1:
            cancel(holder["run"])

    async with ctx.app.admit("t1", None, ask("t1", "/words 500", run_id="r1"), principal=ANONYMOUS) as run:
        holder["run"] = run
        status = await run.execute(sink)
    return events, status


@pytest.mark.parametrize("cause", list(Cause))
async def test_cancel_commits_interrupted_and_says_the_cause_in_words(tmp_path, cause):
    async with engine(tmp_path) as ctx:
        events, status = await cancel_at_first_delta(ctx, lambda run: run.cancel(cause))
        assert status is RunStatus.INTERRUPTED
        assert not any(isinstance(e, ev.RunFinished | ev.RunFailed) for e in events)  # the stream just stops
        run = await ctx.ledger.get_run("r1")
        assert (run.status, run.error_code, run.error_message) == (
            RunStatus.INTERRUPTED, None, runstate.describe(cause))
        assert not ctx.app.is_active("t1")


@pytest.mark.parametrize("cause", list(Cause))
async def test_a_cancelled_run_records_its_cause(tmp_path, cause):
    async with engine(tmp_path) as ctx:
        await cancel_at_first_delta(ctx, lambda run: run.cancel(cause))
        assert (await ctx.ledger.get_run("r1")).cause == cause.value


async def test_a_cancellation_from_outside_with_no_cause_means_the_client_is_gone(tmp_path):
    async with engine(tmp_path) as ctx:
        with trio.CancelScope() as connection:
            await cancel_at_first_delta(ctx, lambda run: connection.cancel())
        assert connection.cancelled_caught
        run = await ctx.ledger.get_run("r1")
        assert (run.status, run.error_message) == (RunStatus.INTERRUPTED, "the client disconnected")


async def test_a_blamed_cause_names_a_later_cancellation_from_outside(tmp_path):
    """``shutting_down`` records ``shutdown`` on every active run; the grace running out (a plain
    cancellation of the connection) then commits that cause, not ``client_gone``."""
    async with engine(tmp_path) as ctx:
        with trio.CancelScope() as connection:
            def shut_down(run):
                ctx.app.shutting_down()
                connection.cancel()
            await cancel_at_first_delta(ctx, shut_down)
        run = await ctx.ledger.get_run("r1")
        assert (run.status, run.error_message) == (RunStatus.INTERRUPTED, "the server shut down")


async def test_a_cancel_before_execute_commits_interrupted_at_once(tmp_path):
    async with engine(tmp_path) as ctx:
        events: list[Any] = []
        async with ctx.app.admit("t1", None, ask("t1", "hi", run_id="r1"), principal=ANONYMOUS) as run:
            run.cancel(Cause.STOPPED)
            assert await run.execute(events.append) is RunStatus.INTERRUPTED
        assert events == []  # not even RUN_STARTED
        run_record = await ctx.ledger.get_run("r1")
        assert (run_record.status, run_record.error_message) == (RunStatus.INTERRUPTED, "stopped on request")
        assert [m.role for m in (await ctx.ledger.thread_view("t1")).messages] == ["user"]


async def test_stop_cancels_the_threads_run_and_returns_its_committed_status(tmp_path):
    async with engine(tmp_path) as ctx:
        assert await ctx.app.stop("t1") is None  # nothing runs
        streaming = trio.Event()
        events: list[Any] = []

        def sink(event: Any) -> None:
            events.append(event)
            if isinstance(event, ev.TextDelta):
                streaming.set()

        async def serve() -> None:
            async with ctx.app.admit("t1", None, ask("t1", "/delay 5\n/words 1000", run_id="r1"),
                                     principal=ANONYMOUS) as run:
                await run.execute(sink)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve)
            await streaming.wait()
            assert ctx.app.active("t1") is not None
            assert await ctx.app.stop("t1") is RunStatus.INTERRUPTED
            assert not ctx.app.is_active("t1")
        run = await ctx.ledger.get_run("r1")
        assert (run.status, run.error_message) == (RunStatus.INTERRUPTED, "stopped on request")
        assert not any(isinstance(e, ev.RunFinished | ev.RunFailed) for e in events)
        assert await ctx.app.stop("t1") is None


async def test_a_stopped_run_records_its_cause(tmp_path):
    async with engine(tmp_path) as ctx:
        await cancel_at_first_delta(ctx, lambda run: run.cancel(Cause.STOPPED))
        assert (await ctx.ledger.get_run("r1")).cause == "stopped"


# -- the transition table ----------------------------------------------------------------------------

#: the legal (from, to) pairs, written out: adding or removing one must break this test
LEGAL = {
    (RunStatus.RUNNING, RunStatus.RUNNING), (RunStatus.RUNNING, RunStatus.WAITING),
    (RunStatus.RUNNING, RunStatus.COMPLETED), (RunStatus.RUNNING, RunStatus.FAILED),
    (RunStatus.RUNNING, RunStatus.INTERRUPTED),
    (RunStatus.WAITING, RunStatus.RUNNING), (RunStatus.WAITING, RunStatus.WAITING),
    (RunStatus.WAITING, RunStatus.INTERRUPTED),
}


@pytest.mark.parametrize(("current", "new"), list(itertools.product(RunStatus, RunStatus)))
def test_transition_allows_exactly_the_legal_pairs(current, new):
    cause = Cause.CLIENT_GONE if new is RunStatus.INTERRUPTED else None
    if (current, new) in LEGAL:
        assert transition(current, new, cause) is new
    else:
        with pytest.raises(IllegalTransition, match=f"from {current.value} to {new.value}"):
            transition(current, new, cause)


@pytest.mark.parametrize("current", [RunStatus.RUNNING, RunStatus.WAITING])
def test_an_interruption_needs_a_cause_and_nothing_else_takes_one(current):
    with pytest.raises(IllegalTransition, match="without a cause"):
        transition(current, RunStatus.INTERRUPTED)
    with pytest.raises(IllegalTransition, match="with a cause"):
        transition(current, RunStatus.RUNNING, Cause.STOPPED)


async def test_an_illegal_transition_commits_nothing(tmp_path, monkeypatch):
    """With RUNNING → COMPLETED taken out of the table, the final step is refused before the ledger
    sees it: the step is not committed; the run fails (RUNNING → FAILED is legal) with INTERNAL_ERROR, and
    the answer it had streamed is committed with that failure, marked incomplete."""
    table = dict(runstate.TRANSITIONS)
    table[RunStatus.RUNNING] = table[RunStatus.RUNNING] - {RunStatus.COMPLETED}
    monkeypatch.setattr(runstate, "TRANSITIONS", table)
    async with engine(tmp_path) as ctx:
        events, status = await run_once(ctx.app, "t1", ask("t1", "hello", run_id="r1"))
        assert status is RunStatus.FAILED
        assert events[-1] == ev.RunFailed("INTERNAL_ERROR", "the server failed while running the agent")
        assert [(m.role, m.incomplete) for m in (await ctx.ledger.thread_view("t1")).messages] == [
            ("user", None), ("assistant", "failed")]
        run = await ctx.ledger.get_run("r1")
        assert (run.status, run.steps, run.usage.output_tokens) == (RunStatus.FAILED, 0, 0)


async def test_the_interrupted_commit_hands_the_cause_to_the_ledger(tmp_path):
    """What the engine writes: ``Commit.cause`` and the cause in words, in the same commit."""
    async with engine(tmp_path) as ctx:
        commits = []
        commit = ctx.ledger.commit

        async def recording(thread_id, run_id, c):
            commits.append((run_id, c.status, c.cause, c.error_message))
            return await commit(thread_id, run_id, c)

        ctx.ledger.commit = recording
        await cancel_at_first_delta(ctx, lambda run: run.cancel(Cause.CLIENT_TOO_SLOW))
        assert commits == [("r1", RunStatus.INTERRUPTED, "client_too_slow", "the client read the stream too slowly")]


async def test_the_interrupted_commit_carries_the_answer_it_cut_off_also_when_it_commits_late(tmp_path):
    """An early end commits what the step had streamed, marked with the cause, in the outcome's own commit;
    when the store refuses that commit, the reconciler commits the same (the status and the answer together,
    once)."""
    async with engine(tmp_path) as ctx, trio.open_nursery() as nursery:
        nursery.start_soon(ctx.app.reconcile_forever)
        commits: list[Any] = []
        commit = ctx.ledger.commit

        async def refused_once(thread_id, run_id, c):
            if c.status is RunStatus.INTERRUPTED and not commits:
                commits.append("refused")
                raise StoreUnavailable("the ledger is down")
            commits.append((c.status, c.cause, [(m.text, m.incomplete) for m in c.messages]))
            return await commit(thread_id, run_id, c)

        ctx.ledger.commit = refused_once
        await cancel_at_first_delta(ctx, lambda run: run.cancel(Cause.STOPPED))
        with trio.fail_after(10):
            while ctx.app.is_active("t1"):
                await trio.sleep(0.01)
        assert commits == ["refused", (RunStatus.INTERRUPTED, "stopped", [("alpha ", "stopped")])]
        messages = await ctx.ledger.read_messages("t1", 0, 10)
        assert [(m.role, m.text, m.incomplete) for m in messages] == [
            ("user", "/words 500", None), ("assistant", "alpha ", "stopped")]
        nursery.cancel_scope.cancel()


class RecordingRun:
    """A stand-in for the run a transport streams: it records the causes it is cancelled for."""

    def __init__(self) -> None:
        self.cancelled: list[Cause] = []

    def cancel(self, cause: Cause) -> None:
        self.cancelled.append(cause)

    def blame(self, cause: Cause) -> None:  # pragma: no cover - not called by the SSE transport
        raise AssertionError("unexpected")


async def test_an_sse_reader_that_stops_reading_cancels_the_run_as_too_slow():
    from awaken.transports.sse import SseTransport

    async def send(message):
        if message["type"] == "http.response.body":
            await trio.sleep_forever()  # the client reads nothing

    async def receive():
        await trio.sleep_forever()

    async def producer(deliver):
        for n in range(100):
            deliver(b"r:%d" % (n + 1), b'{"type":"x","pad":"' + b"a" * 1000 + b'"}')
            await trio.lowlevel.checkpoint()

    run = RecordingRun()
    transport = SseTransport(send, receive, [], keepalive=15, max_buffered=10_000)
    with trio.fail_after(5):
        await transport.stream(producer, run)
    assert run.cancelled == [Cause.CLIENT_TOO_SLOW]
