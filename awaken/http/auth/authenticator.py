"""Credentials → ``Principal``: one authenticator per ``[auth] mode``, built once at start-up.

``build(auth, bind, environ)`` reads what start-up needs (the keys named by ``auth.tokens[i].env``,
the JWT secret or public key) and refuses, with one ``ConfigError`` line naming the key, anything
that cannot serve: ``mode = "none"`` on a non-loopback bind without ``allow_unauthenticated``, a
missing or empty variable, an unreadable key. ``authenticate(token)`` is then pure and synchronous:
the bearer token (None when the request carried none) in, a ``Principal`` out, or ``Unauthenticated``.

A JWT's time claims (``exp``, ``nbf``, ``iat``) must be JSON numbers (RFC 7519 NumericDates): PyJWT
reads them with ``int()`` and would take ``"exp": "1796193485"`` or ``true``, so the signature and the
other claims are checked by PyJWT and the times here, after their type.

Secrets never leave this module: static keys are kept only as SHA-256 digests and compared with
``hmac.compare_digest`` against every entry; no message, log line or error carries a token.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import math
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import attrs
import jwt
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.hazmat.primitives.serialization import load_pem_public_key

from awaken.config.auth import AuthConfig, JwtConfig, TokenConfig, family_of
from awaken.core.errors import ConfigError, Unauthenticated
from awaken.core.principal import ANONYMOUS, Principal

#: the shortest static key accepted (characters): a guessable key on a paid model is an open door
MIN_TOKEN_CHARS = 16
#: the shortest HS* secret accepted (bytes), RFC 7518 §3.2: a key at least as long as the hash
MIN_SECRET_BYTES = 32
LOOPBACK_NAMES = ("localhost",)


class Authenticator:
    """``mode = "none"``: every request is the anonymous, admin-equivalent principal."""

    mode = "none"

    def authenticate(self, token: str | None) -> Principal:
        return ANONYMOUS


def is_loopback(host: str) -> bool:
    host = host.strip("[]")
    if host.lower() in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def build(auth: AuthConfig, bind: str, environ: Mapping[str, str]) -> Authenticator:
    """The authenticator for ``auth`` serving ``bind`` (``HOST:PORT``), or one ``ConfigError`` line."""
    if auth.mode == "none":
        host = bind.rpartition(":")[0]
        if not is_loopback(host) and not auth.allow_unauthenticated:
            raise ConfigError(
                f"auth.mode: \"none\" serves everyone as admin, so it binds only to loopback "
                f"(127.0.0.1, ::1, localhost), not {host!r}: set auth.mode to \"tokens\" or \"jwt\", "
                f"or auth.allow_unauthenticated = true"
            )
        return Authenticator()
    if auth.mode == "tokens":
        return TokenAuthenticator.build(auth.tokens, environ)
    assert auth.jwt is not None  # config.check
    return JwtAuthenticator.build(auth.jwt, environ)


# -- static API keys ----------------------------------------------------------------------------------


@attrs.frozen
class _Key:
    digest: bytes
    principal: Principal


def _digest(token: str) -> bytes:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).digest()


def _header_safe(value: str) -> bool:
    # A bearer token travels in a header or a Sec-WebSocket-Protocol entry: visible ASCII, no
    # separators that would split it.
    return all(33 <= ord(c) <= 126 and c not in ',;"\\' for c in value)


@attrs.frozen
class TokenAuthenticator(Authenticator):
    mode = "tokens"
    keys: tuple[_Key, ...]

    @classmethod
    def build(cls, tokens: list[TokenConfig], environ: Mapping[str, str]) -> TokenAuthenticator:
        keys: list[_Key] = []
        owner: dict[bytes, int] = {}
        for i, token in enumerate(tokens):
            where = f"auth.tokens[{i}].env"
            value = environ.get(token.env, "")
            if not value:
                raise ConfigError(f"{where}: the environment variable {token.env} is not set or is empty")
            if len(value) < MIN_TOKEN_CHARS or not _header_safe(value):
                raise ConfigError(f"{where}: the key in {token.env} must be at least {MIN_TOKEN_CHARS} "
                                  f"visible ASCII characters without , ; \" or \\")
            digest = _digest(value)
            if digest in owner:
                raise ConfigError(f"{where}: {token.env} holds the same key as "
                                  f"auth.tokens[{owner[digest]}].env; every key must be distinct")
            owner[digest] = i
            keys.append(_Key(digest, Principal(token.subject, token.role)))
        return cls(tuple(keys))

    def authenticate(self, token: str | None) -> Principal:
        if token is None:
            raise Unauthenticated("this route needs credentials: send Authorization: Bearer <key>",
                                  token_given=False)
        digest = _digest(token)
        found: Principal | None = None
        for key in self.keys:  # every key is compared: the time taken does not depend on which matched
            if hmac.compare_digest(digest, key.digest):
                found = key.principal
        if found is None:
            raise Unauthenticated("the bearer token is not valid", token_given=True)
        return found


# -- JWTs ---------------------------------------------------------------------------------------------


def _jwt_message(exc: jwt.InvalidTokenError) -> str:
    """What was wrong with a token, in words that never quote it."""
    if isinstance(exc, jwt.ExpiredSignatureError):
        return "the token has expired"
    if isinstance(exc, jwt.ImmatureSignatureError):
        return "the token is not valid yet"
    if isinstance(exc, jwt.MissingRequiredClaimError):
        return f"the token has no {exc.claim!r} claim"
    if isinstance(exc, jwt.InvalidIssuerError):
        return "the token's issuer is not accepted"
    if isinstance(exc, jwt.InvalidAudienceError):
        return "the token's audience is not accepted"
    if isinstance(exc, jwt.InvalidSignatureError):
        return "the token's signature does not verify"
    if isinstance(exc, jwt.InvalidAlgorithmError):
        return "the token's algorithm is not accepted"
    if isinstance(exc, jwt.DecodeError):
        return "the token is not a well-formed JWT"
    return "the token is not valid"


def _check_times(claims: dict[str, Any], leeway: float) -> None:
    """``exp``, ``nbf`` and ``iat`` (where present) are finite numbers, and now is inside them."""
    for claim in ("exp", "nbf", "iat"):
        value = claims.get(claim)
        if claim in claims and (isinstance(value, bool) or not isinstance(value, int | float)
                                or not math.isfinite(value)):
            raise Unauthenticated(f"the token's {claim!r} claim is not a number", token_given=True)
    now = time.time()
    if claims["exp"] <= now - leeway:
        raise Unauthenticated("the token has expired", token_given=True)
    if claims.get("nbf", -math.inf) > now + leeway or claims.get("iat", -math.inf) > now + leeway:
        raise Unauthenticated("the token is not valid yet", token_given=True)


@attrs.frozen
class JwtAuthenticator(Authenticator):
    mode = "jwt"
    config: JwtConfig
    key: Any  # the HS* secret (bytes) or a cryptography public key

    @classmethod
    def build(cls, config: JwtConfig, environ: Mapping[str, str]) -> JwtAuthenticator:
        family = family_of(config.algorithms[0])
        if family == "HMAC":
            assert config.secret_env is not None  # config.check
            secret = environ.get(config.secret_env, "").encode("utf-8", "surrogatepass")
            if not secret:
                raise ConfigError(f"auth.jwt.secret_env: the environment variable {config.secret_env} "
                                  f"is not set or is empty")
            if len(secret) < MIN_SECRET_BYTES:
                raise ConfigError(f"auth.jwt.secret_env: the secret in {config.secret_env} must be at "
                                  f"least {MIN_SECRET_BYTES} bytes")
            return cls(config, secret)
        assert config.public_key_file is not None  # config.check
        path = Path(config.public_key_file)
        try:
            pem = path.read_bytes()
        except OSError as exc:
            raise ConfigError(f"auth.jwt.public_key_file: cannot read {str(path)!r}: {exc.strerror}") from None
        try:
            key = load_pem_public_key(pem)
        except ValueError:
            raise ConfigError(f"auth.jwt.public_key_file: {str(path)!r} is not a PEM public key") from None
        wanted = rsa.RSAPublicKey if family == "RSA" else ec.EllipticCurvePublicKey
        if not isinstance(key, wanted):
            raise ConfigError(f"auth.jwt.public_key_file: {str(path)!r} holds no {family} public key, "
                              f"which {config.algorithms[0]} needs")
        return cls(config, key)

    def authenticate(self, token: str | None) -> Principal:
        if token is None:
            raise Unauthenticated("this route needs credentials: send Authorization: Bearer <JWT>",
                                  token_given=False)
        config = self.config
        try:
            claims = jwt.decode(
                token, self.key, algorithms=config.algorithms, issuer=config.issuer,
                audience=config.audience,
                options={"require": ["exp", "sub"], "verify_aud": config.audience is not None,
                         "verify_exp": False, "verify_nbf": False, "verify_iat": False},
            )
        except jwt.InvalidTokenError as exc:
            raise Unauthenticated(_jwt_message(exc), token_given=True) from None
        _check_times(claims, config.leeway_seconds)
        subject = claims["sub"]
        if not isinstance(subject, str) or not subject:
            raise Unauthenticated("the token's 'sub' claim is not a user id", token_given=True)
        admin = config.admin_claim is not None and claims.get(config.admin_claim) is True
        return Principal(subject, "admin" if admin else "user")
