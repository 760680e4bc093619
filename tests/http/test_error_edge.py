"""One error edge (issue 27 item 4): every JSON error answer is ``errors.error_response``'s: the code's
status from the catalogue, one body shape, ``Cache-Control: no-store``; the same refusal gets the same
status on every JSON route (``docs/errors.md``), while the run routes keep refusing inside their stream.

alice and bob are users, ops is an admin (the threads API's server, ``[auth] mode = "tokens"``).
"""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from awaken.core.errors import CODES, StoreUnavailable
from tests.builders import agui_body, bearer, held, parse_sse, types, user
from tests.http import test_threads_api as threads_api
from tests.http.test_threads_api import KEYS, _release, agui_run, chat_body, started

ROOT = Path(__file__).resolve().parents[2]

# the threads API's server and client: alice and bob are users, ops is an admin
server = threads_api.server
client = threads_api.client

#: every JSON route on one thread (``{}``: the thread id)
ON_A_THREAD = [
    ("GET", "/v1/ag-ui/threads/{}/messages"),
    ("GET", "/v1/ai-sdk/threads/{}/messages"),
    ("GET", "/v1/threads/{}"),
    ("DELETE", "/v1/threads/{}"),
    ("POST", "/v1/threads/{}/stop"),
]
#: every paged JSON route (``{}``: a thread id)
PAGED = ["/v1/ag-ui/threads/{}/messages", "/v1/ai-sdk/threads/{}/messages", "/v1/threads"]


def as_(who: str) -> dict[str, str]:
    return bearer(KEYS[who])


def assert_error(response: httpx.Response, code: str) -> None:
    """``response`` is the JSON error ``code``: its catalogue status, the one shape, never cached."""
    assert (response.status_code, response.headers.get("content-type")) == (CODES[code].status, "application/json"), (
        code, response.status_code, response.text)
    assert response.headers["cache-control"] == "no-store"
    body = response.json()
    assert list(body) == ["error"] and sorted(body["error"]) == ["code", "message"], body
    assert body["error"]["code"] == code, body
    assert isinstance(body["error"]["message"], str) and body["error"]["message"], body


async def test_an_unknown_thread_is_404_on_every_json_route_whether_missing_or_anothers(client):
    await agui_run(client, "alice", "t-alice", "hi")
    for method, path in ON_A_THREAD:
        for who, thread in (("alice", "t-nowhere"), ("bob", "t-alice"), ("ops", "t-nowhere")):
            response = await client.request(method, path.format(thread), headers=as_(who))
            assert_error(response, "UNKNOWN_THREAD")
            assert response.json()["error"]["message"] == f"no thread {thread!r}"
    # and a run of another user's thread, over SSE, before any stream starts (the run routes' one status)
    response = await client.post("/v1/ag-ui", json=agui_body("t-alice", "r-bob", [user("b1", "mine?")]),
                                 headers=as_("bob"))
    assert_error(response, "UNKNOWN_THREAD")


async def test_a_bad_cursor_or_limit_is_400_on_every_paged_route(client):
    await agui_run(client, "alice", "t-paged", "hi")
    for path in PAGED:
        url = path.format("t-paged")
        assert_error(await client.get(url, params={"cursor": "garbage"}, headers=as_("alice")), "INVALID_CURSOR")
        for limit in ("0", "x", "501"):
            assert_error(await client.get(url, params={"limit": limit}, headers=as_("alice")), "INVALID_LIMIT")


async def test_an_unavailable_store_is_503_on_every_json_route(client, server, monkeypatch):
    await agui_run(client, "alice", "t-store", "hi")

    async def unavailable(*args: Any, **kwargs: Any) -> None:
        raise StoreUnavailable("the store is down")

    for name in ("get_thread", "list_thread_summaries", "probe_write"):
        monkeypatch.setattr(server.ctx.ledger, name, unavailable)
    for method, path in [*ON_A_THREAD, ("GET", "/v1/threads")]:
        response = await client.request(method, path.format("t-store"), headers=as_("alice"))
        assert_error(response, "STORE_UNAVAILABLE")
    assert_error(await client.get("/readyz"), "STORE_UNAVAILABLE")


async def test_a_busy_thread_is_409_on_a_json_route_and_a_refusal_inside_the_run_routes_stream(client, server):
    gate = "edge-busy"
    async with trio.open_nursery() as nursery:
        nursery.start_soon(agui_run, client, "alice", "t-busy", held(gate, 3))
        await started(server, "t-busy")
        assert_error(await client.delete("/v1/threads/t-busy", headers=as_("alice")), "THREAD_BUSY")
        # the run routes refuse the same code inside their stream, HTTP 200, as the contract says
        refused = await client.post("/v1/ag-ui", json=agui_body("t-busy", "r2", [user("u2", "again")]),
                                    headers=as_("alice"))
        assert refused.status_code == 200 and refused.headers["content-type"].startswith("text/event-stream")
        events = parse_sse(refused.content)
        assert types(events) == ["RUN_ERROR"] and events[0]["code"] == "THREAD_BUSY"
        chat = await client.post("/v1/ai-sdk/chat", json=chat_body("t-busy", "u3", "again"), headers=as_("alice"))
        assert chat.status_code == 200
        assert [c for c in parse_sse(chat.content) if isinstance(c, dict) and c.get("type") == "error"]
        await _release(client, gate)


@pytest.mark.parametrize(("request_", "code"), [
    (("GET", "/v1/ag-ui/agents/nobody/capabilities", {}), "UNKNOWN_AGENT"),
    (("GET", "/v1/no-such-route", {}), "NOT_FOUND"),
    (("POST", "/v1/agents", {}), "METHOD_NOT_ALLOWED"),         # a quart route
    (("GET", "/v1/ag-ui", {}), "METHOD_NOT_ALLOWED"),           # a raw ASGI run route
    (("GET", "/v1/agents", {"authorization": ""}), "UNAUTHENTICATED"),
    (("GET", "/v1/agents", {"authorization": "Bearer wrong-key-0123456789"}), "UNAUTHENTICATED"),
    (("GET", "/v1/agents", {"host": "evil.example"}), "HOST_NOT_ALLOWED"),
    (("DELETE", "/v1/threads/x", {"origin": "https://evil.example"}), "ORIGIN_NOT_ALLOWED"),
    (("OPTIONS", "/v1/agents", {"origin": "https://evil.example", "access-control-request-method": "GET"}),
     "ORIGIN_NOT_ALLOWED"),                                     # a refused CORS preflight
])
async def test_every_refusal_in_front_of_a_route_is_the_one_json_error(client, request_, code):
    method, path, headers = request_
    sent = {k: v for k, v in {"authorization": f"Bearer {KEYS['alice']}", **headers}.items() if v}
    response = await client.request(method, path, headers=sent)
    assert_error(response, code)
    if code == "METHOD_NOT_ALLOWED":
        assert response.headers["allow"]
    if code == "UNAUTHENTICATED":
        assert response.headers["www-authenticate"].startswith("Bearer")


def _error_dicts(tree: ast.AST) -> list[int]:
    """Lines of the dict literals ``{"error": {"code": …}}`` in ``tree``: a JSON error written by hand."""
    lines = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Dict):
            for key, value in zip(node.keys, node.values, strict=True):
                if (isinstance(key, ast.Constant) and key.value == "error" and isinstance(value, ast.Dict)
                        and any(isinstance(k, ast.Constant) and k.value == "code" for k in value.keys)):
                    lines.append(node.lineno)
    return lines


def test_one_function_writes_every_json_error():
    """Only ``errors.error_body`` (behind ``error_response``) spells the JSON error out."""
    found = {str(path.relative_to(ROOT)): lines for path in (ROOT / "awaken").rglob("*.py")
             if (lines := _error_dicts(ast.parse(path.read_text())))}
    assert list(found) == ["awaken/core/errors.py"], found
    assert len(found["awaken/core/errors.py"]) == 1
