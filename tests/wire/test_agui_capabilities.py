"""``GET /v1/ag-ui/agents/{agentId}/capabilities``: the agent's ``AgentCapabilities``, checked field for
field and by the real ``@ag-ui/core`` 1.0.0 schema (``tests/node/agui_schema.mjs``); the streams a 1.0
client sees for an interrupt, a resume and a failure pass the same package's event schema."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.builders import agui_body, post_agui

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
needs_node = pytest.mark.skipif(
    shutil.which("node") is None or not (NODE_DIR / "node_modules" / "agui-core-1").is_dir(),
    reason="node and `npm ci` in tests/node are needed")


async def validate(schema: str, documents: list[Any]) -> list[dict[str, Any]]:
    """Each document through ``@ag-ui/core`` 1.0.0's ``schema`` (zod), as the 1.x client checks it."""
    result = await trio.run_process(["node", str(NODE_DIR / "agui_schema.mjs"), schema],
                                    stdin=json.dumps(documents).encode(), capture_stdout=True,
                                    capture_stderr=True, check=False, cwd=NODE_DIR)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)["results"]


def has_null(value: Any) -> bool:
    if value is None:
        return True
    if isinstance(value, dict):
        return any(has_null(v) for v in value.values())
    if isinstance(value, list):
        return any(has_null(v) for v in value)
    return False


async def test_capabilities_declare_what_the_agent_does(client, server):
    response = await client.get("/v1/ag-ui/agents/guarded/capabilities")
    assert response.status_code == 200
    tools = server.ctx.app.tools
    assert response.json() == {
        "identity": {"name": "guarded", "type": "awaken",
                     "description": "The same tools, each one asking a person for permission first."},
        "transport": {"streaming": True, "websocket": True, "httpBinary": False, "pushNotifications": False,
                      "resumable": False},
        "tools": {"supported": True, "parallelCalls": True, "clientProvided": True, "items": [
            {"name": name, "description": tools.get(name).description, "parameters": tools.get(name).parameters}
            for name in ("calculator", "current_time", "set_state")]},
        "state": {"snapshots": True, "deltas": True, "memory": False, "persistentState": True},
        "reasoning": {"supported": True, "streaming": True, "encrypted": False},
        "multimodal": {"input": {"image": True, "audio": False, "video": False, "pdf": False, "file": False},
                       "output": {"image": False, "audio": False}},
        "execution": {"maxIterations": 8},
        "humanInTheLoop": {"supported": True, "approvals": True, "interrupts": True, "approveWithEdits": True},
    }


async def test_a_client_tool_is_listed_with_the_agents_tools(client):
    items = (await client.get("/v1/ag-ui/agents/frontend/capabilities")).json()["tools"]["items"]
    assert [t["name"] for t in items] == ["ask_user"]


async def test_an_unknown_agent_is_404_unknown_agent(client):
    response = await client.get("/v1/ag-ui/agents/nobody/capabilities")
    assert response.status_code == 404
    assert response.json()["error"]["code"] == "UNKNOWN_AGENT"


@needs_node
@pytest.mark.slow
@pytest.mark.parametrize("agent", ["assistant", "guarded", "frontend"])
async def test_capabilities_pass_the_real_1_0_schema(client, agent):
    document = (await client.get(f"/v1/ag-ui/agents/{agent}/capabilities")).json()
    assert await validate("AgentCapabilitiesSchema", [document]) == [{"ok": True, "stripped": False}]


@needs_node
@pytest.mark.slow
async def test_1_0_interrupt_resume_and_failure_streams_pass_the_real_event_schema(client):
    """Every event a 1.0 client gets around an interrupt (snapshots, the outcome), its resume and a
    refusal passes ``EventSchema`` unchanged, and none carries a null anywhere (metadata included)."""
    text = '/call calculator {"expression": "2 + 2"}\n/call current_time {}'
    first = await post_agui(client, agui_body("t-schema", "r1", [{"id": "u1", "role": "user", "content": text}],
                                              protocolVersion="1.0"), "/v1/ag-ui/agents/guarded")
    interrupts = first[-1]["outcome"]["interrupts"]
    resume = [{"interruptId": interrupts[0]["id"], "status": "resolved", "payload": {"approved": True}},
              {"interruptId": interrupts[1]["id"], "status": "cancelled"}]
    second = await post_agui(client, agui_body("t-schema", "r2", [], protocolVersion="1.0", resume=resume),
                             "/v1/ag-ui/agents/guarded")
    again = [{**resume[0], "payload": {"approved": False}}]
    refused = await post_agui(client, agui_body("t-schema", "r3", [], protocolVersion="1.0", resume=again),
                              "/v1/ag-ui/agents/guarded")
    assert refused[0]["code"] == "INTERRUPT_ANSWERED"
    events = first + second + refused
    assert not any(has_null(e) for e in events)
    results = await validate("EventSchema", events)
    assert results == [{"ok": True, "stripped": False}] * len(events)
    assert await validate("InterruptSchema", interrupts) == [{"ok": True, "stripped": False}] * 2
    assert await validate("ResumeEntrySchema", resume) == [{"ok": True, "stripped": False}] * 2
