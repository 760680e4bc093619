"""The CopilotKit runtime's routes at the HTTP edge: the ASGI handler of ``/v1/copilotkit`` and ``WIRE``,
what the ``copilotkit`` entry point of the ``awaken.wires`` group registers (every route under the
prefix, for GET and POST). The handler reads the request, names its call (the pure runtime,
``awaken.wires.copilotkit.runtime``), and answers; it lives here, not beside the runtime in the wires,
because it does I/O through the streams, the transports and the edge's context.

Refusals are the catalogue's errors (``awaken.core.errors``) with their HTTP status, written in the
runtime's own JSON shape (``runtime.error_answer``; 503 ``STORE_UNAVAILABLE`` when the ledger does not
answer); who may see a thread is ``engine.access``'s rule (``may_see``).

Every POST but ``stop`` must say ``Content-Type: application/json`` (the media type itself, parameters
allowed: ``jsonbody.is_json_media_type``), checked before its body is read; a ``stop`` may have no
body, and one with a body must say it too. Anything else is 415 in the runtime's error shape.

``run`` is an AG-UI exchange over SSE (the same adapter, engine and ledger as ``/v1/ag-ui``);
``connect`` streams the thread's committed history (``replay.py``), then the active run's events
through ``rejoin.watch_thread`` to its end (only to the thread's owner, or an admin; anyone else gets
the empty replay of an unknown thread); ``stop`` stops the
thread's active run through ``RunApplication.stop``; ``info`` lists the config's agents.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

from awaken.core.errors import AwakenError, InputRejected, StoreUnavailable
from awaken.core.jsonbody import is_json_media_type, load_json_object
from awaken.engine.access import may_see
from awaken.http.auth import principal_of
from awaken.http.context import ServerContext
from awaken.streams.exchange import DETACHED, MAX_BODY, Deliver, content_type_of, exchange
from awaken.streams.rejoin import watch_thread
from awaken.transports import sse
from awaken.transports.body import Body, read_body_or_answer
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.capabilities import capabilities
from awaken.wires.copilotkit import runtime
from awaken.wires.copilotkit.replay import Joined, replay_events
from awaken.wires.encoding import sse_frames, text_payload
from awaken.wires.protocol import Protocol
from awaken.wires.registry import Handler, Route, Wire

PREFIX = "/v1/copilotkit"
_JSON = [(b"content-type", b"application/json")]


async def _json(send: sse.ASGISend, status: int, answer: dict[str, Any]) -> None:
    await sse.send_once(send, _JSON, orjson.dumps(answer), status)


async def _refuse(send: sse.ASGISend, exc: AwakenError, headers: list[tuple[bytes, bytes]] | None = None) -> None:
    """``exc`` answered with its status, in the runtime's error shape."""
    status, answer = runtime.error_answer(exc)
    await sse.send_once(send, [*_JSON, *(headers or [])], orjson.dumps(answer), status)


async def route(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                agui: Protocol = AGUI) -> None:
    """Serve one request under ``PREFIX`` (``scope["path"]`` is already percent-decoded); ``agui``: the
    AG-UI protocol as this server serves it (its replay memo included)."""
    method = scope.get("method", "GET")
    found = runtime.route(method, scope["path"][len(PREFIX):])
    if found is None:
        await _refuse(send, InputRejected(f"{method} {scope['path']} is not a runtime route", code="NOT_FOUND"))
        return
    body = Body(b"")
    if method == "POST" and (found == "envelope" or found.kind != "stop") \
            and not is_json_media_type(content_type_of(scope)):
        # refused before the body is read (the connection is closed after the answer: transports/early.py)
        await _refuse(send, runtime.unsupported_media_type(
            content_type_of(scope), "Single-route endpoint expects JSON payloads" if found == "envelope" else None))
        return
    if method == "POST":
        read = await read_body_or_answer(scope, receive, send, limit=MAX_BODY,
                                         seconds=ctx.config.server.body_timeout_seconds, bodies=ctx.large_bodies)
        if read is None:
            return
        body = read
        if body.too_large:  # refused as soon as it passed the limit: the rest is never read
            await _refuse(send, InputRejected(f"the body is larger than {MAX_BODY} bytes", code="BODY_TOO_LARGE"),
                          [(b"connection", b"close")])
            return
    try:
        data = body.take() or b""
        call = runtime.parse_envelope(data, content_type_of(scope)) if found == "envelope" else \
            attrs.evolve(found, body=data)
        if call.kind == "stop" and call.body.strip() and found != "envelope" \
                and not is_json_media_type(content_type_of(scope)):
            raise runtime.unsupported_media_type(content_type_of(scope))
        del data
        if call.kind == "run":  # its input goes to exchange in ``body``: no copy stays alive past the parse
            body.data, call = call.body, attrs.evolve(call, body=b"")
        else:
            body.release()
        await _serve(ctx, agui, call, body, scope, receive, send)
    except (InputRejected, StoreUnavailable) as exc:
        await _refuse(send, exc)
    finally:
        body.release()


async def _serve(ctx: ServerContext, agui: Protocol, call: runtime.RuntimeCall, body: Body, scope: dict,
                 receive: sse.ASGIReceive, send: sse.ASGISend) -> None:
    """Answer ``call``; ``body`` holds its large-body slot, given back once the run's input is parsed."""
    if call.kind == "info":
        await _json(send, 200, runtime.info_document(
            [(a.id, a.config.description, capabilities(a)) for a in ctx.agents.all()]))
        return
    ctx.agents.get(call.agent_id)  # UNKNOWN_AGENT (404) for an agent that is not published
    if call.kind == "run":
        server = ctx.config.server
        transport = sse.SseTransport(send, receive, sse.sse_headers(agui.sse_headers),
                                     keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes,
                                     scope=scope, heartbeat=ctx.heartbeat)
        await exchange(ctx, agui, transport, body, "application/json", call.agent_id, principal_of(scope))
    elif call.kind == "connect":
        await _connect(ctx, agui, call, scope, receive, send)
    else:
        await _stop(ctx, call, scope, send)


async def _connect(ctx: ServerContext, agui: Protocol, call: runtime.RuntimeCall, scope: dict, receive: sse.ASGIReceive,
                   send: sse.ASGISend) -> None:
    data = load_json_object(call.body)
    thread_id = data.get("threadId")
    if not isinstance(thread_id, str) or not thread_id:
        raise InputRejected("threadId must be a non-empty string")
    principal = principal_of(scope)
    live = await watch_thread(ctx, agui, thread_id, principal)  # first: a run ending now is in the view
    view = await ctx.ledger.thread_view(thread_id)
    _exists, owner = await ctx.app.owner_of(thread_id)
    if view.thread is not None and not may_see(principal, owner):
        view = attrs.evolve(view, thread=None)  # another subject's thread replays as an unknown one
    active = ctx.app.active(thread_id)
    live_id = getattr(live, "run_id", None) if live is not None else None  # a relayed run is not active here
    history = replay_events(view, live_id if live_id is not None else active.run_id if live is not None
                            and active is not None else None)
    if live is None:
        await sse.send_once(send, sse.sse_headers(agui.sse_headers), sse_frames(history))
        return
    joined = Joined.of(view.messages)

    async def produce(deliver: Deliver) -> None:
        for wire in history:
            deliver(None, text_payload(wire))
        await live(lambda at, payload: deliver(at, payload) if joined.keeps(orjson.loads(payload)) else None)

    server = ctx.config.server
    transport = sse.SseTransport(send, receive, sse.sse_headers(agui.sse_headers),
                                 keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes,
                                 heartbeat=ctx.heartbeat)
    await transport.stream(produce, DETACHED)


async def _stop(ctx: ServerContext, call: runtime.RuntimeCall, scope: dict, send: sse.ASGISend) -> None:
    assert call.thread_id is not None
    run_id = runtime.stop_scope(call.body)
    active = ctx.app.active(call.thread_id)
    if active is not None:  # another subject's run is not there for this caller: nothing stops
        _exists, owner = await ctx.app.owner_of(call.thread_id)
        if not may_see(principal_of(scope), owner):
            active = None
    stopped = active is not None and (run_id is None or active.run_id == run_id)
    if stopped:  # StoreUnavailable (503) while its last outcome still waits for the store
        await ctx.app.stop(call.thread_id)
    elif active is None and (relay := ctx.ledger.relay()) is not None:
        # a run another process of a shared ledger streams is stopped there, as POST /v1/threads/{id}/stop does
        found = await relay.find(call.thread_id)
        if found is not None and may_see(principal_of(scope), found.owner) \
                and (run_id is None or found.key == run_id):
            stopped = await ctx.app.stop(call.thread_id) is not None
    await _json(send, 200, runtime.stop_answer(stopped, call.thread_id, run_id))


def serve(agui: Protocol | None) -> Handler:
    """The handler of every route under ``PREFIX``, for the AG-UI protocol as the server serves it."""
    protocol = agui or AGUI

    async def handler(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                      params: dict[str, str]) -> None:
        await route(ctx, scope, receive, send, protocol)

    return handler


#: the runtime as a wire: its runs are AG-UI's (one protocol, one replay memo with ``/v1/ag-ui``), and every
#: route under ``PREFIX``, GET and POST, is ``route``'s
WIRE = Wire(AGUI, extra=(Route(("POST", "GET"), PREFIX + "{rest}", serve),))
