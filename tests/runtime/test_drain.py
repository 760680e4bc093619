"""Graceful drain (docs/deploying.md): on SIGTERM or SIGINT ``/readyz`` answers 503 ``SERVER_DRAINING`` at
once, new runs are refused with that code (and ``Retry-After``), the runs in progress get ``[server]
drain_seconds`` to end or reach a step boundary and are then committed (``interrupted``, cause
``shutdown``), their streams end at their last position, and the process exits 0; a restarted server
on the same ledger shows the committed outcome to a client that rejoins.

Runs are held by the scripted model's ``/hold`` and the ``gate`` test tool: no timing windows. A
second signal cuts the drain short, which is how the real-process test ends a drain whose runs are
held on purpose. That test also reads the server's log: hypercorn's "Running on" line is there once,
and so is the warning about an API key variable that is not set.
"""

from __future__ import annotations

import functools
import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from awaken.engine.state import Cause, RunStatus
from tests.builders import (
    ROOT,
    agui_body,
    aisdk_user,
    default_config_data,
    frames_of,
    free_port,
    live_server,
    make_config,
    open_gate,
    parse_sse,
    user,
)
from tests.plugins import gate

GATE = '/call gate {"name": "%s"}'


# -- a real server process ------------------------------------------------------------------------------


def _config_file(tmp_path: Path) -> Path:
    text = (ROOT / "config.toml").read_text().replace("./var/awaken.db", str(tmp_path / "awaken.db"))
    # hypercorn's graceful timeout starts after the drain: a short one cuts no stream the drain still serves
    text = text.replace("\ngraceful_timeout = 2.0\n", "\ngraceful_timeout = 0.1\n", 1)
    assert "\ngraceful_timeout = 0.1\n" in text
    cfg = tmp_path / "config.toml"
    cfg.write_text(text + '\n[agents.detached]\nmodel = "scripted"\non_disconnect = "continue"\n'
                   # two agents on a provider whose key variable is unset: start-up says so, once
                   '\n[agents.hosted]\nmodel = "openai:some-model"\nprovider = {api_key_env = "AWAKEN_TEST_UNSET_KEY"}\n'
                   '\n[agents.hosted2]\nmodel = "openai:some-model"\nprovider = {api_key_env = "AWAKEN_TEST_UNSET_KEY"}\n')
    return cfg


def _text(log: Path) -> str:
    return log.read_text()


async def _start(cfg: Path, port: int, log: Path) -> trio.Process:
    with log.open("ab") as out:  # the child holds its own copy
        proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "awaken", "serve", "--config", str(cfg), "--bind", f"127.0.0.1:{port}"],
            stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                env={k: v for k, v in {**os.environ, "PYTHONUNBUFFERED": "1"}.items() if k != "AWAKEN_TEST_UNSET_KEY"})
    async with httpx.AsyncClient() as client:
        with trio.fail_after(30):
            while True:
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        return proc
                except httpx.TransportError:
                    pass
                assert proc.poll() is None, _text(log)
                await trio.sleep(0.1)


class Stream:
    """One run's SSE response read to its end in the background: its raw frames, and an event set once
    the first text delta arrived (the run is then held at its ``/hold`` gate)."""

    def __init__(self) -> None:
        self.raw = b""
        self.delta = trio.Event()
        self.ended = trio.Event()

    async def read(self, client: httpx.AsyncClient, path: str, body: dict[str, Any], marker: bytes) -> None:
        async with client.stream("POST", path, json=body) as response:
            assert response.status_code == 200
            try:
                async for chunk in response.aiter_bytes():
                    self.raw += chunk
                    if marker in self.raw:
                        self.delta.set()
            except httpx.RemoteProtocolError:
                pass  # the connection closed with the stream's end
        self.ended.set()

    def frames(self) -> list[tuple[str | None, Any]]:
        return frames_of(self.raw)


async def _refused(client: httpx.AsyncClient, path: str, body: dict[str, Any]) -> tuple[httpx.Response, list[Any]]:
    response = await client.post(path, json=body)
    return response, parse_sse(response.content)


@pytest.mark.slow
async def test_sigterm_drains_both_wires_and_a_restart_shows_the_committed_outcome(tmp_path):
    cfg, port, log = _config_file(tmp_path), free_port(), tmp_path / "server.log"
    base = f"http://127.0.0.1:{port}"
    proc = await _start(cfg, port, log)
    try:
        position = await _drain_both_wires(proc, base, log)
    finally:
        if proc.poll() is None:
            proc.kill()
    proc = await _start(cfg, port, log)
    try:
        await _restarted(base, position)
    finally:
        proc.send_signal(signal.SIGINT)  # SIGINT drains as SIGTERM does; nothing in progress: it ends at once
        with trio.fail_after(30):
            assert await proc.wait() == 0, _text(log)
        assert _text(log).count("awaken: draining: no new runs; 0 in progress") == 1


async def _drain_both_wires(proc: trio.Process, base: str, log: Path) -> str:
    """Two held runs (AG-UI, AI SDK), SIGTERM, the drain's promises, a second SIGTERM: the AG-UI
    stream's last position."""
    agui, aisdk = Stream(), Stream()
    async with httpx.AsyncClient(base_url=base, timeout=30) as client, trio.open_nursery() as nursery:
        nursery.start_soon(agui.read, client, "/v1/ag-ui/agents/detached",
                           agui_body("t-agui", "r-agui", [user("u-agui", "/hold g1\n/words 5")]),
                           b"TEXT_MESSAGE_CONTENT")
        nursery.start_soon(aisdk.read, client, "/v1/ai-sdk/agents/detached/chat",
                           {"id": "t-aisdk", "messages": [aisdk_user("u-aisdk", "/hold g2\n/words 5")]},
                           b'"text-delta"')
        with trio.fail_after(30):
            await agui.delta.wait()
            await aisdk.delta.wait()

        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(30):  # until the signal is handled: then 503 at once, not after the drain
            while (ready := await client.get("/readyz")).status_code == 200:
                await trio.sleep(0.05)
        assert ready.status_code == 503
        assert ready.json()["error"]["code"] == "SERVER_DRAINING"
        assert ready.headers["retry-after"] == "5"

        # new runs are refused with the code on both wires, nothing started
        response, events = await _refused(client, "/v1/ag-ui", agui_body("t-new", "r-new", [user("u-new", "hi")]))
        assert response.headers["retry-after"] == "5"
        assert [(e["type"], e.get("code")) for e in events] == [("RUN_ERROR", "SERVER_DRAINING")]
        response, chunks = await _refused(client, "/v1/ai-sdk/chat", {"id": "t-new2", "messages": [aisdk_user("u2")]})
        assert response.headers["retry-after"] == "5"
        assert [c for c in chunks if isinstance(c, dict) and c["type"] == "error"][0]["errorText"].startswith(
            "SERVER_DRAINING")
        assert not agui.ended.is_set() and not aisdk.ended.is_set()  # the held runs still stream

        proc.send_signal(signal.SIGTERM)  # a second signal: stop the held runs now
        with trio.fail_after(30):
            await agui.ended.wait()
            await aisdk.ended.wait()
            assert await proc.wait() == 0, _text(log)

    # the streams ended at a position, with no terminal event: a client rejoins from there
    agui_frames = agui.frames()
    assert all(pos is not None for pos, _ in agui_frames)
    assert agui_frames[-1][1]["type"] == "TEXT_MESSAGE_CONTENT"
    aisdk_frames = aisdk.frames()
    assert all(pos is not None for pos, _ in aisdk_frames)
    assert aisdk_frames[-1][1]["type"] == "text-delta"
    output = _text(log)
    assert output.count("awaken: draining: no new runs; 2 in progress") == 1, output
    assert output.count("Running on http://") == 1, output  # hypercorn's line, through one handler
    assert output.count("$AWAKEN_TEST_UNSET_KEY is not set: agents hosted, hosted2 call the model without an "
                        "API key") == 1, output

    return agui_frames[-1][0]


async def _restarted(base: str, position: str) -> None:
    """The server restarted on the same ledger: nothing runs, and history and the runs say what the
    drain committed."""
    async with httpx.AsyncClient(base_url=base, timeout=30) as client:
        rejoin = await client.get("/v1/ag-ui/threads/t-agui/stream", headers={"last-event-id": position})
        assert rejoin.status_code == 204
        assert (await client.get("/v1/ai-sdk/chat/t-aisdk/stream")).status_code == 204
        for thread, message, protocol in (("t-agui", "u-agui", "ag-ui"), ("t-aisdk", "u-aisdk", "ai-sdk")):
            detail = (await client.get(f"/v1/threads/{thread}")).json()
            assert [(r["status"], r["cause"]) for r in detail["runs"]] == [("interrupted", "shutdown")]
            items = (await client.get(f"/v1/{protocol}/threads/{thread}/messages")).json()["items"]
            assert items[0]["id"] == message  # the acknowledged message is kept
            # and the answer the client had read, marked as cut off by the shutdown
            assert [(m["role"], m["metadata"]["incomplete"]) for m in items[1:]] == [("assistant", "shutdown")]
        assert (await client.get("/v1/threads/t-new")).status_code == 404  # the refused run left nothing
        assert (await client.get("/readyz")).status_code == 200


# -- the drain itself (in process) ----------------------------------------------------------------------


@pytest.fixture(autouse=True)
def fresh_gates():
    gate.reset()
    yield
    gate.reset()


def _gate_config(tmp_path: Path, **server: Any):
    agents = default_config_data()["agents"]
    agents["detached"] = {"model": "scripted", "tools": ["gate"], "on_disconnect": "continue"}
    data = default_config_data()["server"]
    data.update(server)
    return make_config(tmp_path, agents=agents, tools={"plugins": ["tests.plugins.gate:gate"]}, server=data)


async def _detach(client: httpx.AsyncClient, thread: str, text: str, ctx: Any) -> None:
    """Start a run of ``detached`` and leave once it is active: it runs on without its client."""
    async with client.stream("POST", "/v1/ag-ui/agents/detached",
                             json=agui_body(thread, f"r-{thread}", [user(f"u-{thread}", text)])) as response:
        async for chunk in response.aiter_bytes():
            if b"TOOL_CALL_END" in chunk or b"TEXT_MESSAGE_CONTENT" in chunk:
                break
    with trio.fail_after(10):
        while not ctx.app.is_active(thread):
            await trio.sleep(0.01)


async def _start_drain(nursery: trio.Nursery, ctx: Any) -> None:
    nursery.start_soon(ctx.app.drain, 60.0)
    while not ctx.app.draining:
        await trio.lowlevel.checkpoint()


async def test_a_draining_run_stops_at_its_next_step_boundary_with_that_step_committed(tmp_path):
    async with live_server(_gate_config(tmp_path)) as server, server.client() as client:
        ctx = server.ctx
        await _detach(client, "t1", GATE % "g1", ctx)
        async with trio.open_nursery() as nursery:
            await _start_drain(nursery, ctx)
            assert (await client.get("/readyz")).status_code == 503
            gate.open_gate("g1")  # the tool returns: step 1 is committed, and the run stops before step 2
        run = (await ctx.ledger.list_runs("t1"))[0]
        assert (run.status, run.cause) == (RunStatus.INTERRUPTED, Cause.SHUTDOWN.value)
        assert run.steps == 1
        messages = await ctx.ledger.read_messages("t1", 0, 100)
        assert [m.role for m in messages][:3] == ["user", "assistant", "tool"]
        assert messages[2].tool_result is not None and messages[2].tool_result.status == "ok"


async def test_a_run_still_held_when_drain_seconds_run_out_is_interrupted_for_shutdown(tmp_path):
    async with live_server(_gate_config(tmp_path, drain_seconds=0.2)) as server, server.client() as client:
        ctx = server.ctx
        await _detach(client, "t2", GATE % "never", ctx)
        await ctx.app.drain(ctx.config.server.drain_seconds)
        assert not ctx.app.is_active("t2")
        run = (await ctx.ledger.list_runs("t2"))[0]
        assert (run.status, run.cause) == (RunStatus.INTERRUPTED, Cause.SHUTDOWN.value)


async def test_a_run_that_starts_waiting_during_the_drain_keeps_waiting(tmp_path):
    """A run whose step ends at a permission gate during the drain is committed ``waiting``, not
    interrupted: a decision after the restart resumes it."""
    async with live_server(_gate_config(tmp_path)) as server, server.client() as client:
        ctx = server.ctx
        async with trio.open_nursery() as nursery:
            body = agui_body("t3", "r3", [user("u3", '/hold g3\n/think hmm\n/call calculator {"expression": "1+1"}')])
            nursery.start_soon(functools.partial(client.post, "/v1/ag-ui/agents/guarded", json=body))
            with trio.fail_after(10):
                while not ctx.app.is_active("t3"):
                    await trio.sleep(0.01)
            await _start_drain(nursery, ctx)
            open_gate(ctx, "g3")  # the step streams on to its gated call
        run = (await ctx.ledger.list_runs("t3"))[0]
        assert (run.status, run.cause) == (RunStatus.WAITING, None)
        assert [p.name for p in await ctx.ledger.pending_calls("t3")] == ["calculator"]
