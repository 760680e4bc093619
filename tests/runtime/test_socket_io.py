"""A connection's own socket reads and writes (``awaken/runtime/tcp.py``): a read returns what trio's
``SocketStream.receive_some`` would (the bytes that arrived, b"" at the client's end) and raises what it
would (``BrokenResourceError`` for a reset, ``ClosedResourceError`` for a socket closed while the read
waits); a write the socket takes at once is all taken, and one it cannot take is left to the write that
waits under the deadline. Two properties hold them to trio's own stream (``OWN_SOCKET_IO = False``): the
bytes read from, and written through a connection to, a socket are the same either way.
"""

from __future__ import annotations

import socket as stdlib_socket
from typing import Any

import pytest
import trio
import trio.testing
from hypercorn.events import RawData
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.runtime import tcp
from awaken.runtime.tcp import READ_SIZE, WriteDeadlineServer, Writes, _receive


async def test_a_read_returns_what_has_arrived():
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        await theirs.send(b"GET / HTTP/1.1\r\n")
        assert await _receive(ours) == b"GET / HTTP/1.1\r\n"


async def test_a_read_waits_for_bytes_and_returns_them():
    ours, theirs = trio.socket.socketpair()
    got: list[bytes] = []
    with ours, theirs:
        async with trio.open_nursery() as nursery:
            async def read() -> None:
                got.append(await _receive(ours))

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            assert got == []
            await theirs.send(b"late")
    assert got == [b"late"]


async def test_a_read_is_at_most_read_size():
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        theirs.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 4 * READ_SIZE)
        ours.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_RCVBUF, 4 * READ_SIZE)
        payload = bytes(range(256)) * (READ_SIZE // 128)  # two reads' worth
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_send_all, theirs, payload)
            received = b""
            while len(received) < len(payload):
                chunk = await _receive(ours)
                assert 0 < len(chunk) <= READ_SIZE
                received += chunk
        assert received == payload


async def _send_all(sock: trio.socket.SocketType, data: bytes) -> None:
    with memoryview(data) as view:
        sent = 0
        while sent < len(view):
            sent += await sock.send(view[sent:])


async def test_the_clients_end_reads_as_empty():
    ours, theirs = trio.socket.socketpair()
    with ours:
        theirs.close()
        assert await _receive(ours) == b""


async def test_a_reset_is_a_broken_resource():
    listener = trio.socket.socket()
    with listener:
        await listener.bind(("127.0.0.1", 0))
        listener.listen(1)
        client = trio.socket.socket()
        with client:
            await client.connect(listener.getsockname())
            server_side, _ = await listener.accept()
            with server_side:
                await client.send(b"x")
                # unread bytes at close make the kernel send a reset
                client.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
                client.close()
                await trio.lowlevel.wait_readable(server_side)  # the reset has arrived
                with pytest.raises(trio.BrokenResourceError):
                    while True:
                        if await _receive(server_side) == b"":
                            raise AssertionError("a reset read as the client's end")


async def test_a_socket_closed_while_a_read_waits_ends_the_read():
    ours, theirs = trio.socket.socketpair()
    with theirs:
        async with trio.open_nursery() as nursery:
            raised: list[type] = []

            async def read() -> None:
                try:
                    await _receive(ours)
                except trio.ClosedResourceError as exc:
                    raised.append(type(exc))

            nursery.start_soon(read)
            await trio.testing.wait_all_tasks_blocked()
            ours.close()
        assert raised == [trio.ClosedResourceError]


async def test_a_closed_socket_is_never_read_by_its_old_number():
    ours, theirs = trio.socket.socketpair()
    with theirs:
        ours.close()
        with pytest.raises(trio.BrokenResourceError):
            await _receive(ours)


class _Stream:
    def __init__(self, socket: trio.socket.SocketType) -> None:
        self.socket = socket


async def test_a_write_the_socket_takes_at_once_is_all_taken():
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        server = object.__new__(WriteDeadlineServer)
        server.stream = _Stream(ours)
        assert server._write_at_once(b"data: {}\n\n") == len(b"data: {}\n\n")
        assert await theirs.recv(100) == b"data: {}\n\n"


async def test_a_write_the_socket_cannot_take_is_left_to_the_waiting_write():
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        server = object.__new__(WriteDeadlineServer)
        server.stream = _Stream(ours)
        taken = sum(iter(lambda: server._write_at_once(b"x" * 65536), 0))  # until the socket is full
        assert taken > 0
        assert server._write_at_once(b"more") == 0
        theirs.close()
        assert server._write_at_once(b"more") == 0  # broken: the waiting write raises what trio would


# -- held to trio's own stream (``OWN_SOCKET_IO = False``) ----------------------------------------------

_chunks = st.lists(st.binary(min_size=1, max_size=3000) | st.integers(1, 400_000).map(lambda n: b"x" * n),
                   min_size=0, max_size=6)


async def _read_all(read: Any) -> list[bytes]:
    out: list[bytes] = []
    while chunk := await read():
        out.append(chunk)
    return out


async def _written_and_read(chunks: list[bytes], read_with: str) -> bytes:
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        got: list[bytes] = []
        async with trio.open_nursery() as nursery:
            async def write() -> None:
                for chunk in chunks:
                    await _send_all(theirs, chunk)
                theirs.shutdown(stdlib_socket.SHUT_WR)

            nursery.start_soon(write)
            if read_with == "ours":
                got = await _read_all(lambda: _receive(ours))
            else:
                stream = trio.SocketStream(ours)
                got = await _read_all(lambda: stream.receive_some(READ_SIZE))
        assert all(0 < len(chunk) <= READ_SIZE for chunk in got)
        return b"".join(got)


@settings(max_examples=40, deadline=None)
@given(_chunks)
def test_reads_deliver_what_trios_stream_delivers(chunks):
    ours = trio.run(_written_and_read, chunks, "ours")
    trios = trio.run(_written_and_read, chunks, "trio")
    assert ours == trios == b"".join(chunks)


class _Protocol:
    def __init__(self) -> None:
        self.closed = False

    async def handle(self, _event: object) -> None:
        self.closed = True


def _connection(ours: trio.socket.SocketType) -> WriteDeadlineServer:
    """A connection on ``ours`` with a write deadline, as hypercorn would have made it."""
    server = object.__new__(WriteDeadlineServer)
    server.stream = trio.SocketStream(ours)
    server.send_lock = trio.Lock()
    server.write_timeout = 30.0
    server.writes = Writes()
    server.protocol = _Protocol()
    return server


async def _sent_through_a_connection(frames: list[bytes], own: bool) -> bytes:
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        ours.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 4096)  # full after a few KB
        server = _connection(ours)
        received = bytearray()
        async with trio.open_nursery() as nursery:
            async def read() -> None:
                while chunk := await theirs.recv(65536):
                    received.extend(chunk)

            nursery.start_soon(read)
            tcp.OWN_SOCKET_IO = own  # False: every write is trio's socket's, under the deadline
            try:
                for frame in frames:
                    await server.protocol_send(RawData(frame))
            finally:
                tcp.OWN_SOCKET_IO = True
            ours.shutdown(stdlib_socket.SHUT_WR)
        assert not server.protocol.closed and not server.writes.timed_out
        return bytes(received)


@settings(max_examples=40, deadline=None)
@given(_chunks)
def test_writes_deliver_what_trios_stream_delivers(frames):
    assert trio.run(_sent_through_a_connection, frames, True) == trio.run(_sent_through_a_connection, frames, False) \
        == b"".join(frames)


# -- a write with no other under way takes no scheduling point ------------------------------------------


async def test_a_write_with_no_other_under_way_goes_out_before_any_other_task_runs():
    """A free send lock is taken without trio's checkpoint: the run that produced the frames does not get
    the loop between its frames and their write."""
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        write = _connection(ours).protocol_send(RawData(b"data: first\n\n"))
        with pytest.raises(StopIteration):
            write.send(None)  # done at the first step: it never yielded to the scheduler
        assert await theirs.recv(100) == b"data: first\n\n"


async def test_a_write_while_another_waits_for_the_socket_goes_after_it_whole():
    ours, theirs = trio.socket.socketpair()
    with ours, theirs:
        ours.setsockopt(stdlib_socket.SOL_SOCKET, stdlib_socket.SO_SNDBUF, 4096)
        server = _connection(ours)
        big, small = b"a" * 200_000, b"then this"
        received = bytearray()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(server.protocol_send, RawData(big))
            await trio.testing.wait_all_tasks_blocked()  # the socket is full: the first write waits, holding the lock
            assert server.send_lock.locked()
            nursery.start_soon(server.protocol_send, RawData(small))
            await trio.testing.wait_all_tasks_blocked()
            while len(received) < len(big) + len(small):
                received.extend(await theirs.recv(65536))
        assert bytes(received) == big + small
