"""Wires register like ledgers and models: the ``awaken.wires`` entry-point group, end to end.

The shipped wires (AG-UI, the AI SDK, the CopilotKit runtime) come from Awaken's own package metadata;
a third party's wire, ``plain`` (``tests/plugins/plain_wire.py``), is registered by a package's metadata
(a ``dist-info`` directory put on ``sys.path``, as ``pip install`` would leave it) and the server serves
its declared routes with the shipped wires' front door: its run over SSE and WebSocket, its history,
its rejoin, authentication in tokens mode and CORS for an allowed origin.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import orjson
import pytest
from trio_websocket import open_websocket_url

from awaken.wires.registry import known_wires, wire_entry_points
from tests.builders import bearer, live_server, make_config, parse_sse, ws_url
from tests.plugins.plain_wire import WIRE as PLAIN

ENTRY_POINTS = "[awaken.wires]\nplain = tests.plugins.plain_wire:WIRE\n"
ALLOWED = "http://localhost:3000"  # in the shipped config.toml's cors_origins
USER_KEY = "plain-user-key-0123456789abcdef"
TOKENS = [{"name": "alice", "env": "AWAKEN_TEST_PLAIN_ALICE_KEY", "role": "user", "subject": "alice"}]


@pytest.fixture(autouse=True)
def installed_wire(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A site directory holding the plugin package's metadata, on ``sys.path`` while a test runs."""
    site = tmp_path_factory.mktemp("site")
    info = site / "awaken_plain_wire-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: awaken-plain-wire\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        yield site


def test_the_registry_lists_the_shipped_wires_and_the_plugin():
    wires = known_wires()
    assert {"ag-ui", "ai-sdk", "copilotkit", "plain"} <= set(wires)
    assert {name: ep.value for name, ep in wire_entry_points().items()
            if name in ("ag-ui", "ai-sdk", "copilotkit", "plain")} == {
        "ag-ui": "awaken.wires.agui.adapter:WIRE",
        "ai-sdk": "awaken.wires.aisdk.adapter:WIRE",
        "copilotkit": "awaken.http.copilotkit:WIRE",
        "plain": "tests.plugins.plain_wire:WIRE",
    }
    assert wires["plain"] is PLAIN
    assert ("POST", "/v1/ag-ui", "run") in wires["ag-ui"].routes()
    assert ("WEBSOCKET", "/v1/ai-sdk/ws", "socket") in wires["ai-sdk"].routes()
    assert ("GET", "/v1/ai-sdk/threads/{thread}/messages", "history") in wires["ai-sdk"].routes()
    assert {m for m, _path, kind in wires["copilotkit"].routes() if kind == "extra"} == {"GET", "POST"}


def plain_request(thread_id: str, message_id: str, text: str = "hello there") -> dict:
    return {"threadId": thread_id, "messageId": message_id, "text": text}


def check_stream(events: list[dict], thread_id: str) -> str:
    """A completed run's stream: ``start`` naming the thread, text deltas, ``done``; returns its text."""
    assert events[0]["type"] == "start" and events[0]["threadId"] == thread_id
    assert events[-1] == {"type": "done", "outcome": "completed"}
    assert {e["type"] for e in events[1:-1]} == {"text"}
    return "".join(e["delta"] for e in events[1:-1])


async def test_the_plugin_wire_runs_over_sse_and_serves_its_history(tmp_path):
    async with live_server(make_config(tmp_path)) as server, server.client() as client:
        response = await client.post("/v1/plain", json=plain_request("t-plain", "u1"))
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        answer = check_stream(parse_sse(response.content), "t-plain")
        assert answer

        page = await client.get("/v1/plain/threads/t-plain/messages")
        assert page.status_code == 200
        items = page.json()["items"]
        assert items == [{"id": "u1", "role": "user", "text": "hello there"},
                         {"id": items[1]["id"], "role": "assistant", "text": answer}]
        assert page.json()["cursor"]

        # a refusal is the wire's own, from its encoder; an unknown thread's history is 404
        again = parse_sse((await client.post("/v1/plain", json=plain_request("t-plain", "u1"))).content)
        assert [e["type"] for e in again] == ["error"] and again[0]["code"] == "NO_NEW_INPUT"
        missing = await client.get("/v1/plain/threads/nobody/messages")
        assert (missing.status_code, missing.json()["error"]["code"]) == (404, "UNKNOWN_THREAD")
        # its agent route, its rejoin (204 while nothing runs) and a wrong method (405)
        routed = await client.post("/v1/plain/agents/assistant", json=plain_request("t-agent", "u1"))
        check_stream(parse_sse(routed.content), "t-agent")
        assert (await client.get("/v1/plain/threads/t-plain/stream")).status_code == 204
        wrong = await client.get("/v1/plain")
        assert (wrong.status_code, wrong.headers["allow"]) == (405, "POST")


async def test_the_plugin_wire_runs_over_websocket(tmp_path):
    async with live_server(make_config(tmp_path)) as server:
        async with open_websocket_url(ws_url(server.base_url, "/v1/plain/ws")) as socket:
            for index in (1, 2):  # two runs one after another on one socket
                await socket.send_message(orjson.dumps(plain_request("t-ws", f"u{index}")).decode())
                events: list[dict] = []
                while not events or events[-1]["type"] not in ("done", "error"):
                    events.append(orjson.loads(await socket.get_message()))
                check_stream(events, "t-ws")
        async with server.client() as client:
            items = (await client.get("/v1/plain/threads/t-ws/messages")).json()["items"]
        assert [(i["id"], i["role"]) for i in items if i["role"] == "user"] == [("u1", "user"), ("u2", "user")]


async def test_the_plugin_wire_is_behind_the_front_door(tmp_path, monkeypatch):
    """Tokens mode refuses its routes without credentials (401, ``WWW-Authenticate: Bearer``, CORS headers
    for an allowed origin on the refusal too) and serves them with a token; preflights are answered."""
    monkeypatch.setenv("AWAKEN_TEST_PLAIN_ALICE_KEY", USER_KEY)
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": TOKENS})
    async with live_server(config) as server, server.client() as client:
        for method, path in (("POST", "/v1/plain"), ("GET", "/v1/plain/threads/t-auth/messages"),
                             ("GET", "/v1/plain/threads/t-auth/stream")):
            refused = await client.request(method, path, json=plain_request("t-auth", "u1") if method == "POST" else None,
                                           headers={"origin": ALLOWED})
            assert refused.status_code == 401, path
            assert refused.headers["www-authenticate"] == "Bearer"
            assert refused.json()["error"]["code"] == "UNAUTHENTICATED"
            assert refused.headers["access-control-allow-origin"] == ALLOWED
        preflight = await client.options("/v1/plain", headers={
            "origin": ALLOWED, "access-control-request-method": "POST",
            "access-control-request-headers": "content-type, authorization"})
        assert preflight.status_code in (200, 204)
        assert preflight.headers["access-control-allow-origin"] == ALLOWED
        assert "POST" in preflight.headers["access-control-allow-methods"]

        served = await client.post("/v1/plain", json=plain_request("t-auth", "u1"),
                                   headers={**bearer(USER_KEY), "origin": ALLOWED})
        assert served.status_code == 200
        assert served.headers["access-control-allow-origin"] == ALLOWED
        check_stream(parse_sse(served.content), "t-auth")
        page = await client.get("/v1/plain/threads/t-auth/messages", headers={**bearer(USER_KEY), "origin": ALLOWED})
        assert page.status_code == 200 and page.headers["access-control-allow-origin"] == ALLOWED
        assert [i["id"] for i in page.json()["items"]][0] == "u1"


async def test_copilotkit_runs_share_the_ag_ui_protocol_and_its_replay_memo(tmp_path):
    """The CopilotKit wire declares AG-UI as its protocol: the server serves both wires one protocol, so a
    run through ``/v1/copilotkit`` keeps its replayed history in the same replay memo as ``/v1/ag-ui``."""
    async with live_server(make_config(tmp_path)) as server, server.client() as client:
        assert server.memo("copilotkit") is server.memo("ag-ui")
        history = [{"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "x" * 120}
                   for i in range(300)]
        body = {"threadId": "t-ck-memo", "runId": "r1", "state": {}, "tools": [], "context": [],
                "forwardedProps": {}, "messages": [*history, {"id": "u", "role": "user", "content": "hi"}]}
        response = await client.post("/v1/copilotkit/agent/assistant/run", json=body)
        assert response.status_code == 200 and b'"RUN_FINISHED"' in response.content
        assert "t-ck-memo" in server.memo("ag-ui").owners()
