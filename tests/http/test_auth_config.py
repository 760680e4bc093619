"""``[auth]`` config and start-up refusals, and how the HTTP edge applies credentials, without a server.

Bad config stops start-up with one line naming the key (issue 13 item 2): the shape is checked when
the file is parsed, the bind, the environment and the key file when the server is built.
"""

from __future__ import annotations

import re
import tomllib
from typing import Any

import attrs
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa

from awaken import cli
from awaken.config.auth import AuthConfig, JwtConfig, TokenConfig
from awaken.core.errors import ConfigError
from awaken.http import auth
from awaken.http.auth.credentials import bearer_token
from tests.builders import ROOT, edge_around, make_config

KEY = "k-0123456789abcdef-0123"


def parse_error(tmp_path, auth_table: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as exc:
        make_config(tmp_path, auth=auth_table)
    return str(exc.value)


def token(name: str = "app", env: str = "AWAKEN_T_KEY", role: str = "user", subject: str = "alice") -> dict[str, str]:
    return {"name": name, "env": env, "role": role, "subject": subject}


def test_the_shipped_config_is_mode_none_on_loopback(tmp_path):
    config = make_config(tmp_path)
    assert config.auth == AuthConfig(mode="none", allow_unauthenticated=False, tokens=[], jwt=None)
    assert config.server.bind.startswith("127.0.0.1:")


@pytest.mark.parametrize(("table", "line"), [
    ({"mode": "none", "bogus": 1}, "test config: unknown key auth.bogus"),
    ({"mode": "password"},
     "test config: auth.mode: password not in literal typing.Literal['none', 'tokens', 'jwt']"),
    ({"mode": "none", "allow_unauthenticated": "yes"}, "test config: auth.allow_unauthenticated: expected bool, got str 'yes'"),
    ({"mode": "tokens", "allow_unauthenticated": True},
     "test config: auth.allow_unauthenticated: only applies to auth.mode = \"none\" (mode is 'tokens', which "
     "always requires credentials)"),
    ({"mode": "tokens"}, "test config: auth.tokens: auth.mode = \"tokens\" needs at least one [[auth.tokens]] table"),
    ({"mode": "tokens", "tokens": [{"name": "a", "env": "E", "role": "user"}]},
     "test config: missing key auth.tokens[0].subject"),
    ({"mode": "tokens", "tokens": [token(role="root")]},
     "test config: auth.tokens[0].role: root not in literal typing.Literal['admin', 'user']"),
    ({"mode": "tokens", "tokens": [token(), token(env="OTHER")]},
     "test config: auth.tokens[1].name: 'app' is already auth.tokens[0].name"),
    ({"mode": "tokens", "tokens": [token(env=" ")]}, "test config: auth.tokens[0].env: must not be empty"),
    ({"mode": "jwt"}, "test config: auth.jwt: auth.mode = \"jwt\" needs an [auth.jwt] table"),
    ({"mode": "jwt", "jwt": {"algorithms": ["none"], "secret_env": "S"}},
     "test config: auth.jwt.algorithms: 'none' is not one of HS256, HS384, HS512, RS256, RS384, RS512, ES256, "
     "ES384, ES512"),
    ({"mode": "jwt", "jwt": {"algorithms": [], "secret_env": "S"}},
     "test config: auth.jwt.algorithms: list at least one algorithm"),
    ({"mode": "jwt", "jwt": {"algorithms": ["HS256", "RS256"], "secret_env": "S"}},
     "test config: auth.jwt.algorithms: HS256, RS256 mix key kinds; list HS*, RS* or ES* algorithms only"),
    ({"mode": "jwt", "jwt": {"algorithms": ["HS256"]}},
     "test config: auth.jwt.secret_env: HS256 needs the name of the environment variable holding the shared secret"),
    ({"mode": "jwt", "jwt": {"algorithms": ["HS256"], "secret_env": "S", "public_key_file": "k.pem"}},
     "test config: auth.jwt.public_key_file: HS256 uses a shared secret (secret_env), not a public key"),
    ({"mode": "jwt", "jwt": {"algorithms": ["RS256"]}},
     "test config: auth.jwt.public_key_file: RS256 needs a PEM public key file"),
    ({"mode": "jwt", "jwt": {"algorithms": ["ES256"], "public_key_file": "k.pem", "secret_env": "S"}},
     "test config: auth.jwt.secret_env: ES256 verifies with a public key (public_key_file), not a shared secret"),
    ({"mode": "jwt", "jwt": {"secret_env": "S", "leeway_seconds": -1}},
     "test config: auth.jwt.leeway_seconds: -1.0 is out of range (must be zero or more)"),
    ({"mode": "jwt", "jwt": {"secret_env": "S", "unknown": 1}}, "test config: unknown key auth.jwt.unknown"),
])
def test_bad_auth_config_is_one_line_naming_the_key(tmp_path, table, line):
    message = parse_error(tmp_path, table)
    assert message == line


# -- start-up: the bind, the environment, the key file ------------------------------------------------


@pytest.mark.parametrize("bind", ["127.0.0.1:8000", "127.0.0.2:8000", "[::1]:8000", "localhost:8000",
                                  "LOCALHOST:1"])
def test_none_starts_on_a_loopback_bind(bind):
    assert auth.build(AuthConfig(), bind, {}).authenticate(None) == auth.ANONYMOUS


@pytest.mark.parametrize("bind", ["0.0.0.0:8000", "[::]:8000", "192.168.1.10:8000", "example.com:80"])
def test_none_refuses_a_non_loopback_bind_naming_auth_mode(bind):
    with pytest.raises(ConfigError) as exc:
        auth.build(AuthConfig(), bind, {})
    assert str(exc.value).startswith("auth.mode: \"none\" serves everyone as admin, so it binds only to loopback")
    assert auth.build(AuthConfig(allow_unauthenticated=True), bind, {}).authenticate(None) == auth.ANONYMOUS


def test_the_cli_prints_the_bind_refusal_as_one_line_and_exits_2(tmp_path, capsys):
    config_file = tmp_path / "config.toml"
    config_file.write_text(f'[ledger]\npath = "{tmp_path / "db"}"\n[agents.assistant]\n')
    assert cli.main(["serve", "--config", str(config_file), "--bind", "0.0.0.0:8000"]) == 2
    assert capsys.readouterr().err == (
        "awaken: auth.mode: \"none\" serves everyone as admin, so it binds only to loopback (127.0.0.1, "
        "::1, localhost), not '0.0.0.0': set auth.mode to \"tokens\" or \"jwt\", or "
        "auth.allow_unauthenticated = true\n"
    )


def test_the_cli_names_a_missing_token_variable(tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("AWAKEN_T_A", KEY)
    monkeypatch.delenv("AWAKEN_T_B", raising=False)
    config_file = tmp_path / "config.toml"
    config_file.write_text(
        f'[ledger]\npath = "{tmp_path / "db"}"\n[agents.assistant]\n[auth]\nmode = "tokens"\n'
        '[[auth.tokens]]\nname = "a"\nenv = "AWAKEN_T_A"\nrole = "user"\nsubject = "a"\n'
        '[[auth.tokens]]\nname = "b"\nenv = "AWAKEN_T_B"\nrole = "admin"\nsubject = "b"\n')
    assert cli.main(["serve", "--config", str(config_file)]) == 2
    assert capsys.readouterr().err == (
        "awaken: auth.tokens[1].env: the environment variable AWAKEN_T_B is not set or is empty\n")


def tokens_error(environ: dict[str, str], *tokens: TokenConfig) -> str:
    with pytest.raises(ConfigError) as exc:
        auth.build(AuthConfig(mode="tokens", tokens=list(tokens)), "127.0.0.1:8000", environ)
    return str(exc.value)


def test_token_keys_are_checked_at_start_up_without_echoing_them():
    a = TokenConfig("a", "A", "user", "alice")
    b = TokenConfig("b", "B", "admin", "bob")
    assert tokens_error({"A": KEY, "B": ""}, a, b) == (
        "auth.tokens[1].env: the environment variable B is not set or is empty")
    assert tokens_error({"A": "short"}, a) == (
        "auth.tokens[0].env: the key in A must be at least 16 visible ASCII characters without , ; \" or \\")
    assert tokens_error({"A": "has a space in it, sixteen+"}, a).startswith("auth.tokens[0].env: the key in A")
    assert tokens_error({"A": KEY, "B": KEY}, a, b) == (
        "auth.tokens[1].env: B holds the same key as auth.tokens[0].env; every key must be distinct")


def test_two_keys_may_act_as_one_subject():
    # key rotation: the old and the new key both name alice until the old one is removed
    old, new = TokenConfig("old", "OLD", "user", "alice"), TokenConfig("new", "NEW", "user", "alice")
    authenticator = auth.build(AuthConfig(mode="tokens", tokens=[old, new]), "127.0.0.1:1",
                               {"OLD": KEY, "NEW": KEY + "-next"})
    assert authenticator.authenticate(KEY) == auth.Principal("alice", "user")
    assert authenticator.authenticate(KEY + "-next") == auth.Principal("alice", "user")


def jwt_error(config: JwtConfig, environ: dict[str, str]) -> str:
    with pytest.raises(ConfigError) as exc:
        auth.build(AuthConfig(mode="jwt", jwt=config), "0.0.0.0:8000", environ)
    return str(exc.value)


def test_jwt_secrets_and_keys_are_checked_at_start_up(tmp_path):
    hs = JwtConfig(["HS256"], secret_env="SECRET")
    assert jwt_error(hs, {}) == "auth.jwt.secret_env: the environment variable SECRET is not set or is empty"
    assert jwt_error(hs, {"SECRET": "x" * 31}) == (
        "auth.jwt.secret_env: the secret in SECRET must be at least 32 bytes")
    missing = tmp_path / "missing.pem"
    assert jwt_error(JwtConfig(["RS256"], public_key_file=str(missing)), {}) == (
        f"auth.jwt.public_key_file: cannot read {str(missing)!r}: No such file or directory")
    garbage = tmp_path / "garbage.pem"
    garbage.write_text("not a key")
    assert jwt_error(JwtConfig(["ES256"], public_key_file=str(garbage)), {}) == (
        f"auth.jwt.public_key_file: {str(garbage)!r} is not a PEM public key")
    rsa_pem = tmp_path / "rsa.pem"
    rsa_pem.write_bytes(rsa.generate_private_key(public_exponent=65537, key_size=2048).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    assert jwt_error(JwtConfig(["ES256"], public_key_file=str(rsa_pem)), {}) == (
        f"auth.jwt.public_key_file: {str(rsa_pem)!r} holds no EC public key, which ES256 needs")
    ec_pem = tmp_path / "ec.pem"
    ec_pem.write_bytes(ec.generate_private_key(ec.SECP256R1()).public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo))
    assert auth.build(AuthConfig(mode="jwt", jwt=JwtConfig(["ES256"], public_key_file=str(ec_pem))),
                      "0.0.0.0:8000", {}).mode == "jwt"


# -- the middleware's pure parts ----------------------------------------------------------------------


def scope(kind: str = "http", headers: list[tuple[bytes, bytes]] = (), subprotocols: list[str] = (),
          path: str = "/v1/agents", **extra: Any) -> dict[str, Any]:
    return {"type": kind, "path": path, "headers": list(headers), "subprotocols": list(subprotocols), **extra}


@pytest.mark.parametrize(("request_scope", "expected"), [
    (scope(headers=[(b"authorization", b"Bearer abc.def")]), "abc.def"),
    (scope(headers=[(b"Authorization", b"bearer   abc ")]), "abc"),
    (scope(headers=[(b"authorization", b"Basic abc")]), None),
    (scope(headers=[(b"authorization", b"Bearer ")]), None),
    (scope(), None),
    # a subprotocol entry counts on sockets only
    (scope(subprotocols=["awaken.v1", "bearer.abc"]), None),
    (scope("websocket", subprotocols=["awaken.v1", "bearer.abc"]), "abc"),
    (scope("websocket", subprotocols=["awaken.v1", "bearer."]), None),
    (scope("websocket", headers=[(b"authorization", b"Bearer hdr")], subprotocols=["bearer.sub"]), "hdr"),
])
def test_bearer_token_is_read_from_the_header_or_a_socket_subprotocol(request_scope, expected):
    assert bearer_token(request_scope) == expected


class Recorder:
    def __init__(self, incoming: list[dict[str, Any]]) -> None:
        self.incoming = incoming
        self.sent: list[dict[str, Any]] = []
        self.app_scopes: list[dict[str, Any]] = []

    async def receive(self) -> dict[str, Any]:
        return self.incoming.pop(0)

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    async def app(self, app_scope: dict, receive: Any, send: Any) -> None:
        self.app_scopes.append(app_scope)


async def test_without_the_http_response_extension_a_refused_upgrade_closes_4401_before_accepting():
    rec = Recorder([{"type": "websocket.connect"}])
    edge = edge_around(rec.app, auth.build(AuthConfig(mode="tokens", tokens=[TokenConfig("a", "A", "user", "a")]),
                                           "127.0.0.1:1", {"A": KEY}))
    await edge(scope("websocket", path="/v1/ag-ui/ws", headers=[(b"host", b"127.0.0.1:1")]), rec.receive, rec.send)
    assert rec.sent == [{"type": "websocket.close", "code": 4401,
                         "reason": "this route needs credentials: send Authorization: Bearer <key>"}]
    assert rec.app_scopes == []


async def test_the_principal_rides_on_the_request_s_scope_and_other_paths_pass_untouched():
    rec = Recorder([])
    edge = edge_around(rec.app, auth.build(AuthConfig(mode="tokens", tokens=[TokenConfig("a", "A", "admin", "ops")]),
                                           "127.0.0.1:1", {"A": KEY}))
    original = scope(headers=[(b"authorization", f"Bearer {KEY}".encode()), (b"host", b"127.0.0.1:1")])
    await edge(original, rec.receive, rec.send)
    # the request's own scope (the server makes one per request): no copy held for a stream's life
    assert rec.app_scopes[0] is original
    assert auth.principal_of(rec.app_scopes[0]) == auth.Principal("ops", "admin")
    for path in ("/healthz", "/readyz", "/v1x"):
        await edge(scope(path=path, headers=[(b"host", b"127.0.0.1:1")]), rec.receive, rec.send)
        assert rec.app_scopes[-1]["path"] == path
        with pytest.raises(LookupError):
            auth.principal_of(rec.app_scopes[-1])
    await edge({"type": "lifespan"}, rec.receive, rec.send)
    assert rec.app_scopes[-1] == {"type": "lifespan"}
    assert rec.sent == []


# -- the documentation --------------------------------------------------------------------------------


def test_config_toml_documents_every_auth_key():
    text = (ROOT / "config.toml").read_text()
    for cls in (AuthConfig, TokenConfig, JwtConfig):
        for field in attrs.fields(cls):
            if field.name not in ("tokens", "jwt"):
                assert re.search(rf"^(# )?{field.name} = ", text, re.MULTILINE), field.name
    assert "[[auth.tokens]]" in text and "[auth.jwt]" in text


def test_the_docs_auth_tables_are_valid_config(tmp_path):
    readme = (ROOT / "docs" / "security.md").read_text()
    section = readme[readme.index("## Authentication"):]
    tables = [tomllib.loads(block) for block in re.findall(r"```toml\n(.*?)```", section, re.DOTALL)][:2]
    assert [t["auth"]["mode"] for t in tables] == ["tokens", "jwt"]
    for table in tables:
        assert make_config(tmp_path, **table).auth.mode == table["auth"]["mode"]
