"""Hardening, what a request may send (issue 12): bounded work per request, nothing committed that
cannot be sent back, a coded refusal instead of a 500.

Each test is one finding of the adversarial pass, replayed over HTTP against a live server.
"""

from __future__ import annotations

import json
import threading
from typing import Any

import trio
from hypothesis import given, settings
from hypothesis import strategies as st
from trio_websocket import open_websocket_url

from awaken.core import jsonbody
from awaken.core.jsonbody import COUNT_WINDOW, MAX_CONTAINERS, MAX_DEPTH, MAX_MESSAGES, count_containers
from awaken.tools import MAX_STATE_BYTES
from awaken.wires.agui import adapter as agui_adapter
from awaken.wires.memo import Memoized
from tests.builders import (
    agui_body,
    agui_text,
    aisdk_user,
    default_config_data,
    history_page,
    live_server,
    make_config,
    parse_sse,
    post_agui,
    types,
    user,
    ws_url,
)
from tests.http.test_aisdk_http import answered, post_chat, tool_call_id
from tests.streams.test_ws_aisdk import chat, chat_over_ws, until_done
from tests.streams.test_ws_transport import run_over_ws


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels - 1):
        value = [value]
    return value


def run_error(events: list[dict[str, Any]]) -> tuple[str, str]:
    assert events[-1]["type"] == "RUN_ERROR", types(events)
    return events[-1]["code"], events[-1]["message"]


async def test_a_request_with_more_messages_than_the_cap_is_refused_and_commits_nothing(client, server):
    messages = [user(f"m{i}", "hi") for i in range(MAX_MESSAGES + 1)]
    events = await post_agui(client, agui_body("many", "r1", messages))
    assert run_error(events)[0] == "TOO_MANY_MESSAGES"
    assert await server.ctx.ledger.get_thread("many") is None


async def test_a_body_of_more_arrays_and_objects_than_the_cap_is_refused_undecoded(client, server, monkeypatch):
    """Finding 2 as filed: 300,000 tiny messages. Its decode alone would hold the interpreter (every
    thread, the event loop's too) for a hundred milliseconds and more; it is refused before decoding,
    BODY_TOO_LARGE, and commits nothing."""
    decoded: list[int] = []
    real_loads = jsonbody.orjson.loads

    def loads(data):  # noqa: ANN001, ANN202
        decoded.append(len(data))
        return real_loads(data)

    monkeypatch.setattr(jsonbody.orjson, "loads", loads)
    messages = [user(f"m{i}", "hi") for i in range(300_000)]
    events = await post_agui(client, agui_body("finding-2", "r1", messages))
    code, message = run_error(events)
    assert code == "BODY_TOO_LARGE" and f"{MAX_CONTAINERS:,}" in message
    assert not [size for size in decoded if size > 1_000_000]  # the body itself was never decoded
    assert await server.ctx.ledger.get_thread("finding-2") is None


def chain(depth: int, leaf: Any) -> Any:
    """``leaf`` inside ``depth`` containers, objects and arrays in turn."""
    for level in range(depth):
        leaf = [leaf] if level % 2 else {"k": leaf}
    return leaf


@settings(max_examples=200, deadline=None)
@given(depth=st.integers(1, MAX_DEPTH + 3), messages=st.booleans(), pad=st.integers(0, 40))
def test_a_small_body_is_refused_for_nesting_exactly_when_the_walk_refuses_it(depth, messages, pad):
    """The nesting walk is skipped for a small body with few brackets; the answer is the walk's."""
    data = {"messages": [chain(depth - 2, "x")] if messages else [], "other": chain(depth - 1, "y" * pad)}
    body = json.dumps(data).encode()
    for messages_deep in (True, False):
        walked = jsonbody.too_deep(data, MAX_DEPTH) if messages_deep else jsonbody.too_deep(
            {k: v for k, v in data.items() if k != "messages"}, MAX_DEPTH)
        try:
            jsonbody.load_json_object(body, messages_deep=messages_deep)
            refused = False
        except Exception as exc:  # noqa: BLE001
            assert getattr(exc, "code", None) == "NESTING_TOO_DEEP"
            refused = True
        assert refused == walked, (depth, messages, messages_deep)


def test_the_container_bound_counts_every_bracket_across_windows():
    body = b"[" * (COUNT_WINDOW - 1) + b"{[" + b"x" * 10 + b"{"
    assert count_containers(body, stop=len(body)) == COUNT_WINDOW + 2
    assert count_containers(b'{"text": "[[[]]]"}') == 4  # brackets in strings count: an upper bound
    assert count_containers(b"[" * (3 * COUNT_WINDOW), stop=10) == COUNT_WINDOW  # stops past ``stop``


async def test_a_request_with_the_most_messages_accepted_streams_to_its_end(client, server):
    """The largest accepted replay: its run's first events (``RUN_STARTED`` echoes the input) are larger
    than the replay the broadcast keeps, and still reach the client that started it."""
    messages = [user(f"m{i}", "hi") for i in range(MAX_MESSAGES)]
    events = await post_agui(client, agui_body("most", "r1", messages))
    assert types(events)[0] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", types(events)[-3:]
    assert agui_text(events) == 'You said: "hi".'
    assert len(await server.ctx.ledger.read_messages("most", 0, MAX_MESSAGES + 10)) == MAX_MESSAGES + 1


async def test_a_large_request_is_parsed_and_turned_into_its_run_off_the_event_loop(client, monkeypatch):
    """Finding 2: decoding a body at the message cap and the adapter's work on it (dedup, ids, stamping)
    take tens of milliseconds; they run in a worker thread, never on the thread of the event loop."""
    loop_thread = threading.get_ident()
    where: dict[str, int] = {}
    protocol = type(agui_adapter.PROTOCOL)
    real_parse, real_build = protocol.parse, protocol.to_run_request

    def parse(self, *args):  # noqa: ANN001, ANN002, ANN202 - the protocol's signature
        where["parse"] = threading.get_ident()
        return real_parse(self, *args)

    def to_run_request(self, *args):  # noqa: ANN001, ANN002, ANN202
        where["to_run_request"] = threading.get_ident()
        return real_build(self, *args)

    real_memo_parse = Memoized.parse  # the server's parse: its replay memo around the protocol's

    def memo_parse(self, *args):  # noqa: ANN001, ANN002, ANN202
        where["parse"] = threading.get_ident()
        return real_memo_parse(self, *args)

    monkeypatch.setattr(protocol, "parse", parse)
    monkeypatch.setattr(Memoized, "parse", memo_parse)
    monkeypatch.setattr(protocol, "to_run_request", to_run_request)
    events = await post_agui(client, agui_body("big", "r1", [user(f"m{i}", "hi") for i in range(MAX_MESSAGES)]))
    assert events[-1]["type"] == "RUN_FINISHED", types(events)
    assert sorted(where) == ["parse", "to_run_request"]
    assert loop_thread not in where.values()


async def test_a_request_nested_deeper_than_the_cap_is_refused_and_commits_nothing(client, server):
    message = {"id": "m1", "role": "user", "content": [{"type": "text", "text": "hi", "x": nested(MAX_DEPTH)}]}
    events = await post_agui(client, agui_body("deep", "r1", [message]))
    assert run_error(events)[0] == "NESTING_TOO_DEEP"
    assert await server.ctx.ledger.get_thread("deep") is None


async def test_set_state_nested_too_deep_is_a_tool_error_and_the_thread_keeps_working(client, server):
    call = '/call set_state {"key": "k", "value": ' + "[" * 300 + "]" * 300 + "}"
    first = await post_agui(client, agui_body("poison", "r1", [user("m1", call)]))
    assert first[-1]["type"] == "RUN_FINISHED"
    result = next(e for e in first if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"].startswith("set_state failed: the state would nest deeper than 64 levels")
    assert (await server.ctx.ledger.get_thread("poison")).state == {}
    second = await post_agui(client, agui_body("poison", "r2", [user("m1", call), user("m2", "still there?")]))
    assert second[-1]["type"] == "RUN_FINISHED"


async def test_set_state_past_the_size_cap_is_a_tool_error_and_the_thread_keeps_working(client, server):
    calls = [f'/call set_state {{"key": "k{i}", "value": "{"x" * (MAX_STATE_BYTES // 4)}"}}' for i in range(4)]
    messages = [user(f"m{i}", call) for i, call in enumerate(calls)]
    for i in range(len(calls)):
        events = await post_agui(client, agui_body("big", f"r{i}", messages[: i + 1]))
        assert events[-1]["type"] == "RUN_FINISHED", types(events)
    state = (await server.ctx.ledger.get_thread("big")).state
    assert sorted(state) == ["k0", "k1", "k2"]
    last = await post_agui(client, agui_body("big", "r9", [*messages, user("m9", "hello")]))
    assert last[-1]["type"] == "RUN_FINISHED"
    assert next(e for e in last if e["type"] == "STATE_SNAPSHOT")["snapshot"] == state


async def test_an_ai_sdk_tool_output_nested_too_deep_is_a_coded_refusal_not_a_500(client, server):
    path = "/v1/ai-sdk/agents/frontend/chat"
    first = await post_chat(client, {"id": "deep", "messages": [aisdk_user("u1", '/call ask_user {"question":"?"}')]},
                            path)
    call = tool_call_id(first)
    u1, waiting = (await history_page(client, "ai-sdk", "deep"))["items"]
    response = await client.post(path, json={"id": "deep", "messages": [
        u1, answered(waiting, state="output-available", output=nested(300))]})
    assert response.status_code == 200
    chunks = parse_sse(response.content)
    assert chunks[-3]["type"] == "error" and chunks[-3]["errorText"].startswith("NESTING_TOO_DEEP: ")
    assert (await server.ctx.ledger.thread_view("deep")).pending[0].tool_call_id == call


async def test_an_ai_sdk_tool_output_nested_too_deep_over_websocket_is_a_coded_refusal(server):
    """Finding 5 over WebSocket (it was ``INTERNAL_ERROR``): the same refusal as over HTTP, the call
    still pending, the socket still serving."""
    async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
        question = aisdk_user("d-u1", '/call ask_user {"question":"?"}')
        asked = await chat_over_ws(ws, chat("deep-ws", [question], agentId="frontend"))
        call = next(c for c in asked if isinstance(c, dict) and c["type"] == "tool-input-available")
        part = {"type": "tool-ask_user", "toolCallId": call["toolCallId"], "state": "output-available",
                "input": call["input"], "output": nested(300)}
        start = next(c for c in asked if isinstance(c, dict) and c["type"] == "start")
        assistant = {"id": start["messageId"], "role": "assistant", "parts": [part]}
        await ws.send_message(json.dumps(chat("deep-ws", [question, assistant], agentId="frontend")))  # orjson: 255 levels
        refused = await until_done(ws)
        errors = [c for c in refused if isinstance(c, dict) and c["type"] == "error"]
        assert len(errors) == 1 and errors[0]["errorText"].startswith("NESTING_TOO_DEEP: "), refused
        again = await chat_over_ws(ws, chat("other-ws", [aisdk_user("o-u1", "hello")]))
        assert any(isinstance(c, dict) and c["type"] == "finish" and c.get("finishReason") == "stop" for c in again)
    assert (await server.ctx.ledger.thread_view("deep-ws")).pending[0].tool_call_id == call["toolCallId"]


async def test_a_frame_larger_than_the_buffer_reaches_a_reading_client_whole(tmp_path):
    data = default_config_data()
    config = make_config(tmp_path, server={**data["server"], "max_buffered_bytes": 64 * 1024})
    word = "x" * (200 * 1024)  # the scripted model echoes it as one delta: one frame over three times the buffer
    async with live_server(config) as srv, srv.client() as client:
        events = await post_agui(client, agui_body("wide", "r1", [user("m1", word)]))
        assert events[-1]["type"] == "RUN_FINISHED", types(events)
        assert agui_text(events) == f'You said: "{word}".'
        assert (await srv.ctx.ledger.get_run("r1")).status.value == "completed"
        async with open_websocket_url(ws_url(srv.base_url, "/v1/ag-ui/ws"), message_queue_size=4,
                                      max_message_size=1024 * 1024) as ws:
            ws_events = await run_over_ws(ws, agui_body("wide-ws", "r2", [user("m1", word)]))
        assert ws_events[-1]["type"] == "RUN_FINISHED", types(ws_events)
        assert agui_text(ws_events) == f'You said: "{word}".'


async def test_a_delta_larger_than_the_default_buffer_and_replay_reaches_a_reading_client_whole(client, server):
    """The finding as filed: a 5 MB delta with the default ``max_buffered_bytes`` (4 MiB) and
    ``replay_bytes`` (1 MiB). The frame is the run's first delta, larger than the whole replay the
    broadcast keeps, so it has pushed the run's first frames out of that replay before the
    connection that started the run is watching: that connection still gets every frame."""
    word = "x" * (5 * 1024 * 1024)
    assert len(word) > server.ctx.config.server.max_buffered_bytes > server.ctx.config.server.replay_bytes
    events = await post_agui(client, agui_body("huge", "r1", [user("m1", word)]))
    assert types(events)[0] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED", types(events)[-3:]
    assert agui_text(events) == f'You said: "{word}".'
    assert (await server.ctx.ledger.get_run("r1")).status.value == "completed"


async def test_a_declared_content_length_over_the_limit_is_refused_before_the_body_is_read(server):
    """Only the head and a few bytes are sent: the refusal arrives without waiting for the rest."""
    host, port = server.base_url.removeprefix("http://").split(":")
    stream = await trio.open_tcp_stream(host, int(port))
    async with stream:
        await stream.send_all(b"POST /v1/ag-ui HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                              b"content-length: 500000000\r\n\r\n{")
        received = b""
        with trio.fail_after(5):
            while b"RUN_ERROR" not in received:
                received += await stream.receive_some(65536)
    assert b"BODY_TOO_LARGE" in received
