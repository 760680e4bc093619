"""One request → one run → one stream, for any protocol over any transport.

``exchange`` joins a ``Protocol`` (AG-UI, AI SDK: parse, dedup, encoder, stream ends, refusals), a
``Transport`` (SSE, WebSocket: frames bytes) and the engine (``RunApplication``). It is the only
place that admits runs for a wire: refusals become the protocol's refusal stream (no run started,
nothing committed); admitted runs stream until their committed outcome, and the protocol's
``closing`` follows a stream that ended with its terminal event.

The transports know nothing of this module: ``sse_route``/``ws_route`` hand them what to run.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any
from typing import Protocol as TypingProtocol

import trio

from .context import ServerContext
from .encoding import EncoderBase, EncoderMisuse, WireEvent
from .errors import InputRejected, StoreUnavailable
from .events import AgentEvent, RunFailed
from .ids import check_id, check_request_ids
from .ledger import ThreadView
from .protocol import Protocol, RunRequest, Sink, new_id
from .runstate import Interruptible
from .transports import sse, ws

log = logging.getLogger("awaken.exchange")
#: the largest request body accepted (base64 images make bodies large)
MAX_BODY = 32 * 1024 * 1024
#: a body larger than this is parsed in a worker thread, so decoding it never stalls the loop
INLINE_PARSE_BYTES = 64 * 1024

Emit = Callable[[list[WireEvent]], None]


class Transport(TypingProtocol):
    async def stream(self, producer: Callable[[Emit], Awaitable[None]], run: Interruptible) -> None:
        """Write what ``producer(emit)`` emits until it returns. A disconnect cancels the producer;
        a transport that must stop the run for its own reason calls ``run.cancel(cause)``."""

    async def reject(self, wire: list[WireEvent]) -> None:
        """Write a whole refusal stream."""


def make_sink(encoder: EncoderBase, emit: Emit) -> Sink:
    """The engine's sink: encode each AgentEvent and hand the wire events to the transport."""

    def sink(event: AgentEvent) -> None:
        try:
            wire = encoder.feed(event)
        except EncoderMisuse:
            log.exception("encoder refused %r", event)
            if encoder.closed:
                return
            encoder.closed = True
            wire = encoder.on_run_failed(RunFailed("INTERNAL_ERROR", "the server produced an invalid stream"))
        if wire:
            emit(wire)

    return sink


async def exchange(
    ctx: ServerContext,
    protocol: Protocol,
    transport: Transport,
    body: bytes | None,
    content_type: str | None,
    agent_id: str | None,
) -> None:
    """Serve one request body (None: larger than ``MAX_BODY``) as one stream on ``transport``."""
    encoder = protocol.encoder(None)
    try:
        if body is None:
            raise InputRejected(f"the body is larger than {MAX_BODY} bytes", code="BODY_TOO_LARGE")
        if len(body) > INLINE_PARSE_BYTES:
            parsed = await trio.to_thread.run_sync(protocol.parse, body, content_type)
        else:
            parsed = protocol.parse(body, content_type)
        encoder = protocol.encoder(parsed)
        thread, agent = protocol.target(parsed, agent_id)
        thread_id = thread or new_id("thread")
        check_id("threadId", thread_id)

        def build(view: ThreadView) -> RunRequest:
            request = protocol.to_run_request(parsed, thread_id, agent, view)
            check_request_ids(thread_id, request.run_id, [m.id for m in request.inputs]
                              + [d.message_id for d in request.decisions])
            return request

        async with ctx.app.admit(thread_id, agent, build) as run:

            async def produce(emit: Emit) -> None:
                await run.execute(make_sink(encoder, emit))
                if encoder.closed and (closing := protocol.closing()):  # after the terminal event only
                    emit(closing)

            await transport.stream(produce, run)
    except (InputRejected, StoreUnavailable) as exc:
        await transport.reject(protocol.refusal(exc.code, exc.message, encoder))


def header_of(scope: dict[str, Any], header: bytes) -> str | None:
    for name, value in scope.get("headers", []):
        if name == header:
            return value.decode("latin-1")
    return None


def content_type_of(scope: dict[str, Any]) -> str | None:
    return header_of(scope, b"content-type")


async def sse_exchange(ctx: ServerContext, protocol: Protocol, scope: dict, receive: sse.ASGIReceive,
                       send: sse.ASGISend, agent_id: str | None) -> None:
    """Read the body and run one exchange over SSE (shared by every protocol's POST route)."""
    server = ctx.config.server
    transport = sse.SseTransport(send, receive, sse.sse_headers(protocol.sse_headers),
                                 keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes)
    declared = header_of(scope, b"content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > MAX_BODY:
        body = None  # refused from the header: the body is never read
    else:
        try:
            body = await sse.read_body(receive, MAX_BODY)
        except sse.ClientGone:
            return
    await exchange(ctx, protocol, transport, body, content_type_of(scope), agent_id)


def sse_route(protocol: Protocol) -> Callable[..., Awaitable[None]]:
    """The ASGI handler of a protocol's POST route over SSE: ``route(ctx, scope, receive, send, agent_id)``."""

    async def route(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                    agent_id: str | None) -> None:
        await sse_exchange(ctx, protocol, scope, receive, send, agent_id)

    return route


async def serve_websocket(ctx: ServerContext, protocol: Protocol, scope: dict, receive: ws.ASGIReceive,
                          send: ws.ASGISend, agent_id: str | None) -> None:
    """Accept one websocket and serve ``protocol`` requests on it until either side closes it."""
    server = ctx.config.server

    async def handle(request: ws.RequestStream, body: bytes) -> None:
        await exchange(ctx, protocol, request, body if len(body) <= MAX_BODY else None, ws.CONTENT_TYPE,
                       agent_id)

    await ws.serve_websocket(scope, receive, send, handle, protocol.refusal, ping_seconds=server.ws_ping_seconds,
                             max_buffered=server.max_buffered_bytes)


def ws_route(protocol: Protocol) -> Callable[..., Awaitable[None]]:
    """The ASGI handler serving ``protocol`` over WebSocket: ``route(ctx, scope, receive, send, agent_id)``."""

    async def route(ctx: ServerContext, scope: dict, receive: ws.ASGIReceive, send: ws.ASGISend,
                    agent_id: str | None) -> None:
        await serve_websocket(ctx, protocol, scope, receive, send, agent_id)

    return route
