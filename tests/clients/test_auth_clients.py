"""The real clients with authentication on: ``HttpAgent``'s and ``useChat``'s transport ``headers``.

A live server in ``[auth] mode = "tokens"``; ``tests/node/agui_client.mjs`` (``@ag-ui/client`` 1.x
``HttpAgent``) and ``tests/node/aisdk_client.mjs`` (``ai@6`` ``DefaultChatTransport``, as ``useChat``
uses it) are given ``{Authorization: "Bearer <key>"}`` and run whole flows; the same flows without the
header are refused 401 and commit nothing.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.builders import live_server, make_config, parse_sse

NODE_DIR = Path(__file__).resolve().parents[1] / "node"

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]  # real client libraries in Node
KEY = "client-key-0123456789abcdef"
AUTH = {"Authorization": f"Bearer {KEY}"}


@pytest.fixture
async def keyed_server(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_CLIENT_KEY", KEY)
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": [
        {"name": "web", "env": "AWAKEN_TEST_CLIENT_KEY", "role": "user", "subject": "alice"}]})
    async with live_server(config) as srv:
        yield srv


async def node(*args: str) -> dict[str, Any]:
    with trio.fail_after(60):
        done = await trio.run_process(["node", *args], cwd=NODE_DIR, capture_stdout=True,
                                      capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    return json.loads(done.stdout)


async def test_http_agent_with_an_authorization_header_runs_a_server_tool(keyed_server):
    out = await node("agui_client.mjs", "agui-client-1", keyed_server.base_url, "server_tool", "t-agui-auth",
                     json.dumps({"headers": AUTH}))
    assert out["logs"] == []
    assert [run.get("failed") for run in out["runs"]] == [None, None]
    assert [run["types"][-1] for run in out["runs"]] == ["RUN_FINISHED", "RUN_FINISHED"]
    async with keyed_server.client() as client:
        history = await client.get("/v1/ag-ui/threads/t-agui-auth/messages", headers=AUTH)
    assert [m["id"] for m in history.json()["items"]] == [m["id"] for m in out["messages"]]


async def test_http_agent_without_the_header_is_refused_401(keyed_server):
    out = await node("agui_client.mjs", "agui-client-1", keyed_server.base_url, "multiturn", "t-agui-noauth")
    assert len(out["runs"]) == 3
    assert all("401" in run["failed"] for run in out["runs"])
    async with keyed_server.client() as client:
        history = await client.get("/v1/ag-ui/threads/t-agui-noauth/messages", headers=AUTH)
    assert history.status_code == 404


async def test_use_chat_transport_headers_run_an_approval_and_read_history(keyed_server):
    out = await node("aisdk_client.mjs", keyed_server.base_url, "approve", "ai-6", "t-sdk-auth", json.dumps(AUTH))
    assert (out["status"], out["error"]) == ("ready", None)
    assert len(out["requests"]) == 2
    for request in out["requests"]:
        assert parse_sse(request["sse"])[-1] == "[DONE]"
    assert out["history"]["status"] == 200
    assert [m["id"] for m in out["history"]["items"]] == [m["id"] for m in out["messages"]]


async def test_use_chat_without_headers_is_a_chat_error(keyed_server):
    out = await node("aisdk_client.mjs", keyed_server.base_url, "text", "ai-6", "t-sdk-noauth")
    assert out["status"] == "error"
    assert "UNAUTHENTICATED" in out["error"]
    assert out["history"]["status"] == 401
