"""Rejoining a thread's active run: ``GET …/threads/{threadId}/stream`` (AG-UI) and
``GET …/chat/{chatId}/stream`` (the AI SDK's ``useChat({ resume: true })``).

``watch_thread`` is the one entry point (the SSE routes here use it, and so can any other route
that rejoins, e.g. a CopilotKit ``connect``): it finds the thread's active run, checks that the
caller may watch it (the thread's stored owner, or an admin: ``access.may_see``), and returns a producer that streams
the run's events in the protocol's encoding to a transport's ``deliver(position, payload)``:

* from the position after ``after`` (``Last-Event-ID``), or from the run's first event without one;
* when the run no longer holds that position (its replay is bounded in bytes, or the position is
  of another run): AG-UI gets the run's head (``RUN_STARTED``), the committed messages as one
  ``MESSAGES_SNAPSHOT`` read at the run's next step boundary, and the live tail from that boundary:
  never a silent gap. A protocol without a snapshot event (the AI SDK) gets ``REPLAY_GONE``.

Nothing here stops a run: a rejoining watcher that leaves, or cannot keep up, is dropped alone.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import trio

from awaken.core.asgi import header_of
from awaken.core.errors import InputRejected, StoreUnavailable, error_response
from awaken.core.principal import Principal, principal_of
from awaken.engine import AdmittedRun
from awaken.engine.access import may_see
from awaken.ledger.interface import Ledger
from awaken.ledger.relay import RunRelay
from awaken.streams.broadcast import Channel, RunBroadcast, parse_position, position
from awaken.streams.exchange import DETACHED, Deliver
from awaken.streams.host import StreamHost
from awaken.streams.relayed import relayed_broadcast
from awaken.transports import sse
from awaken.wires.encoding import text_payload
from awaken.wires.protocol import Protocol

Producer = Callable[[Deliver], Awaitable[None]]
#: how long a rejoin looks for a run another process admitted but has not staged yet
STAGING_SECONDS = 2.0


async def _held_elsewhere(ctx: StreamHost, thread_id: str, principal: Principal) -> str | None:
    """The server process (``host:pid``) whose run holds the thread, when it is not this one and the
    caller may see the thread (several processes on one database); None otherwise."""
    try:
        holder = await ctx.app.claims.holder(thread_id)
        if holder is None or holder == ctx.app.claims.process_id:
            return None
        _exists, owner = await ctx.app.owner_of(thread_id)
    except StoreUnavailable:
        return None
    return holder if may_see(principal, owner) else None


async def _relayed(ctx: StreamHost, relay: RunRelay, thread_id: str) -> RunBroadcast | None:
    """The relayed copy of the run another process streams on the thread. A run that process admitted
    a moment ago may not be staged yet (its first batch is written within milliseconds): while the
    thread's claim names another process, look again for up to ``STAGING_SECONDS``."""
    with trio.move_on_after(STAGING_SECONDS):
        while True:
            found = await relayed_broadcast(relay, thread_id, ctx.config.server.replay_bytes)
            if found is not None:
                return found
            holder = await ctx.app.claims.holder(thread_id)
            if holder is None or holder == ctx.app.claims.process_id:
                return None
            await trio.sleep(0.02)
    return None


async def watch_thread(ctx: StreamHost, protocol: Protocol, thread_id: str, principal: Principal,
                 last_event_id: str | None = None, *, from_snapshot: bool = False) -> Producer | None:
    """The producer that streams ``thread_id``'s active run from ``last_event_id`` (None: its start;
    ``from_snapshot``: the head, the committed messages as a snapshot, then the live tail, as for a
    position no longer held), or None when nothing runs on the thread, or when the caller may not see
    the thread (only its owner and admins may watch: another user's thread answers exactly as an idle
    one, so ids leak nothing and a page's resume on a thread it cannot see is a plain "nothing to
    resume"). Raises ``InputRejected`` (``INVALID_POSITION``) for a ``last_event_id`` this server never writes."""
    run = ctx.app.active(thread_id)
    broadcast = run.broadcast if run is not None else None
    if broadcast is None or broadcast.closed:
        run = None
        relay = ctx.ledger.relay()
        if relay is None:
            return None
        # another process of a shared ledger may stream it: its relayed copy here (``streams.relayed``)
        broadcast = await _relayed(ctx, relay, thread_id)
        if broadcast is None:
            return None
    _exists, owner = await ctx.app.owner_of(thread_id)
    if not may_see(principal, owner):
        return None
    after = -1 if from_snapshot else 0
    if last_event_id and not from_snapshot:
        try:
            key, seq = parse_position(last_event_id)
        except ValueError as exc:
            raise InputRejected(str(exc), code="INVALID_POSITION") from None
        after = seq if key == broadcast.key else -1
    channel = broadcast.open_channel(protocol)

    async def produce(deliver: Deliver) -> None:
        watcher = channel.watch(deliver, after) if after >= 0 else None
        if watcher is None:
            snapshot = protocol.snapshot([])
            if snapshot is None:
                for wire in protocol.refusal("REPLAY_GONE", "the start of this run's stream is no longer held; "
                                             "read the thread's history"):
                    deliver(None, text_payload(wire))
                return
            watcher = await _from_snapshot(ctx.ledger, protocol, channel, thread_id, deliver,
                                           (lambda: committed_through(run)) if run is not None else None)
        try:
            await watcher.done.wait()
        finally:
            watcher.leave()

    produce.run_id = broadcast.key  # type: ignore[attr-defined] # the run it streams (a relayed one is not active here)
    return produce


def committed_through(run: AdmittedRun) -> int:
    """The thread's last ledger position ``run`` has committed (its claim makes it the only writer)."""
    return max((m.seq for m in run.history), default=0)


async def _from_snapshot(ledger: Ledger, protocol: Protocol, channel: Channel, thread_id: str,
                         deliver: Deliver, marker: Callable[[], int] | None) -> Any:
    """Head, the committed messages at the next step boundary, then the live tail from it (a run that
    ends with no boundary, interrupted with no terminal event, gets the head and the messages committed).

    The snapshot holds what was committed at the boundary (``marker``'s answer then), never more: a
    step that commits while a slow ledger reads the view is in the live tail, and only there."""
    watcher = channel.watch_from_boundary(deliver, marker)
    await watcher.boundary.wait()
    view = await ledger.thread_view(thread_id)
    for seq, payload in channel.head:
        deliver(position(channel.key, seq), payload)
    held = watcher.held or []
    next_seq = int(held[0][0].rpartition(b":")[2]) if held else channel.next_seq
    mark = watcher.mark
    messages = [m for m in view.messages if mark is None or m.seq <= mark]
    snapshot = protocol.snapshot(messages) or []
    for wire in snapshot:
        deliver(position(channel.key, next_seq - 1), text_payload(wire))
    watcher.release()
    return watcher


def rejoin_route(protocol: Protocol) -> Callable[..., Awaitable[None]]:
    """The ASGI handler of a protocol's rejoin route over SSE: 204 when nothing runs on the thread,
    (and for a thread the caller may not see), 400 for a bad ``Last-Event-ID``, else the stream."""

    async def route(ctx: StreamHost, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                    params: dict[str, str]) -> None:
        principal = principal_of(scope)
        try:
            produce = await watch_thread(ctx, protocol, params["thread"], principal,
                                         header_of(scope, b"last-event-id"))
        except (InputRejected, StoreUnavailable) as exc:  # INVALID_POSITION: 400; the relay's store: 503
            status, headers, body = error_response(exc)
            await sse.send_once(send, headers, body, status)
            return
        if produce is None:
            elsewhere = await _held_elsewhere(ctx, params["thread"], principal)
            if elsewhere is not None:
                status, headers, body = error_response(
                    "RUN_ON_OTHER_PROCESS",
                    f"the run on this thread streams on server process {elsewhere}; rejoin through that process")
                await sse.send_once(send, headers, body, status)
                return
            await send({"type": "http.response.start", "status": 204, "headers": []})
            await send({"type": "http.response.body", "body": b"", "more_body": False})
            return
        server = ctx.config.server
        transport = sse.SseTransport(send, receive, sse.sse_headers(protocol.sse_headers),
                                     keepalive=server.keepalive_seconds, max_buffered=server.max_buffered_bytes,
                                     heartbeat=ctx.heartbeat)
        await transport.stream(produce, DETACHED)

    return route
