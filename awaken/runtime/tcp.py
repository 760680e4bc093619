"""The write deadline: a connection whose client stops reading is closed, not held.

hypercorn's trio worker writes every response byte under a shielded cancel scope (a half-written
frame would corrupt the connection), so a client that stops reading keeps the writing task, the
bytes it was handed and the socket until the client itself goes: nothing in the app can cancel
that write. ``WriteDeadlineServer`` is hypercorn's per-connection ``TCPServer`` with one change:
the shielded write carries a deadline, ``write_timeout`` seconds, pushed back each time the socket
takes bytes. When it passes, the connection is closed (the socket, the bytes it held, the task),
and the app sees ``http.disconnect``/``websocket.disconnect`` as for a client that left.

So the app can tell "too slow" from "gone", every ASGI scope served on such a connection carries
``scope["extensions"]["awaken.writes"]``, a ``Writes`` whose ``timed_out`` is true once the
deadline closed the connection (``timed_out_in(scope)``).

It also closes a connection as soon as its client has closed it. hypercorn's ``TCPServer.run`` reads
until the client's EOF, then leaves its task group, which waits for the connection's idle-timeout task:
that task sleeps ``keep_alive_timeout`` (75 s in ``awaken serve``) before closing, so a connection its
client closed after its last response stayed open (``CLOSE-WAIT``) with its tasks, parser and buffers
until then. hypercorn's asyncio worker stops the idle task on close; ``_read_data`` here stops it once
the read side has ended, so the task group leaves as soon as the response (if any) is done. What such
connections held, measured: ``bench/HISTORY.md``.

Its keep-alive close never cuts a request short: a request that arrives just as the keep-alive runs
out keeps its connection (``_initiate_server_close``), where hypercorn closed it under the request it had begun.

It reads up to ``READ_SIZE`` (256 KiB) at a time where hypercorn reads 64 KiB: every read goes
through h11, hypercorn's stream and the app's queue, so a large replayed history takes fewer of those
trips (the figures: ``bench/HISTORY.md``). A read returns what has arrived, so a small request reads
as before. Its h11 parser holds each large read as it came, so a read that is wholly body reaches the
app without being copied (``awaken/runtime/heldchunks.py``).

On a plain socket it reads and writes the socket itself (``_receive``, ``_write_at_once``), with the
results and errors of trio's stream: a read waits in trio's ``wait_readable`` alone, and a write the
socket takes at once needs no cancel scope; only what it cannot take waits, under the deadline. What
that saves, per open connection and per write: ``bench/REPORT.md``. TLS, or a ``read_timeout``, keeps
trio's stream. A write with no other under way goes out without a scheduling point, and synchronous
code may write through ``Writes.write_now`` (a WebSocket request's first frames, from the run that
makes them: ``transports/ws.py``).

Closing a connection and restarting its idle timer (hypercorn's ``Closed`` and ``Updated``) are
shielded from cancellation: hypercorn runs them inside the task of the request that ended, and an
answer sent before its request body arrived ends with a close that quart-trio's own cancellation
could cut short (``transports/early.py`` says ``Connection: close`` on such answers).

A request learns that its client went without a task waiting for it, and whether its body is all in,
from what hypercorn queued for it: every ASGI scope served on such a connection also carries
``scope["extensions"]["awaken.app_queue"]``, an ``AppQueue`` (one per request, ``app_queue_in(scope)``). hypercorn hands the app its ``http.disconnect`` /
``websocket.disconnect`` through the queue its task group's ``spawn_app`` made for the request;
``NotifyingTaskGroup.spawn_app`` returns a put in front of that queue which first calls the callback
registered on the request's ``AppQueue``, synchronously, then queues the event as before. So a
response that only needs to know when its client left (an SSE stream: ``transports/sse.py``) needs
no task awaiting ``receive()`` for it, and a body already queued whole is read without a deadline
(``transports/body.py``: a cancel scope with a deadline per request cost more than the read).

A WebSocket's messages reach its reader sooner. A read that is one whole text frame, on a socket with no
extension, is read by ``wsread`` rather than by hypercorn's layers and wsproto (``WS_OWN_READING``), and
a text message for a reader that waits in ``receive()`` with nothing queued is handed to it in the read,
synchronously (``AppQueue.receive_directly``, ``WS_DIRECT_RECEIVE``): no queue, no scheduling pass. The
order the reader sees is the queue's: a message put while another waits for the reader is queued behind it.

``install()`` makes hypercorn's trio ``serve`` build these connections, and those connections build
``NotifyingTaskGroup``s (hypercorn has no hook for either: its ``run`` module names the connection
class once, its ``tcp_server`` module names the task group class once; ``install`` replaces both
names). Without ``write_timeout`` on the hypercorn config (``configure``) a connection behaves exactly
as hypercorn's own.
"""

from __future__ import annotations

import logging
import math
import os
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.app_wrappers import ASGIWrapper
from hypercorn.config import Config as HypercornConfig
from hypercorn.events import Closed, RawData, Updated
from hypercorn.trio import run as hypercorn_run
from hypercorn.trio import tcp_server as hypercorn_tcp_server
from hypercorn.trio.task_group import TaskGroup
from hypercorn.trio.tcp_server import TCPServer

from awaken.runtime import accept, wsread
from awaken.runtime.heldchunks import hold_chunks
from awaken.runtime.tuning import OWN_SOCKET_IO, READ_SIZE, WS_DIRECT_RECEIVE, WS_OWN_READING

log = logging.getLogger("awaken.tcp")

EXTENSION = "awaken.writes"
#: the scope extension holding the request's ``AppQueue``
APP_QUEUE = "awaken.app_queue"
#: the ASGI events by which hypercorn tells an app its client went
_DISCONNECTS = frozenset({"http.disconnect", "websocket.disconnect"})


class Writes:
    """What the app may ask of its connection's writes (one per connection)."""

    __slots__ = ("timed_out", "write_now")

    def __init__(self) -> None:
        #: the write deadline passed and closed the connection
        self.timed_out = False
        #: the connection's write of bytes, now, without waiting (``WriteDeadlineServer.write_now``; None:
        #: the connection has none, or it ended)
        self.write_now: Callable[[bytes], int] | None = None


def timed_out_in(scope: dict[str, Any]) -> bool:
    """Whether the connection serving ``scope`` was closed by its write deadline."""
    writes = scope.get("extensions", {}).get(EXTENSION)
    return writes is not None and writes.timed_out


class AppQueue:
    """What hypercorn has queued for one request's app, as it queues it: whether the request's whole body
    is in the queue (``body_in``: then ``receive()`` returns every body message without waiting), and
    the disconnect notice (``on_disconnect(callback)`` has ``callback`` called once, synchronously, when
    hypercorn hands the request its disconnect event; at once when that already happened).

    ``put`` is what hypercorn's protocol uses as the request's app queue (``NotifyingTaskGroup``): it
    notes the event, calls the callback on a disconnect, then queues the event as hypercorn's own put
    does, so ``receive()`` still returns it."""

    __slots__ = ("_callback", "_direct", "body_in", "happened", "queue")

    def __init__(self) -> None:
        self._callback: Callable[[], None] | None = None
        self._direct: Callable[[dict[str, Any]], None] | None = None
        #: the request's last body message has been queued
        self.body_in = False
        #: the disconnect event has been put
        self.happened = False
        #: hypercorn's put into the request's app queue (set by ``NotifyingTaskGroup.spawn_app``)
        self.queue: Callable[[dict[str, Any]], Awaitable[None]] | None = None

    def on_disconnect(self, callback: Callable[[], None] | None) -> None:
        """Call ``callback`` when the client goes (now, if it has gone); None: call nothing any more.
        One callback at a time: a second registration replaces the first."""
        if callback is not None and self.happened:
            callback()
            return
        self._callback = callback

    def receive_directly(self, handler: Callable[[dict[str, Any]], None] | None) -> None:
        """Hand each ``websocket.receive`` event to ``handler``, synchronously, in the connection's read,
        while the app waits in ``receive()`` with nothing queued (so the order of events is the queue's);
        None: queue every event."""
        self._direct = handler if WS_DIRECT_RECEIVE else None

    def _app_waits(self) -> bool:
        """The app waits in ``receive()`` with nothing queued for it. hypercorn's put is its memory
        channel's bound ``send``; any other put answers no, and every event is queued."""
        channel = getattr(self.queue, "__self__", None)
        if not isinstance(channel, trio.MemorySendChannel):
            return False
        stats = channel.statistics()
        return stats.current_buffer_used == 0 and stats.tasks_waiting_receive > 0

    async def put(self, event: dict[str, Any]) -> None:
        kind = event["type"]
        if kind == "websocket.receive" and self._direct is not None and self._app_waits():
            self._direct(event)
            return
        if kind == "http.request":
            if not event.get("more_body", False):
                self.body_in = True
        elif kind in _DISCONNECTS and not self.happened:
            self.happened = True
            callback, self._callback = self._callback, None
            if callback is not None:
                callback()
        assert self.queue is not None
        await self.queue(event)


def app_queue_in(scope: dict[str, Any]) -> AppQueue | None:
    """The ``AppQueue`` of the request ``scope`` describes (None when its server is not this module's)."""
    return scope.get("extensions", {}).get(APP_QUEUE)


class NotifyingTaskGroup(TaskGroup):
    """hypercorn's per-connection task group whose requests carry an ``AppQueue`` (``APP_QUEUE``)."""

    async def spawn_app(self, app: Any, config: HypercornConfig, scope: Any,
                        send: Callable[[Any], Awaitable[None]]) -> Callable[[Any], Awaitable[None]]:
        notice = AppQueue()
        scope.setdefault("extensions", {})[APP_QUEUE] = notice  # before the app's task first runs
        notice.queue = await super().spawn_app(app, config, scope, send)
        return notice.put


def configure(hc: HypercornConfig, write_timeout: float | None) -> HypercornConfig:
    """Give ``hc``'s connections a write deadline of ``write_timeout`` seconds (None: none)."""
    hc.awaken_write_timeout = write_timeout  # type: ignore[attr-defined]
    return hc


class _Tagged:
    """The ASGI app wrapper of one connection: it adds the connection's ``Writes`` to every scope.

    Called, it returns the app's own coroutine (no frame of its own stays alive with each stream), and
    for hypercorn's ``ASGIWrapper`` (which only drops the two extra arguments hypercorn passes) that of
    the ASGI app inside it."""

    __slots__ = ("app", "asgi", "writes")

    def __init__(self, app: Callable[..., Any], writes: Writes) -> None:
        self.app = app
        self.asgi: Callable[..., Awaitable[None]] | None = app.app if isinstance(app, ASGIWrapper) else None
        self.writes = writes

    def __call__(self, scope: dict[str, Any], *args: Any) -> Awaitable[None]:
        scope.setdefault("extensions", {})[EXTENSION] = self.writes
        if self.asgi is not None:
            return self.asgi(scope, args[0], args[1])  # receive, send
        return self.app(scope, *args)


class WriteDeadlineServer(TCPServer):
    """hypercorn's ``TCPServer`` whose writes give up ``write_timeout`` seconds after bytes last moved."""

    def __init__(self, app: Any, config: HypercornConfig, *args: Any) -> None:
        self.writes = Writes()
        super().__init__(_Tagged(app, self.writes), config, *args)
        if OWN_SOCKET_IO:
            self.writes.write_now = self.write_now
        self.write_timeout: float | None = getattr(config, "awaken_write_timeout", None)
        #: no request is being served (hypercorn's last ``Updated``): only then may the keep-alive close it
        #: (``_initiate_server_close``)
        self.idle = True

    async def run(self) -> None:
        try:
            await super().run()
        finally:
            drop_connection(self)

    async def protocol_send(self, event: Any) -> None:
        if not isinstance(event, RawData):
            if isinstance(event, Updated):
                self.idle = event.idle  # before any wait: the idle task reads it
            # ``Closed`` (close the socket) and ``Updated`` (the idle timer) are bookkeeping that must
            # finish: they run in whichever task ended the request, which its app may cancel right then
            # (quart-trio cancels its request task once hypercorn queues ``http.disconnect``). A close
            # cut short left a connection neither closed nor read: its next request was never answered.
            with trio.CancelScope(shield=True):
                await super().protocol_send(event)
            return
        if self.write_timeout is None:
            await super().protocol_send(event)
            return
        data = event.data
        lock = self.send_lock
        if not lock.locked() and self._own_socket() is not None:
            # No write is under way: the socket takes these bytes now, with no scheduling point before
            # them (``trio.Lock`` yields even when it is free, and the run producing the stream got
            # the loop meanwhile, so the first frames waited behind the next ones: about 0.15 ms of a
            # WebSocket run's first delta). Held without a wait, so no other writer comes between.
            lock.acquire_nowait()
            try:
                await self._send_rest(data, self._write_at_once(data))
            finally:
                lock.release()
            return
        async with lock:
            await self._send_rest(data, self._write_at_once(data))

    async def _send_rest(self, data: bytes, taken: int) -> None:
        """What the socket did not take at once (``data[taken:]``), under the write deadline; the caller
        holds the send lock."""
        if taken == len(data):
            return
        # Shielded as hypercorn's own write (the app's cancellation must not cut a frame in two);
        # the scope's own deadline is not shielded from: it is the one way this write ends early.
        with trio.CancelScope(shield=True) as write:
            try:
                await self._send_all(data, write, taken)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                await self.protocol.handle(Closed())
                return
        if not write.cancelled_caught:
            return
        self.writes.timed_out = True
        log.info("closing a connection whose client read nothing for %g s", self.write_timeout)
        with trio.CancelScope(shield=True):
            await self.stream.aclose()
            await self.protocol.handle(Closed())

    async def _initiate_server_close(self) -> None:
        """hypercorn's keep-alive close (its idle task's end), but never under a request. A request that
        arrives as the keep-alive runs out stops the idle task (``Updated(idle=False)``) too late when the
        timeout has already woken it: hypercorn then closed the connection under the request it had just
        begun, whose run saw its client gone, and the client, with no response, sent the request again on
        a new connection (a browser does, for a POST on a reused connection): two runs for one request."""
        if self.idle:
            await super()._initiate_server_close()

    async def _read_data(self) -> None:
        """hypercorn's read loop with ``READ_SIZE`` reads; once the read side ended, the idle task is
        stopped (nothing more will arrive: the connection does not wait ``keep_alive_timeout`` to close).
        An HTTP/1.1 connection's h11 parser holds its reads as they came (``heldchunks``)."""
        hold_chunks(getattr(getattr(self.protocol, "protocol", None), "connection", None))
        socket = self._own_socket()
        timeout = self.config.read_timeout
        while True:
            try:
                if socket is not None and not timeout:
                    data = await _receive(socket)
                else:  # TLS, or a read deadline: trio's stream, as hypercorn reads
                    with trio.fail_after(timeout or math.inf):
                        data = await self.stream.receive_some(READ_SIZE)
            except (trio.ClosedResourceError, trio.BrokenResourceError, trio.TooSlowError):
                break
            if not (WS_OWN_READING and data and await wsread.deliver(self.protocol, data)):
                await self.protocol.handle(RawData(data))
            if not data:
                break
            data = b""  # the parser has what was read: it does not stay with the connection while it waits
        await self.protocol.handle(Closed())
        await self.idle_task.stop()

    def _own_socket(self) -> trio.socket.SocketType | None:
        """The plain socket this connection reads and writes itself (None: TLS, or ``OWN_SOCKET_IO`` off)."""
        return getattr(self.stream, "socket", None) if OWN_SOCKET_IO else None

    def write_now(self, data: bytes) -> int:
        """Write what the socket takes of ``data`` now, from synchronous code: how many bytes it took
        (0 for an error, which the next waiting write raises), or -1 when a write is under way (then
        nothing was written: the caller queues ``data`` behind it), as on a TLS stream, which only
        trio's writes take. hypercorn's own writes (a pong, a close) hold the send lock, so bytes written
        here never come between theirs."""
        if self.send_lock.locked() or self._own_socket() is None:
            return -1
        return self._write_at_once(data)

    def _write_at_once(self, data: bytes) -> int:
        """How much of ``data`` the socket took without waiting: all of it, but for a client that reads
        slower than the server writes. Only what is left needs a deadline: a cancel scope with one
        costs its creation and its entry in trio's deadline heap, where it stays, stale, until the heap
        is pruned (about a thousand writes later). An error, or a TLS stream, leaves it all to
        ``_send_all``, which raises what trio would."""
        socket = self._own_socket()
        if socket is None or not data:
            return 0
        try:
            return os.write(socket.fileno(), data)  # the socket is non-blocking (trio made it so)
        except OSError:
            return 0

    async def _send_all(self, data: bytes, write: trio.CancelScope, total: int = 0) -> None:
        """``stream.send_all(data[total:])``, the deadline of ``write`` pushed back whenever the socket
        takes bytes."""
        assert self.write_timeout is not None
        write.deadline = trio.current_time() + self.write_timeout
        socket = getattr(self.stream, "socket", None)
        if socket is None:  # TLS: the deadline covers the whole write
            await self.stream.send_all(data)
            return
        with memoryview(data) as view:
            while True:
                try:
                    with view[total:] as rest:
                        total += await socket.send(rest)
                except OSError as exc:
                    raise trio.BrokenResourceError(exc) from exc
                if total >= len(view):
                    return
                write.deadline = trio.current_time() + self.write_timeout  # bytes moved: a new deadline


async def _receive(socket: trio.socket.SocketType) -> bytes:
    """What ``SocketStream.receive_some(READ_SIZE)`` returns (b"" at the client's end), read from the
    socket itself: one scheduling point per read, as trio's, without the layers between (its error
    translation and conflict check, each a frame or a context manager that stays alive with every
    connection waiting for its next request, and, in hypercorn's loop, a ``fail_after`` with no deadline).

    The descriptor is asked for at each try, with no checkpoint before the read: a socket closed
    meanwhile has none (-1), and its number cannot be another connection's by then. A socket closed
    while this waits raises ``ClosedResourceError`` (trio's ``notify_closing``)."""
    waited = False
    while True:
        try:
            data: bytes | None = os.read(socket.fileno(), READ_SIZE)  # non-blocking (trio made it so)
        except BlockingIOError:
            data = None  # waited for below, not in this handler: the exception would live as long as the wait
        except OSError as exc:
            raise trio.BrokenResourceError(exc) from exc
        if data is None:
            await trio.lowlevel.wait_readable(socket)  # the scheduling point
            waited = True
            continue
        if not waited:  # it read at once: the scheduling point, after the read as trio's
            await trio.lowlevel.cancel_shielded_checkpoint()
        return data


def drop_connection(server: TCPServer) -> None:
    """Let go of an ended connection's objects: the connection (``server``), its protocol wrapper, its
    HTTP/1.1 or HTTP/2 protocol and the request or WebSocket stream the protocol was on.

    They refer to one another (each ``send`` is the next one's bound method, the socket and the task
    group are shared), so once ``run`` returned they are one reference cycle, and reference counting
    frees none of them: they waited for the cycle collector's full collection, which is rare under
    ``GC_THRESHOLDS`` (awaken/cli.py): about 60 objects and 10 KB a connection, 5 MB a burst of a few
    hundred clients (bench/SLOWCLIENTS.md, finding 13). Nothing of the connection runs any more when
    ``run`` returns (its task group has ended), so their references are dropped here and each object is
    freed at once. Shared objects (the app, the config, the worker context) are only let go of."""
    writes = getattr(server, "writes", None)
    if isinstance(writes, Writes):
        writes.write_now = None  # a bound method of the connection, in the scopes of its requests
    wrapper = getattr(server, "protocol", None)
    inner = getattr(wrapper, "protocol", None)
    for obj in (getattr(inner, "stream", None), inner, wrapper, server):
        if obj is not None and hasattr(obj, "__dict__"):
            vars(obj).clear()


def install() -> None:
    """Make ``hypercorn.trio.serve`` build ``WriteDeadlineServer`` connections, whose requests carry a
    ``AppQueue`` (``NotifyingTaskGroup``), and accept them in batches (``awaken.runtime.accept``);
    idempotent."""
    hypercorn_run.TCPServer = WriteDeadlineServer  # type: ignore[misc]
    hypercorn_tcp_server.TaskGroup = NotifyingTaskGroup  # type: ignore[misc]
    accept.install()
