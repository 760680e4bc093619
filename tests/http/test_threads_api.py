"""The threads API and per-user threads over the wire (issue 13 items 3, 4 and 6), ``[auth] mode = "tokens"``.

alice and bob are users, ops is an admin. A thread belongs to the subject that started it; every
route on a thread (history ×2, runs ×2 protocols × SSE/WebSocket, resume, stop, delete, thread get)
answers another user exactly as it answers a thread that does not exist; admins see everything;
a thread created before auth (owner None) is an admin's only. Runs are held open with the
scripted model's ``/hold`` gates, never by timing.
"""

from __future__ import annotations

import json
from typing import Any

import httpx
import orjson
import pytest
import trio
from trio_websocket import open_websocket_url

from awaken.core.messages import Message, TextPart
from awaken.engine.state import Cause, RunStatus, describe
from awaken.ledger.interface import Commit, RunRecord
from tests.builders import (
    LiveServer,
    agui_body,
    aisdk_kinds,
    bearer,
    held,
    live_server,
    make_config,
    parse_sse,
    types,
    user,
    ws_url,
)

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef",
        "ops": "ops-key-0123456789abcdef"}
ROLES = {"alice": "user", "bob": "user", "ops": "admin"}
NOT_FOUND = "UNKNOWN_THREAD"


def chat_body(thread_id: str, message_id: str, text: str) -> dict[str, Any]:
    return {"id": thread_id, "messages": [{"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}]}


def not_found(thread_id: str) -> dict[str, Any]:
    return {"error": {"code": NOT_FOUND, "message": f"no thread {thread_id!r}"}}


@pytest.fixture
async def server(tmp_path, monkeypatch):
    tokens = []
    for name, key in KEYS.items():
        monkeypatch.setenv(f"AWAKEN_TEST_{name.upper()}_KEY", key)
        tokens.append({"name": name, "env": f"AWAKEN_TEST_{name.upper()}_KEY", "role": ROLES[name], "subject": name})
    async with live_server(make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with server.client() as c:
        yield c


async def agui_run(client: httpx.AsyncClient, who: str, thread_id: str, text: str, run_id: str | None = None,
                   path: str = "/v1/ag-ui", message_id: str = "u1") -> list[dict[str, Any]]:
    response = await client.post(path, json=agui_body(thread_id, run_id or f"r-{thread_id}", [user(message_id, text)]),
                                 headers=bearer(KEYS[who]))
    assert response.status_code == 200, response.text
    return parse_sse(response.content)


async def started(server: LiveServer, thread_id: str) -> None:
    """Wait until the thread's held run has written its record (it streams its first word first)."""
    with trio.fail_after(10):
        while True:
            run = server.ctx.app.active(thread_id)
            if run is not None and await run.started() and await server.ctx.ledger.get_thread(thread_id):
                return
            await trio.sleep(0.01)


# -- listing ------------------------------------------------------------------------------------------


async def test_the_listing_shows_a_user_only_its_own_threads_newest_first(client):
    await agui_run(client, "alice", "a1", "first of alice")
    await agui_run(client, "bob", "b1", "bob's")
    await agui_run(client, "alice", "a2", "  second\n of   alice ")
    response = await client.get("/v1/threads", headers=bearer(KEYS["alice"]))
    assert response.status_code == 200
    body = response.json()
    assert [t["threadId"] for t in body["items"]] == ["a2", "a1"]
    item = body["items"][0]
    assert set(item) == {"threadId", "title", "agentId", "createdAt", "updatedAt", "messageCount", "lastRun",
                         "waiting"}
    assert (item["title"], item["agentId"], item["messageCount"], item["waiting"]) == (
        "second of alice", "assistant", 2, False)
    assert item["lastRun"] == {"runId": "r-a2", "status": "completed", "cause": None, "errorCode": None}
    assert isinstance(item["createdAt"], int) and item["updatedAt"] >= item["createdAt"]
    bob = (await client.get("/v1/threads", headers=bearer(KEYS["bob"]))).json()
    assert [t["threadId"] for t in bob["items"]] == ["b1"]


async def test_an_admin_lists_every_thread_and_unowned_ones_only_admins_see(client, server):
    await agui_run(client, "alice", "a1", "hi")
    await agui_run(client, "bob", "b1", "hi")
    # a thread committed before auth was on: no owner
    record = RunRecord("r-old", "old", "default", RunStatus.RUNNING, 1, 1)
    await server.ctx.ledger.start_run(record, [Message("m1", "user", (TextPart("from before"),))])
    await server.ctx.ledger.commit("old", "r-old", Commit(RunStatus.COMPLETED))
    admin = (await client.get("/v1/threads", headers=bearer(KEYS["ops"]))).json()
    assert sorted(t["threadId"] for t in admin["items"]) == ["a1", "b1", "old"]
    for who in ("alice", "bob"):
        listed = (await client.get("/v1/threads", headers=bearer(KEYS[who]))).json()
        assert "old" not in [t["threadId"] for t in listed["items"]]
        assert (await client.get("/v1/threads/old", headers=bearer(KEYS[who]))).json() == not_found("old")
        history = await client.get("/v1/ag-ui/threads/old/messages", headers=bearer(KEYS[who]))
        assert (history.status_code, history.json()) == (404, not_found("old"))
    assert (await client.get("/v1/threads/old", headers=bearer(KEYS["ops"]))).status_code == 200


async def test_the_listing_pages_with_its_cursor_and_filters_by_agent(client):
    for n in range(3):
        await agui_run(client, "alice", f"p{n}", "hi")
    await agui_run(client, "alice", "g1", "/words 2", path="/v1/ag-ui/agents/guarded")
    seen, cursor = [], None
    for _ in range(10):
        params = {"limit": "1", **({"cursor": cursor} if cursor else {})}
        page = (await client.get("/v1/threads", params=params, headers=bearer(KEYS["alice"]))).json()
        seen += [t["threadId"] for t in page["items"]]
        cursor = page["cursor"]
        if cursor is None:
            break
    assert seen == ["g1", "p2", "p1", "p0"]
    guarded = (await client.get("/v1/threads", params={"agent": "guarded"}, headers=bearer(KEYS["alice"]))).json()
    assert [t["threadId"] for t in guarded["items"]] == ["g1"]
    assert guarded["cursor"] is None


@pytest.mark.parametrize("params", [{"cursor": "not-a-cursor"}, {"limit": "0"}, {"limit": "x"}])
async def test_a_bad_listing_cursor_or_limit_is_400_invalid_cursor(client, params):
    response = await client.get("/v1/threads", params=params, headers=bearer(KEYS["alice"]))
    assert response.status_code == 400
    assert response.json()["error"]["code"] == ("INVALID_LIMIT" if "limit" in params else "INVALID_CURSOR")


# -- one thread ----------------------------------------------------------------------------------------


async def test_a_thread_shows_its_runs_pending_calls_and_state(client):
    await agui_run(client, "alice", "t1", '/call set_state {"key": "k", "value": 1}', run_id="r1")
    events = await agui_run(client, "alice", "t1", '/call calculator {"expression": "1+1"}', run_id="r2",
                            path="/v1/ag-ui/agents/guarded", message_id="u2")
    call_id = next(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    response = await client.get("/v1/threads/t1", headers=bearer(KEYS["alice"]))
    assert response.status_code == 200
    body = response.json()
    assert set(body) == {"threadId", "title", "agentId", "createdAt", "updatedAt", "messageCount", "waiting",
                         "runs", "pending", "state", "activeBranch", "branches"}
    assert (body["activeBranch"], body["branches"]) == (0, [  # never branched: branch 0 alone (test_branches.py)
        {"branch": 0, "parent": None, "forkSeq": 0, "forkMessageId": None, "createdAt": body["createdAt"],
         "runId": None, "reason": "root"}])
    assert (body["threadId"], body["agentId"], body["waiting"], body["state"]) == ("t1", "guarded", True, {"k": 1})
    assert [(r["runId"], r["agentId"], r["status"], r["cause"], r["steps"], r["error"]) for r in body["runs"]] == [
        ("r1", "assistant", "completed", None, 2, None), ("r2", "guarded", "waiting", None, 1, None)]
    assert set(body["runs"][0]) == {"runId", "agentId", "status", "cause", "errorCode", "createdAt", "updatedAt",
                                    "steps", "usage", "error", "timeline"}
    assert set(body["runs"][0]["usage"]) == {"inputTokens", "outputTokens"}
    # the spans this process recorded for the run (docs/observability.md)
    assert body["runs"][0]["timeline"]["spans"][0]["name"] == f"invoke_agent {body['runs'][0]['agentId']}"
    assert body["pending"] == [{"toolCallId": call_id, "runId": "r2", "name": "calculator",
                                "arguments": '{"expression": "1+1"}', "kind": "approval"}]


async def test_an_unknown_thread_is_404_unknown_thread(client):
    response = await client.get("/v1/threads/nope", headers=bearer(KEYS["ops"]))
    assert (response.status_code, response.json()) == (404, not_found("nope"))


# -- another user's thread is not there, on every route -------------------------------------------------


async def test_every_read_and_write_route_answers_another_user_404(client, server):
    await agui_run(client, "alice", "mine", "secret")
    before = await server.ctx.ledger.thread_summary("mine")
    for method, path in [("GET", "/v1/threads/mine"), ("GET", "/v1/ag-ui/threads/mine/messages"),
                         ("GET", "/v1/ai-sdk/threads/mine/messages"), ("DELETE", "/v1/threads/mine"),
                         ("POST", "/v1/threads/mine/stop")]:
        response = await client.request(method, path, headers=bearer(KEYS["bob"]))
        assert (response.status_code, response.json()) == (404, not_found("mine")), (method, path)
        # the same answer as a thread that does not exist at all
        absent = await client.request(method, path.replace("mine", "nothing"), headers=bearer(KEYS["bob"]))
        assert (absent.status_code, absent.json()) == (404, not_found("nothing")), (method, path)
        admin = await client.request(method, path, headers=bearer(KEYS["ops"])) if method == "GET" else None
        assert admin is None or admin.status_code == 200
    assert await server.ctx.ledger.thread_summary("mine") == before


@pytest.mark.parametrize("path", ["/v1/ag-ui", "/v1/ag-ui/agents/guarded"])
async def test_an_agui_run_on_another_users_thread_is_404_over_sse(client, server, path):
    await agui_run(client, "alice", "mine", "secret")
    before = await server.ctx.ledger.thread_summary("mine")
    response = await client.post(path, json=agui_body("mine", "r-bob", [user("b1", "let me in")]),
                                 headers=bearer(KEYS["bob"]))
    assert (response.status_code, response.json()) == (404, not_found("mine"))
    assert await server.ctx.ledger.thread_summary("mine") == before
    assert await server.ctx.ledger.get_run("r-bob") is None


async def test_an_ai_sdk_run_on_another_users_thread_is_404_over_sse(client, server):
    await agui_run(client, "alice", "mine", "secret")
    before = await server.ctx.ledger.thread_summary("mine")
    response = await client.post("/v1/ai-sdk/chat", json=chat_body("mine", "b1", "let me in"), headers=bearer(KEYS["bob"]))
    assert (response.status_code, response.json()) == (404, not_found("mine"))
    assert await server.ctx.ledger.thread_summary("mine") == before


async def test_a_resume_of_another_users_waiting_run_is_404(client, server):
    events = await agui_run(client, "alice", "mine", '/call calculator {"expression": "2+2"}',
                            path="/v1/ag-ui/agents/guarded")
    call_id = next(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
    approve = {"id": "tool-1", "role": "tool", "toolCallId": call_id, "content": "approved"}
    response = await client.post("/v1/ag-ui/agents/guarded", json=agui_body("mine", "r2", [approve]),
                                 headers=bearer(KEYS["bob"]))
    assert (response.status_code, response.json()) == (404, not_found("mine"))
    chat = await client.post("/v1/ai-sdk/agents/guarded/chat", headers=bearer(KEYS["bob"]), json={"id": "mine", "messages": [
        {"id": "a1", "role": "assistant", "parts": [{"type": "tool-calculator", "toolCallId": call_id,
                                                     "state": "approval-responded", "input": {"expression": "2+2"},
                                                     "approval": {"id": call_id, "approved": True}}]}]})
    assert (chat.status_code, chat.json()) == (404, not_found("mine"))
    assert [p.tool_call_id for p in await server.ctx.ledger.pending_calls("mine")] == [call_id]
    # the owner resumes it
    ok = await client.post("/v1/ag-ui/agents/guarded", json=agui_body("mine", "r2", [approve]), headers=bearer(KEYS["alice"]))
    assert types(parse_sse(ok.content))[-1] == "RUN_FINISHED"


@pytest.mark.parametrize(("path", "body", "terminal"), [
    ("/v1/ag-ui/ws", agui_body("mine", "r-bob", [user("b1", "let me in")]),
     {"type": "RUN_ERROR", "message": "no thread 'mine'", "code": NOT_FOUND}),
    ("/v1/ai-sdk/ws", chat_body("mine", "b1", "let me in"),
     {"type": "error", "errorText": f"{NOT_FOUND}: no thread 'mine'"}),
])
async def test_a_run_on_another_users_thread_is_refused_unknown_thread_over_websocket(client, server, path, body,
                                                                                       terminal):
    await agui_run(client, "alice", "mine", "secret")
    before = await server.ctx.ledger.thread_summary("mine")
    async with open_websocket_url(ws_url(server.base_url, path), subprotocols=["awaken.v1", f"bearer.{KEYS['bob']}"]) as ws:
        await ws.send_message(json.dumps(body))
        with trio.fail_after(10):
            first = orjson.loads(await ws.get_message())
    assert first == terminal
    assert await server.ctx.ledger.thread_summary("mine") == before


async def test_a_busy_thread_of_another_user_is_404_not_thread_busy(client, server):
    gate = "busy-foreign"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agui_run, client, "alice", "mine", held(gate, 3))
        await started(server, "mine")
        response = await client.post("/v1/ag-ui", json=agui_body("mine", "r-bob", [user("b1", "x")]),
                                     headers=bearer(KEYS["bob"]))
        assert (response.status_code, response.json()) == (404, not_found("mine"))
        own = parse_sse((await client.post("/v1/ag-ui", json=agui_body("mine", "r-again", [user("a9", "x")]),
                                           headers=bearer(KEYS["alice"]))).content)
        assert own[-1]["code"] == "THREAD_BUSY"
        await _release(client, gate)


async def _release(client: httpx.AsyncClient, gate: str) -> None:
    """``builders.release`` with credentials: open ``gate`` from a run of the admin's."""
    events = await agui_run(client, "ops", f"release-{gate}", f"/release {gate}")
    assert types(events)[-1] == "RUN_FINISHED"


# -- delete ----------------------------------------------------------------------------------------------


async def test_delete_removes_the_thread_and_frees_its_id(client, server):
    await agui_run(client, "alice", "gone", "first life")
    response = await client.delete("/v1/threads/gone", headers=bearer(KEYS["alice"]))
    assert (response.status_code, response.content) == (204, b"")
    assert (await client.get("/v1/ai-sdk/threads/gone/messages", headers=bearer(KEYS["alice"]))).status_code == 404
    assert (await client.get("/v1/threads/gone", headers=bearer(KEYS["alice"]))).status_code == 404
    assert (await client.delete("/v1/threads/gone", headers=bearer(KEYS["alice"]))).json() == not_found("gone")
    await agui_run(client, "bob", "gone", "second life", run_id="r-new")
    items = (await client.get("/v1/ag-ui/threads/gone/messages", headers=bearer(KEYS["bob"]))).json()["items"]
    assert [m["content"] for m in items if m["role"] == "user"] == ["second life"]
    assert (await server.ctx.ledger.get_thread("gone")).owner == "bob"


async def test_delete_while_a_run_is_active_is_409_thread_busy(client, server):
    gate = "delete-busy"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agui_run, client, "alice", "busy", held(gate, 3))
        await started(server, "busy")
        response = await client.delete("/v1/threads/busy", headers=bearer(KEYS["alice"]))
        assert response.status_code == 409
        assert response.json()["error"]["code"] == "THREAD_BUSY"
        await _release(client, gate)
    assert (await server.ctx.ledger.get_thread("busy")) is not None


# -- stop ------------------------------------------------------------------------------------------------


async def test_stop_when_nothing_runs_is_204(client):
    await agui_run(client, "alice", "idle", "hi")
    response = await client.post("/v1/threads/idle/stop", headers=bearer(KEYS["alice"]))
    assert (response.status_code, response.content) == (204, b"")
    assert (await client.get("/v1/threads/idle", headers=bearer(KEYS["alice"]))).status_code == 200  # same connection


async def _stop(client: httpx.AsyncClient, server: LiveServer, thread_id: str, who: str = "alice") -> dict[str, Any]:
    await started(server, thread_id)
    response = await client.post(f"/v1/threads/{thread_id}/stop", headers=bearer(KEYS[who]))
    assert response.status_code == 200, response.text
    run = await server.ctx.ledger.get_run(response.json()["runId"])
    assert (run.status, run.cause) == (RunStatus.INTERRUPTED, "stopped")  # committed before the answer
    return response.json()


async def test_stop_ends_an_agui_sse_stream_with_run_error_stopped(client, server):
    result: dict[str, Any] = {}

    async def run() -> None:
        result["events"] = await agui_run(client, "alice", "s-agui", held("stop-agui-sse", 50), run_id="r-s1")

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        assert await _stop(client, server, "s-agui") == {"runId": "r-s1", "status": "interrupted"}
    events = result["events"]
    assert types(events)[:2] == ["RUN_STARTED", "STEP_STARTED"]
    assert events[-1] == {"type": "RUN_ERROR", "message": describe(Cause.STOPPED), "code": "STOPPED"}
    assert "RUN_FINISHED" not in types(events)


async def test_stop_ends_an_ai_sdk_sse_stream_with_abort_and_done(client, server):
    result: dict[str, Any] = {}

    async def run() -> None:
        response = await client.post("/v1/ai-sdk/chat", json=chat_body("s-sdk", "u1", held("stop-sdk-sse", 50)),
                                     headers=bearer(KEYS["alice"]))
        result["chunks"] = parse_sse(response.content)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        answer = await _stop(client, server, "s-sdk")
    assert answer["status"] == "interrupted"
    kinds = aisdk_kinds(result["chunks"])
    assert kinds[:3] == ["start", "start-step", "text-start"]
    assert kinds[-4:] == ["text-end", "finish-step", "abort", "[DONE]"]
    assert result["chunks"][-2] == {"type": "abort"}


@pytest.mark.parametrize(("path", "protocol"), [("/v1/ag-ui/ws", "ag-ui"), ("/v1/ai-sdk/ws", "ai-sdk")])
async def test_stop_ends_a_websocket_stream_with_the_protocols_terminal_event(client, server, path, protocol):
    gate = f"stop-ws-{protocol}"
    body = (agui_body("s-ws", "r-ws", [user("u1", held(gate, 50))]) if protocol == "ag-ui"
            else chat_body("s-ws", "u1", held(gate, 50)))
    async with open_websocket_url(ws_url(server.base_url, path), subprotocols=["awaken.v1", f"bearer.{KEYS['alice']}"]) as ws:
        await ws.send_message(json.dumps(body))
        first = orjson.loads(await ws.get_message())
        assert first["type"] in ("RUN_STARTED", "start")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_stop, client, server, "s-ws")
            received: list[Any] = []
            with trio.fail_after(10):
                while True:
                    text = await ws.get_message()
                    received.append(text if text == "[DONE]" else orjson.loads(text))
                    if received[-1] == "[DONE]" or (protocol == "ag-ui" and received[-1]["type"] == "RUN_ERROR"):
                        break
        if protocol == "ag-ui":
            assert received[-1]["code"] == "STOPPED"
        else:
            assert received[-2:] == [{"type": "abort"}, "[DONE]"]
        # the socket serves the next request
        await ws.send_message(json.dumps(agui_body("s-ws", "r-next", [user("u2", "again")]) if protocol == "ag-ui"
                                         else chat_body("s-ws2", "u2", "again")))
        with trio.fail_after(10):
            assert orjson.loads(await ws.get_message())["type"] in ("RUN_STARTED", "start")


async def test_an_admin_stops_a_users_run(client, server):
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agui_run, client, "alice", "s-admin", held("stop-admin", 50), "r-adm")
        assert await _stop(client, server, "s-admin", who="ops") == {"runId": "r-adm", "status": "interrupted"}
