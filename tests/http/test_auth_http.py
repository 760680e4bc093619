"""Authentication over the wire: each ``[auth] mode`` against a live server on 127.0.0.1.

Issue 13 item 2: ``Authorization: Bearer`` on HTTP, a ``bearer.<token>`` subprotocol entry (or the
header) on WebSockets; missing or bad credentials get 401 with ``WWW-Authenticate: Bearer`` and a
coded JSON error before any stream starts; ``/healthz`` and ``/readyz`` stay open; secrets never
appear in logs or responses. ``GET /v1/me`` shows the principal a request was given.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
import json
import logging
import time
from pathlib import Path
from typing import Any

import h11
import httpx
import jwt
import pytest
import trio
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from trio_websocket import open_websocket_url

from awaken import cli
from tests.builders import agui_body, agui_text, bearer, live_server, make_config, parse_sse, ws_url

USER_KEY = "user-key-0123456789abcdef"
ADMIN_KEY = "admin-key-0123456789abcdef"
SECRET = "an-hs256-secret-of-at-least-32-bytes!!"
TOKENS = [
    {"name": "alice", "env": "AWAKEN_TEST_ALICE_KEY", "role": "user", "subject": "alice"},
    {"name": "ops", "env": "AWAKEN_TEST_OPS_KEY", "role": "admin", "subject": "ops"},
]
MISSING = {"error": {"code": "UNAUTHENTICATED",
                     "message": "this route needs credentials: send Authorization: Bearer <key>"}}
JWT_MISSING = {"error": {"code": "UNAUTHENTICATED",
                         "message": "this route needs credentials: send Authorization: Bearer <JWT>"}}


async def refused_upgrade(base_url: str, path: str, subprotocols: list[str]) -> tuple[int, dict[str, str], Any]:
    """Open a WebSocket handshake by hand (h11) and read the server's refusal: status, headers, JSON body.

    (trio-websocket's ``ConnectionRejected`` path leaves its socket open, so it is not used here.)
    """
    host, _, port = base_url.removeprefix("http://").rpartition(":")
    headers = [("host", f"{host}:{port}"), ("upgrade", "websocket"), ("connection", "Upgrade"),
               ("sec-websocket-key", base64.b64encode(b"0123456789abcdef").decode()),
               ("sec-websocket-version", "13")]
    if subprotocols:
        headers.append(("sec-websocket-protocol", ", ".join(subprotocols)))
    conn = h11.Connection(h11.CLIENT)
    async with await trio.open_tcp_stream(host, int(port)) as stream:
        await stream.send_all(conn.send(h11.Request(method="GET", target=path, headers=headers))
                              + conn.send(h11.EndOfMessage()))
        response, body = None, b""
        while True:
            event = conn.next_event()
            if event is h11.NEED_DATA:
                conn.receive_data(await stream.receive_some())
            elif isinstance(event, h11.Response):
                response = event
            elif isinstance(event, h11.Data):
                body += event.data
            elif isinstance(event, h11.EndOfMessage):
                break
    assert response is not None
    return response.status_code, {k.decode(): v.decode() for k, v in response.headers}, json.loads(body)


def unauthenticated(message: str) -> dict[str, Any]:
    return {"error": {"code": "UNAUTHENTICATED", "message": message}}


@pytest.fixture
def tokens_config(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_ALICE_KEY", USER_KEY)
    monkeypatch.setenv("AWAKEN_TEST_OPS_KEY", ADMIN_KEY)
    return make_config(tmp_path, auth={"mode": "tokens", "tokens": TOKENS})


@pytest.fixture
async def tokens_server(tokens_config):
    async with live_server(tokens_config) as srv:
        yield srv


def hs_config(tmp_path: Path, **jwt_keys: Any):
    table = {"algorithms": ["HS256"], "secret_env": "AWAKEN_TEST_JWT_SECRET", **jwt_keys}
    return make_config(tmp_path, auth={"mode": "jwt", "jwt": table})


def claims(**changes: Any) -> dict[str, Any]:
    base = {"sub": "alice", "exp": int(time.time()) + 300, "iss": "https://app.example", "aud": "awaken"}
    base.update(changes)
    return {k: v for k, v in base.items() if v is not None}


@pytest.fixture
async def jwt_server(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_JWT_SECRET", SECRET)
    config = hs_config(tmp_path, issuer="https://app.example", audience="awaken", admin_claim="awaken_admin")
    async with live_server(config) as srv:
        yield srv


# -- mode "none" --------------------------------------------------------------------------------------


async def test_none_on_loopback_serves_everyone_as_the_anonymous_principal(client):
    response = await client.get("/v1/me")
    assert response.status_code == 200
    assert response.json() == {"subject": None, "role": "anonymous"}
    events = parse_sse((await client.post("/v1/ag-ui", json=agui_body(
        "t-none", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))).content)
    assert agui_text(events) == 'You said: "hi".'


async def test_none_serves_a_non_loopback_bind_when_allowed(tmp_path):
    config = make_config(tmp_path, server={"bind": "0.0.0.0:0"},
                         auth={"mode": "none", "allow_unauthenticated": True})
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(cli.serve, config)
        port = binds[0].rpartition(":")[2]
        async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}") as client:
            response = await client.get("/v1/me")
        assert response.json() == {"subject": None, "role": "anonymous"}
        nursery.cancel_scope.cancel()


# -- mode "tokens" ------------------------------------------------------------------------------------


async def test_tokens_missing_credentials_get_401_with_a_bare_bearer_challenge(tokens_server):
    async with tokens_server.client() as client:
        for method, path in [("GET", "/v1/me"), ("GET", "/v1/agents"), ("POST", "/v1/ag-ui"),
                             ("POST", "/v1/ai-sdk/chat"), ("GET", "/v1/ag-ui/threads/t1/messages")]:
            response = await client.request(method, path, json={} if method == "POST" else None)
            assert response.status_code == 401, path
            assert response.headers["www-authenticate"] == "Bearer"
            assert response.headers["content-type"] == "application/json"
            assert response.json() == MISSING


async def test_tokens_a_non_bearer_scheme_counts_as_missing(tokens_server):
    async with tokens_server.client() as client:
        response = await client.get("/v1/me", headers={"Authorization": f"Basic {USER_KEY}"})
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == MISSING


async def test_tokens_a_wrong_key_gets_401_invalid_token(tokens_server):
    async with tokens_server.client() as client:
        response = await client.get("/v1/me", headers=bearer("not-a-key-of-this-server"))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert response.json() == unauthenticated("the bearer token is not valid")
    assert "not-a-key-of-this-server" not in response.text


async def test_tokens_a_user_key_is_its_subject_as_user(tokens_server):
    async with tokens_server.client() as client:
        response = await client.get("/v1/me", headers=bearer(USER_KEY))
    assert response.status_code == 200
    assert response.json() == {"subject": "alice", "role": "user"}


async def test_tokens_an_admin_key_is_its_subject_as_admin(tokens_server):
    async with tokens_server.client() as client:
        response = await client.get("/v1/me", headers={"authorization": f"bearer {ADMIN_KEY}"})
    assert response.json() == {"subject": "ops", "role": "admin"}


async def test_tokens_a_refused_run_starts_nothing_and_a_keyed_run_streams(tokens_server):
    body = agui_body("t-keyed", "r1", [{"id": "u1", "role": "user", "content": "hello"}])
    async with tokens_server.client() as client:
        refused = await client.post("/v1/ag-ui", json=body)
        assert refused.status_code == 401
        assert refused.headers["content-type"] == "application/json"
        history = await client.get("/v1/ag-ui/threads/t-keyed/messages", headers=bearer(USER_KEY))
        assert history.status_code == 404  # nothing was committed
        response = await client.post("/v1/ag-ui", json=body, headers=bearer(USER_KEY))
        assert response.status_code == 200
        assert agui_text(parse_sse(response.content)) == 'You said: "hello".'
        chat = await client.post("/v1/ai-sdk/chat", headers=bearer(ADMIN_KEY), json={
            "id": "t-keyed-sdk", "messages": [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": "yo"}]}]})
        assert chat.status_code == 200
        assert parse_sse(chat.content)[-1] == "[DONE]"


async def test_health_routes_stay_open_with_auth_on(tokens_server):
    async with tokens_server.client() as client:
        assert (await client.get("/healthz")).json() == {"status": "ok"}
        assert (await client.get("/readyz")).json() == {"status": "ready"}


async def test_secrets_never_appear_in_logs_or_responses(tokens_server, caplog):
    caplog.set_level(logging.DEBUG)
    wrong = "wrong-key-that-must-not-leak-0001"
    seen: list[str] = []
    async with tokens_server.client() as client:
        for headers in ({}, bearer(wrong), bearer(USER_KEY), bearer(ADMIN_KEY)):
            for response in (await client.get("/v1/me", headers=headers),
                             await client.post("/v1/ag-ui", headers=headers, json=agui_body(
                                 "t-leak", f"r{len(seen)}", [{"id": f"u{len(seen)}", "role": "user",
                                                              "content": "hi"}]))):
                seen.append(response.text + str(response.headers))
    status, headers, body = await refused_upgrade(tokens_server.base_url, "/v1/ag-ui/ws",
                                                  ["awaken.v1", f"bearer.{wrong}"])
    assert status == 401
    seen.append(str(headers) + json.dumps(body))
    for secret in (USER_KEY, ADMIN_KEY, wrong):
        assert secret not in caplog.text
        assert all(secret not in text for text in seen)


# -- WebSockets ---------------------------------------------------------------------------------------


async def test_ws_bearer_subprotocol_is_accepted_and_answered_with_awaken_v1(tokens_server):
    url = ws_url(tokens_server.base_url, "/v1/ag-ui/ws")
    async with open_websocket_url(url, subprotocols=["awaken.v1", f"bearer.{USER_KEY}"]) as ws:
        assert ws.subprotocol == "awaken.v1"
        await ws.send_message(json.dumps(agui_body("t-ws", "r1", [{"id": "u1", "role": "user", "content": "hi"}])))
        types = []
        while not types or types[-1] not in ("RUN_FINISHED", "RUN_ERROR"):
            types.append(json.loads(await ws.get_message())["type"])
        assert types[-1] == "RUN_FINISHED"


async def test_ws_authorization_header_is_accepted(tokens_server):
    url = ws_url(tokens_server.base_url, "/v1/ai-sdk/ws")
    async with open_websocket_url(url, extra_headers=[(b"authorization", f"Bearer {ADMIN_KEY}".encode())]) as ws:
        assert ws.subprotocol is None  # nothing was offered, nothing is selected
        await ws.send_message(json.dumps({"id": "t-ws-h", "messages": [
            {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]}))
        messages = []
        while not messages or messages[-1] != "[DONE]":
            messages.append(await ws.get_message())
        assert messages[-1] == "[DONE]"


@pytest.mark.parametrize(("subprotocols", "challenge", "message"), [
    (["awaken.v1"], "Bearer", MISSING["error"]["message"]),
    (["awaken.v1", "bearer.wrong-key-wrong-key-wrong"], 'Bearer error="invalid_token"', "the bearer token is not valid"),
])
async def test_ws_upgrade_without_valid_credentials_is_refused_with_401(tokens_server, subprotocols, challenge, message):
    status, headers, body = await refused_upgrade(tokens_server.base_url, "/v1/ag-ui/ws", subprotocols)
    assert status == 401
    assert headers["www-authenticate"] == challenge
    assert "sec-websocket-protocol" not in headers
    assert body == unauthenticated(message)


# -- mode "jwt" ---------------------------------------------------------------------------------------


async def test_jwt_missing_credentials_get_401(jwt_server):
    async with jwt_server.client() as client:
        response = await client.get("/v1/me")
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == "Bearer"
    assert response.json() == JWT_MISSING


def hs(payload: dict[str, Any], secret: str = SECRET, **kw: Any) -> str:
    return jwt.encode(payload, secret, algorithm="HS256", **kw)


@pytest.mark.parametrize(("token", "message"), [
    ("garbage", "the token is not a well-formed JWT"),
    (hs(claims(), secret="another-secret-of-at-least-32-bytes!!!"), "the token's signature does not verify"),
    (hs(claims(exp=int(time.time()) - 10)), "the token has expired"),
    (hs(claims(iss="https://evil.example")), "the token's issuer is not accepted"),
    (hs(claims(aud="someone-else")), "the token's audience is not accepted"),
    (hs(claims(exp=None)), "the token has no 'exp' claim"),
    (hs(claims(sub=None)), "the token has no 'sub' claim"),
    (hs(claims(iss=None)), "the token has no 'iss' claim"),
    (jwt.encode(claims(), None, algorithm="none"), "the token's algorithm is not accepted"),
    (jwt.encode(claims(), SECRET + "-longer-for-hs512-is-fine-too-ok", algorithm="HS512"),
     "the token's algorithm is not accepted"),
], ids=["garbage", "wrong-signature", "expired", "wrong-issuer", "wrong-audience", "no-exp", "no-sub",
        "no-iss", "alg-none", "alg-not-listed"])
async def test_jwt_bad_tokens_get_401_invalid_token(jwt_server, token, message):
    async with jwt_server.client() as client:
        response = await client.get("/v1/me", headers=bearer(token))
    assert response.status_code == 401
    assert response.headers["www-authenticate"] == 'Bearer error="invalid_token"'
    assert response.json() == unauthenticated(message)
    assert token not in response.text


async def test_jwt_good_hs256_is_its_sub_as_user(jwt_server):
    async with jwt_server.client() as client:
        response = await client.get("/v1/me", headers=bearer(hs(claims())))
        # only the boolean true marks an admin
        stringly = await client.get("/v1/me", headers=bearer(hs(claims(awaken_admin="true"))))
    assert response.json() == {"subject": "alice", "role": "user"}
    assert stringly.json() == {"subject": "alice", "role": "user"}


async def test_jwt_admin_claim_true_makes_an_admin(jwt_server):
    async with jwt_server.client() as client:
        response = await client.get("/v1/me", headers=bearer(hs(claims(sub="root", awaken_admin=True))))
    assert response.json() == {"subject": "root", "role": "admin"}


async def test_jwt_on_a_websocket_subprotocol(jwt_server):
    token = hs(claims())
    url = ws_url(jwt_server.base_url, "/v1/ag-ui/ws")
    async with open_websocket_url(url, subprotocols=["awaken.v1", f"bearer.{token}"]) as ws:
        assert ws.subprotocol == "awaken.v1"
    status, _, body = await refused_upgrade(jwt_server.base_url, "/v1/ag-ui/ws",
                                            ["awaken.v1", f"bearer.{hs(claims(exp=1))}"])
    assert status == 401
    assert body == unauthenticated("the token has expired")


async def test_jwt_without_issuer_or_audience_configured_checks_neither(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_JWT_SECRET", SECRET)
    async with live_server(hs_config(tmp_path)) as srv, srv.client() as client:
        response = await client.get("/v1/me", headers=bearer(hs(claims(iss="anyone", aud="anything"))))
    assert response.json() == {"subject": "alice", "role": "user"}


def forge_hs256(payload: dict[str, Any], key: bytes) -> str:
    """An HS256 JWT signed by hand (PyJWT refuses to use a PEM key as an HMAC secret)."""

    def segment(raw: bytes) -> bytes:
        return base64.urlsafe_b64encode(raw).rstrip(b"=")

    signing = segment(b'{"alg":"HS256","typ":"JWT"}') + b"." + segment(json.dumps(payload).encode())
    return (signing + b"." + segment(hmac.new(key, signing, hashlib.sha256).digest())).decode()


def public_pem(private_key: Any) -> bytes:
    return private_key.public_key().public_bytes(serialization.Encoding.PEM,
                                                 serialization.PublicFormat.SubjectPublicKeyInfo)


def write_public_key(path: Path, private_key: Any) -> str:
    path.write_bytes(public_pem(private_key))
    return str(path)


@pytest.mark.parametrize(("algorithm", "make_key"), [
    ("RS256", lambda: rsa.generate_private_key(public_exponent=65537, key_size=2048)),
    ("ES256", lambda: ec.generate_private_key(ec.SECP256R1())),
])
async def test_jwt_good_public_key_token(tmp_path, algorithm, make_key):
    key, other = make_key(), make_key()
    config = make_config(tmp_path, auth={"mode": "jwt", "jwt": {
        "algorithms": [algorithm], "public_key_file": write_public_key(tmp_path / "public.pem", key),
        "audience": "awaken"}})
    async with live_server(config) as srv, srv.client() as client:
        good = await client.get("/v1/me", headers=bearer(jwt.encode(claims(), key, algorithm=algorithm)))
        forged = await client.get("/v1/me", headers=bearer(jwt.encode(claims(), other, algorithm=algorithm)))
    assert good.json() == {"subject": "alice", "role": "user"}
    assert forged.status_code == 401
    assert forged.json() == unauthenticated("the token's signature does not verify")


async def test_jwt_an_hs256_token_signed_with_the_public_key_is_refused(tmp_path):
    # the classic algorithm confusion: the public PEM used as an HMAC secret
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem_path = write_public_key(tmp_path / "public.pem", key)
    config = make_config(tmp_path, auth={"mode": "jwt", "jwt": {"algorithms": ["RS256"], "public_key_file": pem_path}})
    forged = forge_hs256({"sub": "root", "exp": int(time.time()) + 60}, public_pem(key))
    async with live_server(config) as srv, srv.client() as client:
        response = await client.get("/v1/me", headers=bearer(forged))
    assert response.status_code == 401
    assert response.json() == unauthenticated("the token's algorithm is not accepted")
