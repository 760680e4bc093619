"""The file ledger's branches beyond the conformance suite: how they sit in its logs and its index.

A thread that never branched writes exactly the records it always did and keeps no tree in its
index; a fork is one frame (the branch, its run and its inputs), so a torn fork leaves the thread as
it was; the tree is rebuilt by replay at open and by a cold access (the detail evicted); a run the
fork left behind commits to its own path without touching the active one.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Fork, Ledger
from awaken.ledger.testkit.harness import assistant, opened, pending, read_all, run_record, tool_result, user
from storage_backends.files import FileLedger, decode_frames, thread_file_name
from tests.ledger_harness import cold_file_ledger, file_ledger

FACTORIES = {"hot": file_ledger, "cold": cold_file_ledger}


def log_records(root: Path, thread_id: str = "t") -> list[dict]:
    data = (root / "ledger" / "threads" / thread_file_name(thread_id)).read_bytes()
    records, valid = decode_frames(data)
    assert valid == len(data)
    return [record for _, _, record in records]


def ids(messages: list) -> list[tuple[int, int, str]]:
    return [(m.seq, m.branch, m.id) for m in messages]


async def turn(ledger: Ledger, run_id: str, question: str, answer: str, fork: Fork | None = None,
               inputs: tuple = ()) -> None:
    """A run: its input (``question``, unless ``inputs`` are given, none for a regenerate) and its answer."""
    given = inputs if inputs or fork is not None else (user(question, question, run_id),)
    await ledger.start_run(run_record(run_id, "t"), given, fork=fork)
    await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, (assistant(answer, answer, run_id),)))


async def test_a_thread_that_never_branched_writes_what_it_always_did(tmp_path: Path) -> None:
    """No ``branch`` key in its runs or messages, no ``fork`` in its records, and no tree in its index:
    branches cost a thread that never branched nothing."""
    async with opened(file_ledger, tmp_path) as ledger:
        await turn(ledger, "r1", "u1", "a1")
        await turn(ledger, "r2", "u2", "a2")
        assert ledger._index.threads["t"].detail.tree is None  # type: ignore[attr-defined, union-attr]
    for record in log_records(tmp_path):
        assert "fork" not in record and "branch" not in (record.get("run") or {})
        assert all("branch" not in m for m in record.get("messages") or ())
    async with opened(file_ledger, tmp_path) as ledger:
        assert ledger._index.threads["t"].detail.tree is None  # type: ignore[attr-defined, union-attr]


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_forks_replay_into_the_same_tree_after_reopen_and_eviction(tmp_path: Path, kind: str) -> None:
    """A regenerate and an edit, then a reopen: every branch's path, the active branch, the branches and
    the active path's count read the same (cold: every access rebuilds the tree from the log)."""
    factory = FACTORIES[kind]
    async with opened(factory, tmp_path) as ledger:
        await turn(ledger, "r1", "u1", "a1")  # seqs 1, 2
        await turn(ledger, "r2", "u2", "a2")  # seqs 3, 4
        await turn(ledger, "r3", "", "a2b", fork=Fork(3, "regenerate"))  # branch 1: seq 5
        await turn(ledger, "r4", "", "a1b", fork=Fork(0, "edit"), inputs=(user("u1", "u1 edited", "r4"),))  # branch 2
        await turn(ledger, "r5", "u3", "a3")  # on branch 2: seqs 8, 9
        before = {b: ids(await read_all(ledger, "t", page=2, branch=b)) for b in range(3)}
        branches = await ledger.list_branches("t")
        summary = await ledger.thread_summary("t")
    assert before == {
        0: [(1, 0, "u1"), (2, 0, "a1"), (3, 0, "u2"), (4, 0, "a2")],
        1: [(1, 0, "u1"), (2, 0, "a1"), (3, 0, "u2"), (5, 1, "a2b")],
        2: [(6, 2, "u1"), (7, 2, "a1b"), (8, 2, "u3"), (9, 2, "a3")],
    }
    assert [(b.branch, b.parent, b.fork_seq, b.run_id, b.reason) for b in branches] == [
        (0, None, 0, None, "root"), (1, 0, 3, "r3", "regenerate"), (2, 0, 0, "r4", "edit")]
    assert summary is not None and summary.message_count == 4
    async with opened(factory, tmp_path) as ledger:
        assert {b: ids(await read_all(ledger, "t", page=3, branch=b)) for b in range(3)} == before
        assert ids(await read_all(ledger, "t")) == before[2]
        assert await ledger.list_branches("t") == branches
        assert await ledger.thread_summary("t") == summary
        thread = await ledger.get_thread("t")
        assert thread is not None and (thread.active_branch, thread.last_seq) == (2, 9)
        assert await ledger.committed_ids("t", ["u1", "a1", "u2", "a2b", "a3"]) == {"u1", "a3"}
        assert [r.branch for r in await ledger.list_runs("t")] == [0, 0, 1, 2, 2]


async def test_a_torn_fork_leaves_the_thread_as_it_was(tmp_path: Path) -> None:
    """The branch, its run and its inputs are one frame: cut short (a crash mid-write), the open cuts it
    off and the thread has no branch, its active path and runs are those before the fork."""
    async with opened(file_ledger, tmp_path) as ledger:
        await turn(ledger, "r1", "u1", "a1")
        before = ids(await read_all(ledger, "t"))
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        size = log.stat().st_size
        await ledger.start_run(run_record("r2", "t"), [user("u1", "edited", "r2")], fork=Fork(0, "edit"))
    with log.open("r+b") as f:
        f.truncate(size + (log.stat().st_size - size) // 2)
    async with opened(file_ledger, tmp_path) as ledger:
        assert log.stat().st_size == size
        assert ids(await read_all(ledger, "t")) == before
        assert [b.branch for b in await ledger.list_branches("t")] == [0]
        assert [r.run_id for r in await ledger.list_runs("t")] == ["r1"]
        with pytest.raises(ValueError):
            await ledger.read_messages("t", 0, 10, branch=1)


@pytest.mark.parametrize("kind", list(FACTORIES))
async def test_a_run_the_fork_left_behind_commits_to_its_own_path(tmp_path: Path, kind: str) -> None:
    """A waiting run on the path a fork abandoned is closed afterwards: its tool result goes to its own
    branch (readable there, and an id of its path is refused again), while the active path, its
    committed ids and the admission facts stay the new branch's."""
    async with opened(FACTORIES[kind], tmp_path) as ledger:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        await ledger.commit("t", "r1", Commit(RunStatus.WAITING, (assistant("a1", calls=["c1"], run_id="r1"),),
                                              pending=(pending("c1", "r1", "t", "a1"),)))
        assert (await ledger.admission_facts("t", frozenset({"a1"}), 10)).committed == {"a1"}
        await ledger.start_run(run_record("r2", "t"), [], fork=Fork(1, "regenerate"))
        await ledger.commit("t", "r1", Commit(RunStatus.INTERRUPTED, (tool_result("t1", "c1", run_id="r1"),),
                                              resolved=("c1",), cause="superseded"))
        with pytest.raises(ValueError):
            await ledger.commit("t", "r1", Commit(RunStatus.INTERRUPTED, (assistant("a1"),)))
        await ledger.commit("t", "r2", Commit(RunStatus.COMPLETED, (assistant("a1b", run_id="r2"),)))
        assert ids(await read_all(ledger, "t", branch=0)) == [(1, 0, "u1"), (2, 0, "a1"), (3, 0, "t1")]
        assert ids(await read_all(ledger, "t")) == [(1, 0, "u1"), (4, 1, "a1b")]
        facts = await ledger.admission_facts("t", frozenset({"u1", "a1", "t1", "a1b"}), 10)
        assert facts.committed == {"u1", "a1b"} and ids(list(facts.tail)) == [(1, 0, "u1"), (4, 1, "a1b")]
        assert facts.pending == () and facts.thread is not None and facts.thread.last_seq == 4
        assert await ledger.answered_calls("t", ["c1"]) == frozenset()
        view = await ledger.thread_view("t")
        assert ids(list(view.messages)) == [(1, 0, "u1"), (4, 1, "a1b")]


async def test_a_fork_refused_writes_nothing(tmp_path: Path) -> None:
    """A fork at a seq off the active path, of a thread that does not exist, or whose input repeats an id
    of the path it keeps, is a ValueError and leaves the log as it was."""
    async with opened(file_ledger, tmp_path) as ledger:
        await turn(ledger, "r1", "u1", "a1")
        await turn(ledger, "r2", "", "a1b", fork=Fork(1, "regenerate"))  # branch 1 leaves seq 2 (a1) behind
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        size = log.stat().st_size
        for run_id, inputs, fork in (("x1", [], Fork(2, "regenerate")), ("x2", [], Fork(9, "regenerate")),
                                     ("x3", [user("u1")], Fork(1, "edit")), ("x4", [], Fork(1, "undo"))):
            with pytest.raises(ValueError):
                await ledger.start_run(run_record(run_id, "t"), inputs, fork=fork)
        with pytest.raises(ValueError):
            await ledger.start_run(run_record("x5", "elsewhere"), [], fork=Fork(0, "edit"))
        assert log.stat().st_size == size
        assert [b.branch for b in await ledger.list_branches("t")] == [0, 1]
        assert await ledger.list_branches("elsewhere") == []
        assert await ledger.read_messages("elsewhere", 0, 10, branch=3) == []
        assert isinstance(ledger, FileLedger) and not (tmp_path / "ledger" / "threads" /
                                                       thread_file_name("elsewhere")).exists()
