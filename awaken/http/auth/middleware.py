"""The auth middleware: every ``/v1/`` request (HTTP and WebSocket) gets a ``Principal`` or a 401.

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

from collections.abc import Awaitable, Callable
from typing import Any

from awaken.core.errors import Unauthenticated, error_response
from awaken.core.principal import FACTS_KEY, PRINCIPAL_KEY
from awaken.http.auth.authenticator import Authenticator

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]

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


class AuthMiddleware:
    """Wraps the ASGI app: authenticates ``/v1/`` requests with ``authenticator``."""

    def __init__(self, authenticator: Authenticator, app: ASGIApp) -> None:
        self.authenticator = authenticator
        self.app = app

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] not in ("http", "websocket") or not guarded(scope["path"]):
            await self.app(scope, receive, send)
            return
        try:
            principal = self.authenticator.authenticate(bearer_token(scope))
        except Unauthenticated as exc:
            await self._refuse(scope, receive, send, exc)
            return
        facts = scope.get(FACTS_KEY)
        if facts is not None:  # the request's telemetry learns who is asking (its log line's subject)
            facts.subject = principal.subject
        # the server's scope is the request's own: the principal joins it (a copy of the scope, held for
        # the whole of a stream, cost about 0.9 KB per open stream)
        scope[PRINCIPAL_KEY] = principal
        await self.app(scope, receive, send)

    async def _refuse(self, scope: dict, receive: Callable, send: Callable, exc: Unauthenticated) -> None:
        status, headers, body = refusal(exc)
        if scope["type"] == "http":
            await send({"type": "http.response.start", "status": status, "headers": headers})
            await send({"type": "http.response.body", "body": body})
            return
        message = await receive()
        if message["type"] != "websocket.connect":
            return  # the client left before the handshake finished
        if "websocket.http.response" in scope.get("extensions", {}):
            # the refused upgrade's connection is closed after the answer: say so, or a client may reuse it
            await send({"type": "websocket.http.response.start", "status": status,
                        "headers": [*headers, (b"connection", b"close")]})
            await send({"type": "websocket.http.response.body", "body": body})
        else:
            await send({"type": "websocket.close", "code": CLOSE_UNAUTHENTICATED, "reason": exc.message})
