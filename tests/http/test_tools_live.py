"""Tools in a live run (issue 31 item 1, docs/tools.md): the context says who asks and where; progress
reaches the clients of both wires while the tool runs; a stop or a disconnect cancels a waiting tool,
and the run commits its outcome. ``[auth] mode = "tokens"`` so that the caller has a subject."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
import trio
import trio.testing

from awaken.engine.state import RunStatus
from tests.builders import agui_body, bearer, live_server, make_config, parse_sse, types, user
from tests.plugins import toolkit

KEY = "alice-key-0123456789abcdef"
TOOLS = ["whoami", "count_up", "wait_here", "block_here"]


@pytest.fixture
async def server(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_ALICE_KEY", KEY)
    toolkit.reset_waiting()
    toolkit.reset_blocking()
    config = make_config(
        tmp_path,
        auth={"mode": "tokens", "tokens": [{"name": "alice", "env": "AWAKEN_TEST_ALICE_KEY", "role": "user",
                                            "subject": "alice"}]},
        tools={"plugins": [f"tests.plugins.toolkit:{name}" for name in TOOLS]},
        agents={"assistant": {"tools": TOOLS, "on_disconnect": "cancel"}},
    )
    async with live_server(config) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with server.client(headers=bearer(KEY)) as c:
        yield c


async def agui(client: httpx.AsyncClient, thread_id: str, text: str) -> list[dict[str, Any]]:
    response = await client.post("/v1/ag-ui", json=agui_body(thread_id, f"r-{thread_id}", [user("u1", text)]))
    assert response.status_code == 200, response.text
    return parse_sse(response.content)


def chat_request(thread_id: str, text: str) -> dict[str, Any]:
    return {"id": thread_id, "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": text}]}]}


async def test_a_tool_knows_who_asks_on_which_thread_and_run(client):
    events = await agui(client, "who", '/call whoami {}')
    call_id = next(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert json.loads(result["content"]) == {"subject": "alice", "role": "user", "thread": "who", "run": "r-who",
                                             "call": call_id, "state": []}


async def test_agui_clients_see_progress_as_custom_events_of_the_call(client):
    events = await agui(client, "count-agui", '/call count_up {"to": 2}')
    call_id = next(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    end = types(events).index("TOOL_CALL_END")
    assert events[end + 1:end + 4] == [
        {"type": "CUSTOM", "name": "tool_progress", "value": {"toolCallId": call_id, "toolName": "count_up",
                                                               "data": {"counted": 1}}},
        {"type": "CUSTOM", "name": "tool_progress", "value": {"toolCallId": call_id, "toolName": "count_up",
                                                               "data": {"counted": 2}}},
        {"type": "TOOL_CALL_RESULT", "messageId": f"tr_{call_id}", "toolCallId": call_id, "content": '{"done":2}',
         "role": "tool"},
    ]


async def test_ai_sdk_clients_see_progress_as_preliminary_outputs_the_result_replaces(client):
    response = await client.post("/v1/ai-sdk/chat", json=chat_request("count-sdk", '/call count_up {"to": 2}'))
    chunks = [c for c in parse_sse(response.content) if isinstance(c, dict)]
    call_id = next(c["toolCallId"] for c in chunks if c["type"] == "tool-input-start")
    outputs = [c for c in chunks if c["type"] == "tool-output-available"]
    assert outputs == [
        {"type": "tool-output-available", "toolCallId": call_id, "output": {"counted": 1}, "preliminary": True},
        {"type": "tool-output-available", "toolCallId": call_id, "output": {"counted": 2}, "preliminary": True},
        {"type": "tool-output-available", "toolCallId": call_id, "output": {"done": 2}},
    ]
    available = next(i for i, c in enumerate(chunks) if c["type"] == "tool-input-available")
    assert chunks.index(outputs[0]) == available + 1


async def _wait_until_the_tool_waits() -> None:
    with trio.fail_after(10):
        await toolkit.waiting["started"].wait()


async def test_a_stop_cancels_a_waiting_tool_and_the_run_commits_its_outcome(client, server):
    result: dict[str, Any] = {}

    async def run() -> None:
        result["events"] = await agui(client, "stop-tool", "/call wait_here {}")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        await _wait_until_the_tool_waits()
        response = await client.post("/v1/threads/stop-tool/stop")
        assert response.json() == {"runId": "r-stop-tool", "status": "interrupted"}
    assert toolkit.waiting["cancelled"] is True
    record = await server.ctx.ledger.get_run("r-stop-tool")
    assert (record.status, record.cause) == (RunStatus.INTERRUPTED, "stopped")
    assert result["events"][-1]["type"] == "RUN_ERROR" and result["events"][-1]["code"] == "STOPPED"
    assert "TOOL_CALL_RESULT" not in types(result["events"])
    assert not server.ctx.app.is_active("stop-tool")


async def test_a_disconnect_cancels_a_waiting_tool_and_the_run_commits_its_outcome(client, server):
    async with trio.open_nursery() as nursery:
        scope = trio.CancelScope()

        async def run() -> None:
            with scope:
                async with client.stream("POST", "/v1/ai-sdk/chat", json=chat_request("gone-tool", "/call wait_here {}")) as r:
                    async for _ in r.aiter_bytes():
                        pass

        nursery.start_soon(run)
        await _wait_until_the_tool_waits()
        scope.cancel()  # the client goes away mid-tool
    with trio.fail_after(10):
        while server.ctx.app.is_active("gone-tool"):
            await trio.sleep(0.01)
    assert toolkit.waiting["cancelled"] is True
    runs = await server.ctx.ledger.list_runs("gone-tool")
    assert [(r.status, r.cause) for r in runs] == [(RunStatus.INTERRUPTED, "client_gone")]


async def test_a_stop_abandons_a_sync_tool_blocked_in_its_thread_and_the_run_ends_at_once(client, server):
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agui, client, "stop-sync", "/call block_here {}")
        with trio.fail_after(10):
            await trio.to_thread.run_sync(toolkit.blocking["started"].wait)
        response = await client.post("/v1/threads/stop-sync/stop")
        assert response.json() == {"runId": "r-stop-sync", "status": "interrupted"}
        assert not toolkit.blocking["returned"].is_set()  # the thread still blocks: the run did not wait for it
    toolkit.blocking["release"].set()
    with trio.fail_after(10):
        await trio.to_thread.run_sync(toolkit.blocking["returned"].wait)  # its late return changes nothing
    await trio.testing.wait_all_tasks_blocked()
    record = await server.ctx.ledger.get_run("r-stop-sync")
    assert (record.status, record.cause) == (RunStatus.INTERRUPTED, "stopped")
    history = (await client.get("/v1/ag-ui/threads/stop-sync/messages")).json()["items"]
    assert [m["role"] for m in history if m["role"] == "tool"] == []  # no result was committed for it
