"""No cross-site page changes state (issue 26 item 2), and CopilotKit's envelope never answers 500 (finding 5).

A page on another site can send a browser's "simple" requests without any preflight: ``text/plain``,
a form (urlencoded or multipart), or no body at all. Each state-changing route gets each of those from
a foreign ``Origin`` while a run is held open (the scripted model's ``/hold``): every one is refused
``403 ORIGIN_NOT_ALLOWED`` and nothing changed (no new thread, the held run still running, the
committed thread still there). Requests without ``Origin`` are unaffected (a bodiless stop still
stops), the server's own origin passes, and the CopilotKit routes require the JSON media type itself.
"""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
import trio

from awaken.engine.state import RunStatus
from tests.builders import LiveServer, agui_body, held, parse_sse, post_agui, release, types, user

FOREIGN = "http://evil.example"
SIMPLE_TYPES = ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data; boundary=xyz", None]


def refused(origin: str) -> dict[str, Any]:
    return {"error": {"code": "ORIGIN_NOT_ALLOWED",
                      "message": f"the origin {origin} is neither this server's nor in server.cors_origins: "
                                 "a page on another site may not change state here"}}


def state_changing_routes(tag: str) -> list[tuple[str, str, bytes]]:
    """(method, path, body) of every route that changes state; runs name a thread ``xs-…`` of their own."""
    agui = orjson.dumps(agui_body(f"xs-agui-{tag}", "r1", [user("u1", "hi")]))
    chat = orjson.dumps({"id": f"xs-chat-{tag}", "messages": [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    ck = orjson.dumps(agui_body(f"xs-ck-{tag}", "r1", [user("u1", "hi")]))
    envelope = orjson.dumps({"method": "agent/run", "params": {"agentId": "assistant"},
                             "body": agui_body(f"xs-env-{tag}", "r1", [user("u1", "hi")])})
    envelope_stop = orjson.dumps({"method": "agent/stop", "params": {"agentId": "assistant", "threadId": "held"}})
    return [
        ("POST", "/v1/ag-ui", agui),
        ("POST", "/v1/ag-ui/agents/assistant", agui),
        ("POST", "/v1/ai-sdk/chat", chat),
        ("POST", "/v1/ai-sdk/agents/assistant/chat", chat),
        ("POST", "/v1/copilotkit/agent/assistant/run", ck),
        ("POST", "/v1/copilotkit", envelope),
        ("POST", "/v1/copilotkit", envelope_stop),
        ("POST", "/v1/copilotkit/agent/assistant/stop/held", b'{"runId": "r-held"}'),
        ("POST", "/v1/threads/held/stop", b""),
        ("DELETE", "/v1/threads/done", b""),
        ("DELETE", "/v1/threads/held", b""),
    ]


async def thread_ids(client: httpx.AsyncClient) -> set[str]:
    page = (await client.get("/v1/threads", params={"limit": 500})).json()
    return {item["threadId"] for item in page["items"]}


async def hold(server: LiveServer, client: httpx.AsyncClient, gate: str, result: dict[str, Any]) -> None:
    result["events"] = await post_agui(client, agui_body("held", "r-held", [user("h1", held(gate, 3))]))


async def started(server: LiveServer, thread_id: str) -> None:
    with trio.fail_after(10):
        while True:
            run = server.ctx.app.active(thread_id)
            if run is not None and await run.started() and await server.ctx.ledger.get_thread(thread_id):
                return
            await trio.sleep(0.01)


async def test_a_foreign_page_changes_nothing_with_any_simple_request(server, client):
    await post_agui(client, agui_body("done", "r-done", [user("d1", "hi")]))
    result: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, server, client, "xs-hold", result)
        await started(server, "held")
        before = await thread_ids(client)
        assert before == {"done", "held"}
        for content_type in SIMPLE_TYPES:
            for method, path, body in state_changing_routes((content_type or "none").split(";")[0].replace("/", "-")):
                headers = {"origin": FOREIGN}
                if content_type is not None:
                    headers["content-type"] = content_type
                sent = body if content_type is not None else b""  # a bodiless request: no type, no body
                response = await client.request(method, path, content=sent, headers=headers)
                assert (response.status_code, response.json()) == (403, refused(FOREIGN)), (method, path, content_type)
                assert "access-control-allow-origin" not in response.headers
        # nothing changed: no new thread, the held run still runs, the committed thread is still there
        assert await thread_ids(client) == before
        active = server.ctx.app.active("held")
        assert active is not None and active.run_id == "r-held"
        assert (await client.get("/v1/threads/done")).status_code == 200
        await release(server, "xs-hold")
    assert types(result["events"])[-1] == "RUN_FINISHED"
    assert (await server.ctx.ledger.get_run("r-held")).status == RunStatus.COMPLETED


async def test_without_origin_a_bodiless_stop_still_stops(server, client):
    result: dict[str, Any] = {}
    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold, server, client, "xs-stop-plain", result)
        await started(server, "held")
        response = await client.post("/v1/threads/held/stop")  # curl -X POST: no Origin, no body
        assert (response.status_code, response.json()) == (200, {"runId": "r-held", "status": "interrupted"})
    assert types(result["events"])[-1] == "RUN_ERROR"


async def test_the_servers_own_origin_and_an_allowed_origin_may_change_state(server, client):
    own = server.base_url.rstrip("/")
    for origin, thread in ((own, "own-page"), ("http://localhost:3000", "cors-page")):
        response = await client.post("/v1/ag-ui", json=agui_body(thread, "r1", [user("u1", "hi")]),
                                     headers={"origin": origin})
        assert response.status_code == 200
        assert types(parse_sse(response.content))[-1] == "RUN_FINISHED"
        response = await client.delete(f"/v1/threads/{thread}", headers={"origin": origin})
        assert (response.status_code, response.content) == (204, b"")


async def test_a_foreign_origin_may_still_read(client):
    """Reads pass (CORS keeps the answer from the page): only state changes are refused."""
    response = await client.get("/v1/agents", headers={"origin": FOREIGN})
    assert response.status_code == 200
    assert "access-control-allow-origin" not in response.headers


# -- CopilotKit: the JSON media type itself ------------------------------------------------------------------


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded",
                                          "multipart/form-data; boundary=xyz", "text/plain; x=application/json",
                                          "application/jsonx", None])
async def test_copilotkit_runs_require_the_json_media_type(client, content_type):
    run = orjson.dumps(agui_body("ck-type", "r1", [user("u1", "hi")]))
    envelope = orjson.dumps({"method": "agent/run", "params": {"agentId": "assistant"},
                             "body": agui_body("ck-type", "r1", [user("u1", "hi")])})
    headers = {} if content_type is None else {"content-type": content_type}
    for path, body, message in (
            ("/v1/copilotkit/agent/assistant/run", run,
             f"the runtime expects JSON payloads (Content-Type: application/json), not {content_type or 'absent'!r}"),
            ("/v1/copilotkit/agent/assistant/connect", run,
             f"the runtime expects JSON payloads (Content-Type: application/json), not {content_type or 'absent'!r}"),
            ("/v1/copilotkit", envelope, "Single-route endpoint expects JSON payloads")):
        response = await client.post(path, content=body, headers=headers)
        assert (response.status_code, response.json()) == (
            415, {"error": "unsupported_media_type", "message": message}), path
    assert (await client.get("/v1/threads/ck-type")).status_code == 404


async def test_copilotkit_runs_accept_json_with_parameters(client):
    response = await client.post("/v1/copilotkit/agent/assistant/run",
                                 content=orjson.dumps(agui_body("ck-json", "r1", [user("u1", "hi")])),
                                 headers={"content-type": "Application/JSON ; charset=utf-8"})
    assert response.status_code == 200
    assert types(parse_sse(response.content))[-1] == "RUN_FINISHED"


async def test_a_copilotkit_stop_with_a_body_requires_json_and_without_one_does_not(client):
    response = await client.post("/v1/copilotkit/agent/assistant/stop/none", content=b'{"runId": "r"}',
                                 headers={"content-type": "text/plain"})
    assert (response.status_code, response.json()) == (415, {
        "error": "unsupported_media_type",
        "message": "the runtime expects JSON payloads (Content-Type: application/json), not 'text/plain'"})
    response = await client.post("/v1/copilotkit/agent/assistant/stop/none")
    assert (response.status_code, response.json()) == (
        200, {"stopped": False, "message": "No active run for thread 'none'."})


# -- finding 5: an envelope's method of another type ---------------------------------------------------------


@pytest.mark.parametrize("method", [["info"], {"a": 1}, 1, True, 2.5])
async def test_an_envelope_method_that_is_not_a_string_is_a_coded_400(client, method):
    response = await client.post("/v1/copilotkit", json={"method": method})
    assert (response.status_code, response.json()) == (
        400, {"error": "invalid_request", "message": "Invalid method field: it must be a string"})
