"""A published MCP server (``mcp-server-time`` from PyPI, over stdio) end to end through the real
AG-UI and AI SDK clients in ``tests/node``: ``/call time__convert_time {json}`` with the scripted model,
approved and denied at the permission gate (an MCP server's tools default to ``ask``).
"""

from __future__ import annotations

import json
import shutil
import sys
from typing import Any

import orjson
import pytest
import trio

from awaken.engine.state import RunStatus
from tests.builders import ROOT, default_config_data, make_config, squeeze
from tests.clients.test_agui_clients import PACKAGES, WAITING_RUN
from tests.clients.test_agui_clients import SCRIPT as AGUI_SCRIPT
from tests.clients.test_aisdk_client import LIBS, assert_history_matches
from tests.clients.test_aisdk_client import SCRIPT as AISDK_SCRIPT

NODE_DIR = ROOT / "tests" / "node"
CALL = '/call time__convert_time {"source_timezone": "UTC", "time": "12:00", "target_timezone": "Asia/Tokyo"}'

pytestmark = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "ai-6").is_dir(),
    reason="node and tests/node/node_modules (npm ci in tests/node) are needed for the real-client tests",
)


@pytest.fixture
def config(tmp_path):
    time_server = {"transport": "stdio", "command": sys.executable,
                   "args": ["-m", "mcp_server_time", "--local-timezone", "UTC"]}
    clock = {"description": "Converts times with the published MCP time server.", "tools": ["time__*"]}
    return make_config(tmp_path, mcp_servers={"time": time_server},
                       agents={**default_config_data()["agents"], "clock": clock})


async def node(args: list[str]) -> dict[str, Any]:
    with trio.fail_after(60):
        done = await trio.run_process(["node", *args], cwd=NODE_DIR, capture_stdout=True, capture_stderr=True,
                                      check=False)
    assert done.returncode == 0, done.stderr.decode()
    return orjson.loads(done.stdout)


def converted(text: str) -> dict[str, Any]:
    """The time server's answer to CALL, checked and reduced to what does not depend on today's date."""
    value = json.loads(text)
    assert value["source"]["timezone"] == "UTC" and value["source"]["datetime"].endswith("T12:00:00+00:00")
    assert value["target"]["timezone"] == "Asia/Tokyo" and value["target"]["datetime"].endswith("T21:00:00+09:00")
    return {"difference": value["time_difference"]}


async def test_the_time_server_lists_its_tools_as_ask(server, client):
    listing = (await client.get("/v1/agents")).json()
    tools = next(a for a in listing["agents"] if a["id"] == "clock")["tools"]
    assert [(t["name"], t["kind"], t["permission"]) for t in tools] == [
        ("time__convert_time", "mcp", "ask"), ("time__get_current_time", "mcp", "ask")]
    assert tools[0]["parameters"]["required"] == ["source_timezone", "time", "target_timezone"]


@pytest.mark.parametrize("package", PACKAGES)
async def test_agui_approve_runs_the_published_server_tool(server, package):
    thread = f"mcp-approve-{package}"
    out = await node([str(AGUI_SCRIPT), package, server.base_url, "approve", thread,
                      json.dumps({"path": "/v1/ag-ui/agents/clock", "text": CALL})])
    assert out["logs"] == [] and all("failed" not in run for run in out["runs"])
    waiting, resumed, _ = [squeeze(run["types"]) for run in out["runs"]]
    # a 1.x client is handed the gate as an interrupt, after the snapshots (docs/clients.md, "AG-UI interrupts")
    interrupt = ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT"] if package == "agui-client-1" else []
    assert waiting == [*WAITING_RUN[:-1], *interrupt, "RUN_FINISHED"]
    assert resumed[:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"] and resumed[-1] == "RUN_FINISHED"
    tool = next(m for m in out["messages"] if m["role"] == "tool" and not m["id"].startswith("tool-"))
    assert converted(tool["content"]) == {"difference": "+9.0h"}
    messages = await server.ctx.ledger.read_messages(thread, 0, 100)
    [result] = [m.tool_result for m in messages if m.role == "tool"]
    assert (result.name, result.status, result.approval) == ("time__convert_time", "ok", "approved")
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]


@pytest.mark.parametrize("package", PACKAGES)
async def test_agui_deny_keeps_the_published_server_tool_from_running(server, package):
    thread = f"mcp-deny-{package}"
    out = await node([str(AGUI_SCRIPT), package, server.base_url, "deny", thread,
                      json.dumps({"path": "/v1/ag-ui/agents/clock", "text": CALL})])
    assert out["logs"] == [] and all("failed" not in run for run in out["runs"])
    messages = await server.ctx.ledger.read_messages(thread, 0, 100)
    [result] = [m.tool_result for m in messages if m.role == "tool"]
    assert (result.content, result.status, result.approval) == (
        "denied: the user did not allow this call: the user said no", "denied", "denied")


@pytest.mark.parametrize("lib", LIBS)
async def test_aisdk_approve_runs_the_published_server_tool(server, lib):
    result = await node([str(AISDK_SCRIPT), server.base_url, "approve", lib, f"mcp-approve-{lib}", "{}",
                         json.dumps({"agent": "clock", "text": CALL})])
    assert result["status"] == "ready" and len(result["requests"]) == 2
    assistant = result["messages"][-1]
    tool = assistant["parts"][1]
    assert (tool["type"], tool["state"]) == ("tool-time__convert_time", "output-available")
    assert tool["approval"] == {"id": f"apr_{tool['toolCallId']}", "approved": True}
    output = tool["output"] if isinstance(tool["output"], str) else json.dumps(tool["output"])
    assert converted(output) == {"difference": "+9.0h"}
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_aisdk_deny_keeps_the_published_server_tool_from_running(server, lib):
    result = await node([str(AISDK_SCRIPT), server.base_url, "deny", lib, f"mcp-deny-{lib}", "{}",
                         json.dumps({"agent": "clock", "text": CALL})])
    assert result["status"] == "ready" and len(result["requests"]) == 2
    tool = result["messages"][-1]["parts"][1]
    assert (tool["type"], tool["state"]) == ("tool-time__convert_time", "output-denied")
    assert tool["approval"] == {"id": f"apr_{tool['toolCallId']}", "approved": False, "reason": "not now"}
    assert_history_matches(result)
