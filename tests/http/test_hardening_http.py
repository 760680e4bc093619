"""Hardening, the HTTP surface (issue 12): every input class answers JSON with a code, and every id
a run route accepts can be read back on every route.

The fuzz test drives the four run and history routes of both ledgers with hypothesis through the
ASGI app in process and asserts the only two promises that hold for any input: never a 500, and a
JSON body (or an SSE stream of JSON events).
"""

from __future__ import annotations

import tempfile
from pathlib import Path
from urllib.parse import quote

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.http.app import build_asgi
from awaken.http.context import ServerContext
from tests.builders import agui_body, make_config, parse_sse, post_agui, user

HISTORY = ("/v1/ag-ui/threads/{}/messages", "/v1/ai-sdk/threads/{}/messages")


@pytest.mark.parametrize("limit", ["²", "①", "٣", "1.5", " 5", "0", "501"])
async def test_a_bad_limit_is_400_invalid_limit_in_json_on_both_history_routes(client, limit):
    await post_agui(client, agui_body("lim", "r1", [user("m1", "hi")]))
    for route in HISTORY:
        response = await client.get(route.format("lim"), params={"limit": limit})
        assert response.status_code == 400
        assert response.json()["error"]["code"] == "INVALID_LIMIT"


@pytest.mark.parametrize("thread_id", ["/lead", ".", "..", "   ", " pad", "a\nb", "x" * 257])
async def test_an_id_history_could_not_serve_is_refused_at_the_door(client, server, thread_id):
    events = await post_agui(client, agui_body(thread_id, "r1", [user("m1", "hi")]))
    assert events[-1]["type"] == "RUN_ERROR" and events[-1]["code"] == "INVALID_ID"
    assert await server.ctx.ledger.get_thread(thread_id) is None
    for route in HISTORY:
        response = await client.get(route.format(quote(thread_id, safe="")))
        assert response.status_code == 404 and response.json()["error"]["code"] in ("UNKNOWN_THREAD", "NOT_FOUND")


async def test_run_and_message_ids_follow_the_same_rule(client, server):
    events = await post_agui(client, agui_body("ok", "bad\x00run", [user("m1", "hi")]))
    assert events[-1]["code"] == "INVALID_ID"
    events = await post_agui(client, agui_body("ok", "r1", [user("m" * 300, "hi")]))
    assert events[-1]["code"] == "INVALID_ID"
    assert await server.ctx.ledger.get_thread("ok") is None


async def test_every_accepted_id_reads_back_on_both_history_routes(client):
    for thread_id in ["a b", "q?#%&=+", "ünï-cødé", "x" * 256, "...", "a.b", "a/b", "a/../b",
                      "ws-http://localhost:3000", "trail/"]:
        events = await post_agui(client, agui_body(thread_id, "r-" + str(len(thread_id)), [user("m1", "hi")]))
        assert events[-1]["type"] == "RUN_FINISHED", thread_id
        for route in HISTORY:
            response = await client.get(route.format(quote(thread_id, safe="")))
            assert response.status_code == 200, (thread_id, route)
            assert len(response.json()["items"]) == 2


@pytest.mark.parametrize(("method", "path"), [("GET", "/v1/ag-ui"), ("PUT", "/v1/ag-ui/agents/assistant"),
                                              ("GET", "/v1/ai-sdk/chat"), ("DELETE", "/v1/ai-sdk/agents/x/chat")])
async def test_a_wrong_method_on_a_run_route_is_405_json_with_allow(client, method, path):
    response = await client.request(method, path)
    assert response.status_code == 405
    assert response.headers["allow"] == "POST"
    assert response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"


async def test_wrong_methods_and_unknown_routes_elsewhere_are_json(client):
    response = await client.post("/v1/ag-ui/threads/x/messages")
    assert response.status_code == 405 and response.json()["error"]["code"] == "METHOD_NOT_ALLOWED"
    response = await client.get("/v1/nothing-here")
    assert response.status_code == 404 and response.json()["error"]["code"] == "NOT_FOUND"


# -- fuzz ------------------------------------------------------------------------------------------

_ids = st.one_of(st.text(max_size=12), st.sampled_from(["/x", ".", "", " ", "a\u2028b", "x" * 300]))
_json_values = st.recursive(st.none() | st.booleans() | st.integers(-(2**53), 2**53) | st.text(max_size=8),
                            lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                         max_size=3),
                            max_leaves=12)
_messages = st.lists(st.fixed_dictionaries({"id": _ids, "role": st.sampled_from(["user", "tool", "x", 1]),
                                            "content": _json_values}, optional={"parts": _json_values}),
                     max_size=3)
_bodies = st.one_of(
    st.binary(max_size=64),
    st.builds(lambda t, r, m, extra: orjson.dumps({"threadId": t, "runId": r, "id": t, "messages": m, **extra}),
              _ids, _ids, _messages, st.dictionaries(st.sampled_from(["state", "tools", "trigger", "agentId"]),
                                                     _json_values, max_size=2)),
)
_requests = st.one_of(
    st.tuples(st.just("POST"), st.sampled_from(["/v1/ag-ui", "/v1/ai-sdk/chat"]), _bodies,
              st.sampled_from(["application/json", "text/plain", ""]), st.just({})),
    st.tuples(st.sampled_from(["GET", "POST", "PATCH"]), st.sampled_from(HISTORY).flatmap(
        lambda route: _ids.map(lambda t: route.format(quote(t, safe="")))), st.just(b""), st.just(""),
              st.dictionaries(st.sampled_from(["limit", "cursor"]), st.text(max_size=6), max_size=2)),
)


@pytest.mark.parametrize("backend", ["sqlite", "files"])
@settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck))
@given(request=_requests)
async def test_fuzzed_requests_on_run_and_history_routes_never_500_and_always_answer_json(backend, request):
    method, path, body, content_type, params = request
    ctx = ServerContext.build(make_config(Path(tempfile.mkdtemp(prefix="awaken-fuzz-")), backend=backend))
    await ctx.open()
    try:
        transport = httpx.ASGITransport(app=build_asgi(ctx))
        async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1") as client:
            headers = {"content-type": content_type} if content_type else {}
            response = await client.request(method, path, content=body, params=params, headers=headers)
    finally:
        await ctx.aclose()
    assert response.status_code < 500, (response.status_code, response.text)
    if response.headers["content-type"].startswith("text/event-stream"):
        events = parse_sse(response.content)
        assert events and all(isinstance(e, (dict, str)) for e in events)
    else:
        assert response.headers["content-type"] == "application/json", response.text
        assert "error" in response.json() or "items" in response.json()
