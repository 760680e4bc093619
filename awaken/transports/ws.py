"""WebSocket over raw ASGI: many runs, one after another, on one socket, for any protocol.

The wire. Each client **text** message is one request body, exactly what the protocol's POST route
takes (``application/json`` is implied). Each wire event goes back as one text message whose payload
is exactly what SSE puts after ``data: `` (an AI SDK stream still ends with a ``[DONE]`` message).
Positions: a socket message carries none (SSE frames carry ``id: <run>:<seq>``). The payload is the
protocol's own event, which the clients validate (the AI SDK's chunk schema is strict, so no extra
key), and our socket clients (tests/node/ws_client.mjs, console/src/clients.ts) read every message
as one event, so neither a field nor an extra message can carry it unnoticed. A socket client whose
socket drops rejoins the run over SSE instead (``GET …/threads/{id}/stream`` or the AI SDK's
``…/chat/{chatId}/stream``) from the run's start, which replays the messages it saw, in order.
Keep-alive is a WebSocket ping frame every ``server.ws_ping_seconds`` (``<= 0`` turns it off).
A client that offers the subprotocol ``awaken.v1`` gets it selected in the accept (browsers carry a
bearer token as a second offered entry, ``bearer.<token>``: see ``awaken/http/auth/credentials.py``).

One request at a time, and streams never interleave. A text message that arrives while the previous
request is still streaming gets ``REQUEST_BUSY`` as that protocol's rejection stream (AG-UI: one
``RUN_ERROR``; AI SDK: ``error`` + ``finish`` + ``[DONE]``). That refusal is held back and sent right
after the running stream's terminal event (and its ``[DONE]``), so the running stream reaches the
client exactly as it would have without the extra message, and every refusal is a complete stream of
its own. Refusals wait in arrival order; a binary message that arrives mid-run (``UNSUPPORTED_MEDIA_TYPE``)
waits the same way. At most ``MAX_DEFERRED`` refusals wait: the message after that breaks the
one-at-a-time rule beyond doubt, so the socket stops reading requests (later messages are ignored) and,
once the running stream and the waiting refusals are out, closes with 1008. A request counts as
streaming until its terminal event (and done marker) is queued, so a client may send the next one as
soon as it reads the previous terminal event. With no request streaming, refusals go out at once. Bad
input gets the same coded error the POST route gives (a binary message: ``UNSUPPORTED_MEDIA_TYPE``) and
the socket stays open and usable.

Ownership (structured concurrency). ``serve_websocket`` opens one nursery per connection holding the
reader (the ASGI ``receive`` loop, to which hypercorn's read hands a text message directly while it
waits: ``AppQueue.receive_directly``), the writer, the pinger, the shutdown watcher and the current
request (``handle``, given by the caller: parse, admit, run; this module knows no protocol and no
engine, and refusals come from the caller's ``refuse``). Nothing outlives the connection; everything stops by
cancel scopes. The run never awaits the socket: its sink ``put``s frames into the ``Outbox``
(synchronous, bounded by ``server.max_buffered_bytes``) and the writer drains it. A client that stops
reading therefore never stalls the run or the server. A request takes its frames from the run's first
event on (its socket has no response head to send first), and while nothing is queued or being
written its first ``WS_AT_ONCE_FRAMES`` frames (a run's opening: its start, its step's, its text's and
the first delta) go to the socket as the run makes them, in a write that never waits
(``Writes.write_now``, ``awaken/runtime/tcp.py``); what the socket does not take of one, and every
frame after them, the writer sends in order.

Close codes (the server's; a client's own close is simply a disconnect)::

    1001  going away: the server is shutting down. An idle socket is closed at once; a streaming
          request first finishes, or is interrupted when the server's graceful timeout runs out.
    1008  policy violation: more than ``MAX_DEFERRED`` messages arrived while one request streamed.
          Sent after that request's stream and the ``MAX_DEFERRED`` refusals; the run is untouched.
    1011  internal error: a server bug broke the current request's stream.
    4008  too slow: the client left more than ``server.max_buffered_bytes`` unread. The frames still
          queued are dropped, the in-flight run is cancelled with ``Cause.CLIENT_TOO_SLOW`` (committed
          ``interrupted``), and the close frame follows the bytes already handed to the socket.
    1009  (hypercorn's own) a message larger than hypercorn's ``websocket_max_message_size``.

Ending. Whatever the reason, an in-flight run is cancelled and the engine commits it
``interrupted`` with its cause (a shutdown whose grace runs out: ``shutdown``; a disconnect:
``client_gone``). After sending its close frame the server waits ``CLOSE_TIMEOUT`` for the client's
reply; when the close frame cannot even be written (the client reads nothing at all, so an earlier
write is still blocked) the TCP connection is dropped after ``ABORT_AFTER`` seconds.

The hypercorn seam (``HypercornWire``). ASGI has no ping message, no way to drop a connection whose
write is stuck (hypercorn shields ``send_all`` with no deadline), no shutdown notice for an open
websocket, and one ``websocket.send`` per message costs a shielded socket write each (about 19k
messages/s on the trio worker, slower than a run can produce them). hypercorn's ``WSStream``, whose
bound ``app_send`` is the ASGI ``send``, has what is missing: its wsproto ``connection`` frames
queued messages into one write per ``WRITE_CHUNK`` characters, a ping, and ``context.terminated``. Under any other ASGI
server ``AsgiWire`` is used: one ``websocket.send`` per message, no pings, and shutdown is noticed
only when the server cancels the connection. ``tests/test_ws_transport.py`` pins the seam.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any

import attrs
import trio

from awaken.engine.state import Cause, Interruptible
from awaken.runtime.flag import Wakeup
from awaken.runtime.tcp import EXTENSION, AppQueue, Writes, app_queue_in, timed_out_in
from awaken.runtime.tuning import WS_AT_ONCE_FRAMES, WS_OWN_FRAMING, WS_WRITE_CHUNK
from awaken.runtime.wsread import plain_connection
from awaken.wires.encoding import WireEvent, text_payload

log = logging.getLogger("awaken.ws")

ASGISend = Callable[[dict[str, Any]], Awaitable[None]]
ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
#: what a request body becomes: ``handle(request, body)`` streams it on ``request`` (a ``RequestStream``)
Handle = Callable[["RequestStream", bytes], Awaitable[None]]
#: the whole refusal stream for (code, message)
Refuse = Callable[[str, str], list[WireEvent]]

#: the server is shutting down
CLOSE_GOING_AWAY = 1001
#: more than ``MAX_DEFERRED`` messages arrived while one request streamed
CLOSE_POLICY = 1008
#: refusals that may wait for the running stream to end (one more message closes with ``CLOSE_POLICY``)
MAX_DEFERRED = 16
#: a server bug broke the current stream
CLOSE_INTERNAL_ERROR = 1011
#: the client left more than ``server.max_buffered_bytes`` unread (mirrors 1008 "policy violation")
CLOSE_TOO_SLOW = 4008
#: seconds the server waits for the client's reply to its close frame before dropping the connection
CLOSE_TIMEOUT = 1.0
#: seconds a close frame may wait behind a write the client does not read before the TCP connection is dropped
ABORT_AFTER = 5.0
#: the subprotocol the server answers when the client offers it (a browser that offers subprotocols,
#: e.g. ``["awaken.v1", "bearer.<token>"]`` for auth, fails a handshake that selects none)
SUBPROTOCOL = "awaken.v1"
#: the content type every text message is read as
CONTENT_TYPE = "application/json"
#: bytes of text framed per socket write (``awaken.runtime.tuning``)
WRITE_CHUNK = WS_WRITE_CHUNK


# -- the outbox: the only thing between a run and the socket ------------------------------------------


@attrs.frozen
class Close:
    code: int
    reason: str


@attrs.frozen
class Batch:
    """What the writer sends next, in this order: the rest of a frame written at once, a ping, the text
    messages (each its UTF-8 payload), the close frame."""

    ping: bool
    payloads: list[bytes]
    close: Close | None
    #: framed bytes the socket did not take of a frame written at once (they go before anything else)
    rest: bytes = b""


class Outbox:
    """Text messages waiting for the socket (their UTF-8 payloads, as the encoders made them), bounded in
    bytes.

    ``put`` is synchronous and never blocks: the run calls it from its event sink. ``take`` hands the
    writer everything queued so far as one ``Batch``. When more than ``limit`` bytes are queued (a
    message larger than ``limit`` does not count, but a second one queued behind it does overflow),
    ``on_overflow`` is called (once; it is expected to ``close`` with ``drop=True``). ``close`` queues
    the close frame: with ``drop`` the queued messages are discarded, without it they are sent first.
    After ``close``, ``put`` and ``ping`` do nothing. ``put_rest`` queues what the socket did not take of
    a frame written at once (``WsConnection.send``): the writer sends it first, and a dropping ``close``
    keeps it (the close frame must not land inside a frame).
    """

    def __init__(self, limit: int, on_overflow: Callable[[], None]) -> None:
        self.limit = limit
        self._on_overflow: Callable[[], None] | None = on_overflow
        self._payloads: list[bytes] = []
        self._rest = b""
        self._size = 0
        self._oversized = 0
        self._ping = False
        self._close: Close | None = None
        self._dropped = False
        self._taken_close = False
        self._waiter = Wakeup()

    @property
    def closing(self) -> bool:
        return self._close is not None

    @property
    def idle(self) -> bool:
        """Nothing is queued (no frame, rest, ping or close)."""
        return not (self._payloads or self._rest or self._ping or self._close is not None)

    @property
    def dropped(self) -> bool:
        """Whether ``close`` discarded the queue (the writer also abandons the batch it holds)."""
        return self._dropped

    def put(self, payload: bytes) -> None:
        if self._close is not None:
            return
        self._payloads.append(payload)
        size = len(payload)
        if size > self.limit:  # one message larger than the buffer is sent whole; a second behind it is too slow
            self._oversized += 1
        else:
            self._size += size
        if self._size > self.limit or self._oversized > 1:
            if self._on_overflow is not None:
                self._on_overflow()
        self._wake()

    def put_rest(self, data: bytes) -> None:
        """The bytes the socket did not take of a frame written at once: sent before anything queued."""
        if self._close is not None:
            return
        self._rest += data
        self._size += len(data)
        if self._size > self.limit and self._on_overflow is not None:
            self._on_overflow()
        self._wake()

    def ping(self) -> None:
        if self._close is None:
            self._ping = True
            self._wake()

    def close(self, code: int, reason: str, *, drop: bool) -> None:
        if self._close is not None:
            return
        self._close = Close(code, reason)
        if drop:
            self._dropped = True
            self._payloads = []
            self._size = self._oversized = 0
            self._ping = False
        self._wake()

    def release(self) -> None:
        """The connection is over: forget its overflow callback (a bound method of the connection)."""
        self._on_overflow = None

    async def take(self) -> Batch:
        """The next batch; waits while there is nothing to send. Never returns after the close batch."""
        while not (self._rest or self._payloads or self._ping or (self._close is not None and not self._taken_close)):
            await self._waiter.waiting()
        batch = Batch(self._ping, self._payloads, self._close, self._rest)
        self._payloads = []
        self._rest = b""
        self._size = self._oversized = 0
        self._ping = False
        self._taken_close = self._close is not None
        return batch

    def _wake(self) -> None:
        self._waiter.wake()


def slices(payloads: list[bytes], size: int) -> Iterator[list[bytes]]:
    """``payloads`` in order, in runs of about ``size`` bytes (at least one payload each)."""
    start = total = 0
    for i, payload in enumerate(payloads):
        total += len(payload)
        if total >= size:
            yield payloads[start : i + 1]
            start, total = i + 1, 0
    if start < len(payloads):
        yield payloads[start:]


def text_frames(payloads: list[bytes]) -> bytes:
    """``payloads`` as unfragmented, unmasked WebSocket text frames, back to back (RFC 6455 §5.2: FIN and
    the text opcode, then the length in 7, 16 or 64 bits): the bytes a server's wsproto connection
    makes of them when no extension was negotiated, without its per-frame objects and copies."""
    out: list[bytes] = []
    for payload in payloads:
        size = len(payload)
        if size < 126:
            out.append(bytes((0x81, size)))
        elif size < 0x10000:
            out.append(b"\x81\x7e" + size.to_bytes(2, "big"))
        else:
            out.append(b"\x81\x7f" + size.to_bytes(8, "big"))
        out.append(payload)
    return b"".join(out)


# -- the wire: how bytes reach the client -------------------------------------------------------------


class AsgiWire:
    """Plain ASGI: one ``websocket.send`` per message; no pings, no abort, no shutdown notice."""

    can_ping = False

    def __init__(self, send: ASGISend) -> None:
        self._send = send

    def write_now(self, payload: bytes) -> bytes | None:
        """``payload``'s frame written now, from synchronous code: None when it was not framed (queue the
        payload), else the frame's bytes the socket did not take (all of them when a write was under way).
        Plain ASGI has no such write."""
        return None

    async def send_raw(self, data: bytes | None) -> None:
        """Bytes already framed: a plain ASGI wire frames nothing itself (``write_now``), so it has none."""
        assert not data, "plain ASGI writes no frames of its own"

    async def send_texts(self, payloads: list[bytes]) -> None:
        for payload in payloads:
            await self._send({"type": "websocket.send", "text": payload.decode()})

    async def ping(self) -> None:
        return None

    async def close(self, code: int, reason: str) -> None:
        await self._send({"type": "websocket.close", "code": code, "reason": reason})

    async def abort(self) -> None:
        """Drop the connection without a close frame (unsupported: the stuck write keeps its task)."""
        return None

    async def wait_shutdown(self) -> None:
        await trio.sleep_forever()


class HypercornWire(AsgiWire):
    """hypercorn's ``WSStream`` behind the ASGI ``send``: batched frames, pings, abort, shutdown notice.

    Batches are framed by the stream's own wsproto connection (so permessage-deflate and the close
    state stay hypercorn's) and written in one ``Data`` event: one shielded ``send_all`` per batch.
    The close frame still goes through ASGI ``websocket.close``, which moves hypercorn's state.
    """

    can_ping = True

    def __init__(self, send: ASGISend, stream: Any, writes: Writes | None = None) -> None:
        super().__init__(send)
        self._stream = stream
        #: the connection's own writes (``awaken/runtime/tcp.py``; None: not this server's connection)
        self._writes = writes

    @classmethod
    def of(cls, send: ASGISend, writes: Writes | None = None) -> AsgiWire:
        """The best wire for ``send``: this one under hypercorn (checked by type), else ``AsgiWire``."""
        try:
            from hypercorn.protocol.ws_stream import WSStream
        except ImportError:  # pragma: no cover - hypercorn is a dependency
            return AsgiWire(send)
        # a middleware that watches ``send`` (awaken/http/metrics.py) names what it wraps: ``__wrapped__``
        stream = getattr(getattr(send, "__wrapped__", send), "__self__", None)
        if isinstance(stream, WSStream) and all(hasattr(stream, a) for a in ("connection", "send", "stream_id")):
            return cls(send, stream, writes)
        log.warning("not served by hypercorn's WSStream: websocket pings, batching and abort are off")
        return AsgiWire(send)

    async def _write_frames(self, events: list[Any]) -> None:
        if not self._stream.closed:  # else the client is gone; its disconnect is on the receive channel
            await self.send_raw(self._framed(events))

    def _framed(self, events: list[Any]) -> bytes | None:
        """``events`` framed by the stream's own wsproto connection (None: the client started the close
        handshake, and nothing more may be sent)."""
        from wsproto.utilities import LocalProtocolError

        try:
            return b"".join([self._stream.connection.send(event) for event in events])
        except LocalProtocolError:
            return None

    def _text_frames(self, payloads: list[bytes]) -> bytes | None:
        """``payloads`` framed as this connection's text messages (None: nothing more may be sent): by
        ``text_frames`` where that is what wsproto would make (``WS_OWN_FRAMING``), else by ``_framed``."""
        from wsproto.events import TextMessage

        if WS_OWN_FRAMING and _frames_plainly(self._stream.connection):
            return text_frames(payloads)
        return self._framed([TextMessage(data=payload.decode()) for payload in payloads])

    async def send_texts(self, payloads: list[bytes]) -> None:
        await self.send_raw(self._text_frames(payloads))

    async def send_raw(self, data: bytes | None) -> None:
        """Write bytes already framed (None: nothing)."""
        from hypercorn.protocol.events import Data

        stream = self._stream
        if data and not stream.closed:  # closed: the client is gone; its disconnect is on the receive channel
            await stream.send(Data(stream_id=stream.stream_id, data=data))

    def write_now(self, payload: bytes) -> bytes | None:
        writes = self._writes
        write = writes.write_now if writes is not None else None
        if write is None or self._stream.closed:
            return None
        frame = self._text_frames([payload])
        if frame is None:
            return b""  # nothing may be sent any more: dropped, as ``send_texts`` drops it
        taken = write(frame)
        # framed is framed: a compressing connection's state has moved past this frame, so a frame the
        # socket could not take now (a write of hypercorn's under way) waits whole, never framed again
        return frame if taken < 0 else frame[taken:]

    async def ping(self) -> None:
        from wsproto.events import Ping

        await self._write_frames([Ping()])

    async def abort(self) -> None:
        from hypercorn.protocol.events import StreamClosed

        # hypercorn's own end-of-stream path: the app sees websocket.disconnect, the TCP stream is
        # closed, and a write blocked on it fails (and returns) at once.
        await self._stream.send(StreamClosed(stream_id=self._stream.stream_id))

    async def wait_shutdown(self) -> None:
        await self._stream.context.terminated.wait()


def _frames_plainly(connection: Any) -> bool:
    """Whether ``text_frames`` makes exactly what ``connection`` (wsproto's, server side) would: it is open
    with no extension (``wsread.plain_connection``) and no fragmented message is under way. Anything
    unexpected in wsproto's internals answers no: wsproto frames it."""
    return plain_connection(connection) and getattr(getattr(connection, "_proto", None), "_outbound_opcode", 0) is None


# -- one connection -----------------------------------------------------------------------------------


class RequestStream:
    """The transport of one request on a socket: its frames go to the connection (``WsConnection.send``)."""

    def __init__(self, conn: WsConnection) -> None:
        self.conn = conn
        self.scope = trio.CancelScope()
        self.started = False
        self.finished = False
        self.run: Interruptible | None = None

    def emit(self, wire: list[WireEvent]) -> None:
        self.started = True
        self.conn.emit(wire)

    def deliver(self, position: bytes | None, payload: bytes) -> None:
        """One encoded event: one text message (no position: see the module docstring). Nothing once the
        request has finished: a run whose request went before it was handed over (its watcher takes
        frames from the run's first event) never reaches the stream of the socket's next request."""
        if self.finished:
            return
        self.started = True
        self.conn.send(payload)

    @property
    def early(self) -> Callable[[bytes | None, bytes], None]:
        """``deliver``, from the run's first event on (before ``stream``): a socket's request has no
        response head to send first (``awaken.streams.exchange.Transport``)."""
        return self.deliver

    async def stream(self, producer: Callable[[Callable[[bytes | None, bytes], None]], Awaitable[None]],
                     run: Interruptible) -> None:
        self.run = run
        if self.conn.shutting_down:
            run.blame(Cause.SHUTDOWN)
        await producer(self.deliver)
        self.finish()

    async def reject(self, wire: list[WireEvent], headers: Sequence[tuple[bytes, bytes]] = ()) -> None:
        """The refusal stream (a socket sends no headers per request: ``headers`` are dropped)."""
        self.emit(wire)
        self.finish()

    async def not_found(self, error: Any, wire: list[WireEvent]) -> None:
        """A socket has no status per request: the refusal stream says ``UNKNOWN_THREAD``."""
        await self.reject(wire)

    def cancel(self, cause: Cause | None) -> None:
        """Stop this request; its run (if one streams) is interrupted for ``cause`` (None: client gone)."""
        if self.run is not None and cause is not None:
            self.run.cancel(cause)
        self.scope.cancel()

    def finish(self) -> None:
        """The terminal frames are queued: the socket takes the next request from now on."""
        if self.finished:
            return
        self.finished = True
        self.conn.request_finished(self)


class WsConnection:
    """One accepted socket: reader, writer, pinger, shutdown watcher and the current request."""

    def __init__(self, receive: ASGIReceive, wire: AsgiWire, handle: Handle, refuse: Refuse, *,
                 ping_seconds: float, max_buffered: int, timed_out: Callable[[], bool] = lambda: False,
                 app_queue: AppQueue | None = None) -> None:
        self.receive = receive
        #: hypercorn's queue of this socket's events (``tcp.py``), which may hand messages over directly
        self.app_queue = app_queue
        #: whether the connection's write deadline closed it (``tcp.py``): its run was too slow to read
        self.timed_out = timed_out
        self.wire = wire
        self.handle = handle
        self.refusal = refuse
        self.ping_seconds = ping_seconds
        self.outbox = Outbox(max_buffered, self._on_overflow)
        self.current: RequestStream | None = None
        #: refusals (code, message) waiting for the current stream's end, in arrival order
        self.deferred: list[tuple[str, str]] = []
        #: more than ``MAX_DEFERRED`` refusals: read no more requests, close after the current stream
        self._overrun = False
        self._nursery: trio.Nursery | None = None
        self.shutting_down = False
        self._disconnected = False
        self._sending = False
        #: frames written at once (``send``) since the writer last took a batch
        self._at_once = 0
        self._close_sent = trio.Event()

    # The connection's tasks --------------------------------------------------------------------------

    async def serve(self) -> None:
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self._write_loop)
                nursery.start_soon(self._watch_shutdown)
                if self.wire.can_ping and self.ping_seconds > 0:
                    nursery.start_soon(self._ping_loop)
                try:
                    await self._read_loop()
                finally:
                    nursery.cancel_scope.cancel()  # the run (if any) is interrupted, the rest stop
                    if self._sending:
                        # A write the client does not read would pin this nursery (hypercorn shields it).
                        with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
                            await self.wire.abort()
        except BaseException as exc:
            # Cancelled from outside (the server's graceful timeout ran out) or a bug: say so, bounded.
            if not (self._disconnected or self._close_sent.is_set()):
                cancelled = isinstance(exc, trio.Cancelled) or (
                    isinstance(exc, BaseExceptionGroup) and exc.split(trio.Cancelled)[1] is None
                )
                code = CLOSE_GOING_AWAY if cancelled else CLOSE_INTERNAL_ERROR
                with trio.move_on_after(CLOSE_TIMEOUT, shield=True):
                    await self.wire.close(code, "server shutting down" if cancelled else "internal error")
            raise

    def release(self) -> None:
        """Once ``serve`` returned: drop what refers back to this connection (the outbox's overflow
        callback, the nursery whose tasks ran its methods, the current request), so that the socket's
        objects, hypercorn's stream with them, are freed at once rather than as a reference cycle at the
        cycle collector's next full collection (``tcp.drop_connection`` says why that matters)."""
        self.outbox.release()
        self._nursery = None
        self.current = None

    async def _read_loop(self) -> None:
        """Until the client's disconnect: each text message is one request (``_on_message``), taken from
        ``receive()`` or, while this waits there with nothing queued, handed over in the connection's read
        (``AppQueue.receive_directly``), in the context of this task."""
        queue = self.app_queue
        if queue is not None:
            context = contextvars.copy_context()
            queue.receive_directly(lambda message: context.run(self._on_message, message))
        try:
            while True:
                message = await self.receive()
                if message["type"] == "websocket.disconnect":
                    self._disconnected = True
                    if self.current is not None and self.timed_out():
                        self.current.cancel(Cause.CLIENT_TOO_SLOW)
                    return
                self._on_message(message)
                message = None  # not kept while the request streams (a replayed history may be hundreds of KB)
        finally:
            if queue is not None:
                queue.receive_directly(None)

    def _on_message(self, message: dict[str, Any]) -> None:
        """One message from the client (not its disconnect): a request, a refusal, or nothing while closing."""
        if message["type"] != "websocket.receive" or self.outbox.closing or self._overrun:
            return  # closing (or about to): wait for the client's close reply
        text = message.get("text")
        if text is None:
            self.refuse("UNSUPPORTED_MEDIA_TYPE",
                        "binary WebSocket messages are not accepted: send each request as one JSON text message")
        elif self.current is not None:
            self.refuse("REQUEST_BUSY",
                        "a run is already streaming on this socket; send the next request after its "
                        "terminal event")
        else:
            request = RequestStream(self)
            self.current = request
            assert self._nursery is not None
            self._nursery.start_soon(self._serve_request, request, text.encode())

    async def _serve_request(self, request: RequestStream, body: bytes) -> None:
        try:
            with request.scope:
                served = self.handle(request, body)
                del body  # the handler drops it once parsed: this frame must not keep it for the stream
                await served
        except Exception:
            log.exception("a WebSocket request failed")
            if not request.started:
                await request.reject(self.refusal("INTERNAL_ERROR", "the server failed while handling the request"))
            else:
                self.close(CLOSE_INTERNAL_ERROR, "internal error", drop=False)
        finally:
            request.finish()  # cancelled or failed: free the socket (a no-op after a normal end)

    async def _write_loop(self) -> None:
        """The only task that writes. Ends after the close frame (and its bounded wait for a reply)."""
        while True:
            batch = await self.outbox.take()
            self._sending = True
            self._at_once = 0
            try:
                if batch.rest:
                    await self.wire.send_raw(batch.rest)
                if batch.ping:
                    await self.wire.ping()
                for chunk in slices(batch.payloads, WRITE_CHUNK):
                    if self.outbox.dropped:
                        break
                    await self.wire.send_texts(chunk)
                if batch.close is not None:
                    await self.wire.close(batch.close.code, batch.close.reason)
                    break
            finally:
                self._sending = False
        self._close_sent.set()
        await trio.sleep(CLOSE_TIMEOUT)
        assert self._nursery is not None
        self._nursery.cancel_scope.cancel()

    async def _ping_loop(self) -> None:
        while True:
            await trio.sleep(self.ping_seconds)
            self.outbox.ping()

    async def _watch_shutdown(self) -> None:
        await self.wire.wait_shutdown()
        self.shutting_down = True
        if self.current is not None and self.current.run is not None:
            self.current.run.blame(Cause.SHUTDOWN)  # interrupted for it if the grace runs out
        if self.current is None:
            self.close(CLOSE_GOING_AWAY, "server shutting down", drop=False)

    async def _abort_if_stalled(self) -> None:
        """Drop the TCP connection when the close frame cannot be written within ``ABORT_AFTER``."""
        with trio.move_on_after(ABORT_AFTER):
            await self._close_sent.wait()
            return
        log.warning("a WebSocket client read nothing for %.1f s after its close: dropping the connection",
                    ABORT_AFTER)
        await self.wire.abort()

    # Synchronous helpers (called by the run's sink, the reader and the request) ---------------------

    def send(self, payload: bytes) -> None:
        """One message of the current request: written at once while nothing is queued or being written
        and fewer than ``WS_AT_ONCE_FRAMES`` went so since the writer last ran (what the socket does not
        take of it is queued first), else queued for the writer."""
        outbox = self.outbox
        if self._at_once < WS_AT_ONCE_FRAMES and not self._sending and outbox.idle:
            rest = self.wire.write_now(payload)
            if rest is not None:
                self._at_once += 1
                if rest:
                    outbox.put_rest(rest)
                return
        outbox.put(payload)

    def emit(self, wire: list[WireEvent]) -> None:
        for event in wire:
            self.outbox.put(text_payload(event))

    def refuse(self, code: str, message: str) -> None:
        """Refuse a message that starts no request: at once when idle, else after the current stream."""
        if self.current is None:
            self.reject_now(code, message)
        elif len(self.deferred) < MAX_DEFERRED:
            self.deferred.append((code, message))
        else:
            log.info("more than %d WebSocket messages arrived during one run: closing with %d after it",
                     MAX_DEFERRED, CLOSE_POLICY)
            self._overrun = True

    def reject_now(self, code: str, message: str) -> None:
        """A whole rejection stream for a message that starts no request (nothing else is streaming)."""
        self.emit(self.refusal(code, message))

    def request_finished(self, request: RequestStream) -> None:
        """``request``'s terminal frames are queued: the waiting refusals follow, then any pending close."""
        if self.current is not request:
            return
        self.current = None
        deferred, self.deferred = self.deferred, []
        for code, message in deferred:
            self.reject_now(code, message)  # a no-op once the outbox is closing
        if self._overrun:
            self.close(CLOSE_POLICY, "too many requests while a run was streaming", drop=False)
        elif self.shutting_down:
            self.close(CLOSE_GOING_AWAY, "server shutting down", drop=False)

    def close(self, code: int, reason: str, *, drop: bool, cause: Cause | None = None) -> None:
        """Start closing: cancel the current request (its run interrupted for ``cause``; None: the
        client is gone), queue the close frame, watch that it gets out."""
        if self.outbox.closing:
            return
        if self.current is not None:
            self.current.cancel(cause)
        self.outbox.close(code, reason, drop=drop)
        if self._nursery is not None:
            self._nursery.start_soon(self._abort_if_stalled)

    def _on_overflow(self) -> None:
        log.info("a WebSocket client left more than %d bytes unread: closing with %d",
                 self.outbox.limit, CLOSE_TOO_SLOW)
        self.close(CLOSE_TOO_SLOW, "too slow: the client left too many bytes unread", drop=True,
                   cause=Cause.CLIENT_TOO_SLOW)


async def serve_websocket(scope: dict, receive: ASGIReceive, send: ASGISend, handle: Handle, refuse: Refuse, *,
                          ping_seconds: float, max_buffered: int) -> None:
    """Accept one websocket and serve requests on it (``handle`` each text message; ``refuse`` gives
    the refusal stream of a message that starts none) until either side closes it."""
    message = await receive()
    if message["type"] != "websocket.connect":
        return
    accept = {"type": "websocket.accept"}
    if SUBPROTOCOL in scope.get("subprotocols", []):
        accept["subprotocol"] = SUBPROTOCOL
    await send(accept)
    wire = HypercornWire.of(send, scope.get("extensions", {}).get(EXTENSION))
    conn = WsConnection(receive, wire, handle, refuse, ping_seconds=ping_seconds,
                        max_buffered=max_buffered, timed_out=lambda: timed_out_in(scope),
                        app_queue=app_queue_in(scope))
    try:
        await conn.serve()
    finally:
        conn.release()
