"""The HTTP edge's telemetry: ``GET /metrics``, and what is observed of every request.

The HTTP edge (``awaken/http/edge.py``) keeps a ``RequestFacts`` for every HTTP request and WebSocket: it counts the answer
by method, route template (``/v1/threads/{thread}``, never the path itself: the label's values stay
few) and status (``awaken_http_requests_total``), keeps ``awaken_streams_open`` for the run and rejoin
routes' streams, makes the request's refusals countable (``awaken.core.errors.REFUSAL_COUNTER``: an
HTTP request answers at most one refusal, a WebSocket one per refused message), and, with
``[server] log_format = "json"``, writes the request's ``request`` line with its principal's subject
(``awaken/telemetry/logs.py``). A request whose path matches no route is counted under ``other``.

``serve_metrics`` answers ``GET /metrics`` (the Prometheus text format, ``ServerMetrics.render``) inside
the Host check and outside the ``/v1/`` authentication: with ``[auth] mode = "none"`` it is open, as
every route is; otherwise it needs a bearer credential whose role ``[auth] metrics_roles`` lists
(default ``["admin"]``): 401 ``UNAUTHENTICATED`` without valid credentials, 403 ``FORBIDDEN`` with a
role not listed.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from typing import Any

from werkzeug.exceptions import HTTPException
from werkzeug.routing import Map

from awaken.core.errors import Unauthenticated
from awaken.core.principal import FACTS_KEY
from awaken.http.auth.authenticator import Authenticator
from awaken.http.auth.credentials import bearer_token, refusal
from awaken.http.errors import write_error
from awaken.telemetry.metrics import CONTENT_TYPE, ServerMetrics
from awaken.wires.registry import Wire, path_pattern

METRICS_PATH = "/metrics"
#: the route label of a path no route serves (a scanner's guesses stay one label value)
OTHER = "other"
#: how many (method, path) answers ``RouteTemplates`` keeps
KNOWN_PATHS = 512
#: the kinds of wire route whose answer is a stream
_STREAMING = frozenset({"run", "socket", "rejoin"})


class RequestFacts:
    """What is learnt of a request while it is served: the answer's status and a stream's end (from each
    message sent, ``saw``), its refusal, who asked."""

    __slots__ = ("_metrics", "refused", "status", "streaming", "subject")

    def __init__(self, metrics: ServerMetrics, streaming: bool = False) -> None:
        self._metrics = metrics
        self.status = 0
        #: the code of the refusal the request was answered with (HTTP: at most one)
        self.refused: str | None = None
        #: the subject of the principal the edge attached (None: anonymous, or not a /v1/ route)
        self.subject: str | None = None
        #: the request is an open stream (counted in ``awaken_streams_open`` until ``close_stream``)
        self.streaming = streaming
        if streaming:
            metrics.open_streams += 1

    def refuse(self, code: str) -> None:
        self.refused = code

    def close_stream(self) -> None:
        if self.streaming:
            self.streaming = False
            self._metrics.open_streams -= 1

    def saw(self, message: dict[str, Any]) -> None:
        """A message the request's answer sends."""
        kind = message["type"]
        if not self.status:
            if kind in ("http.response.start", "websocket.http.response.start"):
                self.status = message["status"]
            elif kind == "websocket.accept":
                self.status = 101
            elif kind == "websocket.close":
                self.status = 403  # closed before it was accepted: the upgrade was refused
        # a stream is closed by its last body message or its socket's close, before the client can see
        # its end: a scrape that follows never counts it
        if self.streaming and (kind == "websocket.close" or kind == "http.response.body"
                               and not message.get("more_body")):
            self.close_stream()


class RouteTemplates:
    """A request's route template: the wires' templates first (their run, socket, rejoin, history and
    extra routes), then the quart app's rules (health, agents, threads, console)."""

    def __init__(self, wires: dict[str, Wire], url_map: Map) -> None:
        self._wire: list[tuple[re.Pattern[str], str, bool]] = []
        for wire in wires.values():
            for _method, template, kind in wire.routes():
                self._wire.append((path_pattern(template), template, kind in _STREAMING))
        self._rules = url_map.bind("awaken")
        self._known: dict[tuple[str, str], tuple[str, bool]] = {}
        #: the latest question and its answer (a server that serves one run route asks it again and again)
        self._last: tuple[str, str, tuple[str, bool]] = ("", "", (OTHER, False))

    def of(self, method: str, path: str) -> tuple[str, bool]:
        """(template, whether it streams) of a request; ``other`` when no route serves the path. The
        answers for the latest paths are kept (the run routes' paths are a handful, asked on every run)."""
        last = self._last
        if path == last[1] and method == last[0]:
            return last[2]
        key = (method, path)
        found = self._known.get(key)
        if found is None:
            if len(self._known) >= KNOWN_PATHS:
                self._known.clear()  # paths with ids in them come and go: start again
            found = self._known[key] = self._match(method, path)
        self._last = (method, path, found)
        return found

    def _match(self, method: str, path: str) -> tuple[str, bool]:
        if path == METRICS_PATH:
            return METRICS_PATH, False
        for pattern, template, streaming in self._wire:
            if pattern.match(path):
                return template, streaming
        try:
            rule, _ = self._rules.match(path, method=None if method == "WEBSOCKET" else method,
                                        return_rule=True)
        except HTTPException as exc:  # a method the rule does not allow is still the rule's request
            rule = getattr(exc, "valid_methods", None) and _rule_of(self._rules, path)
            return (rule.rule, False) if rule is not None else (OTHER, False)
        return rule.rule, False


def _rule_of(adapter: Any, path: str) -> Any:
    for method in ("GET", "POST", "DELETE", "PUT", "PATCH"):
        try:
            return adapter.match(path, method=method, return_rule=True)[0]
        except HTTPException:
            continue
    return None


async def serve_metrics(scope: dict[str, Any], send: Callable[[dict[str, Any]], Awaitable[None]],
                        metrics: ServerMetrics, authenticator: Authenticator, roles: list[str]) -> None:
    """Answer a request for ``METRICS_PATH``: the metrics, for a bearer credential of one of ``roles`` (with
    ``[auth] mode = "none"`` every request is the anonymous principal, and may)."""
    if scope.get("method") != "GET":
        await write_error(send, "METHOD_NOT_ALLOWED", f"{scope.get('method')} is not allowed here; use GET",
                          headers=[(b"allow", b"GET")])
        return
    try:
        principal = authenticator.authenticate(bearer_token(scope))
    except Unauthenticated as exc:
        status, headers, body = refusal(exc)
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body})
        return
    facts = scope.get(FACTS_KEY)
    if facts is not None:
        facts.subject = principal.subject
    if principal.role not in roles and principal.role != "anonymous":
        await write_error(send, "FORBIDDEN", f"the role {principal.role!r} may not read metrics "
                          f"([auth] metrics_roles: {', '.join(sorted(roles)) or 'none'})")
        return
    body = metrics.render()
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", CONTENT_TYPE.encode()), (b"cache-control", b"no-store"),
                            (b"content-length", str(len(body)).encode())]})
    await send({"type": "http.response.body", "body": body})
