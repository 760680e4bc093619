"""MCP tools against real MCP servers (issue 20): the suite's own server (``tests/mcp/demo_server.py``,
written with the SDK's server API) over stdio and over streamable HTTP, driven through the AG-UI route
with the scripted model's ``/call <server>__<tool> {json}``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest
import trio

from awaken.engine.state import RunStatus
from tests.builders import (
    ROOT,
    agui_body,
    default_config_data,
    free_port,
    live_server,
    make_config,
    parse_sse,
    post_agui,
    user,
)
from tests.mcp.demo_server import PNG

DEMO = [sys.executable, "-m", "tests.mcp.demo_server"]


async def wait_until(predicate, seconds: float = 20) -> None:  # noqa: ANN001
    with trio.fail_after(seconds):
        while not predicate():
            await trio.sleep(0.02)


@asynccontextmanager
async def http_demo(log: Path, port: int | None = None) -> AsyncIterator[tuple[str, trio.Process]]:
    """The demo server over streamable HTTP on 127.0.0.1, as a child process of the test."""
    port = port or free_port()
    process = await trio.lowlevel.open_process([*DEMO, "http", str(port)], cwd=ROOT, stdout=subprocess.DEVNULL,
                                               stderr=subprocess.DEVNULL,
                                               env={**os.environ, "DEMO_CANCEL_LOG": str(log)})
    try:
        with trio.fail_after(30):
            while True:
                try:
                    stream = await trio.open_tcp_stream("127.0.0.1", port)
                except OSError:
                    await trio.sleep(0.05)
                    continue
                await stream.aclose()
                break
        yield f"http://127.0.0.1:{port}/mcp", process
    finally:
        process.kill()
        await process.wait()


def stdio_demo(log: Path, **extra: Any) -> dict[str, Any]:
    return {"transport": "stdio", "command": DEMO[0], "args": DEMO[1:], "cwd": str(ROOT),
            "env": {"DEMO_CANCEL_LOG": str(log)}, "permission": "allow", "timeout_seconds": 1.5, **extra}


def with_mcp(tmp_path: Path, servers: dict[str, Any], **agents: Any):  # noqa: ANN201
    return make_config(tmp_path, mcp_servers=servers, agents={**default_config_data()["agents"], **agents})


MCP_AGENT = {"description": "Uses the demo MCP server's tools.", "model": "scripted", "tools": ["demo__*"]}


@pytest.fixture(params=["stdio", "http"])
async def demo(request, tmp_path) -> AsyncIterator[dict[str, Any]]:
    log = tmp_path / "demo.log"
    if request.param == "stdio":
        yield stdio_demo(log)
    else:
        async with http_demo(log) as (url, _):
            yield {"transport": "http", "url": url, "permission": "allow", "timeout_seconds": 1.5}


@pytest.fixture
def config(tmp_path, demo):
    return with_mcp(tmp_path, {"demo": demo}, mcp=MCP_AGENT)


async def call(client, thread: str, text: str) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """Run the ``mcp`` agent on ``text``; the stream's events and its TOOL_CALL_RESULTs."""
    events = await post_agui(client, agui_body(thread, "r", [user("u1", text)]), "/v1/ag-ui/agents/mcp")
    return events, [e for e in events if e["type"] == "TOOL_CALL_RESULT"]


async def tool_parts(server, thread: str) -> list[tuple[str, str]]:
    messages = await server.ctx.ledger.read_messages(thread, 0, 100)
    return [(m.tool_result.content, m.tool_result.status) for m in messages if m.role == "tool"]


async def test_agents_lists_mcp_tools_with_schema_and_permission(server, client):
    listing = (await client.get("/v1/agents")).json()
    tools = {t["name"]: t for t in next(a for a in listing["agents"] if a["id"] == "mcp")["tools"]}
    assert sorted(tools) == ["demo__echo", "demo__fail", "demo__grow", "demo__image", "demo__pid",
                             "demo__report", "demo__sleep"]
    assert tools["demo__echo"] == {
        "name": "demo__echo", "description": "Return the text unchanged.", "kind": "mcp", "permission": "allow",
        "parameters": {"properties": {"text": {"title": "Text", "type": "string"}}, "required": ["text"],
                       "type": "object", "title": "echoArguments"}}


async def test_a_text_result_is_the_tool_result(server, client):
    events, results = await call(client, "t-echo", '/call demo__echo {"text": "hello, mcp"}')
    assert [r["content"] for r in results] == ["hello, mcp"]
    assert events[-1]["type"] == "RUN_FINISHED"
    assert await tool_parts(server, "t-echo") == [("hello, mcp", "ok")]


async def test_an_is_error_result_is_a_tool_error_the_model_sees(server, client):
    events, results = await call(client, "t-fail", '/call demo__fail {"message": "no luck"}')
    assert [r["content"] for r in results] == ["Error executing tool fail: no luck"]
    assert await tool_parts(server, "t-fail") == [("Error executing tool fail: no luck", "error")]
    assert events[-1]["type"] == "RUN_FINISHED"
    runs = await server.ctx.ledger.list_runs("t-fail")
    assert [r.status for r in runs] == [RunStatus.COMPLETED]


async def test_a_call_past_the_timeout_is_classified_and_cancelled(server, client, tmp_path):
    events, results = await call(client, "t-slow", '/call demo__sleep {"seconds": 30}')
    assert [r["content"] for r in results] == ["MCP_TIMEOUT: demo__sleep did not answer within 1.5 s"]
    assert events[-1]["type"] == "RUN_FINISHED"
    log = tmp_path / "demo.log"
    # the SDK sent notifications/cancelled: the server cancelled the sleeping handler
    await wait_until(lambda: "cancelled sleep 30.0" in (log.read_text() if log.exists() else ""))


async def test_an_image_result_is_summarised(server, client):
    _, results = await call(client, "t-img", "/call demo__image {}")
    assert [r["content"] for r in results] == [f"[image: image/png, {len(PNG)} bytes]"]


async def test_an_embedded_resource_keeps_its_text(server, client):
    _, results = await call(client, "t-res", "/call demo__report {}")
    assert [r["content"] for r in results] == [
        "see the attached report\n[resource: file:///report.txt]\nall systems nominal"]


async def test_arguments_are_validated_against_the_tool_schema(server, client, tmp_path):
    _, results = await call(client, "t-args", '/call demo__sleep {"seconds": "long"}')
    assert [r["content"] for r in results] == ["invalid arguments: seconds: 'long' is not of type 'number'"]
    assert not (tmp_path / "demo.log").exists()  # the server was never called


async def test_a_changed_tool_list_is_followed(server, client):
    assert "demo__extra_x" not in server.ctx.app.tools
    _, results = await call(client, "t-grow", '/call demo__grow {"name": "x"}')
    assert [r["content"] for r in results] == ["added extra_x"]
    await wait_until(lambda: "demo__extra_x" in server.ctx.app.tools)
    _, results = await call(client, "t-extra", "/call demo__extra_x {}")
    assert [r["content"] for r in results] == ["x"]
    listing = (await client.get("/v1/agents")).json()
    names = [t["name"] for a in listing["agents"] if a["id"] == "mcp" for t in a["tools"]]
    assert "demo__extra_x" in names


def alive(pid: int) -> bool:
    """Whether a process with this pid exists (a zombie counts: it was never reaped)."""
    return Path(f"/proc/{pid}").exists()


@pytest.mark.parametrize("demo", ["stdio"], indirect=True)
async def test_a_dead_stdio_server_is_restarted(server, client):
    _, results = await call(client, "t-pid1", "/call demo__pid {}")
    first = int(results[0]["content"])
    connection = server.ctx.mcp.connections["demo"]
    assert connection.connects == 1
    os.kill(first, signal.SIGKILL)
    await wait_until(lambda: connection.connects == 2)
    _, results = await call(client, "t-pid2", "/call demo__pid {}")
    second = int(results[0]["content"])
    assert second != first and alive(second)
    await wait_until(lambda: not alive(first))  # the dead child was reaped, not left a zombie


async def test_no_stdio_child_survives_shutdown(tmp_path):
    config = with_mcp(tmp_path, {"demo": stdio_demo(tmp_path / "demo.log"),
                                 "other": stdio_demo(tmp_path / "other.log")},
                      mcp={**MCP_AGENT, "tools": ["demo__*", "other__pid"]})
    async with live_server(config) as server, server.client() as client:
        pids = []
        for tool in ("demo__pid", "other__pid"):
            _, results = await call(client, f"t-{tool}", f"/call {tool} {{}}")
            pids.append(int(results[0]["content"]))
        assert all(alive(p) for p in pids)
    assert [alive(p) for p in pids] == [False, False]


async def test_a_disconnect_mid_call_cancels_it_and_interrupts_the_run(tmp_path, demo):
    log = tmp_path / "demo.log"
    config = with_mcp(tmp_path, {"demo": {**demo, "timeout_seconds": 60}}, mcp=MCP_AGENT)
    async with live_server(config) as server, server.client() as client:
        body = agui_body("t-cut", "r", [user("u1", '/call demo__sleep {"seconds": 45}')])
        async with client.stream("POST", "/v1/ag-ui/agents/mcp", json=body) as response:
            async for _ in response.aiter_lines():
                if "started sleep 45.0" in (log.read_text() if log.exists() else ""):
                    break  # the call is running in the MCP server
                await trio.sleep(0.02)
            await wait_until(lambda: "started sleep 45.0" in (log.read_text() if log.exists() else ""))
        # the connection is closed: the run is cancelled, the SDK sends notifications/cancelled
        await wait_until(lambda: "cancelled sleep 45.0" in log.read_text())
        with trio.fail_after(10):
            while not (runs := await server.ctx.ledger.list_runs("t-cut")) or runs[0].status is RunStatus.RUNNING:
                await trio.sleep(0.02)
        assert [r.status for r in runs] == [RunStatus.INTERRUPTED]


async def test_a_stop_mid_call_cancels_it_and_commits_the_run_interrupted_stopped(tmp_path, demo):
    log = tmp_path / "demo.log"
    config = with_mcp(tmp_path, {"demo": {**demo, "timeout_seconds": 60}}, mcp=MCP_AGENT)
    async with live_server(config) as server, server.client() as client:
        body = agui_body("t-stop", "r-stop", [user("u1", '/call demo__sleep {"seconds": 45}')])
        async with client.stream("POST", "/v1/ag-ui/agents/mcp", json=body) as response:
            await wait_until(lambda: "started sleep 45.0" in (log.read_text() if log.exists() else ""))
            stopped = await client.post("/v1/threads/t-stop/stop")  # the call is running in the MCP server
            events = parse_sse(await response.aread())
        assert (stopped.status_code, stopped.json()) == (200, {"runId": "r-stop", "status": "interrupted"})
        # the stop cancelled the call: the SDK sent notifications/cancelled and the handler saw it
        await wait_until(lambda: "cancelled sleep 45.0" in log.read_text())
        runs = await server.ctx.ledger.list_runs("t-stop")
    assert [(r.status, r.cause) for r in runs] == [(RunStatus.INTERRUPTED, "stopped")]
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "STOPPED"
    assert "TOOL_CALL_RESULT" not in [e["type"] for e in events]


@pytest.mark.parametrize("demo", ["http"], indirect=True)
async def test_an_http_session_reconnects(tmp_path, demo):
    log = tmp_path / "demo.log"
    port = int(demo["url"].split(":")[2].split("/")[0])
    config = with_mcp(tmp_path, {"demo": demo}, mcp=MCP_AGENT)
    async with live_server(config) as server, server.client() as client:
        connection = server.ctx.mcp.connections["demo"]
        _, results = await call(client, "t-h1", "/call demo__pid {}")
        os.kill(int(results[0]["content"]), signal.SIGKILL)
        _, results = await call(client, "t-h2", '/call demo__echo {"text": "anyone?"}')
        assert [r["content"] for r in results] == [
            "MCP_UNAVAILABLE: the MCP server 'demo' closed the connection during the call"]
        async with http_demo(log, port) as (_, fresh):
            await wait_until(lambda: connection.connects == 2, 30)
            _, results = await call(client, "t-h3", '/call demo__echo {"text": "back"}')
            assert [r["content"] for r in results] == ["back"]


async def test_a_server_that_cannot_start_offers_no_tools_and_start_up_goes_on(tmp_path):
    config = with_mcp(tmp_path, {"broken": {"transport": "stdio", "command": str(tmp_path / "no-such-program")}},
                      mcp={**MCP_AGENT, "tools": ["calculator", "broken__*"]})
    async with live_server(config) as server, server.client() as client:
        listing = (await client.get("/v1/agents")).json()
        assert [t["name"] for a in listing["agents"] if a["id"] == "mcp" for t in a["tools"]] == ["calculator"]
        response = await client.post("/v1/ag-ui/agents/mcp",
                                      json=agui_body("t-b", "r", [user("u1", "/call broken__anything {}")]))
        results = [e for e in parse_sse(response.content) if e["type"] == "TOOL_CALL_RESULT"]
        assert [r["content"] for r in results] == ["unknown tool 'broken__anything'"]
