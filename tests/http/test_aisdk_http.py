"""The AI SDK routes over HTTP against a live server (CONTRACT §4, brief items 1–3, 5–7).

Headers and framing, coded error streams, dedup of the resent history, decisions (and refusals of
decisions for calls that are not pending, with nothing committed), history paging and the AG-UI ↔
AI SDK crossover on one thread.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson

from awaken.core.errors import StoreUnavailable
from awaken.ledger.paging import encode_cursor
from awaken.wires.aisdk.wire import check_chunk
from tests.builders import agui_body, aisdk_user, held, history_page, parse_sse, post_agui, release, types
from tests.builders import aisdk_kinds as kinds
from tests.builders import aisdk_text as text_of

CHAT = "/v1/ai-sdk/chat"
CALC = '/call calculator {"expression":"2+3"}'


async def post_chat(client: httpx.AsyncClient, body: Any, path: str = CHAT, **kw: Any) -> list[Any]:
    """POST one chat request; return its chunks (checked against the 6.0.0 field set) ending in [DONE]."""
    if isinstance(body, dict):
        response = await client.post(path, json=body, **kw)
    else:
        response = await client.post(path, content=body, **kw)
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    chunks = parse_sse(response.content)
    assert chunks[-1] == "[DONE]" and "[DONE]" not in chunks[:-1]
    for chunk in chunks[:-1]:
        check_chunk(chunk)
    return chunks


def error_text(chunks: list[Any]) -> str:
    assert kinds(chunks)[-3:] == ["error", "finish", "[DONE]"]
    assert chunks[-2] == {"type": "finish", "finishReason": "error"}
    return chunks[-3]["errorText"]


def tool_call_id(chunks: list[Any]) -> str:
    return next(c["toolCallId"] for c in chunks[:-1] if c["type"] == "tool-input-available")


def answered(assistant: dict[str, Any], **fields: Any) -> dict[str, Any]:
    """``assistant`` (a history UIMessage) with its last tool part moved to the client's answer."""
    parts = [dict(p) for p in assistant["parts"]]
    last = max(i for i, p in enumerate(parts) if p["type"].startswith("tool-"))
    parts[last].update(fields)
    return {**assistant, "parts": parts}


# -- the stream ------------------------------------------------------------------------------------


async def test_headers_frames_and_done(client):
    """§4: the five UI message stream headers, ``data: <json>\\n\\n`` frames, ``data: [DONE]`` last."""
    response = await client.post(CHAT, json={"id": "h1", "messages": [aisdk_user("u1", "hello")]})
    assert response.status_code == 200
    for name, value in [("content-type", "text/event-stream"), ("cache-control", "no-cache"),
                        ("connection", "keep-alive"), ("x-vercel-ai-ui-message-stream", "v1"),
                        ("x-accel-buffering", "no")]:
        assert response.headers[name] == value
    body = response.content
    frames = body.split(b"\n\n")
    assert frames[-1] == b"" and frames[-2].endswith(b"\ndata: [DONE]")
    # every frame: ``id: <run>:<seq>`` (one run, numbered from 1) and one ``data:`` line
    ids = [f.split(b"\n")[0] for f in frames[:-1]]
    key = ids[0].removeprefix(b"id: ").rpartition(b":")[0]
    assert key.startswith(b"run_") and ids == [b"id: %s:%d" % (key, n) for n in range(1, len(ids) + 1)]
    assert all(f.count(b"\n") == 1 and f.split(b"\n")[1].startswith(b"data: ") for f in frames[:-1])
    chunks = parse_sse(body)
    assert kinds(chunks) == ["start", "start-step", "text-start"] + ["text-delta"] * 3 + [
        "text-end", "finish-step", "finish", "[DONE]"]
    assert text_of(chunks) == 'You said: "hello".'
    message_id = chunks[0]["messageId"]
    assert chunks[2] == {"type": "text-start", "id": message_id}
    assert chunks[-2]["finishReason"] == "stop" and chunks[-2]["messageMetadata"]["usage"]["totalTokens"] > 0
    items = (await history_page(client, "ai-sdk", "h1"))["items"]
    assert [i["id"] for i in items] == ["u1", message_id]


async def test_agent_from_the_route_or_the_body(client):
    """The route's agent, else the body's ``agentId``, else the default; unknown agents are refused."""
    for path, extra in [("/v1/ai-sdk/agents/guarded/chat", {}), (CHAT, {"agentId": "guarded"})]:
        chunks = await post_chat(client, {"id": f"ag-{len(extra)}", "messages": [aisdk_user("u1", CALC)], **extra}, path)
        assert kinds(chunks)[-5:] == ["tool-input-available", "tool-approval-request", "finish-step", "finish",
                                      "[DONE]"]
        assert chunks[-2]["finishReason"] == "tool-calls"
    chunks = await post_chat(client, {"id": "ag-default", "messages": [aisdk_user("u1", CALC)]})
    assert "tool-output-available" in kinds(chunks)
    for path, extra in [("/v1/ai-sdk/agents/nobody/chat", {}), (CHAT, {"agentId": "nobody"})]:
        chunks = await post_chat(client, {"id": "ag-x", "messages": [aisdk_user("u1", "hi")], **extra}, path)
        assert error_text(chunks).startswith("UNKNOWN_AGENT: ")
        assert kinds(chunks) == ["error", "finish", "[DONE]"]


async def test_bad_requests_are_error_parts_not_plain_text(client):
    """§4: malformed JSON, wrong content type, ill-typed UIMessages → ``error`` part, HTTP 200, [DONE]."""
    cases = [
        (b"{nope", {"content-type": "application/json"}, "INVALID_JSON"),
        (b'{"id":"bad","messages":[]}', {"content-type": "text/plain"}, "UNSUPPORTED_MEDIA_TYPE"),
        ({"id": "bad", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": 1}]}]}, {},
         "INVALID_REQUEST"),
        ({"id": "bad", "messages": [{"id": "u1", "role": "robot", "parts": []}]}, {}, "INVALID_REQUEST"),
        ({"id": "bad", "messages": []}, {}, "NO_NEW_INPUT"),
    ]
    for body, headers, code in cases:
        chunks = await post_chat(client, body, headers=headers)
        assert kinds(chunks) == ["error", "finish", "[DONE]"]
        assert error_text(chunks).startswith(f"{code}: ")
    assert (await client.get("/v1/ai-sdk/threads/bad/messages")).status_code == 404


async def test_model_failure_closes_the_text_then_error_then_finish(client):
    chunks = await post_chat(client, {"id": "f1", "messages": [aisdk_user("u1", "/fail\nhi")]})
    assert kinds(chunks) == ["start", "start-step", "text-start", "text-delta", "text-end", "error", "finish",
                             "[DONE]"]
    assert error_text(chunks).startswith("MODEL_ERROR: ")


async def test_a_second_input_for_a_busy_thread_is_refused(server, client):
    """CONTRACT §5: one active run per thread; the second request gets THREAD_BUSY, nothing interleaves."""
    body = {"id": "busy1", "messages": [aisdk_user("u1", held("busy1", 5))]}
    async with client.stream("POST", CHAT, json=body) as response:
        first = b""
        stream = response.aiter_bytes()
        async for data in stream:
            first += data
            if b'"start-step"' in first:
                break
        chunks = await post_chat(client, {"id": "busy1", "messages": [aisdk_user("u2", "me too")]})
        assert error_text(chunks).startswith("THREAD_BUSY: ")
        await release(server, "busy1")
        async for data in stream:
            first += data
    assert text_of(parse_sse(first)) == "alpha bravo charlie delta echo"
    items = (await history_page(client, "ai-sdk", "busy1"))["items"]
    assert [i["id"] for i in items][:1] == ["u1"] and len(items) == 2


# -- dedup and decisions ---------------------------------------------------------------------------


async def test_resent_history_is_deduplicated_by_message_id(client):
    """§4: the client resends its whole history; committed ids are dropped, only new input runs."""
    first = await post_chat(client, {"id": "d1", "messages": [aisdk_user("u1", "one")]})
    assistant = (await history_page(client, "ai-sdk", "d1"))["items"][1]
    assert assistant["id"] == first[0]["messageId"]
    second = await post_chat(client, {"id": "d1", "messages": [aisdk_user("u1", "one"), assistant, aisdk_user("u2", "two")],
                                      "trigger": "submit-message"})
    assert text_of(second) == 'You said: "two".'
    assert second[0]["messageId"] != assistant["id"]
    items = (await history_page(client, "ai-sdk", "d1"))["items"]
    assert [(i["id"], i["role"]) for i in items] == [("u1", "user"), (assistant["id"], "assistant"),
                                                     ("u2", "user"), (second[0]["messageId"], "assistant")]
    again = await post_chat(client, {"id": "d1", "messages": [aisdk_user("u1", "one"), assistant, aisdk_user("u2", "two")]})
    assert error_text(again).startswith("NO_NEW_INPUT: ")
    # a regenerate is no new input either, yet it runs: on a new branch, the old path kept (issue 33,
    # tests/http/test_branches.py)
    regenerate = await post_chat(client, {"id": "d1", "messages": [aisdk_user("u1", "one")],
                                          "trigger": "regenerate-message"})
    assert text_of(regenerate) == 'You said: "one".'
    assert (await history_page(client, "ai-sdk", "d1", branch=0))["items"] == items


async def test_approval_round_trip_and_replayed_decisions(client):
    """§4: ``approval-responded`` resumes the waiting call in the same message; once decided, the part
    is replayed history and ignored."""
    path = "/v1/ai-sdk/agents/guarded/chat"
    first = await post_chat(client, {"id": "ap1", "messages": [aisdk_user("u1", CALC)]}, path)
    call = tool_call_id(first)
    assert first[kinds(first).index("tool-approval-request")] == {
        "type": "tool-approval-request", "approvalId": f"apr_{call}", "toolCallId": call}
    page = (await history_page(client, "ai-sdk", "ap1"))["items"]
    waiting = page[1]
    assert waiting["parts"][1]["state"] == "approval-requested"
    responded = answered(waiting, state="approval-responded", approval={"id": f"apr_{call}", "approved": True})
    body = {"id": "ap1", "messages": [page[0], responded], "trigger": "submit-message", "messageId": waiting["id"]}
    second = await post_chat(client, body, path)
    assert kinds(second)[:3] == ["start", "tool-output-available", "start-step"]
    assert second[0] == {"type": "start", "messageId": waiting["id"],
                         "messageMetadata": {"runId": waiting["metadata"]["runId"]}}
    assert second[1] == {"type": "tool-output-available", "toolCallId": call, "output": {"result": 5}}
    assert text_of(second) == "Here is what the tools said: calculator returned {\"result\":5}."
    assert second[-2]["finishReason"] == "stop"
    final = (await history_page(client, "ai-sdk", "ap1"))["items"]
    assert final[1]["parts"][1] == {"type": "tool-calculator", "toolCallId": call, "state": "output-available",
                                    "input": {"expression": "2+3"}, "output": {"result": 5},
                                    "approval": {"id": f"apr_{call}", "approved": True}}
    # the same continuation again: every part is decided already → nothing new
    again = await post_chat(client, body, path)
    assert error_text(again).startswith("NO_NEW_INPUT: ")
    # the final client state resent with a new question: the replayed parts are ignored
    third = await post_chat(client, {"id": "ap1", "messages": [*final, aisdk_user("u2", "thanks")]}, path)
    assert text_of(third) == 'You said: "thanks".'


async def test_partial_decisions_keep_the_run_waiting(client):
    """§4: the run continues once every pending call of the step is decided; the already-decided part
    resent with the next decision is replayed history."""
    path = "/v1/ai-sdk/agents/guarded/chat"
    text = '/call calculator {"expression":"1+1"}\n/call calculator {"expression":"2+2"}'
    first = await post_chat(client, {"id": "pd1", "messages": [aisdk_user("u1", text)]}, path)
    one, two = [c["toolCallId"] for c in first[:-1] if c["type"] == "tool-approval-request"]
    u1, waiting = (await history_page(client, "ai-sdk", "pd1"))["items"]
    parts = [dict(p) for p in waiting["parts"]]
    parts[1].update(state="approval-responded", approval={"id": f"apr_{one}", "approved": True})
    chunks = await post_chat(client, {"id": "pd1", "messages": [u1, {**waiting, "parts": parts}]}, path)
    assert chunks[1:] == [{"type": "tool-output-available", "toolCallId": one, "output": {"result": 2}},
                          chunks[2], "[DONE]"]
    assert chunks[2]["finishReason"] == "tool-calls"
    u1, waiting = (await history_page(client, "ai-sdk", "pd1"))["items"]
    assert [p.get("state") for p in waiting["parts"]] == [None, "output-available", "approval-requested"]
    parts = [dict(p) for p in waiting["parts"]]
    parts[2].update(state="approval-responded", approval={"id": f"apr_{two}", "approved": True})
    chunks = await post_chat(client, {"id": "pd1", "messages": [u1, {**waiting, "parts": parts}]}, path)
    assert chunks[1:3] == [{"type": "tool-output-available", "toolCallId": two, "output": {"result": 4}},
                           {"type": "start-step"}]
    assert text_of(chunks) == ('Here is what the tools said: calculator returned {"result":2}; '
                               'calculator returned {"result":4}.')


async def test_decisions_for_calls_that_are_not_pending_change_nothing(client):
    """§4: a decision for a call that is not pending → an ``error`` part, nothing committed."""
    path = "/v1/ai-sdk/agents/guarded/chat"
    first = await post_chat(client, {"id": "np1", "messages": [aisdk_user("u1", CALC)]}, path)
    call = tool_call_id(first)
    before = await history_page(client, "ai-sdk", "np1")
    u1, waiting = before["items"]
    ghost = {"id": waiting["id"], "role": "assistant", "parts": [
        {"type": "step-start"},
        {"type": "tool-calculator", "toolCallId": "ghost", "state": "approval-responded", "input": {},
         "approval": {"id": "apr_ghost", "approved": True}}]}
    wrong_id = answered(waiting, state="approval-responded", approval={"id": "apr_other", "approved": True})
    for message in (ghost, wrong_id):
        chunks = await post_chat(client, {"id": "np1", "messages": [u1, message]}, path)
        assert kinds(chunks) == ["error", "finish", "[DONE]"]
        assert error_text(chunks).startswith("TOOL_CALL_NOT_PENDING: ")
    assert await history_page(client, "ai-sdk", "np1") == before
    # the real decision still works afterwards
    ok = answered(waiting, state="approval-responded", approval={"id": f"apr_{call}", "approved": False})
    chunks = await post_chat(client, {"id": "np1", "messages": [u1, ok]}, path)
    assert kinds(chunks)[:3] == ["start", "tool-output-denied", "start-step"]
    # nothing waits any more: a late decision is refused
    late = answered(waiting, state="output-available", output={"x": 1})
    late["parts"][1]["toolCallId"] = "late"
    chunks = await post_chat(client, {"id": "np1", "messages": [u1, late]}, path)
    assert error_text(chunks).startswith("NO_PENDING_RUN: ")


async def test_client_tool_result_resumes_and_an_approval_for_it_is_refused(client):
    path = "/v1/ai-sdk/agents/frontend/chat"
    first = await post_chat(client, {"id": "ct1", "messages": [aisdk_user("u1", '/call ask_user {"question":"?"}')]},
                            path)
    assert kinds(first)[-4:] == ["tool-input-available", "finish-step", "finish", "[DONE]"]
    call = tool_call_id(first)
    u1, waiting = (await history_page(client, "ai-sdk", "ct1"))["items"]
    assert waiting["parts"][1] == {"type": "tool-ask_user", "toolCallId": call, "state": "input-available",
                                   "input": {"question": "?"}}
    approval = answered(waiting, state="approval-responded", approval={"id": f"apr_{call}", "approved": True})
    chunks = await post_chat(client, {"id": "ct1", "messages": [u1, approval]}, path)
    assert error_text(chunks).startswith("TOOL_CALL_NOT_PENDING: ")
    failed = answered(waiting, state="output-error", errorText="the user closed the dialog")
    chunks = await post_chat(client, {"id": "ct1", "messages": [u1, failed]}, path)
    assert chunks[1] == {"type": "tool-output-error", "toolCallId": call, "errorText": "the user closed the dialog"}
    assert text_of(chunks) == "Here is what the tools said: ask_user failed: the user closed the dialog."


# -- history ---------------------------------------------------------------------------------------


async def test_history_errors(client, server, monkeypatch):
    """Same rules as AG-UI: unknown thread 404, foreign or malformed cursor / bad limit 400, store 503."""
    await post_chat(client, {"id": "he1", "messages": [aisdk_user("u1", "a")]})
    await post_chat(client, {"id": "he2", "messages": [aisdk_user("u1", "b")]})
    assert (await client.get("/v1/ai-sdk/threads/nope/messages")).status_code == 404
    other = (await history_page(client, "ai-sdk", "he2"))["cursor"]
    for params in ({"cursor": other}, {"cursor": "garbage"}, {"limit": "0"}, {"limit": "x"}):
        response = await client.get("/v1/ai-sdk/threads/he1/messages", params=params)
        assert response.status_code == 400
        assert response.json()["error"]["code"] == ("INVALID_LIMIT" if "limit" in params else "INVALID_CURSOR")

    async def unavailable(*args: Any) -> None:
        raise StoreUnavailable("the store is down")

    monkeypatch.setattr(server.ctx.ledger, "get_thread", unavailable)
    response = await client.get("/v1/ai-sdk/threads/he1/messages")
    assert response.status_code == 503
    assert response.json()["error"]["code"] == "STORE_UNAVAILABLE"


async def test_paging_never_splits_a_runs_assistant_message(client):
    """Brief 6: a page that would end inside a run is extended to the run's end."""
    await post_chat(client, {"id": "pg1", "messages": [aisdk_user("u1", CALC)]})
    await post_chat(client, {"id": "pg1", "messages": [aisdk_user("u2", "next")]})
    whole = (await history_page(client, "ai-sdk", "pg1"))["items"]
    assert [i["role"] for i in whole] == ["user", "assistant", "user", "assistant"]
    assert [p["type"] for p in whole[1]["parts"]] == ["step-start", "tool-calculator", "step-start", "text"]
    pages, cursor = [], None
    for _ in range(6):
        page = await history_page(client, "ai-sdk", "pg1", limit=1, **({"cursor": cursor} if cursor else {}))
        pages.append(page["items"])
        if not page["items"]:
            assert page["cursor"] == cursor
            break
        cursor = page["cursor"]
    assert pages == [[whole[0]], [whole[1]], [whole[2]], [whole[3]], []]


async def test_run_boundaries_are_found_across_read_windows(client):
    """A run longer than the adapter's read window (64) still pages as one UIMessage, from a cursor
    before it and from a cursor inside it."""
    calls = "\n".join(f'/call calculator {{"expression":"{i}+1"}}' for i in range(70))
    await post_chat(client, {"id": "long1", "messages": [aisdk_user("u1", calls)]})
    whole = (await history_page(client, "ai-sdk", "long1", limit=500))["items"]
    assert len(whole) == 2 and len(whole[1]["parts"]) == 1 + 70 + 2
    first = await history_page(client, "ai-sdk", "long1", limit=1)
    assert first["items"] == whole[:1]
    second = await history_page(client, "ai-sdk", "long1", limit=1, cursor=first["cursor"])
    assert second["items"] == whole[1:]
    assert (await history_page(client, "ai-sdk", "long1", cursor=second["cursor"]))["items"] == []
    inside = encode_cursor("long1", 70)  # a committed position in the middle of the run
    assert (await history_page(client, "ai-sdk", "long1", limit=1, cursor=inside))["items"] == whole[1:]


async def test_a_page_that_starts_inside_a_resumed_run_resends_it_whole(client):
    """A waiting run read, then resumed: the next page re-sends the run's UIMessage whole, same id."""
    path = "/v1/ai-sdk/agents/guarded/chat"
    first = await post_chat(client, {"id": "rs1", "messages": [aisdk_user("u1", CALC)]}, path)
    page = await history_page(client, "ai-sdk", "rs1")
    u1, waiting = page["items"]
    call = tool_call_id(first)
    await post_chat(client, {"id": "rs1", "messages": [u1, answered(
        waiting, state="approval-responded", approval={"id": f"apr_{call}", "approved": True})]}, path)
    tail = await history_page(client, "ai-sdk", "rs1", cursor=page["cursor"])
    assert [i["id"] for i in tail["items"]] == [waiting["id"]]
    assert tail["items"] == (await history_page(client, "ai-sdk", "rs1"))["items"][1:]
    assert [p.get("state") for p in tail["items"][0]["parts"]] == [None, "output-available", None, "done"]


# -- AG-UI ↔ AI SDK ---------------------------------------------------------------------------------


async def test_agui_thread_continues_over_ai_sdk(client):
    """Brief 7: a client-tool call left waiting over AG-UI is answered over the AI SDK (same ledger)."""
    events = await post_agui(client, agui_body("x1", "r1", [
        {"id": "u1", "role": "user", "content": '/call ask_user {"question":"a"}\n/call ask_user {"question":"b"}'}
    ]), "/v1/ag-ui/agents/frontend")
    assert types(events)[-1] == "RUN_FINISHED"
    calls = [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]
    # AG-UI answers the first call (committed under the client's tool message id); the run keeps waiting
    events = await post_agui(client, agui_body("x1", "r2", [
        {"id": "u1", "role": "user", "content": "ignored: already committed"},
        {"id": "tm1", "role": "tool", "toolCallId": calls[0], "content": "red"},
    ]), "/v1/ag-ui/agents/frontend")
    assert types(events)[-1] == "RUN_FINISHED"
    u1, waiting = (await history_page(client, "ai-sdk", "x1"))["items"]
    assert [p.get("state") for p in waiting["parts"]] == [None, "output-available", "input-available"]
    # the AI SDK client answers the second; its copy of the first is replayed history
    chunks = await post_chat(client, {"id": "x1", "messages": [
        u1, answered(waiting, state="output-available", output="blue")]}, "/v1/ai-sdk/agents/frontend/chat")
    assert chunks[:2] == [{"type": "start", "messageId": waiting["id"],
                           "messageMetadata": {"runId": waiting["metadata"]["runId"]}},
                          {"type": "tool-output-available", "toolCallId": calls[1], "output": "blue"}]
    assert text_of(chunks) == 'Here is what the tools said: ask_user returned red; ask_user returned "blue".'
    agui = (await client.get("/v1/ag-ui/threads/x1/messages")).json()["items"]
    assert [m["role"] for m in agui] == ["user", "assistant", "tool", "tool", "assistant"]
    assert agui[-1]["content"] == text_of(chunks)


async def test_ai_sdk_thread_continues_over_agui(client):
    """Brief 7: an approval left waiting over the AI SDK is decided over AG-UI, then both continue."""
    path = "/v1/ai-sdk/agents/guarded/chat"
    first = await post_chat(client, {"id": "y1", "messages": [aisdk_user("u1", CALC)]}, path)
    call = tool_call_id(first)
    agui = (await client.get("/v1/ag-ui/threads/y1/messages")).json()["items"]
    events = await post_agui(client, agui_body("y1", "r2", [
        *agui, {"id": "tm1", "role": "tool", "toolCallId": call, "content": "yes"}]), "/v1/ag-ui/agents/guarded")
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ['{"result":5}']
    agui = (await client.get("/v1/ag-ui/threads/y1/messages")).json()["items"]
    events = await post_agui(client, agui_body("y1", "r3", [*agui, {"id": "u2", "role": "user", "content": "more"}]),
                             "/v1/ag-ui/agents/guarded")
    assert types(events)[-1] == "RUN_FINISHED"
    items = (await history_page(client, "ai-sdk", "y1"))["items"]
    assert [(i["role"], [p["type"] for p in i["parts"]]) for i in items] == [
        ("user", ["text"]),
        ("assistant", ["step-start", "tool-calculator", "step-start", "text"]),
        ("user", ["text"]),
        ("assistant", ["step-start", "text"]),
    ]
    assert items[1]["id"] == first[0]["messageId"]
    assert items[1]["parts"][1]["approval"] == {"id": f"apr_{call}", "approved": True}
    # and the AI SDK client carries on from that history
    chunks = await post_chat(client, {"id": "y1", "messages": [*items, aisdk_user("u3", "last")]}, path)
    assert text_of(chunks) == 'You said: "last".'
    assert orjson.dumps(items)  # the projection is plain JSON


# -- state and message metadata (docs/clients.md: AI SDK state and message metadata) -----------------------------


async def test_state_changes_are_data_state_parts_and_history_holds_the_current_state(client, server):
    """A state change is a ``data-state`` chunk under the run's one id; the run id rides on ``start`` and
    ``finish`` as message metadata; the history's last run ends with the current state."""
    set_color = '/call set_state {"key": "color", "value": "blue"}'
    chunks = await post_chat(client, {"id": "st1", "messages": [aisdk_user("u1", set_color)]})
    run_id = chunks[0]["messageMetadata"]["runId"]
    (run,) = await server.ctx.ledger.list_runs("st1")
    assert run_id == run.run_id
    assert [c for c in chunks if c != "[DONE]" and c["type"] == "data-state"] == [
        {"type": "data-state", "id": f"state_{run_id}", "data": {"color": "blue"}}]
    assert chunks[-2]["messageMetadata"] == {"runId": run_id, "usage": {
        "inputTokens": run.usage.input_tokens, "outputTokens": run.usage.output_tokens,
        "totalTokens": run.usage.total_tokens}}
    for chunk in chunks[:-1]:
        check_chunk(chunk)
    items = (await history_page(client, "ai-sdk", "st1"))["items"]
    assert items[-1]["metadata"] == chunks[-2]["messageMetadata"]
    assert items[-1]["parts"][-1] == {"type": "data-state", "id": f"state_{run_id}", "data": {"color": "blue"}}
