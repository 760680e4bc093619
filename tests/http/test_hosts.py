"""The Host check (issue 26 item 1): DNS rebinding reaches nothing.

The policy is pure (``awaken.http.hosts``: headers in, verdict out) and tested without a server; then over
HTTP: a rebinding page's requests (``Host: rebind.evil.example:PORT``, ``Origin`` the same) are refused
``403 HOST_NOT_ALLOWED`` on every route and WebSocket upgrade, in modes ``none`` and ``tokens`` (with a
valid token), while ``/healthz`` and ``/readyz`` stay open; ``[server] allowed_hosts`` admits a name.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from awaken.config import edge, parse_config
from awaken.core.errors import ConfigError
from awaken.http import hosts
from awaken.http.cors import CorsPolicy
from tests.builders import default_config_data, live_server, make_config

REBIND = "rebind.evil.example"
KEY = "hosts-key-0123456789abcdef"

#: every route, with its method (runs, history, threads, console, the runtime, unknown paths)
ROUTES = [
    ("GET", "/v1/me"), ("GET", "/v1/agents"), ("GET", "/v1/threads"), ("GET", "/v1/threads/t1"),
    ("DELETE", "/v1/threads/t1"), ("POST", "/v1/threads/t1/stop"), ("POST", "/v1/ag-ui"),
    ("POST", "/v1/ag-ui/agents/assistant"), ("POST", "/v1/ai-sdk/chat"), ("GET", "/v1/ag-ui/threads/t1/messages"),
    ("GET", "/v1/ai-sdk/threads/t1/messages"), ("GET", "/v1/ag-ui/threads/t1/stream"),
    ("GET", "/v1/ag-ui/agents/assistant/capabilities"), ("GET", "/v1/copilotkit/info"),
    ("POST", "/v1/copilotkit"), ("POST", "/v1/copilotkit/agent/assistant/run"), ("GET", "/console"),
    ("GET", "/console/console.js"), ("GET", "/nowhere"), ("OPTIONS", "/v1/agents"),
]
WS_ROUTES = ["/v1/ag-ui/ws", "/v1/ag-ui/agents/assistant/ws", "/v1/ai-sdk/ws", "/v1/ai-sdk/agents/assistant/ws"]


def host_refused(host: str) -> dict[str, Any]:
    return {"error": {"code": "HOST_NOT_ALLOWED", "message": f"the Host {host!r} does not name this server; "
                                                             "list the name clients use in server.allowed_hosts"}}


# -- the policy -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(("value", "parsed"), [
    ("127.0.0.1:8000", ("127.0.0.1", 8000)),
    ("LocalHost", ("localhost", None)),
    ("localhost.:3000", ("localhost", 3000)),
    ("[::1]:8000", ("::1", 8000)),
    ("[0:0:0:0:0:0:0:1]", ("::1", None)),
    ("awaken_api:80", ("awaken_api", 80)),
    ("::1", None), ("[::1", None), ("[::1]x", None), ("host:", None), ("host:99999", None), ("host:0x1", None),
    ("", None), ("a b", None), ("evil.example@127.0.0.1", None), (None, None),
])
def test_authorities_are_parsed_strictly(value, parsed):
    assert edge.split_authority(value) == parsed


def test_loopback_names_on_any_port_the_bind_host_and_allowed_hosts_pass():
    policy = hosts.HostPolicy.of("10.0.0.5:8000", ["api.example.com", "proxy.example.com:8443"])
    # asked twice each (the second answer is the kept one), and again after more names than are kept
    for names in ([], [], [f"n{i}.evil.example" for i in range(3 * hosts.KNOWN_HOSTS)]):
        for name in names:
            assert not policy.allows_host(name)
        for host in ("127.0.0.1", "127.0.0.1:8000", "127.0.0.1:9999", "localhost", "localhost:3000", "[::1]:8000",
                     "127.1.2.3:8000", "10.0.0.5:8000", "10.0.0.5:1", "api.example.com", "API.example.com:443",
                     "proxy.example.com:8443"):
            assert policy.allows_host(host), host
        for host in (None, "", "rebind.evil.example", "rebind.evil.example:8000", "proxy.example.com",
                     "proxy.example.com:443", "10.0.0.6:8000", "localhost.evil.example", "127.0.0.1.evil.example",
                     "0.0.0.0:8000"):
            assert not policy.allows_host(host), host


def test_own_origins_never_trust_host_alone():
    policy = hosts.HostPolicy.of("127.0.0.1:8000", ["app.example.com"])
    # the page was served under the name and port the request was sent to
    assert policy.own_origin("http://127.0.0.1:8000", "127.0.0.1:8000")
    assert policy.own_origin("http://localhost:9000", "localhost:9000")  # a local load balancer's port
    assert policy.own_origin("http://localhost:8000", "127.0.0.1:8000")  # bind's port under another loopback name
    assert policy.own_origin("https://app.example.com", "app.example.com")
    assert policy.own_origin("https://app.example.com", "127.0.0.1:8000")  # a proxy that rewrote Host
    # a rebinding page: its origin names the Host it sent, but that is not one of ours
    assert not policy.own_origin("http://rebind.evil.example:8000", "rebind.evil.example:8000")
    # another local page on another port
    assert not policy.own_origin("http://localhost:3000", "127.0.0.1:8000")
    for origin in ("null", "http://127.0.0.1:8000/", "ftp://127.0.0.1:8000", "http://user@127.0.0.1:8000",
                   "http://127.0.0.1:8000/path"):
        assert not policy.own_origin(origin, "127.0.0.1:8000"), origin


def scope(host: str | None, method: str = "GET", path: str = "/v1/threads", origin: str | None = None,
          kind: str = "http") -> dict[str, Any]:
    headers = [(b"host", host.encode())] if host is not None else []
    if origin is not None:
        headers.append((b"origin", origin.encode()))
    return {"type": kind, "method": method, "path": path, "headers": headers}


def test_the_verdict_checks_host_then_state_changing_origins():
    policy, cors = hosts.HostPolicy.of("127.0.0.1:0"), CorsPolicy.of(["http://localhost:3000"])
    own = "127.0.0.1:8000"
    assert hosts.verdict(scope(own), policy, cors) is None
    assert hosts.verdict(scope(f"{REBIND}:8000"), policy, cors)[0] == "HOST_NOT_ALLOWED"
    assert hosts.verdict(scope(None), policy, cors) == (
        "HOST_NOT_ALLOWED", "no Host header does not name this server; list the name clients use in "
        "server.allowed_hosts")
    assert hosts.verdict(scope(REBIND, path="/healthz"), policy, cors) is None
    assert hosts.verdict(scope(REBIND, path="/readyz"), policy, cors) is None
    assert hosts.verdict(scope(REBIND, path="/healthz/"), policy, cors)[0] == "HOST_NOT_ALLOWED"
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        assert hosts.verdict(scope(own, method, origin="http://evil.example"), policy, cors)[0] == "ORIGIN_NOT_ALLOWED"
        assert hosts.verdict(scope(own, method, origin="null"), policy, cors)[0] == "ORIGIN_NOT_ALLOWED"
        assert hosts.verdict(scope(own, method, origin="http://localhost:3000"), policy, cors) is None
        assert hosts.verdict(scope(own, method, origin="http://127.0.0.1:8000"), policy, cors) is None
        assert hosts.verdict(scope(own, method), policy, cors) is None
    for method in ("GET", "HEAD", "OPTIONS"):
        assert hosts.verdict(scope(own, method, origin="http://evil.example"), policy, cors) is None
    assert hosts.verdict(scope(own, origin="http://evil.example", kind="websocket"), policy, cors)[0] == \
        "ORIGIN_NOT_ALLOWED"
    assert hosts.verdict(scope(own, origin="http://127.0.0.1:8000", kind="websocket"), policy, cors) is None
    # any origin allowed by "*" (mode none only)
    assert hosts.verdict(scope(own, "POST", origin="http://evil.example"), policy, CorsPolicy.of(["*"])) is None


@pytest.mark.parametrize(("entry", "problem"), [
    ("api.example.com", None), ("api.example.com:8443", None), ("10.0.0.5", None), ("[::1]:8000", None),
    ("https://api.example.com", "'https://api.example.com' is not a host: write a name or address, with :port or "
                                "without (no scheme, no path)"),
    ("api.example.com/x", "'api.example.com/x' is not a host: write a name or address, with :port or without "
                          "(no scheme, no path)"),
    ("*", "'*' is not a host: write a name or address, with :port or without"),
    ("api:port", "'api:port' is not a host: write a name or address, with :port or without"),
])
def test_allowed_hosts_entries(entry, problem):
    assert edge.allowed_host_problem(entry) == problem


def test_a_bad_allowed_hosts_entry_stops_start_up_with_one_line():
    data = default_config_data()
    data["server"]["allowed_hosts"] = ["ok.example", "https://bad.example"]
    with pytest.raises(ConfigError) as info:
        parse_config(data, source="config.toml")
    assert str(info.value) == ("config.toml: server.allowed_hosts[1]: 'https://bad.example' is not a host: write a "
                               "name or address, with :port or without (no scheme, no path)")


# -- over HTTP ------------------------------------------------------------------------------------------


async def refused_everywhere(base_url: str, headers: dict[str, str]) -> None:
    port = base_url.rpartition(":")[2]
    host = f"{REBIND}:{port}"
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        for method, path in ROUTES:
            response = await client.request(method, path, json={} if method == "POST" else None,
                                            headers={"host": host, "origin": f"http://{host}", **headers})
            assert (response.status_code, response.json()) == (403, host_refused(host)), (method, path)
            assert response.headers["content-type"] == "application/json"
            assert not [k for k in response.headers if k.startswith("access-control-")]
        for path in WS_ROUTES:
            response = await client.get(path, headers={
                "host": host, "origin": f"http://{host}", "connection": "Upgrade", "upgrade": "websocket",
                "sec-websocket-version": "13", "sec-websocket-key": "dGhlIHNhbXBsZSBub25jZQ==", **headers})
            assert (response.status_code, response.json()) == (403, host_refused(host)), path
        for path in ("/healthz", "/readyz"):
            response = await client.get(path, headers={"host": host})
            assert response.status_code == 200, path


async def test_a_rebinding_page_reaches_nothing_in_mode_none(server):
    await refused_everywhere(server.base_url, {})


async def test_a_rebinding_page_reaches_nothing_in_mode_tokens_with_a_token(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_HOSTS_KEY", KEY)
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": [
        {"name": "web", "env": "AWAKEN_TEST_HOSTS_KEY", "role": "admin", "subject": "ops"}]})
    async with live_server(config) as srv:
        await refused_everywhere(srv.base_url, {"authorization": f"Bearer {KEY}"})
        async with srv.client() as client:  # the same token by a name of the server's
            assert (await client.get("/v1/threads", headers={"authorization": f"Bearer {KEY}"})).status_code == 200


async def test_loopback_names_on_any_port_are_served(server):
    port = server.base_url.rpartition(":")[2]
    async with server.client() as client:
        for host in (f"127.0.0.1:{port}", f"localhost:{port}", "localhost", "[::1]:9000", "127.0.0.1:80"):
            response = await client.get("/v1/agents", headers={"host": host})
            assert response.status_code == 200, host


async def test_allowed_hosts_admit_a_proxys_name_and_its_pages(tmp_path):
    server = dict(default_config_data()["server"], allowed_hosts=["awaken.example.com", "awaken:8000"])
    async with live_server(make_config(tmp_path, server=server)) as srv, srv.client() as client:
        for host in ("awaken.example.com", "awaken.example.com:443", "awaken:8000"):
            assert (await client.get("/v1/agents", headers={"host": host})).status_code == 200, host
        response = await client.get("/v1/agents", headers={"host": "awaken:8001"})
        assert (response.status_code, response.json()) == (403, host_refused("awaken:8001"))
        # a page the proxy serves under that name may change state
        response = await client.delete("/v1/threads/none", headers={"host": "awaken.example.com",
                                                                     "origin": "https://awaken.example.com"})
        assert response.status_code == 404


async def test_a_socket_from_a_rebinding_page_is_refused_before_accept_with_its_own_host_origin(server):
    """What the old origin check accepted: ``Origin == scheme://Host``, the Host being the attacker's."""
    port = server.base_url.rpartition(":")[2]
    stream = await trio.open_tcp_stream("127.0.0.1", int(port))
    host = f"{REBIND}:{port}"
    await stream.send_all((f"GET /v1/ag-ui/ws HTTP/1.1\r\nhost: {host}\r\norigin: http://{host}\r\n"
                           "upgrade: websocket\r\nconnection: Upgrade\r\nsec-websocket-version: 13\r\n"
                           "sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\n\r\n").encode())
    data = b""
    with trio.fail_after(10):
        while b"}}" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, data
            data += chunk
    await stream.aclose()
    assert data.startswith(b"HTTP/1.1 403 ")
    assert data.endswith(b'{"error":{"code":"HOST_NOT_ALLOWED","message":"the Host \'' + host.encode()
                         + b'\' does not name this server; list the name clients use in server.allowed_hosts"}}')
