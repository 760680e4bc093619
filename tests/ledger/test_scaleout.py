"""Several server processes on one Postgres database (issue 19 items 2-3), with real ``awaken serve``
processes on the session's throwaway cluster: one active run per thread across processes, a waiting
run resumed elsewhere, a SIGKILLed process's runs interrupted by the others once its lease lapses,
stop reaching another process, ``[server] workers``; and the embedded ledgers' refusals.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import attrs
import httpx
import pytest
import trio

from awaken.config import load_config
from awaken.engine.state import RunStatus
from awaken.http.context import ServerContext
from tests import pg_cluster
from tests.builders import agui_body, call, call_ids, free_port, held, post_agui, types, user
from tests.builders import agui_text as text_of
from tests.http.test_agui_http import read_until
from tests.http.test_agui_tools import GUARDED, tool_message
from tests.ledger.test_ledger_postgres import write_config, write_postgres_config

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

#: a lease this short lets the SIGKILL test see it lapse within seconds
LEASE_SECONDS = 1


@attrs.define
class Process:
    url: str
    proc: trio.Process


def postgres_config(path: Path, root: Path, workers: int = 1) -> Path:
    write_postgres_config(path, root)
    text = path.read_text().replace(
        f'password_env = "{pg_cluster.PASSWORD_ENV}"',
        f'password_env = "{pg_cluster.PASSWORD_ENV}", lease_seconds = {LEASE_SECONDS}')
    if workers > 1:
        text = text.replace("\nworkers = 1\n", f"\nworkers = {workers}\n", 1)
    path.write_text(text)
    return path


@asynccontextmanager
async def awaken_serve(config: Path, log: Path) -> AsyncIterator[Process]:
    """An ``awaken serve`` process on a free port, up (``/healthz`` answers); SIGTERM on exit."""
    port = free_port()
    with log.open("wb") as out:
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "awaken", "serve", "--config", str(config), "--bind", f"127.0.0.1:{port}"],
            stdout=out, stderr=subprocess.STDOUT, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            with trio.fail_after(30):
                while True:  # the process starts up: wait until it serves
                    try:
                        if (await client.get(f"{url}/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        assert proc.poll() is None, f"the server exited; see {log}"
                        await trio.sleep(0.05)
        yield Process(url, proc)
    finally:
        if proc.poll() is None:
            proc.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            await proc.wait()


async def release_on(process: Process, gate: str) -> None:
    """Open a ``/hold`` gate of ``process`` (gates are per process) with a run of its own."""
    async with httpx.AsyncClient(base_url=process.url, timeout=30) as c:
        events = await post_agui(c, agui_body(f"release-{gate}", f"release-{gate}",
                                              [user(f"release-{gate}", f"/release {gate}")]))
    assert types(events)[-1] == "RUN_FINISHED", events


def run_row(root: Path, run_id: str) -> tuple[str, str | None, str | None] | None:
    with pg_cluster.admin_in(root) as conn:
        return conn.execute("SELECT status, cause, error_message FROM runs WHERE id = %s",
                            (run_id.encode(),)).fetchone()


async def status_becomes(root: Path, run_id: str, status: str, seconds: float) -> None:
    """Wait until the run's committed status is ``status`` (another process commits it)."""
    with trio.fail_after(seconds):
        while (run_row(root, run_id) or ("",))[0] != status:
            await trio.sleep(0.05)


async def test_one_active_run_per_thread_across_processes(tmp_path: Path) -> None:
    """While a run streams on process A, input for its thread on process B is THREAD_BUSY and a rejoin
    through B streams A's run; once the run ended, B runs on the thread, and both processes show the
    same history."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        body = agui_body("t", "r-a", [user("ua", held("g", 4))])
        async with on_a.stream("POST", "/v1/ag-ui", json=body) as response:
            lines = response.aiter_lines()
            await read_until(lines, "TEXT_MESSAGE_CONTENT")
            refused = await post_agui(on_b, agui_body("t", "r-b", [user("ub", "me too")]))
            assert refused == [{"type": "RUN_ERROR", "code": "THREAD_BUSY", "message":
                                "thread 't' already has an active run on another server process; "
                                "send the next input when it ends"}]
            # rejoining through B gets A's run through the run relay (frames: tests/ledger/test_relay.py)
            async with on_b.stream("GET", "/v1/ag-ui/threads/t/stream") as elsewhere:
                assert elsewhere.status_code == 200
            await release_on(a, "g")
            await read_until(lines, "RUN_FINISHED")
        assert (await on_b.get("/v1/ag-ui/threads/t/stream")).status_code == 204  # nothing runs now
        again = await post_agui(on_b, agui_body("t", "r-b", [user("ub", "me too")]))
        assert types(again)[-1] == "RUN_FINISHED" and text_of(again) == 'You said: "me too".'
        seen = [(await c.get("/v1/ag-ui/threads/t/messages")).json()["items"] for c in (on_a, on_b)]
        assert seen[0] == seen[1] and [m["id"] for m in seen[0]][::2] == ["ua", "ub"]


async def test_a_waiting_run_started_on_one_process_is_resumed_on_another(tmp_path: Path) -> None:
    """A run waits for approval on process A; the approval sent to process B resumes and completes it."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        first = await post_agui(on_a, agui_body("t-wait", "r-wait", [user("u1", call("calculator",
                                                                                      expression="7 * 6"))]), GUARDED)
        assert types(first)[-1] == "RUN_FINISHED"
        (cid,) = call_ids(first)
        assert run_row(tmp_path, "r-wait")[0] == "waiting"  # type: ignore[index]
        items = (await on_b.get("/v1/ag-ui/threads/t-wait/messages")).json()["items"]
        events = await post_agui(on_b, agui_body("t-wait", "r-new", [*items, tool_message("ok-1", cid, "approved")]),
                                 GUARDED)
        assert text_of(events) == 'Here is what the tools said: calculator returned {"result":42}.'
        assert run_row(tmp_path, "r-wait")[0] == "completed"  # type: ignore[index]


async def test_a_killed_process_s_runs_are_interrupted_by_the_others_once_its_lease_lapses(tmp_path: Path) -> None:
    """SIGKILL process A while its run streams: process B (still serving) marks that run interrupted
    with cause owner_died once A's lease lapses, without any restart, and the thread is free again."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        body = agui_body("t-dead", "r-dead", [user("u1", held("never", 4))])
        async with on_a.stream("POST", "/v1/ag-ui", json=body) as response:
            await read_until(response.aiter_lines(), "TEXT_MESSAGE_CONTENT")
            await status_becomes(tmp_path, "r-dead", "running", 10)  # its record is written beside the delta
            a.proc.send_signal(signal.SIGKILL)
            await a.proc.wait()
        assert run_row(tmp_path, "r-dead")[0] == "running"  # type: ignore[index]
        busy = await post_agui(on_b, agui_body("t-dead", "r-b", [user("u2", "hello")]))
        assert busy[0]["code"] == "THREAD_BUSY"  # the lease has not lapsed yet: A might be alive
        # B's sweep, every third of a lease: a generous bound (a loaded 2-core CI machine), and B's log if not
        try:
            await status_becomes(tmp_path, "r-dead", "interrupted", LEASE_SECONDS * 45)
        except trio.TooSlowError:
            raise AssertionError("B never interrupted the dead process's run; its log:\n"
                                 + (tmp_path / "b.log").read_text(errors="replace")[-4000:]) from None
        assert run_row(tmp_path, "r-dead") == ("interrupted", "owner_died", "the process running it died")
        again = await post_agui(on_b, agui_body("t-dead", "r-b", [user("u2", "hello")]))
        assert types(again)[-1] == "RUN_FINISHED" and text_of(again) == 'You said: "hello".'


async def test_stop_reaches_a_run_on_another_process(tmp_path: Path) -> None:
    """``RunApplication.stop`` in one process stops the run another process streams (LISTEN/NOTIFY),
    waits until that process released the thread, and returns the committed status."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a):
        ctx = ServerContext.build(load_config(str(config)))
        await ctx.open()
        try:
            assert await ctx.app.stop("t-stop") is None  # nothing runs there
            body = agui_body("t-stop", "r-stop", [user("u1", held("never", 4))])
            async with on_a.stream("POST", "/v1/ag-ui", json=body) as response:
                lines = response.aiter_lines()
                seen = await read_until(lines, "TEXT_MESSAGE_CONTENT")
                assert await ctx.app.claims.holder("t-stop") is not None
                assert await ctx.app.stop("t-stop") is RunStatus.INTERRUPTED
                seen += [line async for line in lines if line.startswith("data: ")]
            assert "RUN_FINISHED" not in str(seen)
            assert run_row(tmp_path, "r-stop") == ("interrupted", "stopped", "stopped on request")
            assert await ctx.app.claims.holder("t-stop") is None
        finally:
            await ctx.aclose()


async def readyz(client: httpx.AsyncClient, url: str) -> httpx.Response | None:
    """``GET /readyz`` on a connection of its own; None when the connection closed before the answer (a
    worker that starts draining closes its idle connections: a client asks again)."""
    try:
        return await client.get(f"{url}/readyz", headers={"connection": "close"})
    except (httpx.RemoteProtocolError, httpx.ConnectError):
        return None


async def test_workers_run_several_processes_on_one_address(tmp_path: Path) -> None:
    """``[server] workers = 2``: two processes answer on one address (two distinct process names over
    fresh connections); SIGTERM goes from the supervisor to its workers, which drain (``/readyz`` 503
    ``SERVER_DRAINING`` while a held run still streams), a second SIGTERM goes on too and ends their
    drains (the run committed ``interrupted``, cause ``shutdown``), and the supervisor exits 0 once both
    have."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path, workers=2)
    async with awaken_serve(config, tmp_path / "w.log") as served, httpx.AsyncClient() as client:
        names: set[str] = set()
        for _ in range(400):
            response = await client.get(f"{served.url}/healthz", headers={"connection": "close"})
            names.add(response.headers["x-awaken-process"])
            if len(names) == 2:
                break
        assert len(names) == 2, names
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as on_workers:
            events = await post_agui(on_workers, agui_body("t-w", "r-w", [user("u1", "hi")]))
        assert text_of(events) == 'You said: "hi".'
        async with httpx.AsyncClient(base_url=served.url, timeout=30) as streaming, streaming.stream(
                "POST", "/v1/ag-ui", json=agui_body("t-held", "r-held", [user("u2", held("wg"))])) as response:
            lines = response.aiter_lines()
            await read_until(lines, "TEXT_MESSAGE_CONTENT")  # held after its first word
            served.proc.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                while (ready := await readyz(client, served.url)) is None or ready.status_code == 200:
                    await trio.sleep(0.05)
            assert ready.json()["error"]["code"] == "SERVER_DRAINING"
            assert served.proc.poll() is None  # the supervisor waits for its draining workers
            served.proc.send_signal(signal.SIGTERM)
            with trio.fail_after(30):
                with contextlib.suppress(httpx.RemoteProtocolError):  # the worker's connection may close first
                    async for _ in lines:  # the stream ends with the drain
                        pass
                await served.proc.wait()
    assert served.proc.returncode == 0, (tmp_path / "w.log").read_text()
    assert run_row(tmp_path, "r-held")[:2] == ("interrupted", "shutdown")
    with pg_cluster.admin_in(tmp_path) as conn:
        assert conn.execute("SELECT count(*) FROM processes").fetchone()[0] == 0  # both left cleanly


@pytest.mark.parametrize("backend", ["sqlite", "files"])
async def test_an_embedded_ledger_refuses_workers_with_one_line(tmp_path: Path, backend: str) -> None:
    config = tmp_path / "c.toml"
    write_config(config, backend, str(tmp_path / "store"))
    config.write_text(config.read_text().replace("\nworkers = 1\n", "\nworkers = 2\n", 1))
    done = await trio.run_process([sys.executable, "-m", "awaken", "serve", "--config", str(config)],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 2
    assert done.stderr.decode().splitlines() == [
        f'awaken: server.workers: 2 server processes need a ledger they can share (backend = "postgres"); '
        f"the {backend} ledger is owned by one process, so workers must be 1"]


@pytest.mark.parametrize("backend", ["sqlite", "files"])
async def test_an_embedded_ledger_refuses_a_second_process_with_one_line(tmp_path: Path, backend: str) -> None:
    config = tmp_path / "c.toml"
    write_config(config, backend, str(tmp_path / "store"))
    async with awaken_serve(config, tmp_path / "first.log"):
        done = await trio.run_process([sys.executable, "-m", "awaken", "serve", "--config", str(config),
                                       "--bind", f"127.0.0.1:{free_port()}"],
                                      capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 1
    lines = done.stderr.decode().splitlines()
    assert len(lines) == 1 and lines[0].startswith("awaken: the ledger is unavailable: ")
    assert "by another process" in lines[0]  # sqlite: "in use by", files: "locked by"
