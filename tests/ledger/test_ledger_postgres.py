"""The Postgres ledger beyond the shared conformance suite: the DSN and password, versioned
migrations (``open`` and ``awaken ledger migrate``), a database that goes away and comes back while
the server runs, and ``awaken ledger copy`` from SQLite to Postgres and back.

Everything runs against the session's throwaway cluster (``tests/pg_cluster.py``).
"""

from __future__ import annotations

import json
import re
import sys
import tomllib
from pathlib import Path

import pytest
import trio

from awaken.config import parse_config
from awaken.core.errors import ConfigError, StoreUnavailable
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit
from awaken.ledger.registry import build_ledger
from awaken.ledger.testkit.harness import check_thread_invariants, run_record, snapshot, step_messages, user
from storage_backends.postgres_ledger import PostgresLedger
from storage_backends.postgres_schema import LATEST, MIGRATIONS
from storage_backends.sqlite_ledger import SqliteLedger
from tests import pg_cluster
from tests.builders import ROOT, agui_body, default_config_data, live_server, post_agui, types
from tests.ledger_harness import opened


def postgres_config(root: Path, **options):  # noqa: ANN001, ANN201
    data = default_config_data()
    data["ledger"] = {"backend": "postgres", "path": pg_cluster.dsn_for(root),
                      "options": {"password_env": pg_cluster.PASSWORD_ENV, **options}}
    return parse_config(data, source="test config")


def write_config(path: Path, backend: str, location: str, options: str = "{}") -> None:
    """The repo's config.toml with its [ledger] section pointed at ``location``."""
    text = (ROOT / "config.toml").read_text()
    text = text.replace('backend = "sqlite"', f'backend = "{backend}"')
    text = text.replace('path = "./var/awaken.db"', f'path = "{location}"')
    text = text.replace("options = {}", f"options = {options}")
    path.write_text(text)
    assert tomllib.loads(path.read_text())["ledger"]["backend"] == backend


def write_postgres_config(path: Path, root: Path) -> None:
    write_config(path, "postgres", pg_cluster.dsn_for(root), f'{{ password_env = "{pg_cluster.PASSWORD_ENV}" }}')


async def awaken(*args: str) -> trio.CompletedProcess:
    return await trio.run_process([sys.executable, "-m", "awaken", *args], capture_stdout=True,
                                  capture_stderr=True, check=False)


def applied_versions(root: Path) -> list[int]:
    with pg_cluster.admin_in(root) as conn:
        return [r[0] for r in conn.execute("SELECT version FROM schema_migrations ORDER BY version")]


# -- configuration --------------------------------------------------------------------------------


def test_the_password_never_sits_in_the_config(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A DSN with a password, an unset password variable, or a path that is not a DSN is one config
    line naming ``ledger.options``; the password is read from the variable ``password_env`` names."""
    data = default_config_data()

    def build(path: str, **options: object) -> None:
        data["ledger"] = {"backend": "postgres", "path": path, "options": options}
        build_ledger(parse_config(data, source="c"))

    with pytest.raises(ConfigError, match="the DSN holds a password: put it in an environment variable"):
        build("postgresql://awaken:secret@127.0.0.1:5432/db")
    monkeypatch.delenv("AWAKEN_NO_SUCH_VAR", raising=False)
    with pytest.raises(ConfigError, match=r"^ledger\.options: .*AWAKEN_NO_SUCH_VAR \(password_env\) is not set$"):
        build("postgresql://awaken@127.0.0.1:5432/db", password_env="AWAKEN_NO_SUCH_VAR")
    with pytest.raises(ConfigError, match="path must be a DSN"):
        build(str(tmp_path / "awaken.db"))
    monkeypatch.setenv("AWAKEN_PW", "from-the-env")
    ledger = build_ledger(parse_config(
        {**data, "ledger": {"backend": "postgres", "path": "postgresql://u@h/db",
                            "options": {"password_env": "AWAKEN_PW"}}}, source="c"))
    assert isinstance(ledger, PostgresLedger) and ledger._kwargs["password"] == "from-the-env"


async def test_a_wrong_password_is_store_unavailable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The server refusing the password stops the open with StoreUnavailable (not a hang)."""
    dsn = pg_cluster.dsn_for(tmp_path)
    monkeypatch.setenv("AWAKEN_BAD_PW", "wrong")
    ledger = PostgresLedger(dsn, password_env="AWAKEN_BAD_PW", connect_timeout=1)
    with pytest.raises(StoreUnavailable, match="password authentication failed"):
        await ledger.open()
    await ledger.aclose()


# -- migrations -----------------------------------------------------------------------------------


async def test_migrate_command_applies_each_version_once(tmp_path: Path) -> None:
    """``awaken ledger migrate`` applies the missing migrations and records them; run again it finds
    nothing to do, and opening the ledger afterwards changes nothing. SQLite has nothing to migrate."""
    config = tmp_path / "pg.toml"
    write_postgres_config(config, tmp_path)
    first = await awaken("ledger", "migrate", "--config", str(config))
    assert first.returncode == 0, first.stderr.decode()
    assert first.stdout.decode().strip() == (
        f"applied migrations {', '.join(str(v) for v, _, _ in MIGRATIONS)}; the schema is at version {LATEST}")
    again = await awaken("ledger", "migrate", "--config", str(config))
    assert (again.returncode, again.stdout.decode().strip()) == (0, "the schema is up to date")
    async with opened("postgres", tmp_path):
        pass
    assert applied_versions(tmp_path) == [v for v, _, _ in MIGRATIONS]

    sqlite = tmp_path / "sqlite.toml"
    write_config(sqlite, "sqlite", str(tmp_path / "a.db"))
    other = await awaken("ledger", "migrate", "--config", str(sqlite))
    assert (other.returncode, other.stdout.decode().strip()) == (
        0, "the sqlite ledger has no versioned schema: it creates its layout when it opens")


async def test_concurrent_opens_migrate_once(tmp_path: Path) -> None:
    """Six ledgers opening one empty database at the same time all open; each migration ran once."""
    ledgers = [PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV)
               for _ in range(6)]
    try:
        async with trio.open_nursery() as nursery:
            for ledger in ledgers:
                nursery.start_soon(ledger.open)
        for ledger in ledgers:
            await ledger.ping()
    finally:
        for ledger in ledgers:
            await ledger.aclose()
    assert applied_versions(tmp_path) == [v for v, _, _ in MIGRATIONS]


async def test_a_schema_newer_than_the_code_refuses_to_open(tmp_path: Path) -> None:
    """A database migrated by a newer awaken is not touched: open and migrate say which versions."""
    async with opened("postgres", tmp_path):
        pass
    with pg_cluster.admin_in(tmp_path) as conn:
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, 'from the future')", (LATEST + 1,))
    message = f"the database schema is at version {LATEST + 1}, newer than this awaken knows ({LATEST})"
    with pytest.raises(StoreUnavailable, match=re.escape(message)):
        async with opened("postgres", tmp_path):
            pass
    config = tmp_path / "pg.toml"
    write_postgres_config(config, tmp_path)
    refused = await awaken("ledger", "migrate", "--config", str(config))
    assert refused.returncode == 1 and message in refused.stderr.decode()


async def test_migration_2_gives_existing_threads_their_summaries(tmp_path: Path) -> None:
    """A database at schema version 1 with history gets owner-less listing rows computed from it:
    title (first non-blank user text), agent of the latest run, message count, updated_at."""
    with pg_cluster.admin_in(tmp_path) as conn:
        conn.execute("CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,"
                     " applied_at timestamptz NOT NULL DEFAULT now())")
        conn.execute(MIGRATIONS[0][2])  # type: ignore[arg-type]
        conn.execute("INSERT INTO schema_migrations (version, name) VALUES (1, %s)", (MIGRATIONS[0][1],))
        conn.execute("INSERT INTO threads (id, created_at, last_seq) VALUES ('t', 100, 3)")
        for run_id, agent, at in (("r1", "planner", 110), ("r2", "writer", 120)):
            conn.execute("INSERT INTO runs (id, thread_id, agent_id, status, created_at, updated_at) "
                         "VALUES (%s, 't', %s, 'completed', %s, %s)", (run_id.encode(), agent, at, at + 5))
        for seq, role, text in ((1, "assistant", "hi"), (2, "user", "  "), (3, "user", " Plan  a\ttrip ")):
            conn.execute("INSERT INTO messages (thread_id, seq, id, role, parts, created_at) "
                         "VALUES ('t', %s, %s, %s, %s, 100)",
                         (seq, f"m{seq}".encode(), role, json.dumps([{"kind": "text", "text": text}])))
    async with opened("postgres", tmp_path) as ledger:
        summary = await ledger.thread_summary("t")
        assert summary is not None
        assert (summary.title, summary.agent_id, summary.message_count, summary.updated_at, summary.owner) == (
            "Plan a trip", "writer", 3, 125, None)
        assert summary.last_run is not None and summary.last_run.run_id == "r2"
    assert applied_versions(tmp_path) == [v for v, _, _ in MIGRATIONS]


async def test_two_ledgers_on_one_database_commit_to_one_thread_in_turn(tmp_path: Path) -> None:
    """Two ledger instances (two pools, as two processes would have) committing concurrently to one
    thread: the thread row's lock hands out seqs in turn, gapless, each commit's messages consecutive."""
    first = PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV, pool_size=4)
    second = PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV, pool_size=4)
    got: list[list[int]] = []
    await first.open()
    await second.open()
    try:

        async def writer(ledger: PostgresLedger, run: str) -> None:
            got.append([m.seq for m in await ledger.start_run(run_record(run, "shared"), [user(f"{run}-in")])])
            for step in range(10):
                out = await ledger.commit("shared", run, Commit(RunStatus.RUNNING, step_messages(run, step, 3)))
                got.append([m.seq for m in out])

        async with trio.open_nursery() as nursery:
            for n in range(8):
                nursery.start_soon(writer, (first, second)[n % 2], f"run{n}")
        messages = await check_thread_invariants(second, "shared")
    finally:
        await first.aclose()
        await second.aclose()
    assert len(messages) == 8 * (1 + 10 * 3)
    assert all(seqs == list(range(seqs[0], seqs[0] + len(seqs))) for seqs in got)


# -- the database goes away -----------------------------------------------------------------------


async def test_database_down_is_503_and_store_unavailable_then_recovers_without_restart(tmp_path: Path) -> None:
    """With the cluster stopped, history and /readyz answer 503 STORE_UNAVAILABLE and a run ends with
    STORE_UNAVAILABLE having committed nothing; once the cluster is back the same server (no restart)
    pages the same history and runs again."""
    cluster = pg_cluster.cluster()
    config = postgres_config(tmp_path, connect_timeout=1)
    async with live_server(config) as server, server.client() as client:
        await post_agui(client, agui_body("t", "r1", [{"id": "u1", "role": "user", "content": "first"}]))
        before = (await client.get("/v1/ag-ui/threads/t/messages")).json()
        cluster.stop()
        try:
            history = await client.get("/v1/ag-ui/threads/t/messages")
            ready = await client.get("/readyz")
            events = await post_agui(client, agui_body("t", "r2", [{"id": "u2", "role": "user", "content": "x"}]))
        finally:
            cluster.start()
        assert history.status_code == 503 and history.json()["error"]["code"] == "STORE_UNAVAILABLE"
        assert ready.status_code == 503 and ready.json()["error"]["code"] == "STORE_UNAVAILABLE"
        assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE")
        assert "RUN_FINISHED" not in types(events)
        with trio.fail_after(15):
            while (await client.get("/readyz")).status_code != 200:
                await trio.sleep(0.1)
        during = await client.get("/v1/ag-ui/threads/t/messages")
        after = await post_agui(client, agui_body("t", "r3", [{"id": "u3", "role": "user", "content": "again"}]))
        history_after = (await client.get("/v1/ag-ui/threads/t/messages")).json()["items"]
        runs = await server.ctx.ledger.list_runs("t")
    assert during.status_code == 200 and during.json() == before
    assert types(after)[-1] == "RUN_FINISHED"
    assert [m["role"] for m in history_after] == ["user", "assistant", "user", "assistant"]
    assert [(r.run_id, r.status) for r in runs] == [("r1", "completed"), ("r3", "completed")]


async def test_a_commit_on_a_dead_connection_is_store_unavailable_and_leaves_nothing(tmp_path: Path) -> None:
    """Every connection killed by the server (as a failover or restart does) fails the next call with
    StoreUnavailable at worst, never a partial commit; the pool replaces them and calls succeed."""
    async with opened("postgres", tmp_path) as ledger:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        before = await snapshot(ledger)
        with pg_cluster.cluster().admin() as conn:
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()",
                (pg_cluster.DATABASE,),
            )
        await ledger.ping()  # the pool checks connections as it hands them out
        assert await snapshot(ledger) == before
        out = await ledger.start_run(run_record("r2", "t"), [user("u2")])
        assert [m.seq for m in out] == [2]


# -- copying a history ----------------------------------------------------------------------------


async def test_a_history_moves_from_sqlite_to_postgres_and_back(tmp_path: Path) -> None:
    """``awaken ledger copy`` moves every thread from SQLite to Postgres (a waiting run included,
    which then resumes on Postgres) and the grown history back to a fresh SQLite file: all three
    ledgers read the same."""
    sqlite_a = tmp_path / "a.db"
    data = default_config_data()
    data["ledger"] = {"backend": "sqlite", "path": str(sqlite_a)}
    async with live_server(parse_config(data, source="a")) as server, server.client() as client:
        first = await post_agui(client, agui_body("moving", "r1", [
            {"id": "u1", "role": "user", "content": '/call calculator {"expression": "6*7"}'}]),
            path="/v1/ag-ui/agents/guarded")
        await post_agui(client, agui_body("other 🧵", "r2", [{"id": "u1", "role": "user", "content": "hello"}]))
    call_id = next(e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START")

    a, pg, b = tmp_path / "a.toml", tmp_path / "pg.toml", tmp_path / "b.toml"
    write_config(a, "sqlite", str(sqlite_a))
    write_postgres_config(pg, tmp_path / "pg")
    write_config(b, "sqlite", str(tmp_path / "b.db"))
    there = await awaken("ledger", "copy", "--from", str(a), "--to", str(pg))
    assert there.returncode == 0, there.stderr.decode()
    assert there.stdout.decode().strip() == "copied and verified 2 threads, 2 runs, 4 messages, 1 pending calls"
    source = SqliteLedger(str(sqlite_a))
    await source.open()
    try:
        original = await snapshot(source)
    finally:
        await source.aclose()
    async with opened("postgres", tmp_path / "pg") as copy:
        assert await snapshot(copy) == original

    async with live_server(postgres_config(tmp_path / "pg")) as server, server.client() as client:
        before = (await client.get("/v1/ag-ui/threads/moving/messages")).json()["items"]
        resumed = await post_agui(client, agui_body("moving", "r3", [
            {"id": "u1", "role": "user", "content": '/call calculator {"expression": "6*7"}'},
            *before[1:],
            {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "ok"},
        ]), path="/v1/ag-ui/agents/guarded")
    assert types(resumed)[-1] == "RUN_FINISHED"

    back = await awaken("ledger", "copy", "--from", str(pg), "--to", str(b))
    assert back.returncode == 0, back.stderr.decode()
    assert back.stdout.decode().strip() == "copied and verified 2 threads, 2 runs, 6 messages, 0 pending calls"
    async with opened("postgres", tmp_path / "pg") as grown:
        on_postgres = await snapshot(grown)
    returned = SqliteLedger(str(tmp_path / "b.db"))
    await returned.open()
    try:
        assert await snapshot(returned) == on_postgres
    finally:
        await returned.aclose()
    assert [m.role for m in on_postgres["moving"]["messages"]] == ["user", "assistant", "tool", "assistant"]



async def test_the_lease_heartbeat_never_queues_behind_the_runs_commits(tmp_path: Path) -> None:
    """With every pool slot taken by a stalled ledger call (a busy process: commits queued), the lease
    heartbeat still renews this process's lease at once, on its own connection, so no other process
    takes it for dead and interrupts its live runs."""
    import threading

    ledger = PostgresLedger(pg_cluster.dsn_for(tmp_path), password_env=pg_cluster.PASSWORD_ENV, pool_size=1)
    await ledger.open()
    stalled = threading.Event()
    release = threading.Event()

    def stall(conn) -> None:  # noqa: ANN001 - a psycopg connection
        stalled.set()
        release.wait()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ledger._call, stall)
            await trio.to_thread.run_sync(stalled.wait)
            try:
                with trio.fail_after(10):
                    assert await ledger.claims().tick() == []
            finally:
                release.set()
    finally:
        await ledger.aclose()
