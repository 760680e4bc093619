"""The branch promises of ``awaken.ledger.interface.Ledger`` (threads that branch), part of the conformance
suite: ``awaken.ledger.testkit.conformance`` imports every test here, so a backend that runs the suite runs
these too, over the same ``ledger_factory`` fixture.

Every backend that runs the suite keeps branches: one written before them (``Ledger.supports_branches`` is
False: its ``start_run`` takes no ``fork``) still serves threads that never branch and refuses every branch
operation (``tests/ledger/test_branches.py`` holds it to that), but fails these promises, the first of them
saying what to add.

The property test holds a backend's tree to a plain in-memory model: one Python list per branch (its
path), built by random appends, regenerates and edits, and every branch's path read back after each.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.messages import Message
from awaken.engine.state import Cause, RunStatus
from awaken.ledger.interface import (
    MAX_SEQ,
    Branch,
    Commit,
    Fork,
    Ledger,
    ThreadRecord,
    branch_path,
    ledger_class,
    on_path,
    path_of,
)
from awaken.ledger.testkit.harness import (
    LedgerFactory,
    assistant,
    every_message,
    opened,
    pending,
    read_all,
    run_record,
    snapshot,
    tool_result,
    user,
)

__all__ = [
    "branching",
    "test_the_backend_keeps_branches",
    "test_a_thread_that_never_branched_has_branch_0_only",
    "test_a_regenerate_forks_a_branch_and_the_old_path_stays_unchanged",
    "test_an_edited_message_keeps_its_id_on_the_new_branch",
    "test_ids_are_unique_per_path",
    "test_a_fork_refused_writes_nothing",
    "test_forks_nest_and_a_fork_can_keep_nothing",
    "test_a_waiting_run_commits_to_its_own_branch_after_a_fork",
    "test_branches_survive_reopen_and_recovery",
    "test_import_thread_carries_branches",
    "test_the_tree_agrees_with_a_list_per_branch",
]


def _reference(root: Path, **options: Any) -> Ledger:
    """The reference backend (SQLite) an import is also checked against."""
    return ledger_class("sqlite")(str(root / "reference.db"), **options)


@pytest.fixture
async def branching(ledger_factory: LedgerFactory, tmp_path: Path) -> AsyncIterator[Ledger]:
    """The backend under test, opened on an empty ``tmp_path``."""
    async with opened(ledger_factory, tmp_path) as ledger:
        yield ledger


def _texts(messages: list[Message]) -> list[tuple[str, str, int]]:
    return [(m.id, m.text, m.branch) for m in messages]


async def _two_turns(ledger: Ledger, thread_id: str = "t") -> list[Message]:
    """u1 a1 u2 a2 (seq 1-4) on branch 0, by runs r1 and r2 (completed)."""
    out = await ledger.start_run(run_record("r1", thread_id), [user("u1", "first", "r1")])
    out += await ledger.commit(thread_id, "r1", Commit(RunStatus.COMPLETED, (assistant("a1", "one", "r1"),)))
    out += await ledger.start_run(run_record("r2", thread_id), [user("u2", "second", "r2")])
    out += await ledger.commit(thread_id, "r2", Commit(RunStatus.COMPLETED, (assistant("a2", "two", "r2"),)))
    return out


async def test_the_backend_keeps_branches(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """The backend keeps branches (its ``start_run``, ``read_messages`` and ``import_thread`` take ``fork``,
    ``branch`` and ``branches``), and a thread that never branched lists branch 0 alone."""
    async with opened(ledger_factory, tmp_path) as ledger:
        assert ledger.supports_branches, (
            f"{type(ledger).__name__} keeps no branches: its start_run, read_messages and import_thread must take "
            "fork, branch and branches (awaken.ledger.interface)")
        await _two_turns(ledger)
        assert [b.branch for b in await ledger.list_branches("t")] == [0]


async def test_a_thread_that_never_branched_has_branch_0_only(branching: Ledger) -> None:
    """list_branches: ``[]`` for an unknown thread; ``[Branch(0, None, 0, created_at)]`` for a thread that never
    branched, whose messages, runs and record all say branch 0 (its active branch)."""
    ledger = branching
    assert await ledger.list_branches("t") == []
    assert await ledger.read_messages("t", 0, 10, branch=0) == []
    out = await _two_turns(ledger)
    thread = await ledger.get_thread("t")
    assert thread is not None and thread.active_branch == 0
    assert await ledger.list_branches("t") == [Branch(0, None, 0, thread.created_at)]
    assert {m.branch for m in out} == {0}
    assert await ledger.read_messages("t", 0, 10, branch=0) == await ledger.read_messages("t", 0, 10) == out
    assert [r.branch for r in await ledger.list_runs("t")] == [0, 0]


async def test_a_regenerate_forks_a_branch_and_the_old_path_stays_unchanged(branching: Ledger) -> None:
    """start_run with ``Fork(after_seq, "regenerate")`` creates branch 1 (parent: the branch holding after_seq,
    fork_seq after_seq, the run and the reason), makes it active, records the run on it; its commits append
    to it with the thread's next seqs; the active path is the kept messages then the branch's; branch 0's
    path reads exactly as before the fork."""
    ledger = branching
    before = await _two_turns(ledger)
    record = run_record("r3", "t")
    assert await ledger.start_run(record, [], fork=Fork(3, "regenerate")) == []
    thread = await ledger.get_thread("t")
    assert thread is not None and (thread.active_branch, thread.last_seq) == (1, 4)
    branches = await ledger.list_branches("t")
    assert [attrs.evolve(b, created_at=0) for b in branches] == [
        Branch(0, None, 0, 0), Branch(1, 0, 3, 0, "r3", "regenerate")]
    assert branches[0].created_at == thread.created_at and branches[1].created_at >= thread.created_at
    assert (await ledger.get_run("r3")) == attrs.evolve(record, branch=1)
    out = await ledger.commit("t", "r3", Commit(RunStatus.COMPLETED, (assistant("a2", "two again", "r3"),)))
    assert [(m.id, m.seq, m.branch) for m in out] == [("a2", 5, 1)]
    assert _texts(await read_all(ledger, "t")) == [
        ("u1", "first", 0), ("a1", "one", 0), ("u2", "second", 0), ("a2", "two again", 1)]
    assert await read_all(ledger, "t", branch=1) == await read_all(ledger, "t")
    assert await read_all(ledger, "t", branch=0) == before
    assert [m.seq for m in await ledger.read_messages("t", 2, 10)] == [3, 5]  # a cursor is a seq of the path
    assert [m.seq for m in await ledger.read_messages("t", 0, 2, branch=0)] == [1, 2]


async def test_an_edited_message_keeps_its_id_on_the_new_branch(branching: Ledger) -> None:
    """An edit forks after the message before the edited one and commits the edit with the same id: the new
    path holds it once, the old path still holds the original; every "is it committed" answer (thread_view,
    committed_ids, admission_facts, answered_calls, the summary's count) is the active path's."""
    ledger = branching
    await _two_turns(ledger)
    await ledger.start_run(run_record("r0", "t"), [])  # a run with no input keeps nothing to compare
    await ledger.commit("t", "r0", Commit(RunStatus.COMPLETED, (assistant("a3", calls=["c1"]), tool_result("tr", "c1"))))
    out = await ledger.start_run(run_record("r3", "t"), [user("u2", "second, edited", "r3")], fork=Fork(2, "edit"))
    assert [(m.id, m.seq, m.branch) for m in out] == [("u2", 7, 1)]
    assert _texts(await read_all(ledger, "t")) == [("u1", "first", 0), ("a1", "one", 0), ("u2", "second, edited", 1)]
    assert [m.text for m in await read_all(ledger, "t", branch=0)][2:4] == ["second", "two"]
    view = await ledger.thread_view("t")
    assert [m.id for m in view.messages] == ["u1", "a1", "u2"]
    assert view.message_ids() == {"u1", "a1", "u2"}
    asked = frozenset({"u1", "u2", "a2", "a3", "tr"})
    assert await ledger.committed_ids("t", asked) == {"u1", "u2"}
    facts = await ledger.admission_facts("t", asked, 2)
    assert (facts.committed, [m.id for m in facts.tail]) == ({"u1", "u2"}, ["a1", "u2"])
    assert facts.thread is not None and facts.thread.active_branch == 1
    assert await ledger.answered_calls("t", ["c1"]) == frozenset()
    summary = await ledger.thread_summary("t")
    assert summary is not None and summary.message_count == 3
    assert (await ledger.list_branches("t"))[1].reason == "edit"


async def test_ids_are_unique_per_path(branching: Ledger) -> None:
    """On a branch, an id already on its path (kept from the parent, or its own) is refused with ValueError
    and nothing of the commit is written; an id that is only on another branch's path is accepted."""
    ledger = branching
    await _two_turns(ledger)
    await ledger.start_run(run_record("r3", "t"), [], fork=Fork(3, "regenerate"))
    before = await snapshot(ledger)
    for taken in ("a1", "u2"):
        with pytest.raises(ValueError):
            await ledger.commit("t", "r3", Commit(RunStatus.RUNNING, (assistant("new"), assistant(taken)), state={"s": 1}))
    with pytest.raises(ValueError):
        await ledger.start_run(run_record("r4", "t"), [user("u1")])
    assert await snapshot(ledger) == before
    out = await ledger.commit("t", "r3", Commit(RunStatus.COMPLETED, (assistant("a2"),)))
    assert [(m.id, m.branch) for m in out] == [("a2", 1)]
    with pytest.raises(ValueError):
        await ledger.commit("t", "r3", Commit(RunStatus.COMPLETED, (assistant("a2"),)))


async def test_a_fork_refused_writes_nothing(branching: Ledger) -> None:
    """A fork after a seq that is not on the active path (on another branch, past the end, negative), a fork
    of a thread that does not exist, or one with a taken run id raises (ValueError, DuplicateRun) and
    writes nothing: no run, no branch, no input, the active branch unchanged."""
    ledger = branching
    await _two_turns(ledger)
    await ledger.start_run(run_record("r3", "t"), [user("u9", run_id="r3")], fork=Fork(2, "edit"))  # u9 is seq 5
    before = await snapshot(ledger)
    for after in (3, 4, 6, 99, -1):
        with pytest.raises(ValueError):
            await ledger.start_run(run_record("rx", "t"), [user("ux")], fork=Fork(after, "regenerate"))
    with pytest.raises(ValueError):
        await ledger.start_run(run_record("rx", "t"), [user("ux"), user("ux")], fork=Fork(5, "edit"))
    with pytest.raises(ValueError):
        await ledger.start_run(run_record("r1", "t"), [], fork=Fork(5, "regenerate"))
    with pytest.raises(ValueError):
        await ledger.start_run(run_record("rx", "nowhere"), [user("ux")], fork=Fork(0, "edit"))
    assert await snapshot(ledger) == before
    assert await ledger.get_run("rx") is None and await ledger.get_thread("nowhere") is None


async def test_forks_nest_and_a_fork_can_keep_nothing(branching: Ledger) -> None:
    """A fork after a message of a later branch has that branch as parent; a fork after seq 0 keeps nothing
    (parent 0); every branch's path is its ranges walked up to branch 0 (``branch_path``); a branch the thread
    does not have raises ValueError."""
    ledger = branching
    await _two_turns(ledger)
    await ledger.start_run(run_record("r3", "t"), [user("u2", "edited", "r3")], fork=Fork(2, "edit"))  # seq 5
    await ledger.commit("t", "r3", Commit(RunStatus.COMPLETED, (assistant("a2", "b1", "r3"),)))  # seq 6
    await ledger.start_run(run_record("r4", "t"), [], fork=Fork(5, "regenerate"))  # parent 1
    await ledger.commit("t", "r4", Commit(RunStatus.COMPLETED, (assistant("a2", "b2", "r4"),)))  # seq 7
    await ledger.start_run(run_record("r5", "t"), [user("u1", "over", "r5")], fork=Fork(0, "edit"))  # seq 8
    branches = await ledger.list_branches("t")
    assert [(b.branch, b.parent, b.fork_seq, b.run_id) for b in branches] == [
        (0, None, 0, None), (1, 0, 2, "r3"), (2, 1, 5, "r4"), (3, 0, 0, "r5")]
    assert branch_path(branches, 2) == ((0, 2), (1, 5), (2, MAX_SEQ))
    paths = {b.branch: [m.seq for m in await read_all(ledger, "t", branch=b.branch)] for b in branches}
    assert paths == {0: [1, 2, 3, 4], 1: [1, 2, 5, 6], 2: [1, 2, 5, 7], 3: [8]}
    assert [m.text for m in await read_all(ledger, "t")] == ["over"]
    every = await every_message(ledger, "t")
    assert [m.seq for m in every] == list(range(1, 9))
    for b in branches:
        assert [m.seq for m in path_of(branch_path(branches, b.branch), every)] == paths[b.branch]
        assert all(on_path(m, branch_path(branches, b.branch)) for m in await read_all(ledger, "t", branch=b.branch))
    with pytest.raises(ValueError):
        await ledger.read_messages("t", 0, 10, branch=4)
    assert await ledger.read_messages("nowhere", 0, 10, branch=2) == []


async def test_a_waiting_run_commits_to_its_own_branch_after_a_fork(branching: Ledger) -> None:
    """A run keeps the branch it started on: a waiting run on branch 0 closed after a fork (superseded, its
    pending call resolved) appends to branch 0, out of the active path, and leaves the active path and its
    count alone; a later run without a fork goes to the active branch."""
    ledger = branching
    await ledger.start_run(run_record("r1", "t"), [user("u1", run_id="r1")])
    await ledger.commit("t", "r1", Commit(RunStatus.WAITING, (assistant("a1", calls=["c1"], run_id="r1"),),
                                          pending=(pending("c1", "r1", "t", "a1"),)))
    await ledger.start_run(run_record("r2", "t"), [], fork=Fork(1, "regenerate"))
    closed = await ledger.commit("t", "r1", Commit(
        RunStatus.INTERRUPTED, (tool_result("tr_c1", "c1", "superseded", "r1"),), resolved=("c1",),
        cause=Cause.SUPERSEDED.value))
    assert [(m.seq, m.branch) for m in closed] == [(3, 0)]
    assert await ledger.pending_calls("t") == []
    assert [m.id for m in await read_all(ledger, "t")] == ["u1"]
    assert [m.id for m in await read_all(ledger, "t", branch=0)] == ["u1", "a1", "tr_c1"]
    assert await ledger.committed_ids("t", ["a1", "tr_c1", "u1"]) == {"u1"}
    assert await ledger.answered_calls("t", ["c1"]) == frozenset()
    assert (await ledger.thread_summary("t")).message_count == 1  # type: ignore[union-attr]
    assert (await ledger.admission_facts("t", frozenset({"tr_c1"}), 10)).tail[-1].id == "u1"
    await ledger.commit("t", "r2", Commit(RunStatus.COMPLETED, (assistant("a1", "again", "r2"),)))
    out = await ledger.start_run(run_record("r3", "t"), [user("u3", run_id="r3")])
    assert [(m.seq, m.branch) for m in out] == [(5, 1)]
    assert (await ledger.get_run("r3")).branch == 1  # type: ignore[union-attr]
    assert [m.id for m in await read_all(ledger, "t")] == ["u1", "a1", "u3"]
    assert (await ledger.thread_summary("t")).message_count == 3  # type: ignore[union-attr]


async def test_branches_survive_reopen_and_recovery(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """Branches, the active branch, every path and each run's branch are durable; a run left running on a
    branch is recovered (interrupted, ``server_restart``) on that branch, and the next run appends to it."""
    async with opened(ledger_factory, tmp_path) as ledger:
        await _two_turns(ledger)
        await ledger.start_run(run_record("r3", "t"), [user("u2", "edited", "r3")], fork=Fork(2, "edit"))
        await ledger.commit("t", "r3", Commit(RunStatus.RUNNING, (assistant("a2", "half", "r3"),)))
        before = await snapshot(ledger)
    async with opened(ledger_factory, tmp_path) as ledger:
        after = await snapshot(ledger)
        run = await ledger.get_run("r3")
        assert run is not None and (run.status, run.cause, run.branch) == (
            RunStatus.INTERRUPTED, Cause.SERVER_RESTART.value, 1)
        assert {k: v for k, v in after["t"].items() if k not in ("runs", "summary")} == {
            k: v for k, v in before["t"].items() if k not in ("runs", "summary")}
        assert after["threads"] == before["threads"]
        out = await ledger.start_run(run_record("r4", "t"), [user("u4", run_id="r4")])
        assert [(m.seq, m.branch) for m in out] == [(7, 1)]
        assert [m.id for m in await read_all(ledger, "t")] == ["u1", "a1", "u2", "a2", "u4"]


async def test_import_thread_carries_branches(ledger_factory: LedgerFactory, tmp_path: Path) -> None:
    """import_thread with the source's ``list_branches`` writes the branches, the active branch, every
    message's and run's branch (into this backend and into the reference SQLite one): every snapshot,
    every branch's path included, equals the source's, after reopen too, and the copy continues on the
    active branch. A message or run on a branch not given, an unknown active branch, a branch whose
    parent or fork seq is not the thread's, or an id repeated on one path raises ValueError, writing nothing."""
    async with opened(ledger_factory, tmp_path / "source") as source:
        await _two_turns(source)
        await source.start_run(run_record("r3", "t"), [], fork=Fork(3, "regenerate"))
        await source.commit("t", "r3", Commit(RunStatus.WAITING, (assistant("a2", "again", "r3", ["c1"]),),
                                              pending=(pending("c1", "r3", "t", "a2"),)))
        await source.start_run(run_record("r4", "plain"), [user("p1")])
        await source.commit("plain", "r4", Commit(RunStatus.COMPLETED))
        original = await snapshot(source)
        exported = []
        for thread in await source.list_threads():
            branches = await source.list_branches(thread.thread_id)
            exported.append((thread, await source.list_runs(thread.thread_id),
                             await every_message(source, thread.thread_id), await source.pending_calls(thread.thread_id),
                             (await source.thread_summary(thread.thread_id)).updated_at, branches))  # type: ignore[union-attr]
    thread, runs, messages, calls, updated_at, branches = exported[0]
    assert thread.thread_id == "t" and len(branches) == 2 and len(messages) == 5
    for name, target in {"self": ledger_factory, "reference": _reference}.items():
        async with opened(target, tmp_path / f"copy-{name}") as copy:
            for t, r, m, c, u, b in exported:
                await copy.import_thread(t, r, m, c, u, branches=b)
            assert await snapshot(copy) == original
            before = await snapshot(copy)
            fresh = ThreadRecord("fresh", 1, {}, 3)
            one = Branch(1, 0, 1, 2, None, "edit")
            base = [attrs.evolve(messages[0], seq=1), attrs.evolve(messages[1], seq=2, branch=1)]
            invalid = [
                (fresh, [], base, [], None, []),  # a message on a branch not given
                (attrs.evolve(fresh, active_branch=2), [], base, [], None, [one]),  # an unknown active branch
                (fresh, [], base, [], None, [attrs.evolve(one, parent=5)]),  # a parent that is not a branch
                (fresh, [], base, [], None, [attrs.evolve(one, fork_seq=3)]),  # a fork seq of no message
                (fresh, [], base, [], None, [attrs.evolve(one, fork_seq=2)]),  # a fork after its own message
                (fresh, [], [*base, attrs.evolve(messages[0], seq=3, branch=1)], [], None, [one]),  # u1 twice on a path
                (fresh, [attrs.evolve(runs[0], run_id="fresh-run", thread_id="fresh", branch=3)], base[:1], [], None,
                 [one]),  # a run on a branch not given
            ]
            for t, r, m, c, u, b in invalid:
                with pytest.raises(ValueError):
                    await copy.import_thread(t, r, m, c, u, branches=b)
            assert await snapshot(copy) == before
            ok = (attrs.evolve(fresh, active_branch=1), [], [*base, attrs.evolve(messages[1], seq=3, branch=0)], [],
                  None, [one])  # a1 on two branches, once on each path
            await copy.import_thread(*ok[:5], branches=ok[5])
            assert [m.seq for m in await read_all(copy, "fresh")] == [1, 2]
            assert (await copy.thread_summary("fresh")).message_count == 2  # type: ignore[union-attr]
        async with opened(target, tmp_path / f"copy-{name}") as copy:
            assert {k: v for k, v in (await snapshot(copy)).items() if k not in ("fresh", "threads")} == {
                k: v for k, v in original.items() if k != "threads"}
            out = await copy.commit("t", "r3", Commit(RunStatus.RUNNING, (tool_result("tr", "c1"),), resolved=("c1",)))
            assert [(m.seq, m.branch) for m in out] == [(6, 1)]


# -- the tree against a plain list model ---------------------------------------------------------

_step = st.one_of(
    st.tuples(st.just("append"), st.integers(0, 2)),
    st.tuples(st.just("regenerate"), st.integers(0, 50)),
    st.tuples(st.just("edit"), st.integers(0, 50)),
    st.tuples(st.just("reopen")),
)


@settings(max_examples=20, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(steps=st.lists(_step, min_size=1, max_size=14))
async def test_the_tree_agrees_with_a_list_per_branch(ledger_factory: LedgerFactory, steps: list[tuple[Any, ...]]) -> None:
    """Random appends (a user message and up to two answers), regenerates (a fork after the user message
    before an answer, then a new answer) and edits (a fork before a user message, the same id with new
    text) against a model that keeps one plain list per branch: after every step, every branch's path (read
    whole and in pages of 2), the active path's ids, the branch list and the summary's count are the model's."""
    with tempfile.TemporaryDirectory() as tmp:
        ledger = ledger_factory(Path(tmp))
        await ledger.open()
        try:
            paths: list[list[Message]] = [[]]  # the model: each branch's path
            active = 0
            counter = 0
            for step in steps:
                counter += 1
                run_id = f"r{counter}"
                path = paths[active]
                if step[0] == "append":
                    inputs = [user(f"u{counter}", f"ask {counter}", run_id)]
                    out = await ledger.start_run(run_record(run_id, "t"), inputs)
                    out += await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, tuple(
                        assistant(f"a{counter}-{i}", f"answer {counter}.{i}", run_id) for i in range(step[1]))))
                    path.extend(out)
                elif step[0] == "regenerate":
                    answers = [i for i, m in enumerate(path) if m.role == "assistant" and i and path[i - 1].role == "user"]
                    if not answers:
                        continue
                    at = answers[step[1] % len(answers)]
                    await ledger.start_run(run_record(run_id, "t"), [], fork=Fork(path[at - 1].seq, "regenerate"))
                    out = await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, (
                        assistant(path[at].id, f"again {counter}", run_id),)))
                    paths.append(path[:at] + out)
                    active = len(paths) - 1
                elif step[0] == "edit":
                    asks = [i for i, m in enumerate(path) if m.role == "user"]
                    if not asks:
                        continue
                    at = asks[step[1] % len(asks)]
                    out = await ledger.start_run(run_record(run_id, "t"), [user(path[at].id, f"edit {counter}", run_id)],
                                                 fork=Fork(path[at - 1].seq if at else 0, "edit"))
                    paths.append(path[:at] + out)
                    active = len(paths) - 1
                else:
                    await ledger.aclose()
                    ledger = ledger_factory(Path(tmp))
                    await ledger.open()
                    continue
                if not paths[active]:
                    continue
                branches = await ledger.list_branches("t")
                assert [b.branch for b in branches] == list(range(len(paths)))
                thread = await ledger.get_thread("t")
                assert thread is not None and thread.active_branch == active
                for number, expected in enumerate(paths):
                    assert await read_all(ledger, "t", branch=number) == expected, number
                    assert await read_all(ledger, "t", page=2, branch=number) == expected, number
                assert await read_all(ledger, "t") == paths[active]
                every = {m.id for p in paths for m in p} | {"never"}
                assert await ledger.committed_ids("t", every) == {m.id for m in paths[active]}
                assert (await ledger.thread_summary("t")).message_count == len(paths[active])  # type: ignore[union-attr]
                facts = await ledger.admission_facts("t", frozenset(every), 3)
                assert list(facts.tail) == paths[active][-3:]
        finally:
            await ledger.aclose()
