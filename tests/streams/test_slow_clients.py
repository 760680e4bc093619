"""Slow or silent clients are bounded in time and memory (issue 12, must-be-true 5; findings 7 and 10).

Each test drives a live server with a raw socket, the way a misbehaving client would: one that stops
reading its stream, one that sends half a body and stalls, one that uploads a chunked body past the
limit, several that hold large bodies half-sent. Runs stay open with the scripted model's ``/hold``;
the server's own deadlines (``server.write_timeout_seconds``, ``server.body_timeout_seconds``) are set
to one second so a test waits for them, bounded by ``trio.fail_after``, never by a guess.
"""

from __future__ import annotations

import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import orjson
import pytest
import trio

from awaken.engine.state import RunStatus
from awaken.streams.exchange import MAX_BODY
from bench.slowclients import read_to_eof
from tests.builders import agui_body, default_config_data, live_server, parse_sse, release
from tests.builders import make_config as _make_config

#: the deadlines the tests give the server, in seconds
DEADLINE = 1.0


def make_config(tmp_path: Any, **server: Any) -> Any:
    table = default_config_data()["server"] | {"write_timeout_seconds": DEADLINE,
                                                "body_timeout_seconds": DEADLINE} | server
    return _make_config(tmp_path, server=table)


class Clients:
    """Raw TCP connections to one live server, closed before the server stops (a server that cannot
    stop while a client holds a write would otherwise wait for a client that waits for it)."""

    def __init__(self, server: Any) -> None:
        self.server = server
        self.opened: list[trio.SocketStream] = []

    async def connect(self, *, receive_buffer: int | None = None) -> trio.SocketStream:
        """A connection (with a small receive buffer: a client that reads little)."""
        host, port = self.server.base_url.removeprefix("http://").split(":")
        sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
        if receive_buffer is not None:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        try:
            await sock.connect((host, int(port)))
        except BaseException:
            sock.close()
            raise
        self.opened.append(trio.SocketStream(sock))
        return self.opened[-1]

    def server_holds(self, stream: trio.SocketStream) -> bool:
        """Whether the server (this process) still has a file descriptor for ``stream``'s connection."""
        server_port = int(self.server.base_url.rsplit(":", 1)[1])
        client_port = stream.socket.getsockname()[1]
        inodes = set()
        for line in Path("/proc/net/tcp").read_text().splitlines()[1:]:
            fields = line.split()
            local, remote, inode = fields[1], fields[2], fields[9]
            if int(local.split(":")[1], 16) == server_port and int(remote.split(":")[1], 16) == client_port:
                inodes.add(f"socket:[{inode}]")
        for fd in Path("/proc/self/fd").iterdir():
            try:
                if os.readlink(fd) in inodes:
                    return True
            except OSError:
                continue  # closed meanwhile
        return False

    async def released(self, stream: trio.SocketStream) -> None:
        """Wait until the server closed its end of ``stream`` (its file descriptor is gone)."""
        while self.server_holds(stream):
            await trio.sleep(0.05)


@asynccontextmanager
async def serving(config: Any) -> AsyncIterator[tuple[Any, Clients]]:
    async with live_server(config) as server:
        clients = Clients(server)
        try:
            yield server, clients
        finally:
            with trio.CancelScope(shield=True):
                for stream in clients.opened:
                    await stream.aclose()


def head(path: str, length: int | None = None, *, chunked: bool = False) -> bytes:
    lines = [f"POST {path} HTTP/1.1", "host: localhost", "content-type: application/json",
             "accept: text/event-stream"]
    if length is not None:
        lines.append(f"content-length: {length}")
    if chunked:
        lines.append("transfer-encoding: chunked")
    return ("\r\n".join(lines) + "\r\n\r\n").encode()


def request(path: str, body: bytes) -> bytes:
    return head(path, len(body)) + body


def split_response(raw: bytes) -> tuple[int, dict[str, str], bytes]:
    head_bytes, _, body = raw.partition(b"\r\n\r\n")
    lines = head_bytes.decode("latin-1").split("\r\n")
    status = int(lines[0].split(" ")[1])
    headers = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        headers[name.strip().lower()] = value.strip()
    return status, headers, dechunk(body) if headers.get("transfer-encoding") == "chunked" else body


def dechunk(body: bytes) -> bytes:
    out = bytearray()
    while body:
        size_line, _, rest = body.partition(b"\r\n")
        size = int(size_line, 16)
        if size == 0:
            break
        out += rest[:size]
        body = rest[size + 2:]
    return bytes(out)


async def settled_run(ctx: Any, run_id: str) -> Any:
    """The run's record once it is no longer ``running`` (the ledger is read until then)."""
    while True:
        record = await ctx.ledger.get_run(run_id)
        if record is not None and record.status != RunStatus.RUNNING:
            return record
        await trio.sleep(0.05)


def big_frame_run(thread: str, *, hold: str | None = None) -> bytes:
    """A run whose first delta is an 8 MB reasoning frame (more than the socket buffers hold)."""
    text = ("" if hold is None else f"/hold {hold}\n") + "/think " + "a" * 8_000_000 + " end\n/words 3"
    return orjson.dumps(agui_body(thread, f"{thread}-r", [{"id": f"{thread}-m", "role": "user", "content": text}]))


@pytest.mark.timeout(90)
async def test_a_client_that_stops_reading_is_dropped_after_the_write_timeout_and_its_run_interrupted_too_slow(
        tmp_path):
    # a buffer limit far above the frame: only the write deadline can stop this stream
    config = make_config(tmp_path, max_buffered_bytes=64 * 1024 * 1024)
    async with serving(config) as (server, clients):
        stream = await clients.connect(receive_buffer=4096)
        await stream.send_all(request("/v1/ag-ui", big_frame_run("slow", hold="slow")))
        with trio.fail_after(DEADLINE + 20):
            record = await settled_run(server.ctx, "slow-r")  # held: only the dropped client can end it
        assert (record.status, record.cause) == (RunStatus.INTERRUPTED, "client_too_slow")
        with trio.fail_after(20):
            await clients.released(stream)
            raw = await read_to_eof(stream)  # what the kernel still held, then the server's close
        assert b"RUN_FINISHED" not in raw and b"RUN_ERROR" not in raw
        await release(server, "slow")


@pytest.mark.timeout(90)
async def test_a_websocket_client_that_stops_reading_is_dropped_after_the_write_timeout_its_run_too_slow(tmp_path):
    config = make_config(tmp_path, max_buffered_bytes=64 * 1024 * 1024)
    async with serving(config) as (server, clients):
        stream = await clients.connect(receive_buffer=4096)
        await stream.send_all(b"GET /v1/ag-ui/ws HTTP/1.1\r\nhost: localhost\r\nupgrade: websocket\r\nconnection: Upgrade\r\n"
                              b"sec-websocket-key: dGhlIHNhbXBsZSBub25jZQ==\r\nsec-websocket-version: 13\r\n\r\n")
        with trio.fail_after(10):
            handshake = await stream.receive_some(4096)
        assert handshake.startswith(b"HTTP/1.1 101")
        text = big_frame_run("ws-slow", hold="ws-slow")
        # one masked text frame; a zero masking key leaves the payload as it is
        await stream.send_all(b"\x81\xff" + len(text).to_bytes(8, "big") + b"\0\0\0\0" + text)
        with trio.fail_after(DEADLINE + 20):
            record = await settled_run(server.ctx, "ws-slow-r")  # held: only the dropped client can end it
        assert (record.status, record.cause) == (RunStatus.INTERRUPTED, "client_too_slow")
        with trio.fail_after(20):
            await clients.released(stream)
        await release(server, "ws-slow")


@pytest.mark.timeout(90)
async def test_a_client_that_stops_reading_is_dropped_after_its_run_was_interrupted_too_slow(tmp_path):
    """Finding 7: a non-reading client kept its socket and megabytes after its run was interrupted, until it left."""
    async with serving(make_config(tmp_path)) as (server, clients):
        stream = await clients.connect(receive_buffer=4096)
        await stream.send_all(request("/v1/ag-ui", orjson.dumps(agui_body(
            "silent", "silent-r", [{"id": "silent-m", "role": "user", "content": "/words 50000"}]))))
        with trio.fail_after(20):  # ~7 MB of frames: more than the 4 MiB the server queues for a reader
            record = await settled_run(server.ctx, "silent-r")
        assert (record.status, record.cause) == (RunStatus.INTERRUPTED, "client_too_slow")
        assert server.ctx.app.active("silent") is None
        with trio.fail_after(DEADLINE + 20):
            await clients.released(stream)  # the client still reads nothing: the server let go by itself
        with trio.fail_after(20):
            raw = await read_to_eof(stream)
        assert raw.startswith(b"HTTP/1.1 200") and b"RUN_FINISHED" not in raw


@pytest.mark.timeout(90)
async def test_a_client_that_stops_reading_is_dropped_after_its_run_completed(tmp_path):
    """The run ended well (an 8 MB frame, queued whole) but its reader stopped: the connection is dropped too."""
    async with serving(make_config(tmp_path)) as (server, clients):
        stream = await clients.connect(receive_buffer=4096)
        await stream.send_all(request("/v1/ag-ui", big_frame_run("ended")))
        with trio.fail_after(20):
            record = await settled_run(server.ctx, "ended-r")
        assert record.status == RunStatus.COMPLETED  # the run did not wait for its reader
        with trio.fail_after(DEADLINE + 20):
            await clients.released(stream)
        with trio.fail_after(20):
            raw = await read_to_eof(stream)
        assert raw.startswith(b"HTTP/1.1 200")
        assert b"RUN_FINISHED" not in raw  # cut off where the client stopped: the rest was dropped


@pytest.mark.timeout(60)
async def test_a_half_sent_body_is_answered_408_body_timeout_and_its_connection_closed(tmp_path):
    async with serving(make_config(tmp_path)) as (server, clients):
        for path in ("/v1/ag-ui", "/v1/ai-sdk/chat", "/v1/copilotkit"):
            stream = await clients.connect()
            await stream.send_all(head(path, 1000) + b'{"threadId": "half", "messages": [')  # ... then nothing
            with trio.fail_after(DEADLINE + 10):
                raw = await read_to_eof(stream)
            status, headers, body = split_response(raw)
            assert status == 408, raw
            assert headers["connection"] == "close"
            assert orjson.loads(body)["error"]["code"] == "BODY_TIMEOUT"


@pytest.mark.timeout(60)
async def test_a_trickled_body_is_cut_off_at_the_body_timeout(tmp_path):
    """The deadline covers the whole body, not the gap between bytes: a byte every 0.2 s does not keep it open."""
    async with serving(make_config(tmp_path)) as (server, clients):
        stream = await clients.connect()
        await stream.send_all(head("/v1/ag-ui", 1000))
        with trio.fail_after(DEADLINE + 10):
            async with trio.open_nursery() as nursery:
                async def trickle() -> None:
                    try:
                        for _ in range(200):
                            await stream.send_all(b" ")
                            await trio.sleep(0.2)
                    except trio.BrokenResourceError:
                        pass  # the server closed the connection: what the test waits for

                nursery.start_soon(trickle)
                raw = await read_to_eof(stream)
                nursery.cancel_scope.cancel()
        status, _, body = split_response(raw)
        assert status == 408 and orjson.loads(body)["error"]["code"] == "BODY_TIMEOUT"


async def send_chunked_past_the_limit(stream: trio.SocketStream, path: str) -> None:
    """A chunked upload (no Content-Length) one byte past ``MAX_BODY``; no final chunk: it stalls there."""
    await stream.send_all(head(path, chunked=True))
    piece = b" " * (1 << 20)
    for _ in range(MAX_BODY // len(piece)):
        await stream.send_all(b"%x\r\n" % len(piece) + piece + b"\r\n")
    await stream.send_all(b"1\r\n \r\n")


@pytest.mark.timeout(60)
async def test_a_chunked_body_over_the_limit_is_refused_as_it_passes_the_limit_and_the_connection_closed(tmp_path):
    """Finding 10: a body without Content-Length was read in full before BODY_TOO_LARGE."""
    async with serving(make_config(tmp_path, body_timeout_seconds=600.0)) as (server, clients):
        stream = await clients.connect()
        await send_chunked_past_the_limit(stream, "/v1/ag-ui")
        with trio.fail_after(20):
            raw = await read_to_eof(stream)
        status, headers, body = split_response(raw)
        assert status == 200 and headers["connection"] == "close"
        events = parse_sse(body)
        assert [e["type"] for e in events] == ["RUN_ERROR"]
        assert events[-1]["code"] == "BODY_TOO_LARGE"


@pytest.mark.timeout(60)
async def test_copilotkit_refuses_a_chunked_body_over_the_limit_413_as_it_passes_the_limit(tmp_path):
    async with serving(make_config(tmp_path, body_timeout_seconds=600.0)) as (server, clients):
        stream = await clients.connect()
        await send_chunked_past_the_limit(stream, "/v1/copilotkit")
        with trio.fail_after(20):
            raw = await read_to_eof(stream)
        status, headers, body = split_response(raw)
        assert status == 413 and headers["connection"] == "close"
        assert orjson.loads(body)["error"] == "invalid_request"


@pytest.mark.timeout(60)
async def test_large_bodies_beyond_max_large_bodies_are_refused_503_with_retry_after(tmp_path):
    """Finding 10: 8 concurrent 30 MB bodies were all read and parsed at once (+843 MB kept)."""
    config = make_config(tmp_path, max_large_bodies=2, body_timeout_seconds=600.0)
    async with serving(config) as (server, clients):
        large = orjson.dumps(agui_body("big", "big-r", [{"id": "big-m", "role": "user", "content": "x" * 400_000}]))
        holders = []
        for _ in range(2):  # two large bodies, half sent: their slots stay taken
            stream = await clients.connect()
            await stream.send_all(head("/v1/ag-ui", len(large)) + large[:300_000])
            holders.append(stream)
        with trio.fail_after(10):
            while server.ctx.large_bodies.in_flight < 2:
                await trio.sleep(0.02)
        for path in ("/v1/ag-ui", "/v1/ai-sdk/chat", "/v1/copilotkit"):
            third = await clients.connect()
            await third.send_all(head(path, len(large)))  # refused from its head: the body is never read
            with trio.fail_after(10):
                status, headers, body = split_response(await read_to_eof(third))
            assert (status, headers.get("retry-after"), headers.get("connection")) == (503, "1", "close")
            assert orjson.loads(body)["error"]["code"] == "TOO_MANY_LARGE_BODIES"
        # a small body is not held back by the large ones
        small = await clients.connect()
        await small.send_all(request("/v1/ag-ui", orjson.dumps(
            agui_body("small", "small-r", [{"id": "small-m", "role": "user", "content": "hi"}]))))
        with trio.fail_after(10):
            raw = await small.receive_some(1 << 16)
        assert raw.startswith(b"HTTP/1.1 200")
        # one large body arrives in full: its slot is free again once it is parsed, and a new one is served
        await holders[0].send_all(large[300_000:])
        with trio.fail_after(10):
            while server.ctx.large_bodies.in_flight > 1:
                await trio.sleep(0.02)
        fourth = await clients.connect()
        await fourth.send_all(request("/v1/ag-ui", orjson.dumps(
            agui_body("big2", "big2-r", [{"id": "big2-m", "role": "user", "content": "x" * 400_000}]))))
        with trio.fail_after(10):
            raw = await fourth.receive_some(1 << 16)
        assert raw.startswith(b"HTTP/1.1 200")
