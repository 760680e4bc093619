"""The ``[auth]`` config: attrs classes for ``awaken.config`` and their shape checks.

What the file can say is checked here when the config is parsed (``check``); what only start-up can
know (the final bind, the environment, the key file) is checked by ``authenticator.build``.

    [auth]
    mode = "none" | "tokens" | "jwt"
    allow_unauthenticated = false     # mode "none" on a non-loopback bind
    metrics_roles = ["admin"]         # the roles whose credentials may read GET /metrics

    [[auth.tokens]]                   # mode "tokens": one table per static API key
    name = "ops"                      # a label for people (never the key)
    env = "AWAKEN_OPS_TOKEN"          # the NAME of the environment variable holding the key
    role = "admin"                    # "admin" | "user"
    subject = "ops"                   # the user the key acts as

    [auth.jwt]                        # mode "jwt": bearer JWTs an app's backend mints
    algorithms = ["HS256"]            # one family: HS* with secret_env, or RS*/ES* with public_key_file
    secret_env = "AWAKEN_JWT_SECRET"
    public_key_file = "jwt-public.pem"
    issuer = "https://app.example"    # checked when set
    audience = "awaken"               # checked when set
    leeway_seconds = 0.0              # clock skew allowed on exp / nbf / iat
    admin_claim = "awaken_admin"      # a token whose claim is exactly `true` is an admin
"""

from __future__ import annotations

from typing import Literal

import attrs

from awaken.core.errors import ConfigError

Mode = Literal["none", "tokens", "jwt"]
Role = Literal["admin", "user"]

#: the JWT algorithms accepted, by the kind of key that verifies them
HMAC_ALGORITHMS = ("HS256", "HS384", "HS512")
RSA_ALGORITHMS = ("RS256", "RS384", "RS512")
EC_ALGORITHMS = ("ES256", "ES384", "ES512")
ALGORITHM_FAMILIES = {"HMAC": HMAC_ALGORITHMS, "RSA": RSA_ALGORITHMS, "EC": EC_ALGORITHMS}


@attrs.frozen
class TokenConfig:
    #: a label for people and logs; never the key
    name: str
    #: the NAME of the environment variable that holds the key (the key never goes in config)
    env: str
    role: Role
    #: the user this key acts as
    subject: str


@attrs.frozen
class JwtConfig:
    #: accepted ``alg`` values, all of one family (HS*, RS* or ES*)
    algorithms: list[str] = attrs.field(factory=lambda: ["HS256"])
    #: HS*: the NAME of the environment variable holding the shared secret (at least 32 bytes)
    secret_env: str | None = None
    #: RS*/ES*: a PEM public key file (relative paths from the working directory)
    public_key_file: str | None = None
    #: when set, the token's ``iss`` must equal it
    issuer: str | None = None
    #: when set, the token's ``aud`` must contain it (when unset, ``aud`` is not checked)
    audience: str | None = None
    #: seconds of clock skew allowed on ``exp``, ``nbf`` and ``iat``
    leeway_seconds: float = 0.0
    #: a claim whose value ``true`` makes the token an admin (unset: every JWT is a ``user``)
    admin_claim: str | None = None


@attrs.frozen
class AuthConfig:
    mode: Mode = "none"
    #: lets ``mode = "none"`` serve a non-loopback bind (anyone who reaches the port is admin)
    allow_unauthenticated: bool = False
    tokens: list[TokenConfig] = attrs.field(factory=list)
    jwt: JwtConfig | None = None
    #: the roles whose credentials may read ``GET /metrics`` (with mode ``none`` it is open, as every route)
    metrics_roles: list[Role] = attrs.field(factory=lambda: ["admin"])


def family_of(algorithm: str) -> str | None:
    return next((name for name, algs in ALGORITHM_FAMILIES.items() if algorithm in algs), None)


def check(auth: AuthConfig, source: str) -> None:
    """Refuse an ``[auth]`` table whose shape cannot work; one line naming the key."""
    if auth.allow_unauthenticated and auth.mode != "none":
        raise ConfigError(f"{source}: auth.allow_unauthenticated: only applies to auth.mode = \"none\" "
                          f"(mode is {auth.mode!r}, which always requires credentials)")
    if auth.mode == "tokens":
        _check_tokens(auth.tokens, source)
    elif auth.mode == "jwt":
        if auth.jwt is None:
            raise ConfigError(f"{source}: auth.jwt: auth.mode = \"jwt\" needs an [auth.jwt] table")
        _check_jwt(auth.jwt, source)


def _check_tokens(tokens: list[TokenConfig], source: str) -> None:
    if not tokens:
        raise ConfigError(f"{source}: auth.tokens: auth.mode = \"tokens\" needs at least one [[auth.tokens]] table")
    seen: dict[str, int] = {}
    for i, token in enumerate(tokens):
        for key in ("name", "env", "subject"):
            if not getattr(token, key).strip():
                raise ConfigError(f"{source}: auth.tokens[{i}].{key}: must not be empty")
        if token.name in seen:
            raise ConfigError(f"{source}: auth.tokens[{i}].name: {token.name!r} is already "
                              f"auth.tokens[{seen[token.name]}].name")
        seen[token.name] = i


def _check_jwt(jwt: JwtConfig, source: str) -> None:
    if not jwt.algorithms:
        raise ConfigError(f"{source}: auth.jwt.algorithms: list at least one algorithm")
    families = set()
    for alg in jwt.algorithms:
        family = family_of(alg)
        if family is None:
            known = ", ".join(a for algs in ALGORITHM_FAMILIES.values() for a in algs)
            raise ConfigError(f"{source}: auth.jwt.algorithms: {alg!r} is not one of {known}")
        families.add(family)
    if len(families) > 1:
        raise ConfigError(f"{source}: auth.jwt.algorithms: {', '.join(jwt.algorithms)} mix key kinds; "
                          f"list HS*, RS* or ES* algorithms only")
    (family,) = families
    if family == "HMAC":
        if not jwt.secret_env:
            raise ConfigError(f"{source}: auth.jwt.secret_env: {jwt.algorithms[0]} needs the name of "
                              f"the environment variable holding the shared secret")
        if jwt.public_key_file is not None:
            raise ConfigError(f"{source}: auth.jwt.public_key_file: {jwt.algorithms[0]} uses a shared "
                              f"secret (secret_env), not a public key")
    else:
        if not jwt.public_key_file:
            raise ConfigError(f"{source}: auth.jwt.public_key_file: {jwt.algorithms[0]} needs a PEM "
                              f"public key file")
        if jwt.secret_env is not None:
            raise ConfigError(f"{source}: auth.jwt.secret_env: {jwt.algorithms[0]} verifies with a "
                              f"public key (public_key_file), not a shared secret")
    if jwt.leeway_seconds < 0:
        raise ConfigError(f"{source}: auth.jwt.leeway_seconds: {jwt.leeway_seconds!r} is out of range "
                          f"(must be zero or more)")
    if jwt.admin_claim is not None and not jwt.admin_claim:
        raise ConfigError(f"{source}: auth.jwt.admin_claim: must not be empty")
