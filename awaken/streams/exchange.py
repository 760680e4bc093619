"""One request → one run → one stream, for any protocol over any transport.

``exchange`` joins a ``Protocol`` (AG-UI, AI SDK: parse, dedup, encoder, stream ends, refusals), a
``Transport`` (SSE, WebSocket: frames bytes) and the engine (``RunApplication``). It is the only
place that admits runs for a wire: refusals become the protocol's refusal stream (no run started,
nothing committed); admitted runs stream until their committed outcome, and the protocol's
``closing`` follows a stream that ended with its terminal event. A thread the caller may not see
(another user's) is refused as not found: HTTP 404 with the JSON error the read routes give, or on
a socket, which has no status per request, the refusal stream with code ``UNKNOWN_THREAD``.

The transports know nothing of this module: ``sse_route``/``ws_route`` hand them what to run.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable, Sequence
from typing import Any
from typing import Protocol as TypingProtocol

import trio

from awaken.core.asgi import header_of
from awaken.core.errors import AwakenError, InputRejected, StoreUnavailable, UnknownThread
from awaken.core.ids import check_id, check_request_ids
from awaken.core.principal import Principal, principal_of
from awaken.engine import FINAL_COMMIT_TIMEOUT, AdmittedRun
from awaken.engine.state import Cause, Interruptible
from awaken.ledger.interface import ThreadView
from awaken.runtime.tuning import KNOWN_ON_LOOP, OFF_LOOP_BODY
from awaken.streams.broadcast import Channel, RunBroadcast, Watcher
from awaken.streams.host import StreamHost
from awaken.transports import sse, ws
from awaken.transports.body import Body, Refused, read_body_or_answer
from awaken.wires.encoding import WireEvent
from awaken.wires.memo import Memoized
from awaken.wires.protocol import Protocol, RunRequest, new_id

log = logging.getLogger("awaken.streams.exchange")
#: the largest request body accepted (base64 images make bodies large)
MAX_BODY = 32 * 1024 * 1024
# a body of at least ``OFF_LOOP_BODY`` bytes is parsed in a worker thread (``trio.to_thread``), one of
# at most ``KNOWN_ON_LOOP`` bytes is first offered to ``Protocol.parse_known`` on the loop
# (``awaken.runtime.tuning``: the off-loop policy)

#: a transport's writer of one encoded wire event: ``deliver(position or None, payload)``
Deliver = Callable[[bytes | None, bytes], None]


class Transport(TypingProtocol):
    #: a deliver that takes frames from the run's first event on, before ``stream`` (a socket's request);
    #: None: frames wait for ``stream`` (an HTTP response sends its head first)
    early: Deliver | None

    async def stream(self, producer: Callable[[Deliver], Awaitable[None]], run: Interruptible) -> None:
        """Write what ``producer(deliver)`` delivers until it returns. A disconnect cancels the
        producer; a transport that must stop the run for its own reason calls ``run.cancel(cause)``."""

    async def reject(self, wire: list[WireEvent], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """Write a whole refusal stream (``headers``: added to an HTTP response's, e.g. ``Retry-After``)."""

    async def not_found(self, error: AwakenError, wire: list[WireEvent]) -> None:
        """Refuse a request naming a thread the caller may not see: ``error`` where the transport has a
        status (HTTP 404 and its JSON), else the refusal stream ``wire``."""


class Detached:
    """The ``Interruptible`` a transport gets for a run it does not own: stopping it only ends this
    connection's watching (the transport cancels its own producer), never the run."""

    def cancel(self, cause: Cause) -> None:
        return None

    def blame(self, cause: Cause) -> None:
        return None


DETACHED = Detached()


async def exchange(
    ctx: StreamHost,
    protocol: Protocol,
    transport: Transport,
    body: Body,
    content_type: str | None,
    agent_id: str | None,
    principal: Principal,
) -> None:
    """Serve one request ``body`` (``too_large``: over ``MAX_BODY``) as one stream on ``transport``
    (``admit_stream``, then the stream it returns)."""
    stream = await admit_stream(ctx, protocol, transport, body, content_type, agent_id, principal)
    if stream is not None:
        await stream


async def admit_stream(
    ctx: StreamHost,
    protocol: Protocol,
    transport: Transport,
    body: Body,
    content_type: str | None,
    agent_id: str | None,
    principal: Principal,
) -> Awaitable[None] | None:
    """``exchange`` up to its stream: None once a refusal was written (or, in a server that does not host
    runs, once the whole stream was), else the admitted run's stream, for the caller to await at once.
    Returned rather than awaited here, so that this frame, with the parse's and admission's locals and
    the cells of their callbacks, is gone while the stream runs.

    The body's bytes are taken from it and dropped once parsed, and its large-body slot given back
    then: a run never keeps its request's bytes alive.

    The run executes in the server's nursery (``RunApplication.launch``) into its broadcast; this
    connection is its first watcher. When the connection goes while the run streams, an agent with
    ``on_disconnect = "cancel"`` takes the run along (``client_gone``, or the transport's own cause);
    a ``continue`` agent's run goes on to its committed outcome, rejoinable.

    Neither the raw body nor its parse is kept while the run streams (a replayed history of hundreds
    of KB would otherwise stay in memory per stream): the caller passes the body on without keeping
    it, and both are dropped here once the run is admitted.
    """
    encoder = protocol.encoder(None)
    data = body.take()
    refused: InputRejected | None = None
    try:
        if data is None:
            raise InputRejected(f"the body is larger than {MAX_BODY} bytes", code="BODY_TOO_LARGE")
        if len(data) < OFF_LOOP_BODY:  # on the loop (``parse`` splits a known history itself)
            parsed = parse_body(protocol, data, content_type)
        else:
            # a large replayed history the protocol keeps is split on the loop when little is new;
            # otherwise (or when only a little is known) the parse goes to a worker thread
            parsed = parse_body(protocol, data, content_type, known=True) if len(data) <= KNOWN_ON_LOOP else None
            if parsed is None:
                parsed = await trio.to_thread.run_sync(parse_body, protocol, data, content_type)
        del data
        if isinstance(parsed, InputRejected):
            raise parsed
        encoder = protocol.encoder(parsed)
        thread, agent = protocol.target(parsed, agent_id)
        thread_id = thread or new_id("thread")
        check_id("threadId", thread_id)
    except InputRejected as exc:
        refused = exc.with_traceback(None)
    if refused is not None:
        data = parsed = None  # noqa: F841 - nothing of the body outlives its refusal
        body.release()
        await transport.reject(protocol.refusal(refused.code, refused.message, encoder))
        return None
    body.release()

    def build(view: ThreadView) -> RunRequest:
        request = protocol.to_run_request(parsed, thread_id, agent, view)
        check_request_ids(thread_id, request.run_id, [m.id for m in request.inputs]
                          + [d.message_id for d in request.decisions])
        return request

    first: list[Watcher] = []

    def broadcast(run: AdmittedRun) -> RunBroadcast:
        out = RunBroadcast(run.run_id, thread_id, ctx.config.server.replay_bytes, run.owner)
        out.relay = ctx.ledger.relay()  # watchers on other processes (a shared ledger; None for one process)
        # the origin watches from before the run's first event: a frame larger than the replay
        # (a 5 MB delta) may push the first frames out of it before the transport is ready; one that
        # is ready takes them as they come, the others get them held, once they attach
        channel = out.open_channel(protocol, encoder)
        early = transport.early
        first.append(channel.watch(early, 0) if early is not None else channel.watch(_unattached, 0, hold=True))
        return out

    # a server that hosts runs holds each in its own nursery: this request keeps nothing open for it;
    # otherwise the run's nursery is held here, around the stream
    held = None if ctx.app.hosting_runs else contextlib.AsyncExitStack()
    async with held or contextlib.nullcontext():
        try:
            args = (thread_id, agent, build, broadcast, protocol.asks(parsed))
            run = await (ctx.app.start(*args, principal=principal) if held is None
                         else held.enter_async_context(ctx.app.launch(*args, principal=principal)))
        except UnknownThread as exc:
            await transport.not_found(exc, protocol.refusal(exc.code, exc.message, encoder))
            return None
        except (InputRejected, StoreUnavailable) as exc:
            # the stream's refusal, with the error's headers where headers can go (RATE_LIMITED's and
            # SERVER_DRAINING's Retry-After)
            await transport.reject(protocol.refusal(exc.code, exc.message, encoder), exc.headers)
            return None
        attached = run.agent.config.on_disconnect == "cancel" or not ctx.app.hosting_runs
        # admitted: the run holds what it needs (``build``'s request), not the body's parse, nor what
        # admission was handed (the asked ids, the two callbacks)
        parsed = args = build = broadcast = None  # noqa: F841
        stream = origin(run, protocol, transport, first[0], attached=attached)
        if held is None:
            return stream
        await stream  # the run's nursery is held here, around its stream
    return None


def parse_body(protocol: Protocol, data: bytes, content_type: str | None, *, known: bool = False) -> Any:
    """``protocol.parse(data)`` (``known``: ``Memoized.parse_known``, None when the protocol does not
    know the body), or the ``InputRejected`` it raised, returned without its traceback.

    A refusal's traceback holds the parser's frames and so what they decoded (hundreds of MB for a
    large body); raised out of a worker thread it also sits in a reference cycle with trio's result
    objects, which only a full garbage collection frees. Returned bare, nothing of the body survives it.
    """
    try:
        if known:  # only a protocol with a replay memo knows a body (``awaken.wires.memo``)
            return protocol.parse_known(data, content_type) if isinstance(protocol, Memoized) else None
        return protocol.parse(data, content_type)
    except InputRejected as exc:
        return exc.with_traceback(None)


def _unattached(position: bytes, payload: bytes) -> None:
    raise AssertionError("a holding watcher delivered before it was attached")


class Origin:
    """The producer of the connection that started a run: its watcher, attached to the transport, until
    the run's last frame. Awaited (``await origin(deliver)``) it waits for that frame itself; a transport
    that can run it in its own task (SSE: ``sse.Feed``) calls ``start`` and, at the end, ``finish``.
    An ``attached`` watcher that goes before the run ended stops it (``client_gone`` unless a cause was
    recorded first) and waits for its outcome."""

    __slots__ = ("attached", "channel", "run", "watcher")

    def __init__(self, run: AdmittedRun, channel: Channel, watcher: Watcher, attached: bool) -> None:
        self.run = run
        self.channel = channel
        self.watcher = watcher
        self.attached = attached

    def start(self, deliver: Deliver, end: Callable[[], None]) -> None:
        self.watcher.on_done = end
        self.watcher.attach(deliver)
        if self.watcher.done.is_set():
            end()

    async def finish(self) -> None:
        self.watcher.leave()
        if self.attached and not self.channel.closed:
            self.run.cancel(Cause.CLIENT_GONE)
            with trio.move_on_after(FINAL_COMMIT_TIMEOUT + 1, shield=True):
                await self.run.settled()

    async def __call__(self, deliver: Deliver) -> None:
        self.watcher.attach(deliver)
        try:
            await self.watcher.done.wait()
        finally:
            await self.finish()


def origin(run: AdmittedRun, protocol: Protocol, transport: Transport, watcher: Watcher, *,
           attached: bool) -> Awaitable[None]:
    """Watch ``run`` on ``transport`` through ``watcher`` (made holding, before the run's first event):
    ``Origin``. A plain function returning the transport's stream, to be awaited: the transport runs
    the origin's ``finish`` on every path (``Origin.__call__``'s own ``finally``, or a ``Feed``'s), so
    no frame of this one need stay on the stream's stack to let go of the watcher."""
    assert run.broadcast is not None
    channel = run.broadcast.open_channel(protocol)
    return transport.stream(Origin(run, channel, watcher, attached), run if attached else DETACHED)


def content_type_of(scope: dict[str, Any]) -> str | None:
    return header_of(scope, b"content-type")


async def sse_exchange(ctx: StreamHost, protocol: Protocol, scope: dict, receive: sse.ASGIReceive,
                       send: sse.ASGISend, agent_id: str | None) -> Awaitable[None] | None:
    """Read the body and run one exchange over SSE (shared by every protocol's POST route): what it
    answered, or, once a run was admitted, the run's stream, returned for the edge to await (``Edge``:
    a route's continuation) so that this frame, with the request's body and parse, is gone while it
    streams."""
    server = ctx.config.server
    body = await read_body_or_answer(scope, receive, send, limit=MAX_BODY, seconds=server.body_timeout_seconds,
                                     bodies=ctx.large_bodies)
    if body is None:
        return
    # a body refused unread (over the limit) leaves the connection unusable: it is closed after the answer
    extra = [(b"connection", b"close")] if body.too_large else []
    transport = sse.SseTransport(send, receive, sse.sse_headers(protocol.sse_headers + extra),
                                 keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes,
                                 scope=scope, heartbeat=ctx.heartbeat)
    try:
        stream = await admit_stream(ctx, protocol, transport, body, content_type_of(scope), agent_id,
                                    principal_of(scope))
    finally:
        body.release()
    return stream  # awaited by the edge: the admission's frame and this one are gone while it streams


def sse_route(protocol: Protocol) -> Callable[..., Awaitable[Awaitable[None] | None]]:
    """The ASGI handler of a protocol's POST route over SSE: ``route(ctx, scope, receive, send, agent_id)``."""

    def route(ctx: StreamHost, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
              params: dict[str, str]) -> Awaitable[Awaitable[None] | None]:
        return sse_exchange(ctx, protocol, scope, receive, send, params.get("agent"))

    return route


async def serve_websocket(ctx: StreamHost, protocol: Protocol, scope: dict, receive: ws.ASGIReceive,
                          send: ws.ASGISend, agent_id: str | None) -> None:
    """Accept one websocket and serve ``protocol`` requests on it until either side closes it."""
    server = ctx.config.server

    async def handle(request: ws.RequestStream, body: bytes) -> None:
        # a large message takes one of the server's large-body slots until it is parsed, as a POST
        # body does (hypercorn has read it whole already: what the cap bounds here is the parsing)
        bodies = ctx.large_bodies if len(body) > ctx.large_bodies.threshold else None
        if bodies is not None:
            try:
                bodies.take()
            except Refused as refused:
                await request.reject(protocol.refusal(refused.code, refused.message, protocol.encoder(None)))
                return
        message = Body(body if len(body) <= MAX_BODY else None, bodies)
        admitted = admit_stream(ctx, protocol, request, message, ws.CONTENT_TYPE, agent_id, principal_of(scope))
        del body  # exchange drops it once parsed: this frame must not keep it for the stream's life
        try:
            stream = await admitted
        finally:
            message.release()
        if stream is not None:  # awaited here: the admission's frame is gone while it streams
            await stream

    await ws.serve_websocket(scope, receive, send, handle, protocol.refusal, ping_seconds=server.ws_ping_seconds,
                             max_buffered=server.max_buffered_bytes)


def ws_route(protocol: Protocol) -> Callable[..., Awaitable[None]]:
    """The ASGI handler serving ``protocol`` over WebSocket: ``route(ctx, scope, receive, send, agent_id)``."""

    def route(ctx: StreamHost, scope: dict, receive: ws.ASGIReceive, send: ws.ASGISend,
              params: dict[str, str]) -> Awaitable[None]:
        return serve_websocket(ctx, protocol, scope, receive, send, params.get("agent"))

    return route
