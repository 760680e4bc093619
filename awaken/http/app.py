"""The HTTP surface: one ASGI app on hypercorn's trio worker.

The wires' routes come from the wire registry (``awaken.wires.registry``, the ``awaken.wires``
entry-point group: AG-UI, the AI SDK, the CopilotKit runtime and any plugin's): their run, socket,
rejoin and extra routes are served as raw ASGI (``wire_routes``), so nothing sits between the run and
the socket but the transport; their history routes, like everything else (health, agents, threads),
are routes of a quart-trio app. In front of all of them is the HTTP edge (awaken/http/edge.py), one
layer applying, in order: the request observer, the Host check and the cross-site check
(awaken/http/hosts.py: 403 ``HOST_NOT_ALLOWED`` for a ``Host`` that does not name the server, 403
``ORIGIN_NOT_ALLOWED`` for a state change or a socket from a foreign page), ``GET /metrics``, CORS
(awaken/http/cors.py: browser preflights for every ``/v1/`` path, CORS headers on every answer, a 401
included) and authentication (every ``/v1/`` request carries a ``Principal``, ``auth.principal_of(scope)``,
or is refused 401); and on every answer's head, the framing headers of HTML (awaken/http/framing.py) and
``Connection: close`` when it starts before its request body was read (awaken/http/early.py).

Routes (from ``POST /v1/ag-ui`` on, the shipped wires' as they declare them):
    GET  /healthz                                    200 while the process serves
    GET  /readyz                                     200 when the ledger can commit (write probe), else 503;
                                                     503 SERVER_DRAINING from the start of a shutdown
    GET  /metrics                                    Prometheus metrics ([auth] metrics_roles; awaken/http/metrics.py)
    GET  /v1/me                                      the caller's principal {subject, role}
    GET  /v1/agents                                  the published agents, the wires with their capabilities
    GET  /v1/ag-ui/agents/{agentId}/capabilities     the agent's AG-UI AgentCapabilities
    GET  /v1/threads, /v1/threads/{threadId}         the caller's threads, one thread (threads_api.py)
    GET  /v1/threads/{threadId}/branches             its branches; POST /v1/threads/{threadId}/fork: a new thread
    DELETE /v1/threads/{threadId}                    delete a thread (204; 409 THREAD_BUSY)
    POST /v1/threads/{threadId}/stop                 stop its active run (200 {runId, status}; 204)
    GET  /console                                    the console (awaken/http/console/, built assets)
    POST /v1/ag-ui, /v1/ag-ui/agents/{agentId}       AG-UI runs (SSE)
    GET  /v1/ag-ui/threads/{threadId}/messages       AG-UI history page {items, cursor} (?branch=N: that path)
    POST /v1/ai-sdk/chat, /v1/ai-sdk/agents/{agentId}/chat   AI SDK UI Message Stream runs (SSE)
    GET  /v1/ai-sdk/threads/{threadId}/messages      AI SDK history page {items: UIMessage[], cursor}
    GET  /v1/ag-ui/threads/{threadId}/stream         rejoin the thread's active run (AG-UI, Last-Event-ID)
    GET  /v1/ai-sdk/chat/{chatId}/stream, /v1/ai-sdk/agents/{agentId}/chat/{chatId}/stream
                                                     rejoin the chat's active run (useChat resume)
    WS   /v1/ag-ui/ws, /v1/ag-ui/agents/{agentId}/ws         AG-UI runs over WebSocket (transports/ws.py)
    WS   /v1/ai-sdk/ws, /v1/ai-sdk/agents/{agentId}/ws       AI SDK runs over WebSocket
    GET  /v1/copilotkit/info                          CopilotKit runtime: agent discovery
    POST /v1/copilotkit/agent/{agentId}/run|connect   CopilotKit runtime: a run (SSE), a replay of the thread
    POST /v1/copilotkit/agent/{agentId}/stop/{threadId}   CopilotKit runtime: stop the thread's run
    POST /v1/copilotkit                               CopilotKit runtime, single-endpoint envelopes
    GET|POST /v1/sessions, GET|POST|DELETE /v1/sessions/{id}, GET|POST /v1/sessions/{id}/events,
    GET  /v1/sessions/{id}/events/stream              Managed Agents sessions and events (http/managed.py)

A thread is visible to the subject that started it and to admins: every route on a thread answers
another user 404 ``UNKNOWN_THREAD`` (``access.visible_thread``; runs check it at admission).
"""

from __future__ import annotations

import inspect
import math
import os
import re
import socket
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio
from quart import Response, jsonify, request
from quart_trio import QuartTrio
from werkzeug.exceptions import HTTPException, MethodNotAllowed

from awaken.core.errors import (
    BadCursor,
    BadLimit,
    InputRejected,
    ServerDraining,
    StoreUnavailable,
    UnknownBranch,
    UnknownThread,
)
from awaken.core.ids import id_problem
from awaken.engine.access import visible_thread
from awaken.http import console, cors, hosts
from awaken.http import metrics as telemetry
from awaken.http import threads as threads_api
from awaken.http.auth import principal_of
from awaken.http.context import ServerContext
from awaken.http.edge import Edge
from awaken.http.errors import quart_error, write_error
from awaken.ledger.paging import parse_branch, parse_limit
from awaken.runtime import memory
from awaken.streams.exchange import sse_route, ws_route
from awaken.streams.rejoin import rejoin_route
from awaken.telemetry import tracing
from awaken.wires.agui.capabilities import capabilities as agui_capabilities_of
from awaken.wires.memo import Memoized, with_memos
from awaken.wires.registry import PageReader, Wire, known_wires, path_pattern, protocols, quart_rule

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]
#: ``route(ctx, scope, receive, send, params)``: params are the path pattern's groups (``agent``, ``thread``)
StreamRoute = Callable[[ServerContext, dict, Any, Any, dict[str, str]], Awaitable[None]]


#: werkzeug's routing errors by status -> the catalogue's code (any other: ``INVALID_REQUEST``)
HTTP_CODES = {404: "NOT_FOUND", 405: "METHOD_NOT_ALLOWED", 408: "BODY_TIMEOUT", 413: "BODY_TOO_LARGE",
              415: "UNSUPPORTED_MEDIA_TYPE", 500: "INTERNAL_ERROR"}

#: how long /readyz reuses its write probe's answer (a probe per request would be a write per request)
READY_CACHE_SECONDS = 1.0


def build_quart(ctx: ServerContext, wires: dict[str, Wire]) -> QuartTrio:
    app = QuartTrio(__name__)
    app.config["RESPONSE_TIMEOUT"] = None
    # ``threads//x/messages`` is a (refused) thread id, never a redirect to another path
    app.url_map.merge_slashes = False

    @app.errorhandler(HTTPException)
    async def http_error(exc: HTTPException):  # noqa: ANN202
        """Every routing error (404, 405, ...) as JSON with a code, never an HTML page."""
        code = HTTP_CODES.get(exc.code or 500, "INVALID_REQUEST")
        allow = exc.valid_methods if isinstance(exc, MethodNotAllowed) and exc.valid_methods else ()
        return quart_error(code, exc.description or exc.name,
                           headers=[(b"allow", ", ".join(allow).encode())] if allow else ())

    process = f"{socket.gethostname()}:{os.getpid()}"

    @app.get("/healthz")
    async def healthz():  # noqa: ANN202
        # which server process answered (several may serve one address: [server] workers)
        return jsonify({"status": "ok"}), 200, {"x-awaken-process": process}

    probe: dict[str, Any] = {"at": -math.inf, "error": None}

    @app.get("/readyz")
    async def readyz():  # noqa: ANN202
        """Ready when the ledger can commit: a real write probe. A success is reused for
        ``READY_CACHE_SECONDS``; while it fails, every call probes again (recovery shows at once). From
        the start of a shutdown (``RunApplication.drain``) it answers 503 ``SERVER_DRAINING`` at once, so a
        balancer sends no new work here."""
        if ctx.app.draining:
            return quart_error(ServerDraining("the server is shutting down"))
        if probe["error"] is not None or trio.current_time() - probe["at"] > READY_CACHE_SECONDS:
            try:
                await ctx.ledger.probe_write()
                probe["error"] = None
            except StoreUnavailable as exc:
                probe["error"] = exc
            probe["at"] = trio.current_time()
        if probe["error"] is not None:
            return quart_error(probe["error"])
        return jsonify({"status": "ready"})

    @app.get("/v1/me")
    async def me():  # noqa: ANN202
        """Who the credentials say the caller is (``[auth] mode = "none"``: anonymous)."""
        principal = principal_of(request.scope)
        return jsonify({"subject": principal.subject, "role": principal.role})

    listed_wires = {name: {"routes": [f"{method} {path}" for method, path, _kind in wire.routes()], **wire.capabilities}
                    for name, wire in wires.items()}

    @app.get("/v1/agents")
    async def agents():  # noqa: ANN202
        """The published agents, and the wires that serve them (each with its routes and capabilities)."""
        return jsonify({"default": ctx.agents.default_id, "agents": [a.describe() for a in ctx.agents.all()],
                        "wires": listed_wires})

    @app.get("/v1/ag-ui/agents/<agent_id>/capabilities")
    async def agui_capabilities(agent_id: str):  # noqa: ANN202
        """The agent's AG-UI ``AgentCapabilities`` (404 ``UNKNOWN_AGENT``)."""
        try:
            agent = ctx.agents.get(agent_id)
        except InputRejected as exc:  # UNKNOWN_AGENT: 404
            return quart_error(exc)
        return jsonify(agui_capabilities_of(agent))

    def history_route(read: PageReader, protocol: Any) -> Callable[[str], Awaitable[Any]]:
        """``GET …/threads/{threadId}/messages?cursor=&limit=&branch=`` → ``{items, cursor}`` (400/404/503).
        The active path's pages are told to the wire's replay memo (``Memoized.served``): a page that reloads
        and sends the history it read back is split, not parsed whole."""
        reads_branches = "branch" in inspect.signature(read).parameters  # a plugin's reader may read none
        memoized = protocol if isinstance(protocol, Memoized) else None

        async def history(thread_id: str):  # noqa: ANN202
            try:
                if id_problem(thread_id):  # never accepted by a run route, so never committed
                    raise UnknownThread(f"no thread {thread_id[:64]!r}")
                await visible_thread(ctx.app, principal_of(request.scope), thread_id)
                limit = parse_limit(request.args.get("limit"))
                branch = parse_branch(request.args.get("branch"))
                if branch is None:
                    items, cursor = await read(ctx.ledger, thread_id, request.args.get("cursor"), limit)
                elif not reads_branches:
                    raise UnknownBranch("this history route reads the active path only; leave out branch")
                else:
                    items, cursor = await read(ctx.ledger, thread_id, request.args.get("cursor"), limit, branch=branch)
            except (BadCursor, BadLimit, UnknownBranch, UnknownThread, StoreUnavailable) as exc:  # 400, 404, 503
                return quart_error(exc)
            # orjson: a page of 500 long messages is megabytes, which the stdlib encoder behind
            # ``jsonify`` takes tens of milliseconds to write, on the event loop (``bench.stall``). The
            # items are written once: the page is those bytes in ``{"cursor": …, "items": …}`` (sorted keys)
            encoded = orjson.dumps(items, option=orjson.OPT_SORT_KEYS)
            if memoized is not None and branch is None:
                memoized.served(thread_id, request.args.get("cursor") or None, cursor, items, encoded)
            return Response(b'{"cursor":' + orjson.dumps(cursor) + b',"items":' + encoded + b"}",
                            content_type="application/json")

        return history

    for name, wire in wires.items():
        for index, template in enumerate(wire.history):
            app.add_url_rule(quart_rule(template), f"{name}_history_{index}",
                             history_route(wire.read_history, wire.protocol), methods=["GET"])  # type: ignore[arg-type]
    threads_api.add_routes(app, ctx, protocols(wires))
    console.add_routes(app)
    return app


#: how a wire's routes of each kind are served (a history route is the quart app's)
_SERVED_BY: dict[str, Callable[[Any], StreamRoute]] = {"run": sse_route, "socket": ws_route, "rejoin": rejoin_route}


def wire_routes(wires: dict[str, Wire]) -> list[tuple[str, re.Pattern[str], StreamRoute]]:
    """(method, compiled path pattern, handler) for every run, socket, rejoin and extra route the
    registered ``wires`` declare; a pattern's ``agent`` group selects the agent, ``thread`` the thread."""
    routes: list[tuple[str, re.Pattern[str], StreamRoute]] = []
    for wire in wires.values():
        for method, template, kind in wire.routes():
            if kind in _SERVED_BY:  # a Wire with such routes has a protocol
                routes.append((method, path_pattern(template), _SERVED_BY[kind](wire.protocol)))
        for extra in wire.extra:
            handler = extra.serve(wire.protocol)
            routes += [(method, path_pattern(extra.path), handler) for method in extra.methods]
    return routes


async def method_not_allowed(send: Callable, method: str, allow: list[str]) -> None:
    """405 with ``Allow`` and a JSON body, for a run route called with the wrong method."""
    await write_error(send, "METHOD_NOT_ALLOWED", f"{method} is not allowed here; use {', '.join(allow)}",
                      headers=[(b"allow", ", ".join(allow).encode())])


def build_asgi(ctx: ServerContext) -> ASGIApp:
    # each server its own replay memos around the wires' parses (``[server] replay_memo_bytes``)
    wires = with_memos(known_wires(), ctx.config.server.replay_memo_bytes)
    routes = wire_routes(wires)
    quart_app = build_quart(ctx, wires)

    async def lifespan(scope: dict, receive: Callable, send: Callable) -> None:
        # the server's own nursery: late run outcomes are committed here for as long as it serves
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ctx.app.reconcile_forever)
            nursery.start_soon(memory.run_trims)
            nursery.start_soon(ctx.heartbeat.run)  # the open SSE streams' keep-alive comments
            await quart_app(scope, receive, send)
            nursery.cancel_scope.cancel()

    def asgi(scope: dict, receive: Callable, send: Callable) -> Awaitable[None]:
        """The router: the awaitable that serves ``scope`` (a plain function, so no frame of its own stays
        on a stream's stack)."""
        if scope["type"] == "lifespan":
            return lifespan(scope, receive, send)
        if scope["type"] in ("http", "websocket"):
            method = scope.get("method", "GET") if scope["type"] == "http" else "WEBSOCKET"
            path = scope["path"]
            allowed: set[str] = set()
            for route_method, pattern, handler in routes:
                match = pattern.match(path)
                if not match:
                    continue
                if route_method != method:
                    allowed.add(route_method)
                    continue
                # scope["path"] is already percent-decoded by the server
                return handler(ctx, scope, receive, send, match.groupdict())
            if scope["type"] == "http" and (allow := sorted(allowed - {"WEBSOCKET"})):
                return method_not_allowed(send, method, allow)
        return quart_app(scope, receive, send)

    # the edge (edge.py): observed, the Host and cross-site checks, GET /metrics, CORS, authentication;
    # principal_of(scope) reads who is asking
    server = ctx.config.server
    cors_policy = cors.CorsPolicy.of(server.cors_origins, server.cors_extra_headers)
    app = Edge(asgi, metrics=ctx.metrics, routes=telemetry.RouteTemplates(wires, quart_app.url_map),
               host_policy=hosts.HostPolicy.of(server.bind, server.allowed_hosts), cors_policy=cors_policy,
               authenticator=ctx.auth, metrics_roles=ctx.config.auth.metrics_roles)
    app = tracing.incoming(app)  # a client's traceparent parents its run (only with an exporter)
    app.quart = quart_app  # type: ignore[attr-defined]
    app.wires = wires  # type: ignore[attr-defined]  # what this server serves, its replay memos included
    return app
