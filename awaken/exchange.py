"""One request → one run → one stream, for any protocol over any transport.

A ``Protocol`` (AG-UI, AI SDK) knows how to parse a request body, turn it into a ``RunRequest``
(dedup against the ledger, decisions) and build its encoder. A ``Transport`` (SSE, WebSocket) knows
how to write wire events. ``exchange`` joins them and is the only place that admits runs for a
wire: refusals become the protocol's rejection stream (no run started, nothing committed);
admitted runs stream until their committed outcome.
"""

from __future__ import annotations

import abc
import logging
from collections.abc import Awaitable, Callable
from typing import Any
from typing import Protocol as TypingProtocol

import trio

from .context import ServerContext
from .encoding import EncoderBase, EncoderMisuse, WireEvent
from .engine import RunRequest, Sink, new_id
from .errors import InputRejected, StoreUnavailable
from .events import AgentEvent, RunFailed
from .ledger import ThreadView
from .transports import sse

log = logging.getLogger("awaken.exchange")
#: the largest request body accepted (base64 images make bodies large)
MAX_BODY = 32 * 1024 * 1024

Emit = Callable[[list[WireEvent]], None]


class Protocol(abc.ABC):
    """A wire protocol's request side and encoder factory. Every method is pure (sans-IO)."""

    #: what follows the terminal event on every stream (the AI SDK's ``[DONE]``), or None
    done_marker: str | None = None
    #: response headers for SSE, beyond the transport's own
    sse_headers: list[tuple[bytes, bytes]] = []

    @abc.abstractmethod
    def parse(self, body: bytes, content_type: str | None) -> Any:
        """Validate a request body; raise ``InputRejected`` with a catalogue code."""

    @abc.abstractmethod
    def target(self, parsed: Any, route_agent: str | None) -> tuple[str | None, str | None]:
        """The thread (None: start a new one) and the agent (None: the default) a request addresses."""

    @abc.abstractmethod
    def to_run_request(self, parsed: Any, thread_id: str, agent_id: str | None, view: ThreadView) -> RunRequest:
        """Drop what ``view`` (the thread as committed) already holds; split the rest into new input
        and tool decisions. Raise ``InputRejected`` for what cannot be run."""

    @abc.abstractmethod
    def encoder(self, parsed: Any | None) -> EncoderBase:
        """The encoder for this request (``parsed`` is None when the body could not be parsed)."""

    def rejection(self, encoder: EncoderBase, code: str, message: str) -> list[WireEvent]:
        """The whole stream for a refused request."""
        return encoder.feed(RunFailed(code, message))


class Transport(TypingProtocol):
    async def stream(self, producer: Callable[..., Awaitable[None]], done_marker: str | None) -> None:
        """Write what ``producer(emit, nursery=<the connection's nursery>)`` emits until it returns;
        the producer is cancelled on disconnect. The nursery hosts work the run starts beside itself."""

    async def reject(self, wire: list[WireEvent], done_marker: str | None) -> None:
        """Write a refusal stream."""


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
    body: bytes,
    content_type: str | None,
    agent_id: str | None,
) -> None:
    encoder = protocol.encoder(None)
    try:
        parsed = protocol.parse(body, content_type)
        encoder = protocol.encoder(parsed)
        thread, agent = protocol.target(parsed, agent_id)
        thread_id = thread or new_id("thread")

        def build(view: ThreadView) -> RunRequest:
            return protocol.to_run_request(parsed, thread_id, agent, view)

        async with ctx.app.admit(thread_id, agent, build) as run:

            async def produce(emit: Emit, nursery: trio.Nursery) -> None:
                await run.execute(make_sink(encoder, emit), nursery)

            await transport.stream(produce, protocol.done_marker)
    except (InputRejected, StoreUnavailable) as exc:
        await transport.reject(protocol.rejection(encoder, exc.code, exc.message), protocol.done_marker)


def content_type_of(scope: dict[str, Any]) -> str | None:
    for name, value in scope.get("headers", []):
        if name == b"content-type":
            return value.decode("latin-1")
    return None


async def sse_exchange(ctx: ServerContext, protocol: Protocol, scope: dict, receive: sse.ASGIReceive,
                       send: sse.ASGISend, agent_id: str | None) -> None:
    """Read the body and run one exchange over SSE (shared by every protocol's POST route)."""
    server = ctx.config.server
    transport = sse.SseTransport(send, receive, sse.sse_headers(protocol.sse_headers),
                                 keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes)
    try:
        body = await sse.read_body(receive, MAX_BODY)
    except sse.ClientGone:
        return
    if body is None:
        encoder = protocol.encoder(None)
        await transport.reject(protocol.rejection(encoder, "BODY_TOO_LARGE", f"the body is larger than {MAX_BODY} bytes"),
                               protocol.done_marker)
        return
    await exchange(ctx, protocol, transport, body, content_type_of(scope), agent_id)


def sse_route(protocol: Protocol) -> Callable[..., Awaitable[None]]:
    """The ASGI handler of a protocol's POST route over SSE: ``route(ctx, scope, receive, send, agent_id)``."""

    async def route(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                    agent_id: str | None) -> None:
        await sse_exchange(ctx, protocol, scope, receive, send, agent_id)

    return route
