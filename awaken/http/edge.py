"""The HTTP edge: the one ASGI layer between hypercorn and the routes.

Every HTTP request and WebSocket passes one coroutine, ``Edge.__call__``, which applies these rules in
this order. Each rule is owned and decided by its own module; the edge only applies them:

1. the request observer (``http/metrics.py``, ``RequestFacts``): the answer is counted by route template
   and status, a stream while it is open, the request's refusals, and its JSON request line is written;
2. the Host and cross-site checks (``http/hosts.py``, ``verdict``): 403 ``HOST_NOT_ALLOWED`` or
   ``ORIGIN_NOT_ALLOWED`` before anything else is looked at;
3. ``GET /metrics`` (``http/metrics.py``, ``serve_metrics``): behind the Host check, with its own
   credential check, outside the ``/v1/`` authentication and CORS;
4. CORS (``http/cors.py``, ``CorsPolicy``): a preflight under ``/v1/`` is answered here;
5. authentication (``http/auth``): every ``/v1/`` request carries a ``Principal`` on its scope or is
   refused 401.

Then the routes. Going out, one ``send`` (``Answer``) completes each answer's head, in this order:
- the CORS headers (``cors``) of a request past the CORS rule: so a 401 carries them, a Host refusal
  does not;
- the framing headers of an HTML answer (``framing``);
- ``Connection: close`` on an answer that starts before its request body was read (``early``).
The observer sees the status and the stream's end.

Refusals are written by ``refuse``: an HTTP answer, or for a WebSocket the upgrade answered with the
same response (the ASGI ``websocket.http.response`` extension), or a close before accepting where the
server lacks it.

Why one layer: a chain of middlewares costs a coroutine frame and a ``send`` wrapper per layer, for the
whole life of every stream, and a call per layer on every frame a stream sends.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from awaken.core.asgi import header_of
from awaken.core.errors import REFUSAL_COUNTER, Unauthenticated
from awaken.core.principal import FACTS_KEY, PRINCIPAL_KEY
from awaken.http import cors, early, framing, hosts
from awaken.http.auth import credentials as auth
from awaken.http.auth.authenticator import Authenticator
from awaken.http.metrics import METRICS_PATH, RequestFacts, RouteTemplates, serve_metrics
from awaken.telemetry import logs
from awaken.telemetry.metrics import ServerMetrics

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]
Headers = Sequence[tuple[bytes, bytes]]


class Answer:
    """The request's ``send`` as the routes see it (and, for a request that declares a body, its
    ``receive``). It names the ``send`` it wraps (``__wrapped__``: the WebSocket transport finds
    hypercorn's stream behind it)."""

    __slots__ = ("__wrapped__", "_body_pending", "_closing", "_receive", "cors", "facts")

    def __init__(self, send: Callable[[dict[str, Any]], Awaitable[None]], receive: Callable[[], Awaitable[Any]],
                 facts: RequestFacts, body_pending: bool) -> None:
        self.__wrapped__ = send
        self._receive = receive
        self.facts = facts
        #: the CORS headers of the answer (None: the request is not under the CORS rule)
        self.cors: Headers | None = None
        #: the request declared a body (HTTP/1.x) whose last message the routes have not received
        self._body_pending = body_pending
        #: the answer started before the body was read: its connection is closed after it
        self._closing = False

    async def receive(self) -> dict[str, Any]:
        """The request's ``receive``, noting when its body has been read (``early``)."""
        message = await self._receive()
        if message["type"] != "http.request" or not message.get("more_body", False):
            self._body_pending = False  # the last body message, or a disconnect: nothing more arrives
        return message

    async def __call__(self, message: dict[str, Any]) -> None:
        kind = message["type"]
        if kind == "http.response.start":
            message = self._head(message)
        self.facts.saw(message)
        if (self._closing and self._body_pending and kind == "http.response.body"
                and not message.get("more_body", False)):
            # the last message of an answer given before the body was read: what still arrives of the
            # body is read and dropped while it is written (``early``)
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._drain)
                await self.__wrapped__(message)
                nursery.cancel_scope.cancel()
            return
        await self.__wrapped__(message)

    def _head(self, message: dict[str, Any]) -> dict[str, Any]:
        given = headers = message.get("headers", [])
        if self.cors is not None:
            headers = cors.merge_headers(headers, self.cors)
        if framing.is_html(headers):
            headers = framing.with_html_headers(headers)
        if self._body_pending:
            self._closing = True
            if not early.has_close(headers):
                headers = [*headers, (b"connection", b"close")]
        return message if headers is given else {**message, "headers": headers}

    async def _drain(self) -> None:
        while self._body_pending:
            await self.receive()


async def refuse(scope: dict[str, Any], receive: Callable[[], Awaitable[Any]], send: Callable[..., Awaitable[None]],
                 answer: tuple[int, Headers, bytes], close: tuple[int, str]) -> None:
    """Write a refusal: ``answer`` (status, headers, body) to an HTTP request; to a WebSocket, the upgrade
    answered with it, or where the server cannot answer an upgrade, a close with ``close`` (code, reason)
    before accepting."""
    status, headers, body = answer
    if scope["type"] == "http":
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})
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
        await send({"type": "websocket.close", "code": close[0], "reason": close[1]})


class Edge:
    """The ASGI app in front of ``app`` (the routes): the rules of this module, in one coroutine.

    A route may return an awaitable (a run's stream, after the route admitted it): the edge awaits it
    once the route's coroutine has ended, so the stream's stack holds only what streaming needs. An
    ASGI app returns None: nothing more is awaited."""

    def __init__(self, app: ASGIApp, *, metrics: ServerMetrics, routes: RouteTemplates,
                 host_policy: hosts.HostPolicy, cors_policy: cors.CorsPolicy, authenticator: Authenticator,
                 metrics_roles: list[str]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = routes
        self.host_policy = host_policy
        self.cors_policy = cors_policy
        self.authenticator = authenticator
        self.metrics_roles = metrics_roles

    async def __call__(self, scope: dict, receive: Callable, send: Callable) -> None:
        kind = scope["type"]
        if kind != "http" and kind != "websocket":
            await self.app(scope, receive, send)
            return
        path = scope["path"]
        method = scope.get("method", "GET") if kind == "http" else "WEBSOCKET"
        route, streaming = self.routes.of(method, path)
        started = time.perf_counter()
        metrics = self.metrics
        facts = RequestFacts(metrics, streaming)
        token = REFUSAL_COUNTER.set(facts.refuse if kind == "http" else metrics.refused)
        # the server's scope is the request's own: no copy of it to make (the facts leave it at the end,
        # or the connection would refer to itself through them: a cycle no reference count frees)
        scope[FACTS_KEY] = facts
        body_pending = kind == "http" and scope.get("http_version") in ("1.0", "1.1") and early.declares_body(scope)
        answer = Answer(send, receive, facts, body_pending)
        if body_pending:
            receive = answer.receive
        try:
            refused = hosts.verdict(scope, self.host_policy, self.cors_policy)
            if refused is not None:
                await refuse(scope, receive, answer, hosts.refusal(*refused), (hosts.CLOSE_REFUSED, refused[0]))
                return
            if kind == "http" and path == METRICS_PATH:
                await serve_metrics(scope, answer, metrics, self.authenticator, self.metrics_roles)
                return
            if kind == "http" and path.startswith(cors.PREFIX):
                origin = header_of(scope, b"origin")
                if origin is not None and cors.is_preflight(scope):
                    status, headers, body = self.cors_policy.preflight(origin)
                    await answer({"type": "http.response.start", "status": status, "headers": headers})
                    await answer({"type": "http.response.body", "body": body})
                    return
                answer.cors = self.cors_policy.response_headers(origin)
            if auth.guarded(path):
                try:
                    principal = self.authenticator.authenticate(auth.bearer_token(scope))
                except Unauthenticated as exc:
                    await refuse(scope, receive, answer, auth.refusal(exc), (auth.CLOSE_UNAUTHENTICATED, exc.message))
                    return
                facts.subject = principal.subject  # the request's log line names who asked
                scope[PRINCIPAL_KEY] = principal
            follow = await self.app(scope, receive, answer)
            if follow is not None:  # the route's stream, awaited now that the route's own frame is gone
                await follow
        finally:
            del scope[FACTS_KEY]
            REFUSAL_COUNTER.reset(token)
            facts.close_stream()
            if facts.refused is not None:
                metrics.refused(facts.refused)
            metrics.request(method, route, facts.status)
            logs.request_line(method, route, facts.status, time.perf_counter() - started, facts.subject)
