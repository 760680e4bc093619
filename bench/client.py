"""The load generator's clients: a minimal HTTP/1.1 SSE client on raw trio sockets, and a WebSocket client.

The HTTP client does just what the measurements need, with as little Python per byte as possible:
one request, a status line and headers, a chunked (or length-delimited, or close-delimited) body,
split into SSE frames on ``\\n\\n``. A connection is reused for the next request (keep-alive) when
the body ended cleanly. Every socket read is timestamped once; a frame's arrival time is the time of
the read that completed it.

``Endpoint`` names one protocol over one transport at one URL; ``run_stream`` drives one run on it
and returns a ``StreamResult`` (time to first byte, to first text delta, per-delta arrival times when
asked, event counts, error).
"""

from __future__ import annotations

import math
import ssl as ssl_module
import time
import uuid
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

import orjson
import trio

clock = time.perf_counter

#: what marks a text delta, an in-band error, and (on WebSocket) the end of a run, per protocol
DELTA_MARK = {"agui": b'"TEXT_MESSAGE_CONTENT"', "aisdk": b'"text-delta"'}
ERROR_MARK = {"agui": b'"RUN_ERROR"', "aisdk": b'"type":"error"'}
WS_TERMINAL = {"agui": ('"RUN_FINISHED"', '"RUN_ERROR"'), "aisdk": ('"type":"finish"',)}


class ClientError(Exception):
    """The server answered something the bench cannot use (non-200, broken framing, early close)."""


@dataclass(frozen=True)
class Endpoint:
    """One protocol (``agui`` | ``aisdk``) over one transport (``sse`` | ``ws``) at one URL."""

    subject: str
    protocol: str
    transport: str
    url: str
    #: the AI SDK over WebSocket: whether a ``[DONE]`` message follows ``finish`` (found by the probe)
    ws_done: bool = False

    @property
    def channel(self) -> str:
        return f"{self.protocol}/{self.transport}"

    @property
    def label(self) -> str:
        return f"{self.subject} {self.channel}"

    def with_path(self, path: str) -> Endpoint:
        parts = urlsplit(self.url)
        return Endpoint(self.subject, self.protocol, self.transport, f"{parts.scheme}://{parts.netloc}{path}",
                        self.ws_done)


@dataclass
class StreamResult:
    ok: bool = False
    error: str | None = None
    t_send: float = 0.0
    t_first_byte: float = math.nan
    t_first_delta: float = math.nan
    t_end: float = math.nan
    events: int = 0
    deltas: int = 0
    delta_times: list[float] | None = None

    @property
    def ttfb_ms(self) -> float:
        return (self.t_first_byte - self.t_send) * 1000.0

    @property
    def first_delta_ms(self) -> float:
        return (self.t_first_delta - self.t_send) * 1000.0

    @property
    def duration(self) -> float:
        return self.t_end - self.t_send


# ------------------------------------------------------------------------------------------------
# request bodies


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex}"


def request_body(protocol: str, text: str, *, agent: str | None = None) -> bytes:
    """A fresh run's body: a new thread id and unique message ids every time."""
    thread_id = new_id("bench-t")
    if protocol == "agui":
        body: dict[str, Any] = {
            "threadId": thread_id, "runId": new_id("bench-r"),
            "messages": [{"id": new_id("bench-u"), "role": "user", "content": text}],
            "tools": [], "context": [], "forwardedProps": {}, "state": {},
        }
    else:
        body = {
            "id": thread_id, "threadId": thread_id,
            "messages": [{"id": new_id("bench-u"), "role": "user", "parts": [{"type": "text", "text": text}]}],
            "trigger": "submit-message",
        }
    if agent and protocol == "aisdk":
        body["agentId"] = agent
    return orjson.dumps(body)


def script(words: int, delay_ms: float = 0.0) -> str:
    return f"/words {words}" + (f"\n/delay {delay_ms:g}" if delay_ms else "")


# ------------------------------------------------------------------------------------------------
# HTTP/1.1 over raw trio sockets

_RECV = 65536


class HttpConnection:
    """One HTTP/1.1 connection; ``post_sse`` may be called again while ``reusable``."""

    def __init__(self, host: str, port: int, *, tls: bool = False, server_hostname: str | None = None) -> None:
        self.host = host
        self.port = port
        self.tls = tls
        self.server_hostname = server_hostname or host
        self.stream: trio.abc.Stream | None = None
        self.buf = b""
        self.pos = 0
        self.t_recv = 0.0
        self.reusable = False

    @classmethod
    def for_url(cls, url: str) -> HttpConnection:
        parts = urlsplit(url)
        tls = parts.scheme == "https"
        return cls(parts.hostname or "127.0.0.1", parts.port or (443 if tls else 80), tls=tls)

    async def connect(self) -> None:
        if self.tls:
            ctx = ssl_module.create_default_context()
            self.stream = await trio.open_ssl_over_tcp_stream(self.host, self.port, ssl_context=ctx,
                                                              https_compatible=True)
        else:
            self.stream = await trio.open_tcp_stream(self.host, self.port)  # TCP_NODELAY is trio's default
        self.buf = b""
        self.pos = 0
        self.reusable = True

    async def aclose(self) -> None:
        self.reusable = False
        if self.stream is not None:
            stream, self.stream = self.stream, None
            with trio.move_on_after(1) as scope:
                scope.shield = True
                try:
                    await stream.aclose()
                except (trio.BrokenResourceError, trio.ClosedResourceError, OSError):
                    pass

    async def _recv(self) -> None:
        assert self.stream is not None
        data = await self.stream.receive_some(_RECV)
        self.t_recv = clock()
        if not data:
            raise ClientError("the server closed the connection")
        if self.pos >= len(self.buf):
            self.buf = data
        else:
            self.buf = self.buf[self.pos:] + data
        self.pos = 0

    async def _line(self) -> bytes:
        while True:
            i = self.buf.find(b"\r\n", self.pos)
            if i >= 0:
                line = self.buf[self.pos:i]
                self.pos = i + 2
                return line
            await self._recv()

    async def get_status(self, path: str) -> tuple[int, bytes]:
        """A plain GET (health checks): status and body."""
        if self.stream is None or not self.reusable:
            await self.connect()
        host = f"{self.host}:{self.port}".encode()
        assert self.stream is not None
        await self.stream.send_all(b"GET " + path.encode() + b" HTTP/1.1\r\nHost: " + host + b"\r\n\r\n")
        status, headers = await self._head()
        chunks: list[bytes] = []
        await self._body(headers, chunks.append)
        return status, b"".join(chunks)

    async def _head(self) -> tuple[int, dict[bytes, bytes]]:
        status_line = await self._line()
        try:
            status = int(status_line.split(b" ", 2)[1])
        except (IndexError, ValueError):
            raise ClientError(f"bad status line {status_line[:80]!r}") from None
        headers: dict[bytes, bytes] = {}
        while True:
            line = await self._line()
            if not line:
                return status, headers
            name, _, value = line.partition(b":")
            headers[name.strip().lower()] = value.strip()

    async def _body(self, headers: dict[bytes, bytes], on_data: Any) -> None:
        """Feed the body to ``on_data(bytes)``; afterwards ``t_recv`` is when its end arrived."""
        if headers.get(b"connection", b"").lower() == b"close":
            self.reusable = False
        if b"chunked" in headers.get(b"transfer-encoding", b"").lower():
            while True:
                line = await self._line()
                size = int(line.split(b";", 1)[0], 16)
                if size == 0:
                    while await self._line():  # trailers, then the empty line
                        pass
                    return
                end = self.pos + size
                while len(self.buf) < end + 2:
                    await self._recv()
                    end = self.pos + size
                on_data(self.buf[self.pos:end])
                self.pos = end + 2
        elif b"content-length" in headers:
            remaining = int(headers[b"content-length"])
            while remaining:
                if self.pos >= len(self.buf):
                    await self._recv()
                take = min(remaining, len(self.buf) - self.pos)
                on_data(self.buf[self.pos:self.pos + take])
                self.pos += take
                remaining -= take
        else:  # delimited by close
            self.reusable = False
            while True:
                if self.pos < len(self.buf):
                    on_data(self.buf[self.pos:])
                    self.pos = len(self.buf)
                try:
                    await self._recv()
                except ClientError:
                    return

    async def post_sse(self, path: str, body: bytes, protocol: str, result: StreamResult,
                       on_first_delta: Any = None, content_type: bytes = b"application/json") -> None:
        """POST ``body`` and read the SSE response into ``result`` (``t_send`` is set by the caller)."""
        assert self.stream is not None
        host = f"{self.host}:{self.port}".encode()
        head = (b"POST " + path.encode() + b" HTTP/1.1\r\nHost: " + host
                + b"\r\nContent-Type: " + content_type + b"\r\nAccept: text/event-stream\r\nContent-Length: "
                + str(len(body)).encode() + b"\r\n\r\n")
        self.reusable = False
        if len(body) < 64 * 1024:
            await self.stream.send_all(head + body)
        else:  # not joined: copying a large body (a 684 KB replay) is the client's cost, inside the timed window
            await self.stream.send_all(head)
            await self.stream.send_all(body)
        if self.pos >= len(self.buf):
            await self._recv()
        result.t_first_byte = self.t_recv
        status, headers = await self._head()
        if status != 200:
            chunks: list[bytes] = []
            await self._body(headers, chunks.append)
            raise ClientError(f"HTTP {status}: {b''.join(chunks)[:200].decode('utf-8', 'replace')}")
        self.reusable = True
        delta_mark = DELTA_MARK[protocol]
        error_mark = ERROR_MARK[protocol]
        times = result.delta_times
        pending = b""

        def on_data(data: bytes) -> None:
            nonlocal pending
            if pending:
                data = pending + data
            frames = data.split(b"\n\n")
            pending = frames.pop()
            for frame in frames:
                if frame.startswith(b"id:"):
                    frame = frame.partition(b"\n")[2]  # the event's position line
                if not frame.startswith(b"data:"):
                    continue  # keep-alive comments
                result.events += 1
                if delta_mark in frame:
                    result.deltas += 1
                    if result.deltas == 1:
                        result.t_first_delta = self.t_recv
                        if on_first_delta is not None:
                            on_first_delta()
                    if times is not None:
                        times.append(self.t_recv)
                elif error_mark in frame and result.error is None:
                    result.error = "in-band error: " + frame[:200].decode("utf-8", "replace")

        await self._body(headers, on_data)
        result.t_end = self.t_recv


# ------------------------------------------------------------------------------------------------
# one run on any endpoint


class Session:
    """A client for one endpoint that can run streams one after another (keep-alive) or fresh each time."""

    def __init__(self, endpoint: Endpoint, *, fresh: bool = False, nursery: trio.Nursery | None = None) -> None:
        if endpoint.transport == "ws" and nursery is None:
            raise ValueError("a WebSocket session needs a nursery for its reader task")
        self.endpoint = endpoint
        self.fresh = fresh
        self.nursery = nursery
        self.http: HttpConnection | None = None
        self.ws: Any = None
        self._ws_done = trio.Event()
        parts = urlsplit(endpoint.url)
        self.path = parts.path or "/"
        if parts.query:
            self.path += "?" + parts.query

    async def open(self) -> None:
        """Connect now (so a later run measures streaming, not connecting)."""
        if self.endpoint.transport == "sse":
            self.http = HttpConnection.for_url(self.endpoint.url)
            await self.http.connect()
        else:
            await self._ws_open()

    async def _ws_open(self) -> None:
        assert self.nursery is not None
        self.ws, self._ws_done = await self.nursery.start(self._ws_hold)

    async def _ws_hold(self, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Own one WebSocket connection in its own task, so a failing connection fails only its runs."""
        import trio_websocket

        ctx = ssl_module.create_default_context() if self.endpoint.url.startswith("wss:") else None
        done = trio.Event()
        started = False
        try:
            async with trio_websocket.open_websocket_url(
                self.endpoint.url, ctx, message_queue_size=0, max_message_size=16 * 1024 * 1024,
                receive_buffer_size=_RECV, connect_timeout=10, disconnect_timeout=2,
            ) as ws:
                task_status.started((ws, done))
                started = True
                await done.wait()
        except Exception:  # once started, a broken socket is the run's error, not the nursery's
            if not started:
                raise

    async def aclose(self) -> None:
        if self.http is not None:
            await self.http.aclose()
            self.http = None
        if self.ws is not None:
            self.ws = None
            self._ws_done.set()
    async def run(self, body: bytes, *, times: bool = False, limit_s: float = 60.0,
                  on_first_delta: Any = None, t_send: float | None = None) -> StreamResult:
        """One run. In fresh mode the clock starts before the connection is opened."""
        result = StreamResult(delta_times=[] if times else None)
        result.t_send = clock() if t_send is None else t_send
        try:
            with trio.fail_after(limit_s):
                if self.endpoint.transport == "sse":
                    if self.fresh or self.http is None or not self.http.reusable:
                        if self.http is not None:
                            await self.http.aclose()
                        self.http = HttpConnection.for_url(self.endpoint.url)
                        await self.http.connect()
                    await self.http.post_sse(self.path, body, self.endpoint.protocol, result, on_first_delta)
                else:
                    if self.fresh or self.ws is None:
                        await self.aclose()
                        await self._ws_open()
                    await self._ws_run(body, result, on_first_delta)
            result.ok = result.error is None
        except trio.TooSlowError:
            result.error = f"timed out after {limit_s:g} s"
        except (ClientError, OSError, trio.BrokenResourceError, trio.ClosedResourceError) as exc:
            result.error = f"{type(exc).__name__}: {exc}"
        except Exception as exc:  # noqa: BLE001 - trio_websocket's ConnectionClosed and handshake errors
            result.error = f"{type(exc).__name__}: {exc}"
        if not result.ok:
            await self.aclose()
        elif self.fresh:
            await self.aclose()
        return result

    async def _ws_run(self, body: bytes, result: StreamResult, on_first_delta: Any) -> None:
        ws = self.ws
        protocol = self.endpoint.protocol
        delta_mark = DELTA_MARK[protocol].decode()
        error_mark = ERROR_MARK[protocol].decode()
        terminal = WS_TERMINAL[protocol]
        times = result.delta_times
        await ws.send_message(body.decode())
        while True:
            message = await ws.get_message()
            now = clock()
            if isinstance(message, bytes):
                message = message.decode("utf-8", "replace")
            if result.events == 0:
                result.t_first_byte = now
            if message == "[DONE]":
                continue  # a late marker of the previous run
            result.events += 1
            if delta_mark in message:
                result.deltas += 1
                if result.deltas == 1:
                    result.t_first_delta = now
                    if on_first_delta is not None:
                        on_first_delta()
                if times is not None:
                    times.append(now)
                continue
            if error_mark in message and result.error is None:
                result.error = "in-band error: " + message[:200]
            if any(mark in message for mark in terminal):
                result.t_end = now
                if self.endpoint.ws_done:
                    with trio.move_on_after(2):
                        while await ws.get_message() != "[DONE]":
                            pass
                return


async def probe(endpoint: Endpoint, *, limit_s: float = 5.0) -> tuple[bool, str, Endpoint]:
    """Whether ``endpoint`` streams a scripted answer; for the AI SDK over WebSocket, also whether a
    ``[DONE]`` message follows ``finish``."""
    async with trio.open_nursery() as nursery:
        try:
            return await _probe(Session(endpoint, nursery=nursery), endpoint, limit_s)
        finally:
            nursery.cancel_scope.cancel()


async def _probe(session: Session, endpoint: Endpoint, limit_s: float) -> tuple[bool, str, Endpoint]:
    try:
        with trio.move_on_after(limit_s + 2):
            try:
                await session.open()
            except Exception as exc:  # noqa: BLE001 - any failure to connect means "not available"
                return False, f"cannot connect: {type(exc).__name__}: {exc}", endpoint
            result = await session.run(request_body(endpoint.protocol, script(3)), limit_s=limit_s)
            if not result.ok:
                return False, result.error or "no answer", endpoint
            if result.deltas != 3:
                return False, f"expected 3 text deltas for '/words 3', got {result.deltas}", endpoint
            if endpoint.transport == "ws" and endpoint.protocol == "aisdk":
                with trio.move_on_after(0.3):
                    if await session.ws.get_message() == "[DONE]":
                        endpoint = Endpoint(endpoint.subject, endpoint.protocol, endpoint.transport,
                                            endpoint.url, ws_done=True)
            return True, "ok", endpoint
        return False, "probe timed out", endpoint
    finally:
        await session.aclose()


@dataclass
class Barrier:
    """Releases every waiting task at once; ``t`` is when it was released."""

    event: trio.Event = field(default_factory=trio.Event)
    t: float = 0.0

    def release(self) -> None:
        self.t = clock()
        self.event.set()
