"""The ledger conformance suite: every promise of ``awaken.ledger.Ledger``, run against every backend.

The ``ledger`` fixture is parametrized over ``ledger_harness.BACKENDS`` (``sqlite``, ``files``), each
opened on ``tmp_path``; a backend passes when every test here passes for it. The last sections hold
the backend-specific ways a store becomes unavailable (locks, a full disk) and the file ledger's
torn-tail and path-safety promises, plus a differential test that drives both backends with the same
random operations and compares everything they answer.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import sqlite3
import subprocess
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.errors import StoreUnavailable
from awaken.ledger import Commit, DuplicateRun, Ledger, ThreadRecord, ledger_class
from awaken.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart, Usage
from awaken.runstate import RunStatus
from storage_backends.file_ledger import FileLedger, encode_frame, thread_file_name
from tests.ledger_harness import (
    BACKENDS,
    assistant,
    check_thread_invariants,
    make_ledger,
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

REPO = Path(__file__).resolve().parent.parent


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
async def ledger(backend: str, tmp_path: Path) -> AsyncIterator[Ledger]:
    async with opened(backend, tmp_path) as opened_ledger:
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
    assert await ledger.waiting_run("t") is None
    assert await ledger.committed_ids("t", ["u1"]) == set()

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


async def test_committed_ids_finds_exactly_the_committed_subset(ledger: Ledger) -> None:
    """committed_ids returns the subset of the given ids committed on that thread (the dedup check),
    per thread, for any number of ids."""
    await started(ledger, "r1", "t1", user("u1"), user("u2"))
    await ledger.commit("t1", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
    await started(ledger, "r2", "t2", user("u1"))  # ids are unique per thread, not globally
    assert await ledger.committed_ids("t1", ["u1", "a1", "x", "u2", "u1"]) == {"u1", "u2", "a1"}
    assert await ledger.committed_ids("t2", ["u1", "u2", "a1"]) == {"u1"}
    assert await ledger.committed_ids("t3", ["u1"]) == set()
    assert await ledger.committed_ids("t1", []) == set()
    many = [f"m{i}" for i in range(1200)]
    await started(ledger, "r3", "t3", *(user(i) for i in many[::2]))
    assert await ledger.committed_ids("t3", many) == set(many[::2])


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
    waiting_run finds the waiting run; a call id that is already pending is refused atomically."""
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
    waiting = await ledger.waiting_run("t")
    assert waiting is not None and waiting.run_id == "r1"

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
    assert await ledger.waiting_run("t") is None
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


# -- lifecycle ----------------------------------------------------------------------------------


def test_backend_is_reachable_by_its_config_name(backend: str, tmp_path: Path) -> None:
    """``ledger_class`` resolves the backend's config name to the class the suite tests."""
    assert ledger_class(backend) is type(make_ledger(backend, tmp_path))


async def test_files_without_fsync_keep_the_same_semantics(tmp_path: Path) -> None:
    """``fsync = false`` changes durability against power loss only: commits and reopen behave the same."""
    async with opened("files", tmp_path, fsync=False) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        before = await snapshot(ledger)
    async with opened("files", tmp_path, fsync=False) as ledger:
        assert await snapshot(ledger) == before


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


async def test_data_survives_close_and_reopen(backend: str, tmp_path: Path) -> None:
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
    async with opened(backend, tmp_path) as ledger:
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
    async with opened(backend, tmp_path) as ledger:
        assert await snapshot(ledger) == before
        got = await ledger.read_messages("t1", 1, 10)
        assert strip(got) == strip([results, parts_message])
        out = await ledger.commit("t1", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a2"),)))
        assert out[0].seq == 4


async def test_open_marks_running_runs_interrupted(backend: str, tmp_path: Path) -> None:
    """Opening the ledger marks runs left ``running`` (by a dead process) ``interrupted``; waiting and
    finished runs, their messages and pending calls are untouched; a second reopen changes nothing."""
    async with opened(backend, tmp_path) as ledger:
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
    async with opened(backend, tmp_path) as ledger:
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
        assert [p.tool_call_id for p in await ledger.pending_calls("B")] == ["c1"]
        after = await snapshot(ledger)
        assert after["B"] == before["B"] and after["C"] == before["C"]
        assert after["A"]["messages"] == before["A"]["messages"]
    async with opened(backend, tmp_path) as ledger:
        assert await snapshot(ledger) == after


async def test_import_thread_round_trip_across_backends(backend: str, tmp_path: Path) -> None:
    """import_thread writes a whole thread as copied from another ledger (any backend to any backend),
    keeping ids, seqs, runs, pending calls and state; it survives reopen and the copy continues at
    last_seq + 1. Importing a thread that exists, or an inconsistent one (seqs outside 1..last_seq or
    repeated, a run id already held, a call of another thread), raises ValueError and writes nothing."""
    async with opened(backend, tmp_path / "source") as source:
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
                )
            )
    for target in BACKENDS:
        async with opened(target, tmp_path / f"copy-{target}") as copy:
            for thread, runs, messages, calls in exported:
                await copy.import_thread(thread, runs, messages, calls)
            assert await snapshot(copy) == original
            before = await snapshot(copy)
            thread, runs, messages, calls = exported[0]
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
        async with opened(target, tmp_path / f"copy-{target}") as copy:
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


async def test_cancelled_commits_are_all_or_nothing(backend: str, tmp_path: Path) -> None:
    """A commit cancelled at any point (trio.Cancelled) is either wholly visible or not at all, now and
    after reopen; every commit that returned is visible."""
    rng = random.Random(7)
    k = 3
    returned: list[tuple[str, int]] = []
    async with opened(backend, tmp_path) as ledger:
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
    async with opened(backend, tmp_path) as ledger:
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


async def test_any_unicode_or_path_like_thread_id_works(backend: str, tmp_path: Path) -> None:
    """Thread ids are opaque strings: any Unicode id (path-like, empty, very long) round-trips, and the
    store never writes outside its own location (for files: only hex-named logs in its directory)."""
    root = tmp_path / "store"
    root.mkdir()
    async with opened(backend, root) as ledger:
        for n, thread_id in enumerate(ODD_THREAD_IDS):
            await started(ledger, f"r{n}", thread_id, user("u1", thread_id))
            await ledger.commit(
                thread_id, f"r{n}", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),))
            )
        before = await snapshot(ledger)
    async with opened(backend, root) as ledger:
        assert await snapshot(ledger) == before
        assert sorted(t.thread_id for t in await ledger.list_threads()) == sorted(ODD_THREAD_IDS)
        for thread_id in ODD_THREAD_IDS:
            messages = await read_all(ledger, thread_id)
            assert [m.text for m in messages] == [thread_id, "hi"]
    _check_containment(backend, tmp_path, root)


def _check_containment(backend: str, tmp_path: Path, root: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    if backend == "files":
        logs = sorted(p.name for p in (root / "ledger" / "threads").iterdir())
        assert logs == sorted(thread_file_name(t) for t in ODD_THREAD_IDS)
        for path in root.rglob("*"):
            assert path.resolve().is_relative_to((root / "ledger").resolve())


# -- an unavailable store -----------------------------------------------------------------------


async def test_files_lock_held_by_another_process(tmp_path: Path) -> None:
    """A file ledger directory open in another process cannot be opened (StoreUnavailable naming the
    lock); once that process is gone it opens normally. A second instance in this process fails too."""
    path = tmp_path / "ledger"
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            await FileLedger(str(path)).open()
    script = (
        "import sys, trio\n"
        "from storage_backends.file_ledger import FileLedger\n"
        "async def main():\n"
        "    ledger = FileLedger(sys.argv[1])\n"
        "    await ledger.open()\n"
        "    print('READY', flush=True)\n"
        "    sys.stdin.readline()\n"
        "trio.run(main)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await trio.lowlevel.open_process(
        [sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await child.stdout.receive_some(100)
                assert chunk, "the child exited before opening the ledger"
                line += chunk
        assert line.strip() == b"READY"
        with pytest.raises(StoreUnavailable, match=rf"locked by another process \(pid {child.pid}\)"):
            await FileLedger(str(path)).open()
    finally:
        child.kill()
        await child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                await stream.aclose()
    fd = os.open(path / "LOCK", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            await FileLedger(str(path)).open()
    finally:
        os.close(fd)
    async with opened("files", tmp_path) as ledger:
        assert [m.id for m in await ledger.read_messages("t", 0, 10)] == ["u1"]


def _half_then_fail(real: Any, err: int) -> Any:
    """An ``os.pwrite`` that writes half of its first buffer, then raises ``OSError(err)``."""
    calls = [0]

    def fake(fd: int, data: Any, offset: int) -> int:
        calls[0] += 1
        if calls[0] == 1:
            return real(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(err, os.strerror(err))

    return fake


async def test_files_disk_full_mid_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails halfway (ENOSPC) raises StoreUnavailable; the half-written record is cut off,
    nothing of the commit is visible (now or after reopen) and the next commit gets the right seq."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        size = log.stat().st_size
        before = await snapshot(ledger)
        monkeypatch.setattr(os, "pwrite", _half_then_fail(os.pwrite, errno.ENOSPC))
        with pytest.raises(StoreUnavailable, match="disk is full"):
            await ledger.commit(
                "t",
                "r1",
                Commit(status=RunStatus.WAITING, messages=step_messages("r1", 1, 3), state={"x": 1}, steps=1),
            )
        with pytest.raises(StoreUnavailable):
            await started(ledger, "r2", "new-thread", user("u1"))
        monkeypatch.undo()
        assert log.stat().st_size == size
        assert await snapshot(ledger) == before
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after
        assert await ledger.get_thread("new-thread") is None


async def test_files_failed_fsync_or_failed_cut_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync error (EIO) raises StoreUnavailable and the record is cut off; if even the cut fails,
    it is redone before the next write, so the log never holds an unacknowledged record."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)

        def bad_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(os, "fsync", bad_fsync)
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("lost-1"),)))
        monkeypatch.undo()
        assert await snapshot(ledger) == before

        def bad_ftruncate(fd: int, length: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(os, "pwrite", _half_then_fail(os.pwrite, errno.ENOSPC))
        monkeypatch.setattr(os, "ftruncate", bad_ftruncate)
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("lost-2"),)))
        monkeypatch.undo()
        assert await snapshot(ledger) == before
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after


def _corruptions() -> dict[str, bytes]:
    good = encode_frame({"type": "commit", "thread": "t", "run": "r1", "v": 1})
    bad_json = b"{not json"
    not_object = b"[1, 2]"
    import struct
    import zlib

    return {
        "short-header": good[:5],
        "short-payload": good[:-3],
        "bad-checksum": good[:8] + bytes([good[8] ^ 0xFF]) + good[9:],
        "bad-json": struct.pack(">II", len(bad_json), zlib.crc32(bad_json)) + bad_json,
        "not-an-object": struct.pack(">II", len(not_object), zlib.crc32(not_object)) + not_object,
        "zeros": bytes(64),
        "huge-length": b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"x" * 10,
    }


@pytest.mark.parametrize("kind", list(_corruptions()))
async def test_files_torn_tail_is_cut_off_at_open(tmp_path: Path, kind: str) -> None:
    """A torn or corrupt tail record (short frame, bad checksum, bad JSON, zeros) is detected at open and
    truncated off (its bytes kept under ``torn/``); the committed data before it is intact and the log
    accepts new commits."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        before = await snapshot(ledger)
    log = tmp_path / "ledger" / "threads" / thread_file_name("t")
    size = log.stat().st_size
    tail = _corruptions()[kind]
    with log.open("ab") as f:
        f.write(tail)
    async with opened("files", tmp_path) as ledger:
        assert log.stat().st_size == size
        assert await snapshot(ledger) == before
        kept = list((tmp_path / "ledger" / "torn").iterdir())
        assert [p.read_bytes() for p in kept] == [tail]
        await started(ledger, "r2", "t", user("u2"))
        await ledger.commit("t", "r2", Commit(status=RunStatus.COMPLETED))
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after


async def test_files_whole_but_unappliable_record_refuses_to_open(tmp_path: Path) -> None:
    """A whole, checksummed record that cannot be applied (not a torn write: a bug or a hand edit) is
    never silently dropped: open raises StoreUnavailable naming the file, and the file is untouched."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
    log = tmp_path / "ledger" / "threads" / thread_file_name("t")
    with log.open("ab") as f:
        f.write(encode_frame({"type": "commit", "thread": "t", "run": "no-such-run", "v": 1}))
    size = log.stat().st_size
    with pytest.raises(StoreUnavailable, match="cannot be applied"):
        await FileLedger(str(tmp_path / "ledger")).open()
    assert log.stat().st_size == size
    log.rename(tmp_path / "aside.log")
    async with opened("files", tmp_path) as ledger:  # the failed open released the lock
        assert await ledger.list_threads() == []


async def test_sqlite_exclusive_lock_makes_the_ledger_unavailable(tmp_path: Path) -> None:
    """While another connection holds the database with locking_mode=EXCLUSIVE + BEGIN EXCLUSIVE, opening
    the SQLite ledger raises StoreUnavailable (within the busy timeout); afterwards the data is intact."""
    async with opened("sqlite", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
        before = await snapshot(ledger)
    other = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
    try:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        with trio.fail_after(5):
            with pytest.raises(StoreUnavailable):
                await make_ledger("sqlite", tmp_path, busy_timeout_ms=100).open()
        other.execute("ROLLBACK")
    finally:
        other.close()
    async with opened("sqlite", tmp_path) as ledger:
        assert await snapshot(ledger) == before


async def test_sqlite_held_write_lock_fails_commits_cleanly(tmp_path: Path) -> None:
    """While another connection holds the write lock, start_run and commit raise StoreUnavailable after
    the busy timeout and leave nothing; reads still answer (WAL); later commits succeed."""
    async with opened("sqlite", tmp_path, busy_timeout_ms=100) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)
        other = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with trio.fail_after(5):
                with pytest.raises(StoreUnavailable):
                    await ledger.commit(
                        "t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),))
                    )
                with pytest.raises(StoreUnavailable):
                    await started(ledger, "r2", "t2", user("u1"))
            assert await snapshot(ledger) == before
            other.execute("ROLLBACK")
        finally:
            other.close()
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2


async def test_sqlite_full_database_fails_commits_cleanly(tmp_path: Path) -> None:
    """When the database cannot grow (max_page_count reached, as on a full disk), a commit raises
    StoreUnavailable and nothing of it is visible, now or after reopen."""
    async with opened("sqlite", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)
        conn = ledger._db.conn  # type: ignore[attr-defined]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        big = tuple(assistant(f"big{i}", "x" * 20_000) for i in range(5))
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=big, state={"s": 1}))
        assert await snapshot(ledger) == before
        conn.execute("PRAGMA max_page_count = 1073741823")
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("sqlite", tmp_path) as ledger:
        assert await snapshot(ledger) == after


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


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(ops=st.lists(_op, max_size=25))
async def test_backends_agree_on_random_operations(ops: list[tuple[Any, ...]]) -> None:
    """Driven by the same random sequence of start_run/commit/reopen calls (valid or not), every backend
    returns the same results, raises the same exception types and ends with the same observable state."""
    with tempfile.TemporaryDirectory() as tmp:
        ledgers = {name: make_ledger(name, Path(tmp) / name) for name in BACKENDS}
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
                            ledgers[name] = ledger = make_ledger(name, Path(tmp) / name)
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


# -- the file ledger's compact index: message bodies are read back from the log -----------------


def _timed(m: Message) -> Message:
    """The message with a fixed created_at, so two backends store the same value."""
    return attrs.evolve(m, created_at=tick())


@pytest.mark.parametrize("cache_bytes", [0, 3000, 256 * 1024])
async def test_files_reads_from_the_log_agree_with_sqlite(tmp_path: Path, cache_bytes: int) -> None:
    """The file ledger keeps no message bodies in its index: with its history cache off, tiny (always
    evicting) or at the default, every read_messages window, thread_view and committed_ids answer equals
    SQLite's, over an imported thread with seq gaps, steps of 0-3 messages, pending calls and reopens."""
    rng = random.Random(cache_bytes + 11)
    options: dict[str, dict[str, Any]] = {"sqlite": {}, "files": {"cache_bytes": cache_bytes}}
    ledgers = {name: make_ledger(name, tmp_path / name, **options[name]) for name in options}
    for ledger in ledgers.values():
        await ledger.open()
    try:
        imported = [
            attrs.evolve(_timed(user(f"g{seq}", f"imported {seq}", "imp-run")), seq=seq)
            for seq in (9, 2, 3, 4, 7)
        ]
        for ledger in ledgers.values():
            await ledger.import_thread(
                ThreadRecord("imp", 1, {"k": 1}, 10),
                [run_record("imp-run", "imp", status=RunStatus.COMPLETED, created_at=1)],
                imported,
                [],
            )
        runs: dict[str, str] = {}
        for step in range(80):
            thread_id = rng.choice(["a", "b/../c", "imp"])
            roll = rng.random()
            if roll < 0.1:
                for name in options:
                    await ledgers[name].aclose()
                    ledgers[name] = make_ledger(name, tmp_path / name, **options[name])
                    await ledgers[name].open()
            elif thread_id not in runs or roll < 0.25:
                run_id = f"r{step}"
                record = run_record(run_id, thread_id)
                inputs = [
                    _timed(user(f"{run_id}-in{i}", "x" * rng.randint(0, 300), run_id))
                    for i in range(rng.randint(0, 2))
                ]
                for ledger in ledgers.values():
                    await ledger.start_run(record, inputs)
                runs[thread_id] = run_id
            else:
                run_id = runs[thread_id]
                messages = tuple(
                    _timed(assistant(f"{run_id}-{step}-{i}", "y" * rng.randint(0, 500), run_id, [f"c{step}"]))
                    for i in range(rng.randint(0, 3))
                )
                open_calls = [p.tool_call_id for p in await ledgers["sqlite"].pending_calls(thread_id)]
                calls = ()
                if messages and rng.random() < 0.4:
                    calls = (pending(f"c{step}", run_id, thread_id, messages[0].id),)
                commit = Commit(
                    RunStatus.WAITING if calls else RunStatus.RUNNING,
                    messages=messages,
                    pending=calls,
                    resolved=tuple(open_calls),
                    state={"step": step} if rng.random() < 0.3 else None,
                    steps=1,
                )
                for ledger in ledgers.values():
                    await ledger.commit(thread_id, run_id, commit)
            await _compare_reads(ledgers["sqlite"], ledgers["files"], rng, windows=6)
        await _compare_reads(ledgers["sqlite"], ledgers["files"], rng, windows=-1)
        assert _normalize(await snapshot(ledgers["files"])) == _normalize(await snapshot(ledgers["sqlite"]))
    finally:
        for ledger in ledgers.values():
            await ledger.aclose()


async def _compare_reads(reference: Ledger, files: Ledger, rng: random.Random, windows: int) -> None:
    """thread_view, committed_ids and ``windows`` random read_messages windows (all if -1) per thread."""
    for thread in await reference.list_threads():
        thread_id = thread.thread_id
        view = await reference.thread_view(thread_id)
        assert await files.thread_view(thread_id) == view
        ids = [m.id for m in view.messages]
        asked = rng.sample(ids, min(3, len(ids))) + ["never-committed"]
        assert await files.committed_ids(thread_id, asked) == await reference.committed_ids(thread_id, asked)
        grid = [(after, limit) for after in range(-1, thread.last_seq + 2) for limit in (-1, 0, 1, 2, 3, 7)]
        for after, limit in grid if windows < 0 else rng.sample(grid, min(windows, len(grid))):
            expected = await reference.read_messages(thread_id, after, limit)
            assert await files.read_messages(thread_id, after, limit) == expected, (thread_id, after, limit)


async def test_files_index_holds_no_message_bodies(tmp_path: Path) -> None:
    """Committed bodies live in the log, not in memory: after 200 threads with 20 KB of messages each,
    the ledger's Python heap grew by far less than the 4 MB of bodies (a compact index plus a bounded
    history cache), thread_view on every thread keeps it there, and every body reads back intact."""
    import gc
    import tracemalloc

    bodies = 200 * 4 * 5_000
    tracemalloc.start()
    try:
        async with opened("files", tmp_path, fsync=False, cache_bytes=64 * 1024) as ledger:

            async def write_and_view(threads: range) -> None:
                for n in threads:
                    body = f"{n:04d}" + "z" * 4_996
                    run_id, thread_id = f"r{n}", f"t{n}"
                    await started(ledger, run_id, thread_id, user(f"u{n}", body, run_id))
                    answer = tuple(assistant(f"a{n}-{i}", body, run_id, [f"c{n}"]) for i in range(3))
                    call = pending(f"c{n}", run_id, thread_id, answer[0].id)
                    await ledger.commit(thread_id, run_id, Commit(RunStatus.WAITING, answer, pending=(call,)))
                for n in threads:
                    view = await ledger.thread_view(f"t{n}")
                    assert [m.text[:4] for m in view.messages] == [f"{n:04d}"] * 4
                    assert [len(m.text) for m in view.messages] == [5_000] * 4 and len(view.pending) == 1

            await write_and_view(range(1000, 1050))  # warm up (one-time allocations of the process)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            await write_and_view(range(200))
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
            assert grown < bodies / 4, f"the heap grew by {grown} bytes for {bodies} bytes of bodies"
    finally:
        tracemalloc.stop()


async def test_files_a_log_damaged_under_an_open_ledger_fails_reads_cleanly(tmp_path: Path) -> None:
    """Reads check what they read: if a committed record's bytes change under an open ledger (disk
    corruption, a hand edit) or the log is cut short, reading them raises StoreUnavailable, never wrong
    messages; intact records before the damage still read."""
    async with opened("files", tmp_path, cache_bytes=0) as ledger:
        await started(ledger, "r1", "t", user("u1", "first"))
        await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, messages=(assistant("a1", "second"),)))
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        data = log.read_bytes()
        with log.open("r+b") as f:
            f.seek(data.index(b"second"))
            f.write(b"S")
        with pytest.raises(StoreUnavailable):
            await ledger.read_messages("t", 0, 10)
        with pytest.raises(StoreUnavailable):
            await ledger.thread_view("t")
        assert [m.text for m in await ledger.read_messages("t", 0, 1)] == ["first"]
        os.truncate(log, data.index(b"second"))
        with pytest.raises(StoreUnavailable):
            await ledger.read_messages("t", 1, 10)
        assert await ledger.committed_ids("t", ["u1", "a1", "x"]) == {"u1", "a1"}  # the index answers


@pytest.mark.parametrize("cache_bytes", [0, 256 * 1024])
async def test_files_thread_view_is_consistent_under_concurrent_commits(
    tmp_path: Path, cache_bytes: int
) -> None:
    """While a writer commits steps (each adds a message and moves the pending call to it), concurrent
    thread_view calls (served from the cache or from the log) always see one instant: gapless seqs up
    to the thread's last_seq, and the pending call of its last message; a later read_messages page
    returns the same messages for those seqs."""
    async with opened("files", tmp_path, cache_bytes=cache_bytes) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        done = trio.Event()
        views = [0]

        async def writer() -> None:
            for step in range(40):
                answer = assistant(f"a{step}", calls=[f"c{step}"])
                await ledger.commit(
                    "t",
                    "r1",
                    Commit(
                        RunStatus.WAITING,
                        messages=(answer,),
                        pending=(pending(f"c{step}", "r1", "t", answer.id),),
                        resolved=(f"c{step - 1}",) if step else (),
                    ),
                )
            done.set()

        async def reader() -> None:
            while not done.is_set():
                view = await ledger.thread_view("t")
                assert view.thread is not None
                last = view.thread.last_seq
                assert [m.seq for m in view.messages] == list(range(1, last + 1))
                if last > 1:
                    assert [p.message_id for p in view.pending] == [view.messages[-1].id]
                after = max(last - 2, 0)  # a later call: more may be committed by now, never less
                page = await ledger.read_messages("t", after, 2)
                assert [m.seq for m in page] == list(range(after + 1, after + 1 + len(page)))
                assert page[: last - after] == list(view.messages[after:])
                views[0] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(reader)
            nursery.start_soon(writer)
        assert views[0] > 40
        assert len(await read_all(ledger, "t")) == 41
