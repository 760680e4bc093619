"""SSE over raw ASGI: the response writer between a run and the socket.

The run never awaits the client. It ``put``s encoded frames into a ``FrameBuffer`` (synchronous,
never blocks); the connection task drains whatever is queued and writes it in one ``send`` (frames
that pile up while a send is in flight are coalesced; an idle stream costs one wake-up per frame).
hypercorn's trio sends are shielded and cannot be cancelled, so a reader that stops reading is
detected by the buffer's byte limit instead: on overflow the run's scope is cancelled and the run
is committed ``interrupted``. A single frame larger than the limit is not slowness: it is queued
without counting against the limit (one at a time: a second one queued behind it is an overflow),
so it reaches a client that reads, whole.

A concurrent ``receive()`` loop sees ``http.disconnect`` the moment the client goes and cancels the
connection's nursery, which owns the run (a cancellation with no cause: ``client_gone``). A write
that stays blocked past the connection's write deadline (``tcp.py``, ``server.write_timeout_seconds``)
closes the connection from below: the same disconnect, whose cause is then ``client_too_slow``, and
the socket and the bytes it held are released whether a run still streams or not.

This module frames bytes and nothing else: it knows no protocol and no engine. What a stream
carries (including a protocol's closing ``[DONE]``) arrives as wire events.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, Protocol

import trio

from awaken.core.errors import error_response
from awaken.engine.state import Cause, Interruptible
from awaken.runtime import memory
from awaken.runtime.tcp import timed_out_in
from awaken.runtime.tuning import COALESCE_BYTES, COALESCE_FRAMES
from awaken.wires.encoding import WireEvent, sse_frame_at, sse_frames

log = logging.getLogger("awaken.sse")

Put = Callable[[bytes], None]
Producer = Callable[[Put], Awaitable[None]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]
ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]

KEEPALIVE = b": keep-alive\n\n"


class Feed(Protocol):
    """A producer that needs no task of its own: ``stream`` runs it in the writer's task. ``start`` hands
    it where its frames go and what to call after its last one; ``finish`` runs once the stream ended
    or the connection went (cancelled: it shields what it must still wait for). A stream's origin
    watcher is one: it only waits for its run's last frame, and a task per stream for that wait cost
    about 3 KB (``python -m bench.memtrace``)."""

    def start(self, deliver: Callable[[bytes | None, bytes], None], end: Callable[[], None]) -> None: ...

    async def finish(self) -> None: ...


def is_feed(producer: object) -> bool:
    """Whether ``producer`` is a ``Feed`` (a plain producer is a function). Not ``isinstance`` against a
    runtime-checkable protocol: that walks the protocol's members on every call, about 10 µs a stream."""
    return hasattr(producer, "start") and hasattr(producer, "finish")


class _Framed:
    """A ``Feed`` whose payloads become SSE frames."""

    __slots__ = ("feed",)

    def __init__(self, feed: Feed) -> None:
        self.feed = feed

    def start(self, put: Put, end: Callable[[], None]) -> None:
        self.feed.start(lambda position, payload: put(sse_frame_at(position, payload)), end)

    async def finish(self) -> None:
        await self.feed.finish()


# queued frames are joined into one block once ``COALESCE_BYTES`` of them wait behind the socket (a
# reader that stops reading then holds a few blocks large enough to be mapped on their own, returned to
# the system when dropped), and every ``COALESCE_FRAMES`` single frames are joined first
# (``awaken.runtime.tuning``)


class FrameBuffer:
    """Bytes waiting for the socket: ``put`` is synchronous; ``take`` waits for data or a timeout."""

    __slots__ = ("_chunks", "_closed", "_joined", "_lot", "_oversized", "_pieced", "_size", "_tail", "last_put",
                 "limit", "on_overflow", "overflowed")

    def __init__(self, limit: int, on_overflow: Callable[[], None]) -> None:
        self.limit = limit
        self.on_overflow = on_overflow
        self._chunks: list[bytes] = []
        self._size = 0
        #: ``_chunks[:_joined]`` are joined blocks, then pieces up to ``_pieced``, then single frames;
        #: ``_tail`` bytes follow the last block
        self._joined = 0
        self._pieced = 0
        self._tail = 0
        #: frames larger than ``limit`` queued now (they do not count in ``_size``)
        self._oversized = 0
        self._closed = False
        self._lot = trio.lowlevel.ParkingLot()
        self.overflowed = False
        #: when bytes were last queued (trio clock): the keep-alive timer measures idleness from here
        self.last_put = trio.current_time()

    def put(self, data: bytes) -> None:
        if self._closed or self.overflowed or not data:
            return
        self.last_put = trio.current_time()
        self._chunks.append(data)
        if len(data) > self.limit:
            self._oversized += 1
        else:
            self._size += len(data)
        if self._size > self.limit or self._oversized > 1:
            self.overflowed = True
            self.on_overflow()
            self.discard()  # never sent: the reader that could not keep up is dropped
            return
        self._tail += len(data)
        if self._tail >= COALESCE_BYTES:
            block = b"".join(self._chunks[self._joined:])
            del self._chunks[self._joined:]
            self._chunks.append(block)
            self._joined = self._pieced = len(self._chunks)
            self._tail = 0
        elif len(self._chunks) - self._pieced >= COALESCE_FRAMES:
            piece = b"".join(self._chunks[self._pieced:])
            del self._chunks[self._pieced:]
            self._chunks.append(piece)
            self._pieced = len(self._chunks)
        if self._lot:
            self._lot.unpark_all()

    def discard(self) -> None:
        """Drop what is queued (the connection is gone)."""
        self._chunks.clear()
        self._size = self._oversized = self._joined = self._pieced = self._tail = 0

    def close(self) -> None:
        self._closed = True
        if self._lot:
            self._lot.unpark_all()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def exhausted(self) -> bool:
        return self._closed and not self._chunks

    async def take(self) -> bytes | None:
        """All queued bytes, waiting for some; ``None`` once closed and drained.

        No timeout here: a deadline per frame costs a cancel scope per delta on the hot path. The
        keep-alive timer lives in the connection's receive loop instead (``_watch_client``).
        """
        while not self._chunks:
            if self._closed and not self.overflowed:
                return None
            await self._lot.park()  # after an overflow: until the connection's cancellation
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._size = self._oversized = self._joined = self._pieced = self._tail = 0
        return data


def sse_headers(extra: list[tuple[bytes, bytes]] | None = None) -> list[tuple[bytes, bytes]]:
    headers = [
        (b"content-type", b"text/event-stream"),
        (b"cache-control", b"no-cache"),
        (b"x-accel-buffering", b"no"),
    ]
    return headers + (extra or [])


async def send_once(send: ASGISend, headers: list[tuple[bytes, bytes]], body: bytes, status: int = 200) -> None:
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})


class SseTransport:
    """The ``Transport`` for one HTTP request: SSE frames and keep-alive comments."""

    def __init__(self, send: ASGISend, receive: ASGIReceive, headers: list[tuple[bytes, bytes]], *,
                 keepalive: float, max_buffered: int, scope: dict[str, Any] | None = None) -> None:
        self.send = send
        self.receive = receive
        self.headers = headers
        self.keepalive = keepalive
        self.max_buffered = max_buffered
        #: the request's ASGI scope: whether its connection's write deadline closed it (``tcp.py``)
        self.scope = scope or {}

    async def stream(self, producer: Callable[[Callable[[bytes | None, bytes], None]], Awaitable[None]],
                     run: Interruptible) -> None:
        async def produce(put: Put) -> None:
            await producer(lambda position, payload: put(sse_frame_at(position, payload)))

        fed = _Framed(producer) if is_feed(producer) else produce
        await stream(self.send, self.receive, self.headers, fed, keepalive=self.keepalive,
                     max_buffered=self.max_buffered, on_overflow=lambda: run.cancel(Cause.CLIENT_TOO_SLOW),
                     timed_out=lambda: timed_out_in(self.scope))

    async def reject(self, wire: list[WireEvent], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """The whole refusal stream, with ``headers`` beside the stream's own (``Retry-After``)."""
        await send_once(self.send, [*self.headers, *headers], sse_frames(wire))

    async def not_found(self, error: Any, wire: list[WireEvent]) -> None:
        """HTTP 404 with ``{"error": {"code", "message"}}`` (``error_response``), as the read routes answer
        a thread that is not there."""
        status, headers, body = error_response(error)
        await send_once(self.send, headers, body, status=status)


async def stream(
    send: ASGISend,
    receive: ASGIReceive,
    headers: list[tuple[bytes, bytes]],
    producer: Producer | Feed,
    *,
    keepalive: float,
    max_buffered: int,
    on_overflow: Callable[[], None] = lambda: None,
    timed_out: Callable[[], bool] = lambda: False,
) -> None:
    """Send the response head, run ``producer(put)`` in a nursery owned by this connection, and write
    what it puts until it returns (a ``Feed`` runs in this task instead: until it calls its ``end``).

    A client disconnect cancels the connection's nursery, so the producer; a buffer overflow calls
    ``on_overflow`` (which says why the run stops) and then does the same, as does a disconnect that
    the write deadline made (``timed_out()`` true then). The producer's own
    cleanup (committing ``interrupted``) runs under its shield.
    """
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    finished = False
    async with trio.open_nursery() as nursery:
        connection = nursery.cancel_scope

        def overflow() -> None:
            on_overflow()
            connection.cancel()

        buffer = FrameBuffer(max_buffered, overflow)

        async def produce() -> None:
            try:
                await producer(buffer.put)  # type: ignore[operator]
            finally:
                buffer.close()

        def gone() -> None:
            if timed_out():  # the write deadline closed the connection: the client was too slow
                on_overflow()

        nursery.start_soon(_watch_client, receive, buffer, connection, keepalive, gone)
        feed = producer if is_feed(producer) else None
        if feed is None:
            nursery.start_soon(produce)
        try:
            if feed is not None:
                feed.start(buffer.put, buffer.close)
            while (data := await buffer.take()) is not None:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            finished = True
            connection.cancel()  # stop watching the client
        finally:
            if feed is not None:
                await feed.finish()
    if finished:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif buffer.overflowed or timed_out():
        # the client could not keep up: megabytes were queued for it; hand them back to the system
        data = None
        buffer.discard()
        memory.request_trim(buffer.limit)  # what it may have held
    # else: the client is gone: nothing more to write


async def _watch_client(receive: ASGIReceive, buffer: FrameBuffer, connection: trio.CancelScope,
                        keepalive: float, gone: Callable[[], None] = lambda: None) -> None:
    """Wait for ``http.disconnect`` (then call ``gone`` and cancel the connection) and queue a ``: keep-alive`` comment
    whenever nothing was queued for ``keepalive`` seconds. It wakes at most once per interval."""
    while True:
        # Once the run has ended nothing more is queued: only a disconnect matters (no deadline, or a
        # reader that stopped reading would make this loop spin against a deadline in the past).
        deadline = math.inf if buffer.closed else buffer.last_put + keepalive
        with trio.move_on_at(deadline):
            message = await receive()
            if message["type"] == "http.disconnect":
                gone()
                connection.cancel()
                return
            continue
        if trio.current_time() >= buffer.last_put + keepalive:
            buffer.put(KEEPALIVE)
