"""The ledger conformance suite: every promise of ``awaken.ledger.interface.Ledger``, importable by any backend.

A backend's test module runs the whole suite with one import and one fixture::

    from awaken.ledger.testkit.conformance import *  # noqa: F403

    @pytest.fixture
    def ledger_factory():
        return my_factory  # my_factory(root: Path, **options) -> an unopened ledger under root

(parametrise the fixture to run several backends). The tests open ledgers under pytest's
``tmp_path``, reopen them to check durability, and compare the backend with the reference backend
(SQLite) on random operations and on imports. The crash test is in ``awaken.ledger.testkit.crash``.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import (
    ImagePart,
    IncompletePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from awaken.engine.state import Cause, RunStatus, recovery
from awaken.ledger.interface import (
    ALL_OWNERS,
    TITLE_LIMIT,
    Commit,
    DuplicateRun,
    Ledger,
    RunSummary,
    ThreadRecord,
    ledger_class,
)
from awaken.ledger.testkit.harness import (
    LedgerFactory,
    assistant,
    check_thread_invariants,
    opened,
    pending,
    read_all,
    run_record,
    snapshot,
    step_ids,
    step_messages,
    strip,
    tick,
    tool_result,
    user,
)
from awaken.models import ToolSpec


def SqliteReference(root: Path, **options: Any) -> Ledger:  # noqa: N802 - named like the class it builds
    """The reference backend the suite compares a backend with."""
    return ledger_class("sqlite")(str(root / "reference.db"), **options)


@pytest.fixture
async def ledger(ledger_factory: LedgerFactory, tmp_path: Path) -> AsyncIterator[Ledger]:
    """The backend under test, opened on an empty ``tmp_path``."""
    async with opened(ledger_factory, tmp_path) as opened_ledger:
        yield opened_ledger


async def started(ledger: Ledger, run_id: str, thread_id: str, *inputs: Message) -> list[Message]:
    return await ledger.start_run(run_record(run_id, thread_id), inputs)


# -- creating runs ------------------------------------------------------------------------------


async def test_start_run_creates_thread_and_numbers_inputs(ledger: Ledger) -> None:
    """start_run creates the thread, records the run and appends the inputs with seq 1, 2, …"""
    assert await ledger.get_thread("t") is None
    assert await ledger.read_messages("t", 0, 10) == []
    assert await ledger.list_runs("t") == []
    assert await ledger.pending_calls("t") == []
    assert (await ledger.thread_view("t")).message_ids() == frozenset()

    record = run_record("r1", "t")
    given_time = Message("u2", "user", (TextPart("second"),), "r1", created_at=1234)
    out = await ledger.start_run(record, [user("u1", "first", "r1"), given_time])
    assert [(m.id, m.seq) for m in out] == [("u1", 1), ("u2", 2)]
    assert out[0].created_at > 0 and out[1].created_at == 1234
    assert strip(out) == strip([user("u1", "first", "r1"), given_time])

    thread = await ledger.get_thread("t")
    assert thread is not None
    assert (thread.thread_id, thread.created_at, thread.state, thread.last_seq) == (
        "t",
        record.created_at,
        {},
        2,
    )
    assert await ledger.get_run("r1") == record
    assert await ledger.read_messages("t", 0, 10) == out

    assert await started(ledger, "r2", "t") == []
    assert (await ledger.get_thread("t")).last_seq == 2  # type: ignore[union-attr]
    assert [r.run_id for r in await ledger.list_runs("t")] == ["r1", "r2"]


async def test_duplicate_run_id_raises_and_commits_nothing(ledger: Ledger) -> None:
    """start_run with a run id the ledger holds (on any thread) raises DuplicateRun and writes nothing."""
    await started(ledger, "r1", "t1", user("u1"))
    before = await snapshot(ledger)
    with pytest.raises(DuplicateRun):
        await started(ledger, "r1", "t1", user("u2"))
    with pytest.raises(DuplicateRun):
        await started(ledger, "r1", "t2", user("u3"))
    assert await snapshot(ledger) == before
    assert await ledger.get_thread("t2") is None
    assert issubclass(DuplicateRun, ValueError)


async def test_start_run_with_repeated_input_id_commits_nothing(ledger: Ledger) -> None:
    """A start_run whose inputs repeat an id (or reuse a committed one) raises ValueError: no run, no
    thread, no message is written."""
    with pytest.raises(ValueError):
        await started(ledger, "r1", "t", user("u1"), user("u1"))
    assert await ledger.get_run("r1") is None
    assert await ledger.get_thread("t") is None
    await started(ledger, "r2", "t", user("u1"))
    before = await snapshot(ledger)
    with pytest.raises(ValueError):
        await started(ledger, "r3", "t", user("u2"), user("u1"))
    assert await ledger.get_run("r3") is None
    assert await snapshot(ledger) == before


# -- commits ------------------------------------------------------------------------------------


async def test_step_commit_is_atomic_when_an_id_repeats(ledger: Ledger) -> None:
    """A commit with a duplicate message id raises ValueError and changes nothing: no message, pending
    call, state, usage, step count or status of it is visible."""
    await started(ledger, "r1", "t", user("u1", run_id="r1"))
    before = await snapshot(ledger)
    bad_steps = [
        (assistant("a1", run_id="r1", calls=["c1"]), user("u1")),  # repeats a committed id
        (assistant("a1", run_id="r1", calls=["c1"]), assistant("a1")),  # repeats an id inside the step
    ]
    for messages in bad_steps:
        with pytest.raises(ValueError):
            await ledger.commit(
                "t",
                "r1",
                Commit(
                    status=RunStatus.WAITING,
                    messages=messages,
                    pending=(pending("c1", "r1", "t", "a1"),),
                    state={"changed": True},
                    usage=Usage(5, 7),
                    steps=1,
                ),
            )
        assert await snapshot(ledger) == before
    out = await ledger.commit(
        "t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),), steps=1)
    )
    assert [m.seq for m in out] == [2]


async def test_commit_for_unknown_run_is_rejected(ledger: Ledger) -> None:
    """A commit naming a run the ledger does not hold, or a run of another thread, raises ValueError
    and writes nothing (no thread is created, no message appended)."""
    await started(ledger, "r1", "t1", user("u1"))
    before = await snapshot(ledger)
    with pytest.raises(ValueError):
        await ledger.commit("t1", "nope", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),)))
    with pytest.raises(ValueError):
        await ledger.commit("t2", "nope", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),)))
    with pytest.raises(ValueError):
        await ledger.commit("t2", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
    assert await snapshot(ledger) == before
    assert await ledger.get_thread("t2") is None


async def test_thread_view_names_exactly_the_committed_ids(ledger: Ledger) -> None:
    """The ids an adapter drops as replayed history (``thread_view(...).message_ids()``) are exactly the
    ids committed on that thread, per thread, for any number of messages."""
    await started(ledger, "r1", "t1", user("u1"), user("u2"))
    await ledger.commit("t1", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
    await started(ledger, "r2", "t2", user("u1"))  # ids are unique per thread, not globally
    assert (await ledger.thread_view("t1")).message_ids() == {"u1", "u2", "a1"}
    assert (await ledger.thread_view("t2")).message_ids() == {"u1"}
    assert (await ledger.thread_view("t3")).message_ids() == set()
    many = [f"m{i}" for i in range(1200)]
    await started(ledger, "r3", "t3", *(user(i) for i in many[::2]))
    assert (await ledger.thread_view("t3")).message_ids() == set(many[::2])


async def test_read_messages_pages_by_cursor(ledger: Ledger) -> None:
    """read_messages returns up to ``limit`` messages with seq > after_seq, oldest first, so paging by
    the last seq walks the whole thread exactly once and then returns an empty page."""
    await started(ledger, "r1", "t", *(user(f"u{i}") for i in range(5)))
    for step in range(4):
        await ledger.commit(
            "t", "r1", Commit(status=RunStatus.RUNNING, messages=step_messages("r1", step, 5))
        )
    pages: list[list[int]] = []
    after = 0
    while page := await ledger.read_messages("t", after, 10):
        pages.append([m.seq for m in page])
        after = page[-1].seq
    assert pages == [list(range(1, 11)), list(range(11, 21)), list(range(21, 26))]
    assert await ledger.read_messages("t", 25, 10) == []
    assert await ledger.read_messages("t", 1000, 10) == []
    assert [m.seq for m in await ledger.read_messages("t", 0, 1)] == [1]
    assert [m.seq for m in await ledger.read_messages("t", 24, 100)] == [25]
    assert [m.id for m in await ledger.read_messages("t", 5, 5)] == step_ids("r1", 0, 5)
    assert await ledger.read_messages("elsewhere", 0, 10) == []


async def test_pending_calls_are_added_resolved_and_ordered(ledger: Ledger) -> None:
    """Pending calls come back in commit order with the thread's id; ``resolved`` removes them;
    the run is waiting; a call id that is already pending is refused atomically."""
    await started(ledger, "r1", "t", user("u1"))
    await started(ledger, "o1", "other", user("u1"))
    c1, c2, c3 = (pending(c, "r1", "t", "a1") for c in ("c1", "c2", "c3"))
    await ledger.commit(
        "t",
        "r1",
        Commit(status=RunStatus.WAITING, messages=(assistant("a1", calls=["c2", "c1"]),), pending=(c2, c1)),
    )
    await ledger.commit(
        "other", "o1", Commit(status=RunStatus.WAITING, pending=(pending("x", "o1", "other", "u1"),))
    )
    assert await ledger.pending_calls("t") == [c2, c1]
    assert [(r.run_id, r.status) for r in await ledger.list_runs("t")] == [("r1", RunStatus.WAITING)]

    before = await snapshot(ledger)
    with pytest.raises(ValueError):
        await ledger.commit(
            "t", "r1", Commit(status=RunStatus.WAITING, messages=(assistant("a9"),), pending=(c1,))
        )
    assert await snapshot(ledger) == before

    await ledger.commit(
        "t",
        "r1",
        Commit(
            status=RunStatus.WAITING,
            messages=(tool_result("tr2", "c2"),),
            resolved=("c2", "unknown"),
            pending=(c3,),
        ),
    )
    assert await ledger.pending_calls("t") == [c1, c3]
    await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, resolved=("c1", "c3")))
    assert await ledger.pending_calls("t") == []
    assert [(r.run_id, r.status) for r in await ledger.list_runs("t")] == [("r1", RunStatus.RUNNING)]
    assert [p.tool_call_id for p in await ledger.pending_calls("other")] == ["x"]


async def test_thread_view_is_the_thread_its_history_and_its_pending_calls(ledger: Ledger) -> None:
    """``thread_view`` answers what the three single reads answer (one round trip where it can)."""
    empty = await ledger.thread_view("nobody")
    assert (empty.thread, empty.messages, empty.pending) == (None, (), ())
    await started(ledger, "r1", "t", user("u1"))
    c1 = pending("c1", "r1", "t", "a1")
    await ledger.commit("t", "r1", Commit(status=RunStatus.WAITING, messages=(assistant("a1", calls=["c1"]),),
                                          pending=(c1,), state={"k": 1}))
    view = await ledger.thread_view("t")
    assert view.thread == await ledger.get_thread("t")
    assert view.thread.state == {"k": 1}
    assert list(view.messages) == await ledger.read_messages("t", 0, 100)
    assert [m.id for m in view.messages] == ["u1", "a1"]
    assert list(view.pending) == [c1]


async def test_run_status_transitions_and_usage_accumulate(ledger: Ledger) -> None:
    """Each commit sets the run's status and error fields and adds its usage and steps to the run."""
    record = await ledger.start_run(run_record("r1", "t"), [user("u1")])
    assert record
    commits = [
        Commit(status=RunStatus.RUNNING, usage=Usage(10, 5), steps=1),
        Commit(
            status=RunStatus.WAITING, usage=Usage(1, 1), steps=1, pending=(pending("c1", "r1", "t", "u1"),)
        ),
        Commit(status=RunStatus.RUNNING, resolved=("c1",)),
        Commit(
            status=RunStatus.FAILED,
            usage=Usage(2, 3),
            steps=1,
            error_code="MODEL_ERROR",
            error_message="boom",
        ),
    ]
    seen = []
    for commit in commits:
        await ledger.commit("t", "r1", commit)
        run = await ledger.get_run("r1")
        assert run is not None
        seen.append((run.status, run.usage, run.steps, run.error_code, run.error_message))
    assert seen == [
        (RunStatus.RUNNING, Usage(10, 5), 1, None, None),
        (RunStatus.WAITING, Usage(11, 6), 2, None, None),
        (RunStatus.RUNNING, Usage(11, 6), 2, None, None),
        (RunStatus.FAILED, Usage(13, 9), 3, "MODEL_ERROR", "boom"),
    ]
    run = await ledger.get_run("r1")
    assert run is not None and run.updated_at >= run.created_at and run.usage.total_tokens == 22
    assert await ledger.get_run("missing") is None


async def test_the_cause_of_an_interruption_is_stored_with_the_status(
    ledger_factory: LedgerFactory, tmp_path: Path
) -> None:
    """A commit's ``cause`` is stored with the run's status and returned by get_run and list_runs, now
    and after reopen; a run committed without one has None; a later commit sets it again."""
    async with opened(ledger_factory, tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await started(ledger, "r2", "t", user("u2"))
        await started(ledger, "r3", "t", user("u3"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.INTERRUPTED, cause="client_gone"))
        await ledger.commit("t", "r2", Commit(status=RunStatus.WAITING, cause=None))
        await ledger.commit("t", "r2", Commit(status=RunStatus.INTERRUPTED, cause="superseded"))
        await ledger.commit("t", "r3", Commit(status=RunStatus.COMPLETED))
        assert (await ledger.get_run("r1")).cause == "client_gone"  # type: ignore[union-attr]
        expected = [("r1", "client_gone"), ("r2", "superseded"), ("r3", None)]
        assert [(r.run_id, r.cause) for r in await ledger.list_runs("t")] == expected
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        assert [(r.run_id, r.cause) for r in await ledger.list_runs("t")] == expected
        assert (await ledger.get_run("r2")).cause == "superseded"  # type: ignore[union-attr]
        assert await snapshot(ledger) == before


async def test_a_runs_tools_are_stored_with_it(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """The tools a client declared for a run are stored with its record and returned by get_run and
    list_runs, now, after later commits, and after reopen; a run without any has ``()``."""
    tools = (ToolSpec("ask_user", "Ask the person", {"type": "object", "properties": {"q": {"type": "string"}}}),
             ToolSpec("pick", "", {"type": "object", "properties": {}}))
    async with opened(ledger_factory, tmp_path) as ledger:
        await ledger.start_run(attrs.evolve(run_record("r1", "t"), tools=tools), (user("u1"),))
        await ledger.commit("t", "r1", Commit(status=RunStatus.WAITING))
        await started(ledger, "r2", "t2", user("u2"))
        assert (await ledger.get_run("r1")).tools == tools  # type: ignore[union-attr]
        assert [r.tools for r in await ledger.list_runs("t")] == [tools]
        assert (await ledger.get_run("r2")).tools == ()  # type: ignore[union-attr]
    async with opened(ledger_factory, tmp_path) as ledger:
        assert (await ledger.get_run("r1")).tools == tools  # type: ignore[union-attr]
        assert (await ledger.get_run("r2")).tools == ()  # type: ignore[union-attr]


async def test_commit_state_replaces_the_thread_state(ledger: Ledger) -> None:
    """``Commit.state`` replaces the agent state (no merge); None leaves it; callers' dicts are not shared."""
    await started(ledger, "r1", "t", user("u1"))
    mine = {"a": 1, "nested": {"list": [1, "два", None]}}
    await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, state=mine))
    mine["a"] = 2
    thread = await ledger.get_thread("t")
    assert thread is not None and thread.state == {"a": 1, "nested": {"list": [1, "два", None]}}
    thread.state["a"] = 3
    assert (await ledger.get_thread("t")).state["a"] == 1  # type: ignore[union-attr]
    await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, state={"b": 2}))
    await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),)))
    assert (await ledger.get_thread("t")).state == {"b": 2}  # type: ignore[union-attr]
    await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, state={}))
    assert (await ledger.get_thread("t")).state == {}  # type: ignore[union-attr]


async def test_list_threads_and_runs_oldest_first(ledger: Ledger) -> None:
    """list_threads returns every thread by creation time; list_runs every run of a thread oldest first."""
    for name in ("t-b", "t-a", "t-c"):
        await started(ledger, f"{name}-r1", name, user("u"))
    await started(ledger, "t-a-r2", "t-a", user("u2"))
    late = run_record("t-a-r0", "t-a", created_at=tick() + 10_000)
    await ledger.start_run(late, [])
    threads = await ledger.list_threads()
    assert [t.thread_id for t in threads] == ["t-b", "t-a", "t-c"]
    assert [t.last_seq for t in threads] == [1, 2, 1]
    assert [r.run_id for r in await ledger.list_runs("t-a")] == ["t-a-r1", "t-a-r2", "t-a-r0"]
    assert await ledger.list_runs("nope") == []


async def test_ping_close_and_closed_ledger(ledger: Ledger) -> None:
    """ping answers while open; aclose is idempotent; a closed ledger raises StoreUnavailable, never
    an empty answer."""
    await ledger.ping()
    await started(ledger, "r1", "t", user("u1"))
    await ledger.aclose()
    await ledger.aclose()
    with pytest.raises(StoreUnavailable):
        await ledger.ping()
    with pytest.raises(StoreUnavailable):
        await ledger.read_messages("t", 0, 10)
    with pytest.raises(StoreUnavailable):
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))



async def test_the_write_probe_passes_leaves_no_trace_and_fails_once_closed(ledger: Ledger) -> None:
    """``probe_write`` (``/readyz``) succeeds, again and again, on a ledger that can commit, without
    changing what the ledger holds; a closed ledger fails it with StoreUnavailable."""
    await started(ledger, "r1", "t", user("u1"))
    before = (await ledger.list_threads(), await ledger.list_runs("t"), await ledger.read_messages("t", 0, 10))
    await ledger.probe_write()
    await ledger.probe_write()
    assert (await ledger.list_threads(), await ledger.list_runs("t"), await ledger.read_messages("t", 0, 10)) == before
    await ledger.aclose()
    with pytest.raises(StoreUnavailable):
        await ledger.probe_write()


async def test_an_answer_cut_off_is_committed_whole_with_the_outcome(ledger_factory: LedgerFactory,
                                                                       tmp_path: Path) -> None:
    """An early end commits the answer streamed so far, marked incomplete, in the same commit as the
    run's ``interrupted`` status: every read (the history, admission's tail, the hot paths, a reopen)
    gives the whole message with its marker."""
    cut = Message("a1", "assistant", (ReasoningPart("rs1", "pondering"), TextPart("The answer is"),
                                      IncompletePart("stopped")), "r1")
    async with opened(ledger_factory, tmp_path) as ledger:
        await started(ledger, "r1", "t1", user("u1", "first", "r1"))
        await ledger.commit("t1", "r1", Commit(status=RunStatus.INTERRUPTED, messages=(cut,), cause="stopped",
                                               error_message="stopped on request"))
        committed = attrs.evolve(cut, seq=2, created_at=(await ledger.read_messages("t1", 1, 1))[0].created_at)
        assert (await ledger.read_messages("t1", 1, 10)) == [committed]
        assert (await ledger.thread_view("t1")).messages[-1] == committed
        assert (await ledger.admission_facts("t1", frozenset(), 10)).tail[-1] == committed
        assert committed.incomplete == "stopped"
        run = await ledger.get_run("r1")
        assert (run.status, run.cause) == (RunStatus.INTERRUPTED, "stopped")
    async with opened(ledger_factory, tmp_path) as ledger:
        assert (await ledger.read_messages("t1", 1, 10)) == [committed]
        assert (await ledger.admission_facts("t1", frozenset(), 10)).tail[-1].incomplete == "stopped"


async def test_data_survives_close_and_reopen(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """Everything committed (every part kind, runs, usage, pending calls, state) reads back the same
    after the ledger is closed and opened again."""
    parts_message = Message(
        "a-all",
        "assistant",
        (
            ReasoningPart("rs1", "thinking…"),
            TextPart('text with ünïcödé 🧵 and "quotes" \n newlines'),
            ImagePart("https://example.com/x.png"),
            ImagePart("data:image/png;base64,AAAA", "image/png"),
            ToolCallPart("c1", "calculator", '{"expression": "1+1"}'),
        ),
        "r1",
    )
    results = Message(
        "tool-1",
        "tool",
        (
            ToolResultPart("c0", "calculator", "2", "ok", "approved"),
            ToolResultPart("cx", "x", "no", "denied", "denied"),
        ),
        "r1",
    )
    async with opened(ledger_factory, tmp_path) as ledger:
        await started(ledger, "r1", "t1", user("u1", "first", "r1"))
        await ledger.commit(
            "t1",
            "r1",
            Commit(
                status=RunStatus.WAITING,
                messages=(results, parts_message),
                pending=(pending("c1", "r1", "t1", "a-all", kind="client"),),
                state={"k": ["v", 1, 2.5, True, None, {"x": "ÿ"}]},
                usage=Usage(3, 4),
                steps=1,
            ),
        )
        await started(ledger, "r2", "t2", user("u1"))
        await ledger.commit(
            "t2",
            "r2",
            Commit(status=RunStatus.FAILED, error_code="MODEL_ERROR", error_message="bad", steps=1),
        )
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        assert await snapshot(ledger) == before
        got = await ledger.read_messages("t1", 1, 10)
        assert strip(got) == strip([results, parts_message])
        out = await ledger.commit("t1", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a2"),)))
        assert out[0].seq == 4


async def test_open_marks_running_runs_interrupted(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """Opening the ledger commits runs left ``running`` (by a dead process) ``interrupted`` with cause
    ``server_restart``; waiting and
    finished runs, their messages and pending calls are untouched; a second reopen changes nothing."""
    async with opened(ledger_factory, tmp_path) as ledger:
        await started(ledger, "run-a", "A", user("u1"))
        await ledger.commit(
            "A", "run-a", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),), steps=1)
        )
        await started(ledger, "run-b", "B", user("u1"))
        await ledger.commit(
            "B",
            "run-b",
            Commit(status=RunStatus.WAITING, pending=(pending("c1", "run-b", "B", "u1", "client"),)),
        )
        await started(ledger, "run-c", "C", user("u1"))
        await ledger.commit("C", "run-c", Commit(status=RunStatus.COMPLETED))
        await started(ledger, "run-d", "A", user("u2"))  # two running runs on one thread
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        runs = {r.run_id: r for t in ("A", "B", "C") for r in await ledger.list_runs(t)}
        statuses = {run_id: run.status for run_id, run in runs.items()}
        assert statuses == {
            "run-a": RunStatus.INTERRUPTED,
            "run-b": RunStatus.WAITING,
            "run-c": RunStatus.COMPLETED,
            "run-d": RunStatus.INTERRUPTED,
        }
        run_a = await ledger.get_run("run-a")
        assert run_a is not None and run_a.error_code is None and run_a.steps == 1
        causes = {run_id: run.cause for run_id, run in runs.items()}
        restart = Cause.SERVER_RESTART.value
        assert causes == {"run-a": restart, "run-b": None, "run-c": None, "run-d": restart}
        assert (await ledger.get_run("run-d")).cause == restart  # type: ignore[union-attr]
        # the recovery writes the run state's change, every field of it (the cause in words too)
        recovered = recovery(Cause.SERVER_RESTART)
        assert (run_a.status, run_a.cause, run_a.error_code, run_a.error_message) == (
            recovered.status, recovered.cause_value, recovered.error_code, recovered.error_message)
        assert [p.tool_call_id for p in await ledger.pending_calls("B")] == ["c1"]
        after = await snapshot(ledger)
        assert after["B"] == before["B"] and after["C"] == before["C"]
        assert after["A"]["messages"] == before["A"]["messages"]
    async with opened(ledger_factory, tmp_path) as ledger:
        assert await snapshot(ledger) == after


async def test_import_thread_round_trip_across_backends(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """import_thread writes a whole thread as copied from another ledger (into this backend and into the
    reference SQLite backend),
    keeping ids, seqs, runs, pending calls and state; it survives reopen and the copy continues at
    last_seq + 1. Importing a thread that exists, or an inconsistent one (seqs outside 1..last_seq or
    repeated, a run id already held, a call of another thread), raises ValueError and writes nothing."""
    async with opened(ledger_factory, tmp_path / "source") as source:
        await started(source, "r1", "t1", user("u1"))
        await source.commit(
            "t1", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),), usage=Usage(1, 2))
        )
        await started(source, "r2", "t1", user("u2"))
        await source.commit(
            "t1",
            "r2",
            Commit(
                status=RunStatus.WAITING,
                messages=(assistant("a2", calls=["c1"]),),
                pending=(pending("c1", "r2", "t1", "a2"),),
                state={"s": 1},
            ),
        )
        await started(source, "r3", "日本語 🧵", user("u1"))
        await source.commit("日本語 🧵", "r3", Commit(status=RunStatus.INTERRUPTED))  # reopen keeps it
        original = await snapshot(source)
        exported = []
        for thread in await source.list_threads():
            exported.append(
                (
                    thread,
                    await source.list_runs(thread.thread_id),
                    await read_all(source, thread.thread_id),
                    await source.pending_calls(thread.thread_id),
                    (await source.thread_summary(thread.thread_id)).updated_at,  # type: ignore[union-attr]
                )
            )
    for name, target in {"self": ledger_factory, "reference": SqliteReference}.items():
        async with opened(target, tmp_path / f"copy-{name}") as copy:
            for thread, runs, messages, calls, updated_at in exported:
                await copy.import_thread(thread, runs, messages, calls, updated_at)
            assert await snapshot(copy) == original
            before = await snapshot(copy)
            thread, runs, messages, calls, _ = exported[0]
            with pytest.raises(ValueError):
                await copy.import_thread(thread, [], [], [])
            fresh = ThreadRecord("fresh", 1, {}, 1)
            taken_run = attrs.evolve(runs[0], thread_id="fresh")
            invalid = [
                (fresh, [], [attrs.evolve(messages[0], seq=2)], []),  # a seq beyond last_seq
                (fresh, [], [messages[0], attrs.evolve(messages[0], id="other")], []),  # a repeated seq
                (fresh, [taken_run], [], []),  # a run id the ledger holds
                (fresh, [], [], [attrs.evolve(calls[0], thread_id="t1")]),  # a call of another thread
            ]
            for args in invalid:
                with pytest.raises(ValueError):
                    await copy.import_thread(*args)
            assert await snapshot(copy) == before
        async with opened(target, tmp_path / f"copy-{name}") as copy:
            assert await snapshot(copy) == original
            out = await copy.commit(
                "t1",
                "r2",
                Commit(status=RunStatus.RUNNING, resolved=("c1",), messages=(tool_result("tr", "c1"),)),
            )
            assert out[0].seq == original["threads"][0].last_seq + 1


# -- concurrency and cancellation ---------------------------------------------------------------


async def test_concurrent_writers_on_different_threads(ledger: Ledger) -> None:
    """20 tasks × 20 commits, one thread each: every thread ends with gapless seqs and every step whole."""
    tasks, commits, k = 20, 20, 2

    async def writer(n: int) -> None:
        thread, run = f"thread-{n}", f"run{n}"
        await started(ledger, run, thread, user(f"{run}-in"))
        for step in range(commits):
            out = await ledger.commit(
                thread, run, Commit(RunStatus.RUNNING, step_messages(run, step, k), steps=1)
            )
            assert [m.seq for m in out] == [2 + step * k + i for i in range(k)]

    async with trio.open_nursery() as nursery:
        for n in range(tasks):
            nursery.start_soon(writer, n)
    assert len(await ledger.list_threads()) == tasks
    for n in range(tasks):
        messages = await check_thread_invariants(ledger, f"thread-{n}")
        assert len(messages) == 1 + commits * k
        assert (await ledger.get_run(f"run{n}")).steps == commits  # type: ignore[union-attr]


async def test_concurrent_writers_on_one_thread(ledger: Ledger) -> None:
    """20 tasks × 20 commits to the same thread: seqs are unique and gapless, each commit's messages
    get consecutive seqs, and each run's usage counts all of its commits."""
    tasks, commits, k = 20, 20, 2
    got: list[list[int]] = []

    async def writer(n: int) -> None:
        run = f"run{n}"
        got.append([m.seq for m in await started(ledger, run, "shared", user(f"{run}-in"))])
        for step in range(commits):
            out = await ledger.commit(
                "shared", run, Commit(RunStatus.RUNNING, step_messages(run, step, k), usage=Usage(1, 1))
            )
            got.append([m.seq for m in out])

    async with trio.open_nursery() as nursery:
        for n in range(tasks):
            nursery.start_soon(writer, n)
    messages = await check_thread_invariants(ledger, "shared")
    assert len(messages) == tasks * (1 + commits * k)
    for seqs in got:
        assert seqs == list(range(seqs[0], seqs[0] + len(seqs)))
    assert sorted(s for seqs in got for s in seqs) == list(range(1, len(messages) + 1))
    for n in range(tasks):
        assert (await ledger.get_run(f"run{n}")).usage == Usage(commits, commits)  # type: ignore[union-attr]


async def test_cancelled_commits_are_all_or_nothing(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """A commit cancelled at any point (trio.Cancelled) is either wholly visible or not at all, now and
    after reopen; every commit that returned is visible."""
    rng = random.Random(7)
    k = 3
    returned: list[tuple[str, int]] = []
    async with opened(ledger_factory, tmp_path) as ledger:
        for round_ in range(8):

            async def writer(n: int, round_: int = round_) -> None:
                run = f"r{round_}x{n}"
                await started(ledger, run, f"t{n}", user(f"{run}-in"))
                for step in range(1000):
                    out = await ledger.commit(
                        f"t{n}", run, Commit(RunStatus.RUNNING, step_messages(run, step, k), steps=1)
                    )
                    returned.append((f"t{n}", out[-1].seq))

            with trio.move_on_after(rng.uniform(0.001, 0.05)):
                async with trio.open_nursery() as nursery:
                    for n in range(4):
                        nursery.start_soon(writer, n)
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        after = await snapshot(ledger)
        for thread in await ledger.list_threads():
            messages = await check_thread_invariants(ledger, thread.thread_id)
            groups: dict[tuple[str, str], list[str]] = {}
            for m in messages:
                if not m.id.endswith("-in"):
                    run, step, _ = m.id.split("-")
                    groups.setdefault((run, step), []).append(m.id)
            for (run, step), ids in groups.items():
                assert ids == step_ids(run, int(step), k)
            for run in await ledger.list_runs(thread.thread_id):
                assert run.steps == sum(1 for r, _ in groups if r == run.run_id)
        seqs = {(t.thread_id, s) for t in await ledger.list_threads() for s in range(1, t.last_seq + 1)}
        assert set(returned) <= seqs
    for thread_id in after:
        if thread_id != "threads":
            assert after[thread_id]["messages"] == before[thread_id]["messages"]


# -- thread ids ---------------------------------------------------------------------------------

ODD_THREAD_IDS = [
    "../../etc/passwd",
    "a/b",
    "/absolute",
    "..",
    ".",
    "C:\\windows\\system32",
    "日本語 🧵",
    "nul\x00byte",
    "x" * 5000,
    "",
]


async def test_any_unicode_or_path_like_thread_id_works(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """Thread ids are opaque strings: any Unicode id (path-like, empty, very long) round-trips, and the
    store never writes outside its own location (for files: only hex-named logs in its directory)."""
    root = tmp_path / "store"
    root.mkdir()
    async with opened(ledger_factory, root) as ledger:
        for n, thread_id in enumerate(ODD_THREAD_IDS):
            await started(ledger, f"r{n}", thread_id, user("u1", thread_id))
            await ledger.commit(
                thread_id, f"r{n}", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),))
            )
        before = await snapshot(ledger)
    async with opened(ledger_factory, root) as ledger:
        assert await snapshot(ledger) == before
        assert sorted(t.thread_id for t in await ledger.list_threads()) == sorted(ODD_THREAD_IDS)
        for thread_id in ODD_THREAD_IDS:
            messages = await read_all(ledger, thread_id)
            assert [m.text for m in messages] == [thread_id, "hi"]
    assert _names(tmp_path) == ["store"]


def _names(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# -- differential: both backends answer the same to the same operations -------------------------

_THREADS = ["t1", "t2", "../t3"]
_IDS = ["m1", "m2", "m3", "m4", "m5", "m6"]
_CALLS = ["c1", "c2", "c3"]
_op = st.one_of(
    st.tuples(
        st.just("start"),
        st.sampled_from(["r1", "r2", "r3", "r4"]),
        st.sampled_from(_THREADS),
        st.lists(st.sampled_from(_IDS), max_size=3),
    ),
    st.tuples(
        st.just("commit"),
        st.sampled_from(["r1", "r2", "r3", "r4", "zz"]),
        st.sampled_from(_THREADS),
        st.lists(st.sampled_from(_IDS), max_size=3),
        st.lists(st.sampled_from(_CALLS), max_size=2),
        st.lists(st.sampled_from(_CALLS), max_size=2),
        st.sampled_from(list(RunStatus)),
        st.one_of(st.none(), st.dictionaries(st.sampled_from("abc"), st.integers(0, 3), max_size=2)),
        st.integers(0, 3),
    ),
    st.tuples(st.just("reopen")),
)


def _normalize(value: Any) -> Any:
    """Drop the wall-clock fields (updated_at, and created_at of untimed messages) before comparing."""
    if isinstance(value, dict):
        return {k: _normalize(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return type(value)(_normalize(v) for v in value)
    if isinstance(value, Message):
        return attrs.evolve(value, created_at=0)
    if attrs.has(type(value)) and hasattr(value, "updated_at"):
        return attrs.evolve(value, updated_at=0)
    return value


@settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(ops=st.lists(_op, max_size=25))
async def test_agrees_with_the_reference_backend_on_random_operations(
    ledger_factory: LedgerFactory, ops: list[tuple[Any, ...]]
) -> None:
    """Driven by the same random sequence of start_run/commit/reopen calls (valid or not), the backend
    returns what the reference (SQLite) backend returns, raises the same exception types and ends with
    the same observable state."""
    factories = {"reference": SqliteReference, "self": ledger_factory}
    with tempfile.TemporaryDirectory() as tmp:
        for name in factories:
            (Path(tmp) / name).mkdir()
        ledgers = {name: factories[name](Path(tmp) / name) for name in factories}
        for ledger in ledgers.values():
            await ledger.open()
        try:
            for op in ops:
                outcomes = {}
                for name in list(ledgers):
                    ledger = ledgers[name]
                    try:
                        if op[0] == "start":
                            _, run, thread, ids = op
                            result: Any = await ledger.start_run(
                                run_record(run, thread, created_at=1), [user(i, run_id=run) for i in ids]
                            )
                        elif op[0] == "commit":
                            _, run, thread, ids, add, resolve, status, state, steps = op
                            commit = Commit(
                                status=status,
                                messages=tuple(assistant(i, run_id=run) for i in ids),
                                pending=tuple(pending(c, run, thread, "m1") for c in add),
                                resolved=tuple(resolve),
                                state=state,
                                usage=Usage(steps, 1),
                                steps=steps,
                            )
                            result = await ledger.commit(thread, run, commit)
                        else:
                            await ledger.aclose()
                            ledgers[name] = ledger = factories[name](Path(tmp) / name)
                            await ledger.open()
                            result = None
                        outcomes[name] = ("ok", _normalize(result))
                    except (ValueError, StoreUnavailable) as exc:
                        outcomes[name] = ("raised", type(exc).__name__)
                    outcomes[name] = (outcomes[name], _normalize(await snapshot(ledger)))
                first, *rest = outcomes.values()
                for other in rest:
                    assert other == first, op
        finally:
            for ledger in ledgers.values():
                await ledger.aclose()




# -- owners, listing and deletion ---------------------------------------------------------------


async def test_a_new_thread_belongs_to_the_subject_that_started_it(
    ledger_factory: LedgerFactory, tmp_path: Path
) -> None:
    """start_run's ``owner`` becomes the new thread's owner (None without one); later runs on the thread
    never change it; get_thread, thread_view, list_threads and thread_summary say it, after reopen too."""
    async with opened(ledger_factory, tmp_path) as ledger:
        await ledger.start_run(run_record("r1", "mine"), [user("u1")], owner="alice")
        await ledger.start_run(run_record("r2", "mine"), [user("u2")], owner="bob")
        await ledger.start_run(run_record("r3", "mine"), [user("u3")])
        await ledger.start_run(run_record("r4", "nobody's"), [user("u1")])
        for n, thread_id in ((1, "mine"), (2, "mine"), (3, "mine"), (4, "nobody's")):
            await ledger.commit(thread_id, f"r{n}", Commit(RunStatus.COMPLETED))  # none left to recover
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        assert await snapshot(ledger) == before
        assert (await ledger.get_thread("mine")).owner == "alice"  # type: ignore[union-attr]
        assert (await ledger.thread_view("mine")).thread.owner == "alice"  # type: ignore[union-attr]
        assert (await ledger.get_thread("nobody's")).owner is None  # type: ignore[union-attr]
        assert {t.thread_id: t.owner for t in await ledger.list_threads()} == {"mine": "alice", "nobody's": None}
        assert (await ledger.thread_summary("mine")).owner == "alice"  # type: ignore[union-attr]


async def test_thread_summary_describes_the_thread(ledger: Ledger) -> None:
    """A summary holds the title (the first non-blank user text, whitespace collapsed, at most
    TITLE_LIMIT characters), the latest run's agent and outcome, the times, the message count and
    whether pending calls exist; updated_at moves forward with every start_run and commit."""
    assert await ledger.thread_summary("t") is None
    blank = Message("u0", "user", (TextPart("  \n "),))
    first = await ledger.start_run(
        attrs.evolve(run_record("r1", "t"), agent_id="planner"),
        [blank, user("u1", "  Plan   my\ttrip\n to Lisbon  "), user("u2", "second")],
    )
    assert len(first) == 3
    s1 = await ledger.thread_summary("t")
    assert s1 is not None
    assert (s1.thread_id, s1.title, s1.agent_id, s1.message_count, s1.waiting, s1.owner) == (
        "t", "Plan my trip to Lisbon", "planner", 3, False, None)
    assert s1.last_run == RunSummary("r1", RunStatus.RUNNING, None, None)
    assert s1.created_at == (await ledger.get_thread("t")).created_at  # type: ignore[union-attr]
    await ledger.commit("t", "r1", Commit(RunStatus.WAITING, messages=(assistant("a1", calls=["c1"]),),
                                          pending=(pending("c1", "r1", "t", "a1"),)))
    s2 = await ledger.thread_summary("t")
    assert s2 is not None and s2.updated_at > s1.updated_at
    assert (s2.title, s2.message_count, s2.waiting) == ("Plan my trip to Lisbon", 4, True)
    assert s2.last_run == RunSummary("r1", RunStatus.WAITING, None, None)
    await ledger.commit("t", "r1", Commit(RunStatus.INTERRUPTED, resolved=("c1",), cause="superseded"))
    await ledger.start_run(attrs.evolve(run_record("r2", "t"), agent_id="writer"), [user("u3", "other")])
    await ledger.commit("t", "r2", Commit(RunStatus.FAILED, error_code="MODEL_ERROR", error_message="x"))
    s3 = await ledger.thread_summary("t")
    assert s3 is not None and s3.updated_at > s2.updated_at
    assert (s3.title, s3.agent_id, s3.message_count, s3.waiting) == ("Plan my trip to Lisbon", "writer", 5, False)
    assert s3.last_run == RunSummary("r2", RunStatus.FAILED, None, "MODEL_ERROR")
    await ledger.start_run(run_record("r3", "long"), [user("u1", "word " * 100)])
    long = await ledger.thread_summary("long")
    assert long is not None and long.title == ("word " * 100).strip()[:TITLE_LIMIT]
    assert len(long.title) == TITLE_LIMIT
    await ledger.start_run(run_record("r4", "untitled"), [assistant("a1")])
    assert (await ledger.thread_summary("untitled")).title is None  # type: ignore[union-attr]


async def _page_through(ledger: Ledger, owner: Any, agent: str | None = None, limit: int = 3) -> list[str]:
    seen: list[str] = []
    cursor = None
    while True:
        page = await ledger.list_thread_summaries(owner, agent, cursor, limit)
        assert len(page.items) <= limit
        seen += [s.thread_id for s in page.items]
        if page.cursor is None:
            return seen
        assert len(page.items) == limit
        cursor = page.cursor


async def test_listing_is_newest_first_per_owner_and_agent_and_keyset_paged(ledger: Ledger) -> None:
    """list_thread_summaries returns the owner's threads (one subject's, the unowned ones for None,
    all for ALL_OWNERS), of one agent if asked, most recently updated first, in pages joined by opaque
    cursors; the last page has no cursor; a bad cursor or limit raises ValueError."""
    owners = ["alice", "bob", None]
    for n in range(12):
        owner = owners[n % 3] if n < 9 else "alice"
        agent = "planner" if n % 2 else "writer"
        await ledger.start_run(attrs.evolve(run_record(f"r{n}", f"t{n:02d}"), agent_id=agent), [user("u")],
                               owner=owner)
    await ledger.commit("t03", "r3", Commit(RunStatus.COMPLETED))  # t03 is now the newest
    alice = ["t03", "t11", "t10", "t09", "t06", "t00"]
    assert await _page_through(ledger, "alice") == alice
    assert await _page_through(ledger, "alice", limit=6) == alice  # an exactly full page ends the listing
    assert await _page_through(ledger, "alice", limit=100) == alice
    assert await _page_through(ledger, "bob") == ["t07", "t04", "t01"]
    assert await _page_through(ledger, None, limit=1) == ["t08", "t05", "t02"]
    everyone = ["t03", "t11", "t10", "t09", "t08", "t07", "t06", "t05", "t04", "t02", "t01", "t00"]
    assert await _page_through(ledger, ALL_OWNERS, limit=5) == everyone
    assert await _page_through(ledger, "alice", "planner") == ["t03", "t11", "t09"]
    assert await _page_through(ledger, ALL_OWNERS, "writer", limit=2) == [t for t in everyone if int(t[1:]) % 2 == 0]
    assert await _page_through(ledger, "carol") == []
    page = await ledger.list_thread_summaries("alice", limit=2)
    assert [s.thread_id for s in page.items] == ["t03", "t11"] and isinstance(page.cursor, str)
    assert page.items[0] == await ledger.thread_summary("t03")
    for bad in ("", "not a cursor", "e30", page.cursor + "x"):
        with pytest.raises(ValueError):
            await ledger.list_thread_summaries("alice", cursor=bad, limit=2)
    for limit in (0, -1):
        with pytest.raises(ValueError):
            await ledger.list_thread_summaries("alice", limit=limit)


async def test_paging_is_stable_under_concurrent_writes(ledger: Ledger) -> None:
    """Writes between pages (to threads already listed, to threads not yet listed, new threads) never
    make a thread appear twice, and every thread not written meanwhile appears exactly once."""
    for n in range(20):
        await ledger.start_run(run_record(f"r{n}", f"t{n:02d}"), [user("u")], owner="alice")
    seen: list[str] = []
    touched: set[str] = set()
    cursor = None
    step = 0
    while True:
        page = await ledger.list_thread_summaries("alice", cursor=cursor, limit=3)
        seen += [s.thread_id for s in page.items]
        if page.cursor is None:
            break
        cursor = page.cursor
        step += 1
        for thread_id in (seen[0], f"t{step:02d}"):  # one already listed, one (maybe) not yet
            touched.add(thread_id)
            await ledger.commit(thread_id, f"r{int(thread_id[1:])}", Commit(RunStatus.RUNNING))
        await ledger.start_run(run_record(f"new{step}", f"new{step}"), [user("u")], owner="alice")
    assert len(seen) == len(set(seen))
    assert {f"t{n:02d}" for n in range(20)} - touched <= set(seen)
    assert [s for s in seen if not s.startswith("new")] == sorted(
        [s for s in seen if not s.startswith("new")], key=lambda s: seen.index(s))


async def test_listing_order_and_summaries_survive_reopen(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """After reopen the same pages come back, and a write after reopen still sorts first (the write clock
    continues from the newest ``updated_at`` stored)."""
    async with opened(ledger_factory, tmp_path) as ledger:
        for n in range(5):
            await ledger.start_run(run_record(f"r{n}", f"t{n}"), [user("u", f"title {n}")], owner="alice")
        for n in (0, 2, 3, 4, 1):  # (a run left running would be recovered at reopen)
            await ledger.commit(f"t{n}", f"r{n}", Commit(RunStatus.COMPLETED))
        before = await ledger.list_thread_summaries("alice", limit=10)
    async with opened(ledger_factory, tmp_path) as ledger:
        assert await ledger.list_thread_summaries("alice", limit=10) == before
        await ledger.start_run(run_record("r9", "t0"), [user("u2")])
        assert [s.thread_id for s in (await ledger.list_thread_summaries("alice", limit=2)).items] == ["t0", "t1"]
        assert (await ledger.thread_summary("t0")).updated_at > before.items[0].updated_at  # type: ignore[union-attr]


async def test_delete_thread_removes_everything_and_frees_the_id(
    ledger_factory: LedgerFactory, tmp_path: Path
) -> None:
    """delete_thread removes the thread's messages, runs, pending calls, state and listing row (now and
    after reopen), leaves other threads as they were, answers False for a thread that does not exist,
    and the id (and its run ids) can start a new thread afterwards."""
    async with opened(ledger_factory, tmp_path) as ledger:
        await ledger.start_run(run_record("r1", "gone"), [user("u1")], owner="alice")
        await ledger.commit("gone", "r1", Commit(RunStatus.WAITING, messages=(assistant("a1", calls=["c1"]),),
                                                 pending=(pending("c1", "r1", "gone", "a1"),), state={"s": 1}))
        await ledger.start_run(run_record("r2", "gone"), [user("u2")], owner="alice")
        await ledger.start_run(run_record("k1", "kept"), [user("u1")], owner="alice")
        await ledger.commit("kept", "k1", Commit(RunStatus.COMPLETED, messages=(assistant("a1"),)))
        kept = await snapshot(ledger)
        kept.pop("gone")
        kept["threads"] = [t for t in kept["threads"] if t.thread_id == "kept"]
        assert await ledger.delete_thread("gone") is True
        assert await ledger.delete_thread("gone") is False
        assert await ledger.delete_thread("never") is False
        await _check_gone(ledger, "gone", ("r1", "r2"))
        assert await snapshot(ledger) == kept
    async with opened(ledger_factory, tmp_path) as ledger:
        await _check_gone(ledger, "gone", ("r1", "r2"))
        assert await snapshot(ledger) == kept
        out = await ledger.start_run(run_record("r1", "gone"), [user("u1", "fresh")], owner="bob")
        assert [(m.id, m.seq) for m in out] == [("u1", 1)]
        thread = await ledger.get_thread("gone")
        assert thread is not None and (thread.owner, thread.state, thread.last_seq) == ("bob", {}, 1)
        summary = await ledger.thread_summary("gone")
        assert summary is not None and (summary.title, summary.message_count, summary.waiting) == ("fresh", 1, False)
        assert [r.run_id for r in await ledger.list_runs("gone")] == ["r1"]


async def _check_gone(ledger: Ledger, thread_id: str, run_ids: Sequence[str]) -> None:
    assert await ledger.get_thread(thread_id) is None
    assert await ledger.thread_summary(thread_id) is None
    assert await ledger.read_messages(thread_id, 0, 100) == []
    assert await ledger.list_runs(thread_id) == []
    assert await ledger.pending_calls(thread_id) == []
    view = await ledger.thread_view(thread_id)
    assert (view.thread, view.messages, view.pending) == (None, (), ())
    for run_id in run_ids:
        assert await ledger.get_run(run_id) is None
    assert thread_id not in {t.thread_id for t in await ledger.list_threads()}
    assert thread_id not in await _page_through(ledger, ALL_OWNERS, limit=50)


# -- threads that branch (``awaken.ledger.testkit.branches``) -----------------------------------

from awaken.ledger.testkit.branches import *  # noqa: E402, F403 - the branch promises are part of the suite
