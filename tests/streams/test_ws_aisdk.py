"""The AI SDK UI Message Stream over WebSocket (CONTRACT §4, §6): ``/v1/ai-sdk/ws`` and per-agent sockets.

Every message is what SSE carries after ``data: `` (chunks as JSON, then the ``[DONE]`` message);
every chunk passes the ai@6.0.0 strict schema (``awaken.wires.aisdk.wire.check_chunk``).
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
import trio
from trio_websocket import WebSocketConnection, open_websocket_url

from awaken.engine.state import RunStatus
from awaken.wires.aisdk.wire import check_chunk
from tests.builders import aisdk_kinds as kinds
from tests.builders import aisdk_text as text_of
from tests.builders import held, parse_sse, release, ws_url
from tests.streams.test_ws_transport import run_node

DONE = "[DONE]"
#: the Node client's held run (``ws_client.mjs`` ``SLOW``: 12 words, held after the first until released)
SLOW = held("slow")
SLOW_TEXT = "alpha bravo charlie delta echo foxtrot golf hotel india juliet alpha bravo"


def ui_user(message_id: str, text: str) -> dict[str, Any]:
    return {"id": message_id, "role": "user", "parts": [{"type": "text", "text": text}]}


def chat(thread_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A body as ``DefaultChatTransport`` sends it."""
    return {"id": thread_id, "messages": messages, "trigger": "submit-message", **extra}


async def until_done(ws: WebSocketConnection) -> list[Any]:
    """Every message up to and including the next ``[DONE]`` (chunks decoded and schema-checked)."""
    out: list[Any] = []
    with trio.fail_after(10):
        while not out or out[-1] != DONE:
            message = await ws.get_message()
            assert isinstance(message, str)
            if message != DONE:
                chunk = orjson.loads(message)
                check_chunk(chunk)
                out.append(chunk)
            else:
                out.append(message)
    return out


async def chat_over_ws(ws: WebSocketConnection, body: dict[str, Any]) -> list[Any]:
    await ws.send_message(orjson.dumps(body).decode())
    return await until_done(ws)


def normalized(stream: list[Any]) -> list[Any]:
    """Chunks with the per-run ids (and the run id in message metadata) replaced, for comparing two runs
    of the same input."""
    ids = ("id", "messageId", "toolCallId", "approvalId")

    def one(c: dict[str, Any]) -> dict[str, Any]:
        out = {k: (k if k in ids else v) for k, v in c.items()}
        if "messageMetadata" in out:
            out["messageMetadata"] = {**out["messageMetadata"], "runId": "runId"}
        return out

    return [c if c == DONE else one(c) for c in stream]


def only(stream: list[Any], kind: str) -> dict[str, Any]:
    (found,) = [c for c in stream if c != DONE and c["type"] == kind]
    return found


async def test_text_run_ends_with_done_and_is_the_sse_stream(server, client):
    """§4/§6: the same chunks as the POST route's SSE stream, one per message, then a ``[DONE]`` message."""
    response = await client.post("/v1/ai-sdk/chat", json=chat("a-sse", [ui_user("a-u1", "hello there")]))
    sse = parse_sse(response.content)
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
        stream = await chat_over_ws(ws, chat("a-ws", [ui_user("a-u2", "hello there")]))
    assert kinds(stream)[-2:] == ["finish", DONE] and only(stream, "finish")["finishReason"] == "stop"
    assert text_of(stream) == 'You said: "hello there".'
    assert normalized(stream) == normalized(sse)
    runs = await server.ctx.ledger.list_runs("a-ws")
    assert [r.status for r in runs] == [RunStatus.COMPLETED]


async def test_approval_and_client_result_over_one_socket(server):
    """Both tool flows on one socket: the body's ``agentId`` picks ``guarded`` then ``frontend``."""
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
        ask = ui_user("a-g1", '/call calculator {"expression":"1+1"}')
        gate = await chat_over_ws(ws, chat("a-g", [ask], agentId="guarded"))
        request = only(gate, "tool-approval-request")
        assert only(gate, "finish")["finishReason"] == "tool-calls"
        part = {"type": "tool-calculator", "toolCallId": request["toolCallId"], "state": "approval-responded",
                "input": only(gate, "tool-input-available")["input"],
                "approval": {"id": request["approvalId"], "approved": True}}
        assistant = {"id": only(gate, "start")["messageId"], "role": "assistant", "parts": [part]}
        approved = await chat_over_ws(ws, chat("a-g", [ask, assistant], agentId="guarded"))
        assert only(approved, "tool-output-available")["output"] == {"result": 2}
        assert "calculator returned" in text_of(approved)
        assert only(approved, "finish")["finishReason"] == "stop"

        question = ui_user("a-f1", '/call ask_user {"question":"?"}')
        asked = await chat_over_ws(ws, chat("a-f", [question], agentId="frontend"))
        call = only(asked, "tool-input-available")
        assert call["toolName"] == "ask_user" and only(asked, "finish")["finishReason"] == "tool-calls"
        part = {"type": "tool-ask_user", "toolCallId": call["toolCallId"], "state": "output-available",
                "input": call["input"], "output": "forty-two"}
        assistant = {"id": only(asked, "start")["messageId"], "role": "assistant", "parts": [part]}
        answered = await chat_over_ws(ws, chat("a-f", [question, assistant], agentId="frontend"))
        assert "ask_user returned" in text_of(answered) and "forty-two" in text_of(answered)
    for thread in ("a-g", "a-f"):
        assert [r.status for r in await server.ctx.ledger.list_runs(thread)] == [RunStatus.COMPLETED]


async def test_requests_while_streaming_are_refused_after_the_runs_done_never_inside_it(server, client):
    """REQUEST_BUSY (and a binary message's refusal) as whole ``error``, ``finish``, ``[DONE]`` streams
    right after the running stream's ``[DONE]``, in arrival order: the socket carries exactly the chunks
    SSE gives for the same input, then the refusals; an AI SDK reader never stops inside the run."""
    await release(server, "alone")  # an open gate: the same input streams at once (usage counts its words)
    response = await client.post("/v1/ai-sdk/chat", json=chat("a-alone", [ui_user("a-a1", held("alone"))]))
    alone = normalized(parse_sse(response.content))
    assert kinds(alone)[-2:] == ["finish", DONE] and text_of(alone) == SLOW_TEXT
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
        await ws.send_message(orjson.dumps(chat("a-busy", [ui_user("a-b1", held("busy"))])).decode())
        received: list[Any] = []
        with trio.fail_after(10):
            while not received or received[-1] == DONE or received[-1]["type"] != "text-delta":
                message = await ws.get_message()
                received.append(message if message == DONE else orjson.loads(message))
        await ws.send_message(orjson.dumps(chat("a-later", [ui_user("a-l1", "hi")])).decode())
        await ws.send_message(b"\x01\x02")
        await ws.send_message(orjson.dumps(chat("a-later2", [ui_user("a-l2", "hi")])).decode())
        await ws.ping()  # its pong: the server has read the three messages (the run is still held)
        await release(server, "busy")
        for _ in range(4):  # the rest of the run, then three refusals (every stream ends with [DONE])
            received += await until_done(ws)
    run, refusals = received[: len(alone)], received[len(alone) :]
    assert normalized(run) == alone  # the whole run stream, [DONE] included, and nothing inside it
    for chunk in run[:-1]:
        check_chunk(chunk)
    assert kinds(refusals) == ["error", "finish", DONE] * 3
    assert [c["errorText"].split(":")[0] for c in refusals if c != DONE and c["type"] == "error"] == [
        "REQUEST_BUSY", "UNSUPPORTED_MEDIA_TYPE", "REQUEST_BUSY"]
    assert [c for c in refusals if c != DONE and c["type"] == "finish"] == [
        {"type": "finish", "finishReason": "error"}] * 3
    assert [r.status for r in await server.ctx.ledger.list_runs("a-busy")] == [RunStatus.COMPLETED]
    for thread in ("a-later", "a-later2"):
        assert await server.ctx.ledger.get_thread(thread) is None


async def test_bad_messages_get_error_parts_and_the_socket_stays_usable(server):
    """Malformed JSON, binary frames and bad UIMessages: an ``error`` chunk stream each, socket still open."""
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
        for message, code in [("{x", "INVALID_JSON"), (b"\x01\x02", "UNSUPPORTED_MEDIA_TYPE"),
                              ('{"messages": [{"id": "m", "role": "robot", "parts": []}]}', "INVALID_REQUEST")]:
            await ws.send_message(message)
            stream = await until_done(ws)
            assert kinds(stream) == ["error", "finish", DONE]
            assert stream[0]["errorText"].startswith(f"{code}: ")
        ok = await chat_over_ws(ws, chat("a-ok", [ui_user("a-ok1", "fine")]))
        assert text_of(ok) == 'You said: "fine".'


async def test_agent_socket_uses_the_path_agent(server):
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/agents/frontend/ws")) as ws:
        asked = await chat_over_ws(ws, chat("a-p", [ui_user("a-p1", '/call ask_user {"question":"?"}')]))
    assert only(asked, "tool-input-available")["toolName"] == "ask_user"


@pytest.mark.slow  # a real client in Node
@pytest.mark.timeout(120)
async def test_node_ws_client_runs_text_and_both_tool_flows_on_one_socket(server):
    """The Node ``ws`` package: a text run, an approval and a client result on one AI SDK socket."""
    out = await run_node("aisdk", ws_url(server.base_url, ""))
    assert out["text"][-1] == DONE and text_of(out["text"]) == 'You said: "hi from node".'
    assert only(out["gate"], "finish")["finishReason"] == "tool-calls"
    assert only(out["approved"], "tool-output-available")["output"] == {"result": 2}
    assert kinds(out["approved"])[-1] == DONE
    assert "forty-two" in text_of(out["answered"])
    assert out["close"] == 1000


@pytest.mark.slow  # a real client in Node
@pytest.mark.timeout(120)
@pytest.mark.parametrize("lib", ["ai-6-0-0", "ai-6", "ai-7"])
async def test_real_ai_sdk_chats_sharing_a_socket_see_whole_runs_and_whole_refusals(server, lib):
    """The AI SDK's own chat machinery over the socket's actual output: AbstractChats whose
    ``DefaultChatTransport`` ``fetch`` is a WebSocket adapter (``ws_client.mjs`` ``openShared``), so
    every reply is parsed with ``uiMessageChunkSchema`` and folded into messages. A chat streams; two
    other chats ask (and a binary message arrives) while it does: the streaming chat ends ``ready`` with
    its whole answer, each refused chat ends ``error`` with REQUEST_BUSY, and the next turn works."""
    out = await run_node("aisdk-shared", ws_url(server.base_url, ""), lib)
    assert out["logs"] == [] and out["stray"] == [] and out["close"] == 1000
    slow, busy, busy2, again = out["slow"], out["busy"], out["busy2"], out["again"]
    assert (slow["status"], slow["error"]) == ("ready", None)
    assert [p["text"] for p in slow["messages"][-1]["parts"] if p["type"] == "text"] == [SLOW_TEXT]
    for refused in (busy, busy2):
        assert refused["status"] == "error" and refused["error"].startswith("REQUEST_BUSY: ")
    assert kinds(out["binary"]) == ["error", "finish", DONE]
    assert out["binary"][0]["errorText"].startswith("UNSUPPORTED_MEDIA_TYPE: ")
    assert (again["status"], again["error"]) == ("ready", None)
    assert [[p["text"] for p in m["parts"] if p["type"] == "text"] for m in again["messages"]] == [
        [SLOW], [SLOW_TEXT], ["again"], ['You said: "again".']]
    # the socket's own order: the run, the three refusals in arrival order, the next turn
    log = out["log"]
    first_done = log.index(DONE)
    assert kinds(log[first_done + 1 : first_done + 10]) == ["error", "finish", DONE] * 3
    assert kinds(log[: first_done + 1]).count("error") == 0 and text_of(log[: first_done + 1]) == SLOW_TEXT
    assert kinds(log[first_done + 10 :])[0] == "start" and kinds(log)[-2:] == ["finish", DONE]
