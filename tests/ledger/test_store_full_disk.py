"""A full disk, after the fact (issue 26, finding 9): a thread whose run outcome could not be committed
answers ``STORE_UNAVAILABLE`` (not ``THREAD_BUSY``) until it is committed, and SQLite on a full disk
starts read-only and serves history.

The full disk is simulated, as in test_store_failure_files.py and test_hardening_store.py: the file
ledger's ``os.pwrite`` fails ``ENOSPC``; SQLite's connections are made (``sqlite3.connect``'s
``factory``) so that every statement that writes fails with SQLite's own ``SQLITE_FULL`` error.
"""

from __future__ import annotations

import errno
import os
import re
import sqlite3

import pytest
import trio

from awaken.engine import reconcile
from awaken.http import app as server_module
from tests.builders import (
    ask,
    held,
    live_server,
    make_config,
    open_gate,
    parse_sse,
    post_agui,
    read_until,
    types,
)


@pytest.fixture(autouse=True)
def probe_every_time(monkeypatch):  # noqa: ANN001, ANN201
    """Every ``/readyz`` probes (no cached success hides the disk freeing up)."""
    monkeypatch.setattr(server_module, "READY_CACHE_SECONDS", 0.0)


def _full(fd: int, data: bytes, offset: int) -> int:
    raise OSError(errno.ENOSPC, "No space left on device")


async def _until_free(srv, thread_id: str) -> None:  # noqa: ANN001
    """Wait until the reconciler committed the thread's late outcome (it retries with back-off)."""
    with trio.fail_after(20):
        while srv.ctx.app.active(thread_id) is not None:
            await trio.sleep(0.02)


async def test_a_thread_whose_outcome_could_not_be_committed_answers_store_unavailable_until_it_is(
        tmp_path, monkeypatch):
    """Finding 9: the next requests on the thread got ``THREAD_BUSY`` (41 times) while the store
    could not take the outcome; retrying another run's end would never help, the store has to answer."""
    monkeypatch.setattr(reconcile, "RETRY_MAX", 0.2)
    config = make_config(tmp_path, backend="files")
    async with live_server(config) as srv, srv.client() as client:
        async with client.stream("POST", "/v1/ag-ui", json=ask("t", "r1", "u1", held("t-full", 4))) as response:
            lines = response.aiter_lines()
            await read_until(lines, "TEXT_MESSAGE_CONTENT")
            assert await srv.ctx.app.active("t").started()  # its start is committed; the disk fills now
            monkeypatch.setattr(os, "pwrite", _full)
            open_gate(srv.ctx, "t-full")
            rest = [line async for line in lines if line.startswith("data: ")]
        assert '"code":"STORE_UNAVAILABLE"' in rest[-1]
        assert srv.ctx.app.active("t").outcome_refused
        again = [await post_agui(client, ask("t", f"r{n}", f"u{n}")) for n in (2, 3)]
        sdk = await client.post("/v1/ai-sdk/chat", json={
            "id": "t", "messages": [{"id": "u4", "role": "user", "parts": [{"type": "text", "text": "x"}]}]})
        stop = await client.post("/v1/threads/t/stop")
        delete = await client.delete("/v1/threads/t")
        refused_run = {"type": "RUN_ERROR", "code": "STORE_UNAVAILABLE", "message": (
            "thread 't': the outcome of run 'r1' could not be committed (the ledger is failing); the thread "
            "takes new input once it is committed: retry when /readyz is 200")}
        assert again == [[refused_run], [refused_run]]
        assert parse_sse(sdk.content) == [
            {"type": "error", "errorText": f"STORE_UNAVAILABLE: {refused_run['message']}"},
            {"type": "finish", "finishReason": "error"}, "[DONE]"]
        assert (stop.status_code, stop.json()["error"]["code"]) == (503, "STORE_UNAVAILABLE")
        assert stop.json()["error"]["message"] == (
            "thread 't': nothing runs, but the outcome of run 'r1' could not be committed yet (the ledger is failing)")
        assert (delete.status_code, delete.json()) == (503, {"error": {"code": "STORE_UNAVAILABLE", "message": (
            "thread 't': the outcome of run 'r1' could not be committed yet (the ledger is failing); retry when "
            "/readyz is 200")}})
        monkeypatch.undo()  # the disk has room again
        monkeypatch.setattr(server_module, "READY_CACHE_SECONDS", 0.0)
        await _until_free(srv, "t")
        after = await post_agui(client, ask("t", "r5", "u5"))
        runs = await srv.ctx.ledger.list_runs("t")
    assert types(after)[-1] == "RUN_FINISHED"
    assert [(r.run_id, str(r.status), r.error_code) for r in runs] == [
        ("r1", "failed", "STORE_UNAVAILABLE"), ("r5", "completed", None)]


# -- SQLite: a disk that is full when the server starts -------------------------------------------

_WRITES = re.compile(r"\s*(INSERT|UPDATE|DELETE|REPLACE|CREATE|ALTER|DROP|PRAGMA\s+user_version\s*=|"
                     r"PRAGMA\s+journal_mode\s*=)", re.IGNORECASE)


class _FullDisk(sqlite3.Connection):
    """A connection on a disk with no room: every statement that writes fails ``SQLITE_FULL``."""

    def execute(self, sql: str, *args):  # noqa: ANN002, ANN201
        if _WRITES.match(sql):
            raise sqlite3.OperationalError("database or disk is full")
        return super().execute(sql, *args)

    def executemany(self, sql: str, *args):  # noqa: ANN002, ANN201
        if _WRITES.match(sql):
            raise sqlite3.OperationalError("database or disk is full")
        return super().executemany(sql, *args)


def _disk_full(monkeypatch) -> None:  # noqa: ANN001
    real = sqlite3.connect

    def connect(*args, **kwargs):  # noqa: ANN002, ANN003, ANN202
        return real(*args, **kwargs, factory=_FullDisk)

    monkeypatch.setattr(sqlite3, "connect", connect)


async def test_sqlite_on_a_full_disk_starts_read_only_serves_history_and_takes_writes_once_it_can(
        tmp_path, monkeypatch):
    """Finding 9: SQLite refused to start on a full disk, so history could not be read until space was
    freed (the file ledger starts and serves reads). Now it starts read-only: history, listings and the
    thread answer as before; /readyz and runs say STORE_UNAVAILABLE and why; once the disk has room,
    the next probe reopens it for writing and runs commit."""
    config = make_config(tmp_path)
    async with live_server(config) as srv, srv.client() as client:
        assert types(await post_agui(client, ask("t", "r1", "u1")))[-1] == "RUN_FINISHED"
        before = (await client.get("/v1/ag-ui/threads/t/messages")).json()
        listing = (await client.get("/v1/threads")).json()
    _disk_full(monkeypatch)
    async with live_server(config) as srv, srv.client() as client:
        history = await client.get("/v1/ag-ui/threads/t/messages")
        sdk = await client.get("/v1/ai-sdk/threads/t/messages")
        threads = await client.get("/v1/threads")
        ready = await client.get("/readyz")
        refused = await post_agui(client, ask("t", "r2", "u2"))
        new = await post_agui(client, ask("t-new", "r3", "u3"))
        monkeypatch.undo()  # space is freed
        monkeypatch.setattr(server_module, "READY_CACHE_SECONDS", 0.0)
        ready_again = await client.get("/readyz")
        after = await post_agui(client, ask("t", "r4", "u4"))
        runs = await srv.ctx.ledger.list_runs("t")
    assert (history.status_code, history.json()) == (200, before)
    assert sdk.status_code == 200 and [m["id"] for m in sdk.json()["items"]][0] == "u1"
    assert (threads.status_code, threads.json()) == (200, listing)
    unwritable = ("the SQLite ledger is read-only: the disk is full (free some space): database or disk is full")
    assert (ready.status_code, ready.json()) == (503, {"error": {"code": "STORE_UNAVAILABLE", "message": unwritable}})
    for events in (refused, new):
        assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE"), events
        assert "RUN_FINISHED" not in types(events)
    assert (ready_again.status_code, ready_again.json()) == (200, {"status": "ready"})
    assert types(after)[-1] == "RUN_FINISHED"
    assert [(r.run_id, str(r.status)) for r in runs] == [("r1", "completed"), ("r4", "completed")]

