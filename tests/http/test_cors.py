"""CORS (issue 13 item 1): browsers on other origins, at the HTTP level.

The preflight matrix (every browser route × allowed / disallowed origin × its method), the headers on
actual answers (streaming runs included), simple cross-origin POSTs refused by the run routes,
WebSocket upgrades refused for a foreign ``Origin``, and the config rules. The shipped config.toml
allows ``http://localhost:3000`` and ``http://localhost:5173``.
"""

from __future__ import annotations

import orjson
import pytest
from trio_websocket import open_websocket_url

from awaken.config import edge, parse_config
from awaken.core.errors import ConfigError
from awaken.http import cors
from tests.builders import (
    agui_body,
    aisdk_kinds,
    default_config_data,
    live_server,
    make_config,
    parse_sse,
    ws_url,
)

ALLOWED = "http://localhost:3000"
ALSO_ALLOWED = "http://localhost:5173"
FOREIGN = "http://evil.example"
EXPOSED = "x-vercel-ai-ui-message-stream, www-authenticate"

#: every route a browser calls, with its method (the threads routes are covered by the /v1/ prefix)
BROWSER_ROUTES = [
    ("POST", "/v1/ag-ui"),
    ("POST", "/v1/ag-ui/agents/guarded"),
    ("POST", "/v1/ai-sdk/chat"),
    ("POST", "/v1/ai-sdk/agents/frontend/chat"),
    ("GET", "/v1/agents"),
    ("GET", "/v1/ag-ui/threads/t1/messages"),
    ("GET", "/v1/ai-sdk/threads/t1/messages"),
    ("GET", "/v1/threads"),
    ("GET", "/v1/threads/t1"),
    ("DELETE", "/v1/threads/t1"),
    ("POST", "/v1/threads/t1/stop"),
    ("GET", "/v1/ag-ui/threads/t1/stream"),
    ("GET", "/v1/ai-sdk/chat/t1/stream"),
    ("GET", "/v1/ai-sdk/agents/frontend/chat/t1/stream"),
]
WS_ROUTES = ["/v1/ag-ui/ws", "/v1/ag-ui/agents/guarded/ws", "/v1/ai-sdk/ws", "/v1/ai-sdk/agents/frontend/ws"]


def preflight_headers(origin: str, method: str, headers: str = "content-type") -> dict[str, str]:
    return {"origin": origin, "access-control-request-method": method, "access-control-request-headers": headers}


def cors_headers(response) -> dict[str, str]:  # noqa: ANN001 - an httpx response
    return {k: v for k, v in response.headers.items() if k.startswith("access-control-")}


# -- preflights ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("method", "path"), BROWSER_ROUTES)
@pytest.mark.parametrize("origin", [ALLOWED, ALSO_ALLOWED])
async def test_preflight_from_an_allowed_origin_is_answered(client, method, path, origin):
    response = await client.options(path, headers=preflight_headers(origin, method,
                                                                    "content-type,authorization,user-agent"))
    assert response.status_code == 204
    assert response.content == b""
    assert cors_headers(response) == {
        "access-control-allow-origin": origin,
        "access-control-allow-methods": "GET, POST, DELETE, OPTIONS",
        "access-control-allow-headers": "content-type, authorization, user-agent, last-event-id",
        "access-control-max-age": "600",
    }
    assert response.headers["vary"] == "Origin"


async def test_a_page_rejoining_with_last_event_id_passes_its_preflight_and_reads_the_answer(client):
    """A ``fetch`` rejoin sends ``Last-Event-ID`` (not a CORS-safelisted header): the preflight allows it,
    and the rejoin's own answer (204: nothing runs) carries the page's origin."""
    path = "/v1/ag-ui/threads/t-none/stream"
    response = await client.options(path, headers=preflight_headers(ALLOWED, "GET", "last-event-id"))
    assert response.status_code == 204
    assert "last-event-id" in response.headers["access-control-allow-headers"].split(", ")
    response = await client.get(path, headers={"origin": ALLOWED, "last-event-id": "run_x:3"})
    assert response.status_code == 204
    assert response.headers["access-control-allow-origin"] == ALLOWED


@pytest.mark.parametrize(("method", "path"), BROWSER_ROUTES)
async def test_preflight_from_a_foreign_origin_gets_403_and_no_cors_header(client, method, path):
    response = await client.options(path, headers=preflight_headers(FOREIGN, method))
    assert response.status_code == 403
    assert cors_headers(response) == {}
    assert response.json()["error"]["code"] == "ORIGIN_NOT_ALLOWED"
    assert response.headers["vary"] == "Origin"


async def test_preflight_allows_the_configured_extra_headers(tmp_path):
    server = dict(default_config_data()["server"], cors_extra_headers=["X-App-Version", "x-trace"])
    async with live_server(make_config(tmp_path, server=server)) as srv, srv.client() as client:
        response = await client.options("/v1/ai-sdk/chat", headers=preflight_headers(ALLOWED, "POST", "x-app-version"))
    assert response.status_code == 204
    assert response.headers["access-control-allow-headers"] == "content-type, authorization, user-agent, last-event-id, x-app-version, x-trace"


async def test_options_without_a_requested_method_is_not_a_preflight(client):
    response = await client.options("/v1/agents", headers={"origin": ALLOWED})
    assert response.status_code != 204
    assert "access-control-allow-methods" not in response.headers


# -- actual requests -------------------------------------------------------------------------------


async def test_an_allowed_origin_reads_agents_and_history(client):
    for path, status in (("/v1/agents", 200), ("/v1/ag-ui/threads/none/messages", 404),
                         ("/v1/ai-sdk/threads/none/messages", 404)):
        response = await client.get(path, headers={"origin": ALLOWED})
        assert response.status_code == status
        assert cors_headers(response) == {"access-control-allow-origin": ALLOWED,
                                          "access-control-expose-headers": EXPOSED}
        assert response.headers["vary"] == "Origin"


async def test_a_foreign_origin_gets_no_cors_header_on_an_actual_request(client):
    response = await client.get("/v1/agents", headers={"origin": FOREIGN})
    assert response.status_code == 200  # the server answers; the browser hides it from the page
    assert cors_headers(response) == {}
    assert response.headers["vary"] == "Origin"


async def test_paths_outside_v1_get_no_cors_header(client):
    response = await client.get("/healthz", headers={"origin": ALLOWED})
    assert response.status_code == 200
    assert cors_headers(response) == {}


async def test_streaming_runs_carry_cors_headers(client):
    chat = await client.post("/v1/ai-sdk/chat", headers={"origin": ALLOWED}, json={
        "id": "cors-chat", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    assert chat.status_code == 200
    assert chat.headers["content-type"].startswith("text/event-stream")
    assert chat.headers["access-control-allow-origin"] == ALLOWED
    assert chat.headers["access-control-expose-headers"] == EXPOSED
    assert chat.headers["x-vercel-ai-ui-message-stream"] == "v1"
    assert aisdk_kinds(parse_sse(chat.content))[-2:] == ["finish", "[DONE]"]

    run = await client.post("/v1/ag-ui", headers={"origin": ALSO_ALLOWED},
                            json=agui_body("cors-agui", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))
    assert run.status_code == 200
    assert run.headers["access-control-allow-origin"] == ALSO_ALLOWED
    assert [e["type"] for e in parse_sse(run.content)][-1] == "RUN_FINISHED"


@pytest.mark.parametrize("content_type", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"])
async def test_a_simple_cross_origin_post_is_refused_and_commits_nothing(client, content_type):
    """A POST a browser sends without a preflight (text/plain, a form) never starts a run."""
    agui = orjson.dumps(agui_body("simple-agui", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))
    response = await client.post("/v1/ag-ui", content=agui, headers={"origin": ALLOWED, "content-type": content_type})
    events = parse_sse(response.content)
    assert [(e["type"], e.get("code")) for e in events] == [("RUN_ERROR", "UNSUPPORTED_MEDIA_TYPE")]
    assert response.headers["access-control-allow-origin"] == ALLOWED

    chat = orjson.dumps({"id": "simple-chat",
                         "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
    response = await client.post("/v1/ai-sdk/chat", content=chat,
                                 headers={"origin": ALLOWED, "content-type": content_type})
    chunks = parse_sse(response.content)
    assert aisdk_kinds(chunks) == ["error", "finish", "[DONE]"]
    assert chunks[0]["errorText"].startswith("UNSUPPORTED_MEDIA_TYPE: ")

    for thread in ("simple-agui", "simple-chat"):
        assert (await client.get(f"/v1/ai-sdk/threads/{thread}/messages")).status_code == 404


async def test_any_origin_with_a_wildcard_and_never_credentials(tmp_path):
    server = dict(default_config_data()["server"], cors_origins=["*"])
    async with live_server(make_config(tmp_path, server=server)) as srv, srv.client() as client:
        pre = await client.options("/v1/ai-sdk/chat", headers=preflight_headers(FOREIGN, "POST"))
        actual = await client.get("/v1/agents", headers={"origin": FOREIGN})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-origin"] == "*"
    assert actual.headers["access-control-allow-origin"] == "*"
    for response in (pre, actual):
        assert "access-control-allow-credentials" not in response.headers


async def test_no_cors_origins_means_no_browser_on_another_origin(tmp_path):
    server = dict(default_config_data()["server"], cors_origins=[])
    async with live_server(make_config(tmp_path, server=server)) as srv, srv.client() as client:
        pre = await client.options("/v1/ai-sdk/chat", headers=preflight_headers(ALLOWED, "POST"))
    assert pre.status_code == 403
    assert cors_headers(pre) == {}


async def test_with_auth_on_preflights_need_no_credentials_and_a_401_carries_cors_headers(tmp_path, monkeypatch):
    """CORS sits outside authentication: a browser can ask, and can read why it was refused."""
    monkeypatch.setenv("AWAKEN_TEST_CORS_KEY", "cors-key-0123456789abcdef")
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": [
        {"name": "web", "env": "AWAKEN_TEST_CORS_KEY", "role": "user", "subject": "alice"}]})
    async with live_server(config) as srv, srv.client() as client:
        pre = await client.options("/v1/ai-sdk/chat", headers=preflight_headers(ALLOWED, "POST", "content-type,authorization"))
        refused = await client.get("/v1/agents", headers={"origin": ALLOWED})
        allowed = await client.get("/v1/agents", headers={"origin": ALLOWED,
                                                          "authorization": "Bearer cors-key-0123456789abcdef"})
    assert pre.status_code == 204
    assert pre.headers["access-control-allow-headers"] == "content-type, authorization, user-agent, last-event-id"
    assert refused.status_code == 401
    assert refused.json()["error"]["code"] == "UNAUTHENTICATED"
    assert refused.headers["www-authenticate"].startswith("Bearer")
    assert cors_headers(refused) == {"access-control-allow-origin": ALLOWED, "access-control-expose-headers": EXPOSED}
    assert allowed.status_code == 200
    assert allowed.headers["access-control-allow-origin"] == ALLOWED


def test_the_wildcard_with_auth_on_stops_start_up():
    data = default_config_data()
    data["server"]["cors_origins"] = ["*"]
    data["auth"] = {"mode": "tokens", "tokens": [{"name": "web", "env": "AWAKEN_X", "role": "user", "subject": "a"}]}
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    assert str(info.value) == ('config.toml: server.cors_origins: "*" is only allowed when no credentials are '
                               "involved, but [auth] mode is 'tokens'")


# -- WebSockets ------------------------------------------------------------------------------------


def upgrade_headers(origin: str) -> dict[str, str]:
    """A browser's WebSocket handshake (sent with httpx: a refused upgrade is a plain HTTP answer)."""
    return {"origin": origin, "connection": "Upgrade", "upgrade": "websocket", "sec-websocket-version": "13",
            "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ=="}


@pytest.mark.parametrize("path", WS_ROUTES)
async def test_a_socket_from_a_foreign_origin_is_refused_before_accept(client, path):
    response = await client.get(path, headers=upgrade_headers(FOREIGN))
    assert response.status_code == 403
    assert cors_headers(response) == {}


@pytest.mark.parametrize("origin", [ALLOWED, None])
async def test_a_socket_from_an_allowed_origin_or_without_origin_runs(server, origin):
    headers = [(b"origin", origin.encode())] if origin else []
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws"), extra_headers=headers) as ws:
        await ws.send_message(orjson.dumps(agui_body(f"ws-{origin}", "r1",
                                                     [{"id": "u1", "role": "user", "content": "hi"}])).decode())
        events = []
        while not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            events.append(orjson.loads(await ws.get_message()))
    assert events[-1]["type"] == "RUN_FINISHED"


async def test_a_socket_from_a_page_this_server_served_runs(server):
    """The console (``/console``) opens sockets from the server's own origin, which no list names."""
    own = server.base_url.rstrip("/")
    headers = [(b"origin", own.encode())]
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws"), extra_headers=headers) as ws:
        await ws.send_message(orjson.dumps(agui_body("ws-own", "r1",
                                                     [{"id": "u1", "role": "user", "content": "hi"}])).decode())
        events = []
        while not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            events.append(orjson.loads(await ws.get_message()))
    assert events[-1]["type"] == "RUN_FINISHED"


# -- the policy and its config ---------------------------------------------------------------------


@pytest.mark.parametrize(("origin", "problem"), [
    ("http://localhost:3000", None),
    ("https://app.example.com", None),
    ("http://[::1]:8080", None),
    ("*", None),
    ("http://localhost:3000/", "'http://localhost:3000/' has a trailing '/': an origin is scheme://host[:port] with no path"),
    ("http://Localhost:3000", "'http://Localhost:3000' must be lower case, as browsers send it"),
    ("localhost:3000", "'localhost:3000' is not an origin: write scheme://host[:port] (http or https, no path)"),
    ("https://app.example.com/chat", "'https://app.example.com/chat' is not an origin: write scheme://host[:port] (http or https, no path)"),
    ("null", "'null' is not an origin: write scheme://host[:port] (http or https, no path)"),
])
def test_cors_origins_are_exact_origins(origin, problem):
    assert edge.origin_problem(origin) == problem


@pytest.mark.parametrize(("server", "message"), [
    ({"cors_origins": ["http://localhost:3000/"]},
     "server.cors_origins[0]: 'http://localhost:3000/' has a trailing '/': an origin is scheme://host[:port] with no path"),
    ({"cors_origins": ["*", "http://localhost:3000"]},
     'server.cors_origins: "*" allows every origin: list it alone or list exact origins'),
    ({"cors_extra_headers": ["x ok"]}, "server.cors_extra_headers[0]: 'x ok' is not an HTTP header name"),
    ({"cors_origins": "http://localhost:3000"},
     "server.cors_origins: expected list, got str 'http://localhost:3000'"),
])
def test_bad_cors_config_stops_start_up_with_one_line(server, message):
    data = default_config_data()
    data["server"].update(server)
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    assert str(info.value) == f"config.toml: {message}"


def test_the_wildcard_is_refused_when_credentials_are_involved():
    assert edge.wildcard_problem(["*"], "none") is None
    assert edge.wildcard_problem(["http://localhost:3000"], "tokens") is None
    assert edge.wildcard_problem(["*"], "tokens") == (
        "\"*\" is only allowed when no credentials are involved, but [auth] mode is 'tokens'")
    assert edge.wildcard_problem(["*"], "jwt") is not None


def test_vary_is_extended_not_repeated():
    assert cors.merge_headers([(b"Vary", b"Accept")], [(b"vary", b"Origin")]) == [(b"Vary", b"Accept, Origin")]
    assert cors.merge_headers([(b"vary", b"origin")], [(b"vary", b"Origin")]) == [(b"vary", b"origin")]
    assert cors.merge_headers([], [(b"vary", b"Origin")]) == [(b"vary", b"Origin")]
