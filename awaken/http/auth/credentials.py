"""A request's credentials: every ``/v1/`` request (HTTP and WebSocket) gets a ``Principal`` or a 401
(the HTTP edge applies this: ``awaken/http/edge.py``).

Credentials, in this order:

* ``Authorization: Bearer <token>`` (HTTP, and WebSockets opened by non-browser clients);
* on a WebSocket, a ``Sec-WebSocket-Protocol`` entry ``bearer.<token>``, since a browser cannot set
  headers on a socket: ``new WebSocket(url, ["awaken.v1", "bearer." + token])``. The server answers
  the upgrade with the subprotocol ``awaken.v1`` (``transports/ws.py``) and never echoes the
  ``bearer.`` entry.

Refusals happen before any stream starts. HTTP: 401, ``WWW-Authenticate: Bearer`` (``Bearer
error="invalid_token"`` when a token was given) and ``{"error": {"code": "UNAUTHENTICATED",
"message": …}}``. WebSocket: the upgrade itself is answered with that same 401 response (the ASGI
``websocket.http.response`` extension, which hypercorn provides); under a server without it the
upgrade is refused by closing with ``CLOSE_UNAUTHENTICATED`` before accepting.

``/healthz``, ``/readyz`` and everything outside ``/v1/`` pass through untouched. The principal is
put on the request's scope under ``PRINCIPAL_KEY``; routes read it with ``principal_of(scope)``.
"""

from __future__ import annotations

from typing import Any

from awaken.core.errors import Unauthenticated, error_response

#: the ``Sec-WebSocket-Protocol`` entry prefix that carries a bearer token
BEARER_SUBPROTOCOL_PREFIX = "bearer."
#: the close code refusing an upgrade where the server cannot answer it with a 401
CLOSE_UNAUTHENTICATED = 4401


def guarded(path: str) -> bool:
    """Whether ``path`` needs a principal: the whole ``/v1/`` API."""
    return path == "/v1" or path.startswith("/v1/")


def bearer_token(scope: dict[str, Any]) -> str | None:
    """The bearer token a request carries, or None. Only the ``Bearer`` scheme counts; without an
    ``Authorization`` header, an ``x-api-key`` header carries the token (how the Anthropic SDKs send it)."""
    api_key = None
    for name, value in scope.get("headers", []):
        if name.lower() == b"authorization":
            scheme, _, token = value.decode("latin-1").strip().partition(" ")
            token = token.strip()
            if scheme.lower() == "bearer" and token:
                return token
            api_key = None
            break
        if name.lower() == b"x-api-key" and value.strip():
            api_key = value.decode("latin-1").strip()
    else:
        if api_key is not None:
            return api_key
    if scope["type"] == "websocket":
        for entry in scope.get("subprotocols", []):
            if entry.startswith(BEARER_SUBPROTOCOL_PREFIX) and len(entry) > len(BEARER_SUBPROTOCOL_PREFIX):
                return entry[len(BEARER_SUBPROTOCOL_PREFIX):]
    return None


def refusal(exc: Unauthenticated) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The 401 response for a refused request (``error_response``): (status, headers, body)."""
    challenge = b'Bearer error="invalid_token"' if exc.token_given else b"Bearer"
    return error_response(exc, headers=[(b"www-authenticate", challenge)])
