"""SSE over raw ASGI: the response writer between a run and the socket.

The run never awaits the client. It ``put``s encoded frames into a ``FrameBuffer`` (synchronous,
never blocks); the connection task drains whatever is queued and writes it in one ``send`` (frames
that pile up while a send is in flight are coalesced; an idle stream costs one wake-up per frame).
hypercorn's trio sends are shielded and cannot be cancelled, so a reader that stops reading is
detected by the buffer's byte limit instead: on overflow the run's scope is cancelled and the run
is committed ``interrupted``. A single frame larger than the limit is not slowness: it is queued
without counting against the limit (one at a time: a second one queued behind it is an overflow),
so it reaches a client that reads, whole.

A stream learns that its client went in one of two ways. On the common path (a ``Feed`` producer, a
request served by ``tcp.py``'s connections, which carries an ``AppQueue``, and a running server-wide
``Heartbeat``) it opens no nursery and starts no task: the ``AppQueue``'s disconnect callback, called by
hypercorn as it queues ``http.disconnect``, ends the writing loop, and the ``Heartbeat``'s one task
queues the ``: keep-alive`` comments of every idle stream. Otherwise (a plain producer, a server of
another kind, a unit test's fake ``receive``) a concurrent ``receive()`` loop (``_watch_client``) sees
``http.disconnect`` and cancels the connection's nursery, which owns the producer, and queues the
keep-alive comments itself. Either way the producer stops, and a run that stops with it has no cause
of its own: ``client_gone``. A write that stays blocked past the connection's write deadline
(``tcp.py``, ``server.write_timeout_seconds``) closes the connection from below: the same disconnect,
whose cause is then ``client_too_slow``, and the socket and the bytes it held are released whether a
run still streams or not. The bytes written are the same on both paths.

This module frames bytes and nothing else: it knows no protocol and no engine. What a stream
carries (including a protocol's closing ``[DONE]``) arrives as wire events.
"""

from __future__ import annotations

import logging
import math
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from functools import partial
from typing import Any, Protocol

import trio

from awaken.core.errors import error_response
from awaken.engine.state import Cause, Interruptible
from awaken.runtime import memory
from awaken.runtime.flag import Wakeup
from awaken.runtime.tcp import AppQueue, app_queue_in, timed_out_in
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
    or the connection went (cancelled: it shields what it must still wait for), on every path: also
    when the response could not even start, and then without ``start``. A stream's origin
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
        self.feed.start(_Framer(put), end)

    async def finish(self) -> None:
        await self.feed.finish()


class _Framer:
    """One payload (and its position), framed, to ``put``: what a ``_Framed`` feed delivers to. It refers
    to nothing of the feed's (the feed holds it: a reference back would make each stream a cycle)."""

    __slots__ = ("put",)

    def __init__(self, put: Put) -> None:
        self.put = put

    def __call__(self, position: bytes | None, payload: bytes) -> None:
        self.put(sse_frame_at(position, payload))


class _TooSlow:
    """What a stream's overflow does to its run: stop it, because its client could not keep up."""

    __slots__ = ("run",)

    def __init__(self, run: Interruptible) -> None:
        self.run = run

    def __call__(self) -> None:
        self.run.cancel(Cause.CLIENT_TOO_SLOW)


# queued frames are joined into one block once ``COALESCE_BYTES`` of them wait behind the socket (a
# reader that stops reading then holds a few blocks large enough to be mapped on their own, returned to
# the system when dropped), and every ``COALESCE_FRAMES`` single frames are joined first
# (``awaken.runtime.tuning``)


class FrameBuffer:
    """Bytes waiting for the socket: ``put`` is synchronous; ``take`` waits for data or a timeout."""

    __slots__ = ("_abandoned", "_chunks", "_closed", "_joined", "_oversized", "_pieced", "_size", "_tail", "_waiter",
                 "last_put", "limit", "on_overflow", "overflowed")

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
        #: the connection went (or its reader could not keep up) and nothing more is written: ``abandon``
        self._abandoned = False
        self._waiter = Wakeup()
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
        self._waiter.wake()

    def discard(self) -> None:
        """Drop what is queued (the connection is gone)."""
        self._chunks.clear()
        self._size = self._oversized = self._joined = self._pieced = self._tail = 0

    def close(self) -> None:
        self._closed = True
        self._waiter.wake()

    def abandon(self) -> None:
        """The writer stops: what is queued is dropped, nothing more is queued, and ``take`` returns None
        at once (an overflowed buffer too). For a stream whose writer no cancellation stops."""
        self._abandoned = True
        self.discard()
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    @property
    def abandoned(self) -> bool:
        return self._abandoned

    @property
    def exhausted(self) -> bool:
        return self._closed and not self._chunks

    async def take(self) -> bytes | None:
        """All queued bytes, waiting for some; ``None`` once closed and drained.

        No timeout here: a deadline per frame costs a cancel scope per delta on the hot path. The
        keep-alive timer lives in the server's ``Heartbeat`` or the connection's receive loop instead
        (``_watch_client``).
        """
        data = self.take_now()
        while data == b"":
            await self.wait()
            data = self.take_now()
        return data

    def take_now(self) -> bytes | None:
        """All queued bytes; ``b""`` when none are (``wait``, then take again); ``None`` once closed and
        drained. After an overflow there is nothing until ``abandon`` or the connection's cancellation."""
        if not self._chunks:
            if self._closed and (self._abandoned or not self.overflowed):
                return None
            return b""
        data = self._chunks[0] if len(self._chunks) == 1 else b"".join(self._chunks)
        self._chunks.clear()
        self._size = self._oversized = self._joined = self._pieced = self._tail = 0
        return data

    def wait(self) -> Awaitable[None]:
        """Until something is queued (or the buffer closes), for its one writer to await at once: trio's
        own wait, so an idle stream's writer has no frame of this buffer's on its stack."""
        return self._waiter.waiting()


class Heartbeat:
    """The keep-alive comments of every open SSE stream that has no receive loop of its own: one task for
    the whole server (``run``, started in the server's lifespan nursery), one registry of buffers.

    Every ``interval / TICKS_PER_INTERVAL`` seconds it queues ``KEEPALIVE`` into each registered buffer
    that is not closed and has queued nothing for ``interval`` seconds (``FrameBuffer.last_put``): an
    idle stream gets a comment between ``interval`` and 1.25 × ``interval`` after its last bytes."""

    TICKS_PER_INTERVAL = 4

    __slots__ = ("_buffers", "interval", "running")

    def __init__(self, interval: float) -> None:
        #: ``[server] keepalive_seconds``
        self.interval = interval
        self._buffers: set[FrameBuffer] = set()
        #: ``run`` is ticking: a buffer registered now gets its comments
        self.running = False

    def serves(self, keepalive: float) -> bool:
        """Whether a stream whose keep-alive interval is ``keepalive`` may rely on this heartbeat."""
        return self.running and keepalive == self.interval

    def add(self, buffer: FrameBuffer) -> None:
        self._buffers.add(buffer)

    def discard(self, buffer: FrameBuffer) -> None:
        self._buffers.discard(buffer)

    @property
    def registered(self) -> int:
        """How many streams it keeps alive now."""
        return len(self._buffers)

    def beat(self, now: float) -> None:
        """Queue a comment into every registered buffer idle since ``now - interval`` or longer."""
        idle_since = now - self.interval
        for buffer in list(self._buffers):  # a put's overflow may end a stream (it unregisters later)
            if buffer.last_put <= idle_since and not buffer.closed:
                buffer.put(KEEPALIVE)

    async def run(self) -> None:
        """Tick until cancelled."""
        self.running = True
        try:
            while True:
                await trio.sleep(self.interval / self.TICKS_PER_INTERVAL)
                self.beat(trio.current_time())
        finally:
            self.running = False


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

    #: frames wait for ``stream``: the response's head goes first
    early = None

    def __init__(self, send: ASGISend, receive: ASGIReceive, headers: list[tuple[bytes, bytes]], *,
                 keepalive: float, max_buffered: int, scope: dict[str, Any] | None = None,
                 heartbeat: Heartbeat | None = None) -> None:
        self.send = send
        self.receive = receive
        self.headers = headers
        self.keepalive = keepalive
        self.max_buffered = max_buffered
        #: the request's ASGI scope: whether its connection's write deadline closed it, and its
        #: ``AppQueue`` (``tcp.py``)
        self.scope = scope or {}
        #: the server's keep-alive ticker (None: each stream keeps its own, ``_watch_client``)
        self.heartbeat = heartbeat

    def stream(self, producer: Callable[[Callable[[bytes | None, bytes], None]], Awaitable[None]],
               run: Interruptible) -> Awaitable[None]:
        """The stream (``stream``), to be awaited: a plain function, so no frame of its own stays on the
        stack for the stream's life."""
        async def produce(put: Put) -> None:
            await producer(lambda position, payload: put(sse_frame_at(position, payload)))

        fed = _Framed(producer) if is_feed(producer) else produce
        return stream(self.send, self.receive, self.headers, fed, keepalive=self.keepalive,
                      max_buffered=self.max_buffered, on_overflow=_TooSlow(run),
                      timed_out=partial(timed_out_in, self.scope), app_queue=app_queue_in(self.scope),
                      heartbeat=self.heartbeat)

    async def reject(self, wire: list[WireEvent], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """The whole refusal stream, with ``headers`` beside the stream's own (``Retry-After``)."""
        await send_once(self.send, [*self.headers, *headers], sse_frames(wire))

    async def not_found(self, error: Any, wire: list[WireEvent]) -> None:
        """HTTP 404 with ``{"error": {"code", "message"}}`` (``error_response``), as the read routes answer
        a thread that is not there."""
        status, headers, body = error_response(error)
        await send_once(self.send, headers, body, status=status)


def stream(
    send: ASGISend,
    receive: ASGIReceive,
    headers: list[tuple[bytes, bytes]],
    producer: Producer | Feed,
    *,
    keepalive: float,
    max_buffered: int,
    on_overflow: Callable[[], None] = lambda: None,
    timed_out: Callable[[], bool] = lambda: False,
    app_queue: AppQueue | None = None,
    heartbeat: Heartbeat | None = None,
) -> Coroutine[Any, Any, None]:
    """Send the response head, run ``producer(put)`` in a nursery owned by this connection, and write
    what it puts until it returns (a ``Feed`` runs in this task instead: until it calls its ``end``).

    A client disconnect cancels the connection's nursery, so the producer; a buffer overflow calls
    ``on_overflow`` (which says why the run stops) and then does the same, as does a disconnect that
    the write deadline made (``timed_out()`` true then). The producer's own
    cleanup (committing ``interrupted``) runs under its shield.

    A ``Feed`` whose request carries its ``app_queue`` (its disconnect notice), given a running ``heartbeat`` with
    this ``keepalive``, needs no nursery: ``_stream_unwatched``. (A plain function returning the path's
    coroutine, awaited as ``stream`` itself: no frame of its own stays alive with each open stream.)
    """
    if app_queue is not None and heartbeat is not None and heartbeat.serves(keepalive) and is_feed(producer):
        return _stream_unwatched(send, headers, producer, app_queue, heartbeat,  # type: ignore[arg-type]
                                 max_buffered=max_buffered, on_overflow=on_overflow, timed_out=timed_out)
    return _stream_watched(send, receive, headers, producer, keepalive=keepalive, max_buffered=max_buffered,
                           on_overflow=on_overflow, timed_out=timed_out)


async def _stream_watched(send: ASGISend, receive: ASGIReceive, headers: list[tuple[bytes, bytes]],
                          producer: Producer | Feed, *, keepalive: float, max_buffered: int,
                          on_overflow: Callable[[], None], timed_out: Callable[[], bool]) -> None:
    """``stream`` with a nursery of its own and a task watching the client (``_watch_client``)."""
    feed: Feed | None = producer if is_feed(producer) else None  # type: ignore[assignment]
    try:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
    except BaseException:
        if feed is not None:  # a feed's ``finish`` runs on every path, this one too
            await feed.finish()
        raise
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


async def _stream_unwatched(send: ASGISend, headers: list[tuple[bytes, bytes]], feed: Feed, app_queue: AppQueue,
                            heartbeat: Heartbeat, *, max_buffered: int, on_overflow: Callable[[], None],
                            timed_out: Callable[[], bool]) -> None:
    """``stream`` for a ``Feed``, in the caller's task alone: no nursery, no task watching the client.

    The buffer is registered with ``heartbeat`` (its keep-alive comments) and a callback with
    ``app_queue``: the client's going (or an overflow) abandons the buffer, so ``take`` returns None
    and the writing loop ends as a cancellation would have ended it: not finished, the feed's
    ``finish`` run (it stops an attached run: ``client_gone``). Both are unregistered at the end.
    """
    ending = _Ending(on_overflow, timed_out)
    buffer = ending.buffer = FrameBuffer(max_buffered, ending.overflow)
    finished = False
    heartbeat.add(buffer)
    try:
        await send({"type": "http.response.start", "status": 200, "headers": headers})
        app_queue.on_disconnect(ending.gone)  # at once when the client already went
        feed.start(buffer.put, buffer.close)
        while (data := buffer.take_now()) is not None:  # ``take``, inline: this loop is the stream's stack
            if data:
                await send({"type": "http.response.body", "body": data, "more_body": True})
            else:
                await buffer.wait()
        finished = not buffer.abandoned
    finally:
        app_queue.on_disconnect(None)
        heartbeat.discard(buffer)
        # nothing more is queued, so nothing more overflows: ``ending`` (which refers to the buffer and,
        # through ``on_overflow``, to the run) is let go, or the two would outlive the stream as a cycle
        # that only a full collection frees (``GC_THRESHOLDS``)
        buffer.close()
        buffer.on_overflow = _no_overflow
        ending.buffer = None
        await feed.finish()
    if finished:
        await send({"type": "http.response.body", "body": b"", "more_body": False})
    elif buffer.overflowed or timed_out():
        # the client could not keep up: megabytes were queued for it; hand them back to the system
        buffer.discard()
        memory.request_trim(buffer.limit)  # what it may have held
    # else: the client is gone: nothing more to write


class _Ending:
    """How an unwatched stream ends early (its buffer abandoned): ``overflow``, its client could not keep
    up; ``gone``, its client went (too slow, when the write deadline closed the connection). One object
    with two bound methods, where two closures cost three cells and two tuples beside them."""

    __slots__ = ("buffer", "on_overflow", "timed_out")

    def __init__(self, on_overflow: Callable[[], None], timed_out: Callable[[], bool]) -> None:
        self.on_overflow = on_overflow
        self.timed_out = timed_out
        self.buffer: FrameBuffer | None = None

    def overflow(self) -> None:
        self.on_overflow()
        if self.buffer is not None:
            self.buffer.abandon()

    def gone(self) -> None:
        if self.timed_out():  # the write deadline closed the connection: the client was too slow
            self.on_overflow()
        if self.buffer is not None:
            self.buffer.abandon()


def _no_overflow() -> None:
    return None


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
