"""Detached runs over WebSocket (issue 16 items 2 and 6).

A WebSocket event message is exactly the SSE ``data:`` payload and carries no position (see
awaken/transports/ws.py): a socket client that loses its socket rejoins the run over the SSE rejoin
route, from the run's start. These tests hold the run with the scripted model's ``/hold``.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from trio_websocket import open_websocket_url

from awaken.engine.state import RunStatus
from tests.builders import (
    agui_body,
    default_config_data,
    frames_of,
    held,
    live_server,
    make_config,
    post_agui,
    release,
    wait_for_status,
    watchers_gone,
    ws_url,
)

WORDS = 10


@pytest.fixture
async def server(tmp_path):
    agents = default_config_data()["agents"]
    agents["detached"] = dict(agents["assistant"], on_disconnect="continue")
    async with live_server(make_config(tmp_path, agents=agents)) as srv:
        yield srv


async def first_events_then_close(server, thread: str) -> list[dict[str, Any]]:  # noqa: ANN001
    """Start a held run on the ``continue`` agent over a socket, read to its first text, close the socket."""
    seen: list[dict[str, Any]] = []
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/agents/detached/ws")) as ws:
        body = agui_body(thread, f"run-{thread}", [{"id": "u1", "role": "user", "content": held(thread, WORDS)}])
        await ws.send_message(orjson.dumps(body).decode())
        while not seen or seen[-1]["type"] != "TEXT_MESSAGE_CONTENT":
            seen.append(orjson.loads(await ws.get_message()))
    return seen


async def test_a_continue_agents_run_outlives_its_socket_and_commits_its_outcome(server):
    await first_events_then_close(server, "ws-cont")
    await watchers_gone(server, "ws-cont")  # the server has handled the closed socket
    assert server.ctx.app.is_active("ws-cont")
    await release(server, "ws-cont")
    await wait_for_status(server.ctx.ledger, "ws-cont", RunStatus.COMPLETED)


async def test_a_socket_clients_run_is_rejoined_over_sse_from_its_start(server):
    seen = await first_events_then_close(server, "ws-rejoin")
    await watchers_gone(server, "ws-rejoin")
    async with server.client() as client, client.stream("GET", "/v1/ag-ui/threads/ws-rejoin/stream") as rejoined:
        assert rejoined.status_code == 200
        await release(server, "ws-rejoin")
        frames = frames_of(await rejoined.aread())
    events = [payload for _, payload in frames]
    assert events[: len(seen)] == seen  # the socket's messages are the SSE payloads, from the run's start
    assert events[-1]["type"] == "RUN_FINISHED"
    history = (await server.ctx.ledger.thread_view("ws-rejoin")).messages
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert len(text.split()) == WORDS and history[-1].role == "assistant"
    await wait_for_status(server.ctx.ledger, "ws-rejoin", RunStatus.COMPLETED)


async def test_with_auth_on_a_socket_users_detached_run_is_rejoined_by_its_owner_only(tmp_path, monkeypatch):
    """Tokens on: alice's run started over a socket (bearer subprotocol) outlives the socket; bob's
    rejoin answers 204 as for an idle thread, alice's streams it to its end."""
    keys = {"AWAKEN_TEST_ALICE_KEY": "alice-key-0123456789abcdef", "AWAKEN_TEST_BOB_KEY": "bob-key-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    tokens = [{"name": "alice", "env": "AWAKEN_TEST_ALICE_KEY", "role": "user", "subject": "alice"},
              {"name": "bob", "env": "AWAKEN_TEST_BOB_KEY", "role": "user", "subject": "bob"}]
    agents = default_config_data()["agents"]
    agents["detached"] = dict(agents["assistant"], on_disconnect="continue")
    config = make_config(tmp_path, agents=agents, auth={"mode": "tokens", "tokens": tokens})
    alice_auth = {"authorization": f"Bearer {keys['AWAKEN_TEST_ALICE_KEY']}"}
    async with live_server(config) as server:
        seen: list[dict[str, Any]] = []
        async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/agents/detached/ws"),
                                      subprotocols=["awaken.v1", f"bearer.{keys['AWAKEN_TEST_ALICE_KEY']}"]) as ws:
            body = agui_body("ws-auth", "run-ws-auth", [{"id": "u1", "role": "user", "content": held("ws-auth", WORDS)}])
            await ws.send_message(orjson.dumps(body).decode())
            while not seen or seen[-1]["type"] != "TEXT_MESSAGE_CONTENT":
                seen.append(orjson.loads(await ws.get_message()))
        await watchers_gone(server, "ws-auth")
        assert server.ctx.app.is_active("ws-auth")
        async with server.client(headers={"authorization": f"Bearer {keys['AWAKEN_TEST_BOB_KEY']}"}) as bob:
            refused = await bob.get("/v1/ag-ui/threads/ws-auth/stream")
        assert (refused.status_code, refused.content) == (204, b"")
        async with server.client(headers=alice_auth) as alice, \
                alice.stream("GET", "/v1/ag-ui/threads/ws-auth/stream") as rejoined:
            assert rejoined.status_code == 200
            released = await post_agui(alice, agui_body("release-ws-auth", "release-ws-auth", [
                {"id": "r1", "role": "user", "content": "/release ws-auth"}]))
            assert released[-1]["type"] == "RUN_FINISHED"
            events = [payload for _, payload in frames_of(await rejoined.aread())]
        assert events[: len(seen)] == seen and events[-1]["type"] == "RUN_FINISHED"
        run = await wait_for_status(server.ctx.ledger, "ws-auth", RunStatus.COMPLETED)
    assert run.run_id == "run-ws-auth"
