"""Threads that branch, in the SQLite ledger and around it: the schema migration of a database written
before branches, the hot-thread cache across forks, no extra statement for a thread that never branched,
``ledger copy`` carrying branches, and a backend without branches refusing them. (The branch promises
every backend keeps are in the conformance suite, ``awaken.ledger.testkit.branches``.)"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from awaken.core.messages import Message
from awaken.engine.state import Cause, RunStatus
from awaken.ledger.copy import copy_ledger
from awaken.ledger.interface import (
    MAX_SEQ,
    ROOT_PATH,
    Branch,
    BranchesUnsupported,
    Commit,
    Fork,
    Ledger,
    RunRecord,
    branch_path,
    on_path,
)
from awaken.ledger.testkit.harness import (
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
from storage_backends.sqlite_ledger import _MIGRATIONS, SqliteLedger
from tests.ledger_harness import file_ledger, sqlite_ledger


def test_a_branch_path_walks_up_to_branch_0() -> None:
    """``branch_path``: the branch's own range (to the end), then each parent up to the fork seq of its child,
    oldest first; branch 0 alone is every message; an unknown branch, or a parent that is not older than its
    child, raises ValueError. ``on_path`` keeps a message iff a range holds its branch and its seq."""
    tree = [Branch(0, None, 0, 1), Branch(1, 0, 2, 2), Branch(2, 1, 5, 3), Branch(3, 0, 0, 4)]
    assert branch_path(tree, 0) == ROOT_PATH == ((0, MAX_SEQ),)
    assert branch_path(tree, 2) == ((0, 2), (1, 5), (2, MAX_SEQ))
    assert branch_path(tree, 3) == ((0, 0), (3, MAX_SEQ))
    path = branch_path(tree, 2)
    kept = [(b, seq) for b, seq in [(0, 1), (0, 2), (0, 3), (1, 5), (1, 6), (2, 7), (3, 8)]
            if on_path(Message("m", "user", (), seq=seq, branch=b), path)]
    assert kept == [(0, 1), (0, 2), (1, 5), (2, 7)]
    with pytest.raises(ValueError):
        branch_path(tree, 4)
    with pytest.raises(ValueError):
        branch_path([*tree, Branch(4, 4, 1, 5)], 4)


_BEFORE_BRANCHES = """
CREATE TABLE threads (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, state TEXT NOT NULL,
    last_seq INTEGER NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, error_code TEXT, error_message TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0);
CREATE TABLE messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, role TEXT NOT NULL,
    run_id TEXT, parts TEXT NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq), UNIQUE (thread_id, id));
CREATE TABLE pending (thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, run_id TEXT NOT NULL,
    name TEXT NOT NULL, arguments TEXT NOT NULL, kind TEXT NOT NULL, message_id TEXT NOT NULL,
    ord INTEGER NOT NULL, PRIMARY KEY (thread_id, tool_call_id));
INSERT INTO threads VALUES ('t', 100, '{}', 4);
INSERT INTO runs VALUES ('r1', 't', 'assistant', 'completed', 100, 150, NULL, NULL, 0, 0, 1);
INSERT INTO messages VALUES ('t', 1, 'u1', 'user', 'r1', '[{"kind":"text","text":"first"}]', 100);
INSERT INTO messages VALUES ('t', 2, 'a1', 'assistant', 'r1', '[{"kind":"text","text":"one"}]', 110);
INSERT INTO messages VALUES ('t', 3, 'u2', 'user', 'r1', '[{"kind":"text","text":"second"}]', 120);
INSERT INTO messages VALUES ('t', 4, 'a2', 'assistant', 'r1', '[{"kind":"text","text":"two"}]', 130);
"""


def _database_before_branches(path: Path) -> None:
    """A database as the release before branches left it (schema version 3)."""
    conn = sqlite3.connect(str(path), isolation_level=None)
    conn.executescript(_BEFORE_BRANCHES)
    for migration in _MIGRATIONS[:3]:
        migration(conn)
    conn.execute("PRAGMA user_version = 3")
    conn.close()


async def test_a_database_written_before_branches_migrates_at_open(tmp_path: Path) -> None:
    """Every message, run and thread of a database of schema version 3 is on branch 0 after the open
    (the thread never branched); an edit may then keep a message's id on a new branch, which the old
    ``(thread_id, id)`` uniqueness refused; a reopen migrates nothing more."""
    _database_before_branches(tmp_path / "ledger.db")
    async with opened(sqlite_ledger, tmp_path) as ledger:
        before = await read_all(ledger, "t")
        assert [(m.id, m.seq, m.branch) for m in before] == [("u1", 1, 0), ("a1", 2, 0), ("u2", 3, 0), ("a2", 4, 0)]
        assert [b.branch for b in await ledger.list_branches("t")] == [0]
        assert (await ledger.get_run("r1")).branch == 0  # type: ignore[union-attr]
        out = await ledger.start_run(run_record("r2", "t"), [user("u2", "second, edited", "r2")], fork=Fork(2, "edit"))
        assert [(m.id, m.seq, m.branch) for m in out] == [("u2", 5, 1)]
        await ledger.commit("t", "r2", Commit(RunStatus.COMPLETED))
        after = await snapshot(ledger)
    async with opened(sqlite_ledger, tmp_path) as ledger:
        assert await snapshot(ledger) == after
        assert await read_all(ledger, "t", branch=0) == before
    conn = sqlite3.connect(str(tmp_path / "ledger.db"))
    assert conn.execute("PRAGMA user_version").fetchone()[0] == len(_MIGRATIONS)
    conn.close()


async def _same_admission(ledger: SqliteLedger, asked: frozenset[str], tail: int) -> None:
    """The cache's answer (warming it if cold) equals the store's (the cache emptied first)."""
    cached = await ledger.admission_facts("t", asked, tail)
    ledger._hot.clear()
    stored = await ledger.admission_facts("t", asked, tail)
    assert cached == stored
    view = await ledger.thread_view("t")
    assert list(stored.tail) == list(view.messages[max(0, len(view.messages) - tail):])


async def test_the_hot_cache_answers_the_active_path_across_forks(tmp_path: Path) -> None:
    """Admissions between turns, regenerates, edits and a superseded run closing on the path a fork
    left: each answer of the hot cache equals the store's, tail and committed ids of the active path."""
    async with opened(sqlite_ledger, tmp_path) as ledger:
        assert isinstance(ledger, SqliteLedger)
        asked = frozenset({"u1", "a1", "u2", "a2", "tr_c1", "u3", "never"})

        async def check() -> None:
            for tail in (0, 1, 3, 10):
                await _same_admission(ledger, asked, tail)

        await ledger.start_run(run_record("r1", "t"), [user("u1", run_id="r1")])
        await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, (assistant("a1", run_id="r1"),)))
        await check()
        await ledger.start_run(run_record("r2", "t"), [user("u2", run_id="r2")])
        await ledger.commit("t", "r2", Commit(RunStatus.WAITING, (assistant("a2", run_id="r2", calls=["c1"]),),
                                              pending=(pending("c1", "r2", "t", "a2"),)))
        await check()
        await ledger.admission_facts("t", asked, 3)  # hot before the fork
        await ledger.start_run(run_record("r3", "t"), [user("u2", "edited", "r3")], fork=Fork(2, "edit"))
        await check()
        await ledger.admission_facts("t", asked, 3)  # hot before the superseded run closes on branch 0
        await ledger.commit("t", "r2", Commit(RunStatus.INTERRUPTED, (tool_result("tr_c1", "c1", run_id="r2"),),
                                              resolved=("c1",), cause=Cause.SUPERSEDED.value))
        facts = await ledger.admission_facts("t", asked, 10)
        assert ([m.id for m in facts.tail], facts.committed) == (["u1", "a1", "u2"], {"u1", "a1", "u2"})
        await check()
        await ledger.admission_facts("t", asked, 3)
        await ledger.commit("t", "r3", Commit(RunStatus.COMPLETED, (assistant("a2", "again", "r3"),)))
        await ledger.start_run(run_record("r4", "t"), [user("u3", run_id="r4")])
        await check()
        await ledger.admission_facts("t", asked, 3)
        await ledger.start_run(run_record("r5", "t"), [], fork=Fork(0, "regenerate"))
        await check()
        assert (await ledger.admission_facts("t", asked, 10)).tail == ()


async def test_a_thread_that_never_branched_reads_as_before(tmp_path: Path) -> None:
    """No statement of a never-branched thread's writes and reads touches the branches (no extra query on
    the hot path): a history page is one statement, as before branches; a branched thread's page reads its
    branches in the same worker call."""
    async with opened(sqlite_ledger, tmp_path, cache_bytes=0) as ledger:
        assert isinstance(ledger, SqliteLedger)
        statements: list[str] = []
        ledger._db.conn.set_trace_callback(statements.append)  # type: ignore[union-attr]
        await ledger.start_run(run_record("r1", "t"), [user("u1", run_id="r1")])
        await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, (assistant("a1", run_id="r1"),)))
        await ledger.admission_facts("t", frozenset({"u1", "x"}), 5)
        await ledger.thread_view("t")
        await ledger.committed_ids("t", ["u1"])
        await ledger.answered_calls("t", ["c1"])
        assert [s for s in statements if "FROM branches" in s or "INTO branches" in s] == []
        statements.clear()
        page = await ledger.read_messages("t", 0, 10)
        assert len(statements) == 1 and [m.id for m in page] == ["u1", "a1"]
        await ledger.start_run(run_record("r2", "t"), [], fork=Fork(1, "regenerate"))
        statements.clear()
        assert [m.id for m in await ledger.read_messages("t", 0, 10)] == ["u1"]
        assert any("FROM branches" in s for s in statements)
        ledger._db.conn.set_trace_callback(None)  # type: ignore[union-attr]


class _OldStyle(SqliteLedger):
    """A backend written before branches: its start_run and read_messages take no fork or branch."""

    async def start_run(self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None) -> list[Message]:
        return await super().start_run(run, inputs, owner)

    async def read_messages(self, thread_id: str, after_seq: int, limit: int) -> list[Message]:
        return await super().read_messages(thread_id, after_seq, limit)


def _old_style(root: Path) -> Ledger:
    return _OldStyle(str(root / "old.db"))


async def test_a_backend_written_before_branches_keeps_working_and_refuses_forks(tmp_path: Path) -> None:
    """A subclass whose methods take no ``fork``/``branch``/``branches`` says it keeps no branches, serves
    threads that never branch as before, and refuses a fork, another branch's read and a branched import
    with ``BranchesUnsupported``, writing nothing."""
    async with opened(_old_style, tmp_path) as ledger:
        assert not ledger.supports_branches and SqliteLedger.supports_branches
        out = await ledger.start_run(run_record("r1", "t"), [user("u1")], fork=None)
        assert [m.seq for m in out] == [1]
        assert await ledger.read_messages("t", 0, 10, branch=0) == out
        before = await snapshot(ledger)
        with pytest.raises(BranchesUnsupported, match="does not keep branches"):
            await ledger.start_run(run_record("r2", "t"), [user("u2")], fork=Fork(1, "regenerate"))
        with pytest.raises(BranchesUnsupported):
            await ledger.read_messages("t", 0, 10, branch=1)
        assert await snapshot(ledger) == before


async def _branched_source(ledger: Ledger) -> None:
    """Thread ``t``: u1 a1 u2 a2 on branch 0, a regenerate (branch 1, waiting on a call) and an edit of u1
    (branch 2, active); thread ``plain`` never branched."""
    await ledger.start_run(run_record("r1", "t"), [user("u1", "first", "r1")])
    await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, (assistant("a1", "one", "r1"),)))
    await ledger.start_run(run_record("r2", "t"), [user("u2", "second", "r2")])
    await ledger.commit("t", "r2", Commit(RunStatus.COMPLETED, (assistant("a2", "two", "r2"),)))
    await ledger.start_run(run_record("r3", "t"), [], fork=Fork(3, "regenerate"))
    await ledger.commit("t", "r3", Commit(RunStatus.WAITING, (assistant("a2", "again", "r3", ["c1"]),),
                                          pending=(pending("c1", "r3", "t", "a2"),)))
    await ledger.commit("t", "r3", Commit(RunStatus.INTERRUPTED, resolved=("c1",), cause=Cause.SUPERSEDED.value))
    await ledger.start_run(run_record("r4", "t"), [user("u1", "first, edited", "r4")], fork=Fork(0, "edit"))
    await ledger.start_run(run_record("r5", "plain"), [user("p1", "plain", "r5")])


@pytest.mark.parametrize("destination", ["sqlite", "files"])
async def test_ledger_copy_carries_branches(tmp_path: Path, destination: str) -> None:
    """``copy_ledger`` writes every branch, the active branch, each message's and run's branch: the copy's
    snapshot (every branch's path included) equals the source's, and so does every message of any branch."""
    target = {"sqlite": sqlite_ledger, "files": file_ledger}[destination]
    async with opened(sqlite_ledger, tmp_path / "source") as source:
        await _branched_source(source)
        original = await snapshot(source)
        everything = await every_message(source, "t")
        async with opened(target, tmp_path / "dest") as dest:
            report = await copy_ledger(source, dest)
            assert (report.threads, report.runs, report.messages) == (2, 5, 7)
            assert await snapshot(dest) == original
            assert await every_message(dest, "t") == everything
    assert [m.branch for m in everything] == [0, 0, 0, 0, 1, 2]
    assert [m.text for m in original["t"]["messages"]] == ["first, edited"]
    assert [m.text for m in original["t"]["paths"][1]] == ["first", "one", "second", "again"]
