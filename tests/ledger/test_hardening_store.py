"""Hardening, the store's side: readiness is a real write, a vanished ledger refuses, durability is
the documented default (issue 12, findings 8 and 10; must-be-true items 6 and 8).

* ``/readyz`` answers 503 ``STORE_UNAVAILABLE`` while the ledger cannot commit (a full disk, a
  read-only or deleted directory, a read-only database) and 200 again once it can.
* The file ledger notices its directory, or a thread's log, deleted or replaced under the server:
  a run there ends with the store-failure terminal event, nothing is claimed committed that is not
  on disk, and history is not served from an unlinked file.
* SQLite fsyncs a commit (its WAL, by the group commit) before acknowledging it unless told
  otherwise; the file ledger fsyncs a commit before acknowledging it.
"""

from __future__ import annotations

import errno
import os
import shutil
from pathlib import Path

import orjson
import pytest
import trio
from psycopg import sql

from awaken.core.errors import StoreUnavailable
from awaken.engine.state import RunStatus
from awaken.http import app as server_module
from awaken.ledger.interface import Commit
from awaken.ledger.registry import build_ledger
from awaken.ledger.testkit.harness import run_record, user
from storage_backends.files import FileLedger, thread_file_name
from tests import pg_cluster
from tests.builders import ask, held, live_server, make_config, post_agui, read_until, release, types
from tests.ledger.test_ledger_postgres import postgres_config


def refused_for_the_store(events: list[dict]) -> bool:
    """The run ended with the store-failure terminal event and never claimed to have finished."""
    return (events[-1]["type"], events[-1].get("code")) == ("RUN_ERROR", "STORE_UNAVAILABLE") and \
        "RUN_FINISHED" not in types(events)


async def not_ready(client) -> dict:  # noqa: ANN001
    response = await client.get("/readyz")
    assert response.status_code == 503, response.text
    body = response.json()
    assert body["error"]["code"] == "STORE_UNAVAILABLE"
    return body


@pytest.fixture(autouse=True)
def probe_every_time(monkeypatch):  # noqa: ANN001, ANN201
    """Every ``/readyz`` probes (no cached success hides a change made by the test)."""
    monkeypatch.setattr(server_module, "READY_CACHE_SECONDS", 0.0)


def files_config(tmp_path: Path):  # noqa: ANN201
    return make_config(tmp_path, backend="files")


def threads_dir(tmp_path: Path) -> Path:
    return tmp_path / "ledger" / "threads"


# -- the file ledger: a deleted or replaced log --------------------------------------------------


async def test_a_run_on_a_thread_whose_log_was_deleted_ends_store_unavailable_and_commits_nothing(tmp_path):
    """Finding 8: the run used to "finish" into the unlinked log, and the thread was gone at restart."""
    config = files_config(tmp_path)
    async with live_server(config) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        os.unlink(threads_dir(tmp_path) / thread_file_name("t"))
        events = await post_agui(client, ask("t", "r2", "u2", "more"))
        history = await client.get("/v1/ag-ui/threads/t/messages")
        other = await post_agui(client, ask("elsewhere", "r3", "u3"))
    assert refused_for_the_store(events), events
    assert history.status_code == 503 and history.json()["error"]["code"] == "STORE_UNAVAILABLE"
    assert types(other)[-1] == "RUN_FINISHED"  # the other threads' logs still take commits
    async with live_server(config) as srv, srv.client() as client:  # what the server said, the disk holds
        assert (await client.get("/v1/ag-ui/threads/t/messages")).status_code == 404
        assert await srv.ctx.ledger.get_run("r2") is None
        assert [m.id for m in await srv.ctx.ledger.read_messages("elsewhere", 0, 10)][0] == "u3"


async def test_a_run_whose_log_is_deleted_while_it_streams_ends_store_unavailable(tmp_path):
    config = files_config(tmp_path)
    async with live_server(config) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t-held", "r0", "u0")))[-1] == "RUN_FINISHED"
        body = ask("t-held", "r1", "u1", held("t-held", 4))
        async with client.stream("POST", "/v1/ag-ui", json=body) as response:
            lines = response.aiter_lines()
            seen = await read_until(lines, "TEXT_MESSAGE_CONTENT")
            os.unlink(threads_dir(tmp_path) / thread_file_name("t-held"))
            await release(srv, "t-held")
            seen += [e async for e in _rest(lines)]
        history = await client.get("/v1/ag-ui/threads/t-held/messages")
        ready = await client.get("/readyz")  # the directory still takes commits
    assert refused_for_the_store(seen), types(seen)
    assert history.status_code == 503
    assert ready.status_code == 200
    async with live_server(config) as srv:
        assert await srv.ctx.ledger.get_run("r1") is None


async def _rest(lines):  # noqa: ANN001, ANN202
    async for line in lines:
        if line.startswith("data: "):
            yield orjson.loads(line[6:])


async def test_the_file_ledger_refuses_a_commit_into_a_log_replaced_by_another_file(tmp_path):
    """A log replaced under the server (a restore of an older copy, an editor's save) is not written
    at the offset the index expects: the commit is refused and the replacement left as it was."""
    ledger = FileLedger(str(tmp_path / "ledger"))
    await ledger.open()
    try:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        path = threads_dir(tmp_path) / thread_file_name("t")
        replacement = path.with_suffix(".new")
        replacement.write_bytes(b"")
        os.replace(replacement, path)
        with pytest.raises(StoreUnavailable, match="deleted or replaced"):
            await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
        assert path.read_bytes() == b""
        assert (await ledger.get_run("r1")).status is RunStatus.RUNNING
        with pytest.raises(StoreUnavailable):  # nor is the thread's history served from the old log
            await ledger.read_messages("t", 0, 10)
    finally:
        await ledger.aclose()


async def test_a_thread_whose_log_was_deleted_can_be_deleted_and_then_started_afresh(tmp_path):
    ledger = FileLedger(str(tmp_path / "ledger"))
    await ledger.open()
    try:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        os.unlink(threads_dir(tmp_path) / thread_file_name("t"))
        with pytest.raises(StoreUnavailable, match="deleted or replaced"):
            await ledger.start_run(run_record("r2", "t"), [user("u2")])
        with pytest.raises(StoreUnavailable):  # refused from then on, without touching the disk
            await ledger.thread_view("t")
        assert await ledger.delete_thread("t") is True
        await ledger.start_run(run_record("r3", "t"), [user("u3")])
        assert [m.id for m in await ledger.read_messages("t", 0, 10)] == ["u3"]
    finally:
        await ledger.aclose()
    reopened = FileLedger(str(tmp_path / "ledger"))
    await reopened.open()
    try:
        assert [m.id for m in await reopened.read_messages("t", 0, 10)] == ["u3"]
    finally:
        await reopened.aclose()


# -- the file ledger: its directory, and /readyz -------------------------------------------------


async def test_readyz_is_503_and_runs_refuse_once_the_file_ledger_directory_is_deleted(tmp_path):
    async with live_server(files_config(tmp_path)) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        assert (await client.get("/readyz")).status_code == 200
        shutil.rmtree(threads_dir(tmp_path))
        existing = await post_agui(client, ask("t", "r2", "u2"))  # its log's descriptor is still open
        new = await post_agui(client, ask("t-new", "r3", "u3"))
        body = await not_ready(client)
    assert refused_for_the_store(existing), existing
    assert refused_for_the_store(new), new
    assert not threads_dir(tmp_path).exists()  # nothing was written anywhere in its place
    assert "is gone" in body["error"]["message"]


async def test_a_file_ledger_directory_replaced_under_the_server_is_refused_not_written(tmp_path):
    async with live_server(files_config(tmp_path)) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        shutil.rmtree(threads_dir(tmp_path))
        threads_dir(tmp_path).mkdir()
        body = await not_ready(client)
        new = await post_agui(client, ask("t-new", "r2", "u2"))
    assert "replaced" in body["error"]["message"]
    assert refused_for_the_store(new), new
    assert list(threads_dir(tmp_path).iterdir()) == []


async def test_readyz_is_503_while_the_file_ledger_directory_is_away_and_200_once_it_is_back(tmp_path):
    async with live_server(files_config(tmp_path)) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        away = tmp_path / "ledger" / "moved-away"
        os.rename(threads_dir(tmp_path), away)
        await not_ready(client)
        refused = await post_agui(client, ask("t", "r2", "u2"))
        os.rename(away, threads_dir(tmp_path))
        ready = await client.get("/readyz")
        again = await post_agui(client, ask("t", "r3", "u3"))
        history = (await client.get("/v1/ag-ui/threads/t/messages")).json()["items"]
    assert refused_for_the_store(refused), refused
    assert (ready.status_code, ready.json()) == (200, {"status": "ready"})
    assert types(again)[-1] == "RUN_FINISHED"
    assert [m["id"] for m in history if m["role"] == "user"] == ["u1", "u3"]


async def test_readyz_is_503_while_the_file_ledger_disk_is_full_and_200_once_it_frees(tmp_path, monkeypatch):
    """Finding 8: ``/readyz`` said 200 while every write failed. The full disk is simulated (every
    write fails ``ENOSPC``), as in test_store_failure_files.py."""
    real = os.pwrite

    def full(fd: int, data: bytes, offset: int) -> int:
        raise OSError(errno.ENOSPC, "No space left on device")

    async with live_server(files_config(tmp_path)) as srv, srv.client() as client:
        assert (await client.get("/readyz")).status_code == 200
        monkeypatch.setattr(os, "pwrite", full)
        body = await not_ready(client)
        monkeypatch.setattr(os, "pwrite", real)
        ready = await client.get("/readyz")
    assert "disk is full" in body["error"]["message"]
    assert ready.status_code == 200
    assert not any(p.name.startswith(".") for p in threads_dir(tmp_path).iterdir())  # no probe file left


@pytest.mark.skipif(os.geteuid() == 0, reason="root ignores permission bits; the deleted, replaced and "
                                              "moved-away directory tests cover a directory that cannot be written")
async def test_readyz_is_503_while_the_file_ledger_directory_is_read_only(tmp_path):
    async with live_server(files_config(tmp_path)) as srv, srv.client() as client:
        threads_dir(tmp_path).chmod(0o555)
        try:
            await not_ready(client)
        finally:
            threads_dir(tmp_path).chmod(0o755)
        assert (await client.get("/readyz")).status_code == 200


# -- SQLite: a deleted database file -------------------------------------------------------------


async def test_sqlite_history_is_not_served_from_a_deleted_database_file(tmp_path):
    """Finding 8: after the database file was deleted, reads were served from the unlinked file
    (history that is gone at the next start)."""
    async with live_server(make_config(tmp_path)) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        assert (await client.get("/v1/ag-ui/threads/t/messages")).status_code == 200
        os.unlink(tmp_path / "awaken.db")
        history = await client.get("/v1/ag-ui/threads/t/messages")
        assert history.status_code == 503 and history.json()["error"]["code"] == "STORE_UNAVAILABLE"
        await not_ready(client)


# -- durability: the defaults (finding 10) -------------------------------------------------------


async def test_the_default_sqlite_ledger_fsyncs_a_commit_before_acknowledging_it(tmp_path, monkeypatch):
    """Finding 10: SQLite ran WAL with ``synchronous=NORMAL`` and nothing else (acknowledged commits
    lost when the filesystem went away). Built from the default config, every commit is fsynced before
    it is acknowledged: the group commit's fsync of the WAL file (``awaken/ledger/groupsync.py``)."""
    ledger = build_ledger(make_config(tmp_path))
    await ledger.open()
    synced: list[tuple[int, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))

    try:
        journal = await ledger._call(lambda db: db.conn.execute("PRAGMA journal_mode").fetchone()[0])
        monkeypatch.setattr(os, "fsync", fsync)
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        wal = os.stat(f"{ledger.path}-wal")
    finally:
        await ledger.aclose()
    assert journal == "wal"
    assert synced == [(wal.st_dev, wal.st_ino)]


async def test_the_default_file_ledger_fsyncs_a_commit_before_acknowledging_it(tmp_path, monkeypatch):
    ledger = build_ledger(files_config(tmp_path))
    await ledger.open()
    synced: list[tuple[int, int]] = []
    real = os.fsync

    def fsync(fd: int) -> None:
        real(fd)
        st = os.fstat(fd)
        synced.append((st.st_dev, st.st_ino))

    try:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        log = os.stat(threads_dir(tmp_path) / thread_file_name("t"))
        monkeypatch.setattr(os, "fsync", fsync)
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
    finally:
        await ledger.aclose()
    assert (log.st_dev, log.st_ino) in synced


# -- Postgres: a database that takes no writes ---------------------------------------------------


def _database_read_only(on: bool) -> None:
    """Set (or reset) ``default_transaction_read_only`` on the test database and end its sessions, so
    every new connection (the ledger's pool reconnects by itself) starts with the new default."""
    with pg_cluster.cluster().admin() as conn:
        database = sql.Identifier(pg_cluster.DATABASE)
        if on:
            conn.execute(sql.SQL("ALTER DATABASE {} SET default_transaction_read_only = on").format(database))
        else:
            conn.execute(sql.SQL("ALTER DATABASE {} RESET default_transaction_read_only").format(database))
        conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s",
                     (pg_cluster.DATABASE,))


async def test_readyz_is_503_while_the_postgres_database_is_read_only_and_200_once_it_takes_writes(tmp_path):
    """A read-only database (a hot standby after a failover, ``default_transaction_read_only``) answers
    reads: only a write tells that no run can commit."""
    async with live_server(postgres_config(tmp_path)) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        assert (await client.get("/readyz")).status_code == 200
        _database_read_only(True)
        try:
            with trio.fail_after(15):  # the pool replaces the ended sessions in the background
                while (await client.get("/readyz")).status_code != 503:
                    await trio.sleep(0.05)
            body = await not_ready(client)
            history = await client.get("/v1/ag-ui/threads/t/messages")
            refused = await post_agui(client, ask("t", "r2", "u2"))
        finally:
            _database_read_only(False)
        with trio.fail_after(15):
            while (await client.get("/readyz")).status_code != 200:
                await trio.sleep(0.05)
        again = await post_agui(client, ask("t", "r3", "u3"))
        runs = await srv.ctx.ledger.list_runs("t")
    assert "read-only" in body["error"]["message"]
    assert history.status_code == 200  # reads still answer
    assert refused_for_the_store(refused), refused
    assert types(again)[-1] == "RUN_FINISHED"
    assert [(r.run_id, r.status) for r in runs] == [("r1", RunStatus.COMPLETED), ("r3", RunStatus.COMPLETED)]
