"""The Postgres ledger's branches beyond the conformance suite: the schema migration that brings them to
a database with history, what a thread that never branched stores (nothing more), the active path
kept on the thread's row (also a branched thread whose active branch is 0), and a fork made by one
process seen by another's hot-thread cache.

Everything runs against the session's throwaway cluster (``tests/pg_cluster.py``).
"""

from __future__ import annotations

import json
from pathlib import Path

import attrs
import pytest

from awaken.core.messages import Message
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Branch, Commit, Fork, ThreadRecord
from awaken.ledger.testkit.harness import assistant, read_all, run_record, user
from storage_backends import postgres_schema
from storage_backends.postgres_ledger import PostgresLedger
from tests import pg_cluster
from tests.ledger_harness import opened


def ids(messages: list) -> list[tuple[int, int, str]]:
    return [(m.seq, m.branch, m.id) for m in messages]


async def test_migration_7_puts_existing_history_on_branch_0(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A database at schema version 6 with a thread: after the migration its messages and runs are on
    branch 0 and it has branch 0 only; an edit may then keep an existing message id on a new branch
    (ids are unique per (thread, id, branch)), and the old path stays readable."""
    with pg_cluster.admin_in(tmp_path) as conn:
        monkeypatch.setattr(postgres_schema, "MIGRATIONS", postgres_schema.MIGRATIONS[:6])
        monkeypatch.setattr(postgres_schema, "LATEST", 6)
        assert postgres_schema.migrate(conn) == [1, 2, 3, 4, 5, 6]
        monkeypatch.undo()
        conn.execute("INSERT INTO threads (id, created_at, last_seq, updated_at, message_count) "
                     "VALUES ('t', 100, 2, 120, 2)")
        conn.execute("INSERT INTO runs (id, thread_id, agent_id, status, created_at, updated_at) "
                     "VALUES ('r1', 't', 'assistant', 'completed', 110, 120)")
        for seq, role, message_id in ((1, "user", "u1"), (2, "assistant", "a1")):
            conn.execute("INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at) "
                         "VALUES ('t', %s, %s, %s, 'r1', %s, 100)",
                         (seq, message_id.encode(), role, json.dumps([{"kind": "text", "text": message_id}])))
    async with opened("postgres", tmp_path) as ledger:
        assert ids(await read_all(ledger, "t")) == [(1, 0, "u1"), (2, 0, "a1")]
        assert await ledger.list_branches("t") == [Branch(0, None, 0, 100)]
        assert [r.branch for r in await ledger.list_runs("t")] == [0]
        await ledger.start_run(run_record("r2", "t"), [user("u1", "edited", "r2")], fork=Fork(0, "edit"))
        assert ids(await read_all(ledger, "t")) == [(3, 1, "u1")]
        assert ids(await read_all(ledger, "t", branch=0)) == [(1, 0, "u1"), (2, 0, "a1")]
    with pg_cluster.admin_in(tmp_path) as conn:
        assert [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")] == [
            v for v, _, _ in postgres_schema.MIGRATIONS]


async def test_a_thread_that_never_branched_stores_nothing_more(tmp_path: Path) -> None:
    """No branch row, no path on its row, every message and run on branch 0; its first fork writes the
    branch and the active path (root first, then the first seq of each later range)."""
    async with opened("postgres", tmp_path) as ledger:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, (assistant("a1"),)))
        with pg_cluster.admin_in(tmp_path) as conn:
            assert conn.execute("SELECT count(*) FROM branches").fetchone() == (0,)
            assert conn.execute("SELECT active_branch, last_branch, path_branches, path_starts FROM threads"
                                ).fetchone() == (0, 0, None, None)
            assert conn.execute("SELECT DISTINCT branch FROM messages UNION SELECT branch FROM runs").fetchall() == [(0,)]
        await ledger.start_run(run_record("r2", "t"), [], fork=Fork(1, "regenerate"))
        await ledger.commit("t", "r2", Commit(RunStatus.COMPLETED, (assistant("a1b"),)))
        with pg_cluster.admin_in(tmp_path) as conn:
            assert conn.execute("SELECT active_branch, last_branch, path_branches, path_starts, message_count "
                                "FROM threads").fetchone() == (1, 1, [0, 1], [2], 2)
            assert conn.execute("SELECT branch, parent, fork_seq, run_id, reason FROM branches").fetchall() == [
                (1, 0, 1, b"r2", "regenerate")]


async def test_a_branched_thread_whose_active_branch_is_0_reads_branch_0(tmp_path: Path) -> None:
    """An imported thread with a branch but branch 0 active: its active path is branch 0 alone (a path
    of one range on the row), for reads, committed ids, the view and the count."""
    messages = [stored(user("u1"), 1, 0), stored(assistant("a1"), 2, 0), stored(assistant("a1b"), 3, 1)]
    thread = ThreadRecord("t", 100, {}, 3, None, 0)
    branches = [Branch(0, None, 0, 100), Branch(1, 0, 1, 150, None, "regenerate")]
    async with opened("postgres", tmp_path) as ledger:
        await ledger.import_thread(thread, [], messages, [], branches=branches)
        assert ids(await read_all(ledger, "t")) == [(1, 0, "u1"), (2, 0, "a1")]
        assert ids(await read_all(ledger, "t", branch=1)) == [(1, 0, "u1"), (3, 1, "a1b")]
        assert await ledger.committed_ids("t", ["u1", "a1", "a1b"]) == {"u1", "a1"}
        assert ids(list((await ledger.thread_view("t")).messages)) == [(1, 0, "u1"), (2, 0, "a1")]
        summary = await ledger.thread_summary("t")
        assert summary is not None and summary.message_count == 2
        assert await ledger.list_branches("t") == branches


def stored(message: Message, seq: int, branch: int) -> Message:
    return attrs.evolve(message, seq=seq, branch=branch, created_at=100 + seq)


async def test_a_fork_by_one_process_is_seen_by_another_processs_cache(tmp_path: Path) -> None:
    """Two ledgers on one database (two processes): one holds the thread in its hot-thread cache, the
    other forks it; the first's next admission answers for the new active path."""
    first = PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV, pool_size=2)
    second = PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV, pool_size=2)
    await first.open()
    await second.open()
    try:
        await first.start_run(run_record("r1", "t"), [user("u1")])
        await first.commit("t", "r1", Commit(RunStatus.COMPLETED, (assistant("a1"),)))
        asked = frozenset({"u1", "a1", "a1b"})
        facts = await first.admission_facts("t", asked, 10)
        assert facts.committed == {"u1", "a1"} and first._hot.get("t") is not None  # type: ignore[attr-defined]
        await second.start_run(run_record("r2", "t"), [], fork=Fork(1, "regenerate"))
        await second.commit("t", "r2", Commit(RunStatus.COMPLETED, (assistant("a1b"),)))
        facts = await first.admission_facts("t", asked, 10)
        assert facts.thread is not None and facts.thread.active_branch == 1
        assert facts.committed == {"u1", "a1b"}
        assert ids(list(facts.tail)) == [(1, 0, "u1"), (3, 1, "a1b")]
        await first.start_run(run_record("r3", "t"), [user("u2")])
        assert ids(await read_all(second, "t")) == [(1, 0, "u1"), (3, 1, "a1b"), (4, 1, "u2")]
    finally:
        await first.aclose()
        await second.aclose()
