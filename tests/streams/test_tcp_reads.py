"""A connection reads what has arrived, up to ``READ_SIZE`` at a time (``awaken.runtime.tcp``).

hypercorn's own loop reads 64 KiB at a time, and each read goes through h11, hypercorn's stream and
the app's queue: a 684 KB replayed history took eleven such trips. The connection's read loop asks
for up to 256 KiB, hands every read on whole, ends at the client's EOF (telling the protocol the
connection closed, and stopping the idle task so the connection does not wait out its keep-alive).
"""

from __future__ import annotations

from typing import Any

import trio
from hypercorn.config import Config
from hypercorn.events import Closed, RawData, Updated

from awaken.runtime.tcp import READ_SIZE, WriteDeadlineServer


class ArrivingStream:
    """A socket stream on which ``pieces`` have arrived, then EOF; it records each read's size."""

    def __init__(self, pieces: list[bytes]) -> None:
        self.pieces = list(pieces)
        self.asked: list[int] = []

    async def receive_some(self, max_bytes: int) -> bytes:
        await trio.lowlevel.checkpoint()
        self.asked.append(max_bytes)
        if not self.pieces:
            return b""
        data = b"".join(self.pieces)
        self.pieces.clear()
        taken, rest = data[:max_bytes], data[max_bytes:]
        if rest:
            self.pieces.append(rest)
        return taken


class Recorder:
    def __init__(self) -> None:
        self.events: list[Any] = []

    async def handle(self, event: Any) -> None:
        self.events.append(event)


async def test_a_large_body_that_has_arrived_is_read_in_few_reads():
    body = b"POST / HTTP/1.1\r\ncontent-length: 700000\r\n\r\n" + b"x" * 700_000
    stream = ArrivingStream([body])
    server = WriteDeadlineServer(lambda *a: None, Config(), None, None, stream)
    server.protocol = Recorder()  # type: ignore[assignment]
    await server._read_data()
    data = [e.data for e in server.protocol.events if isinstance(e, RawData)]
    assert b"".join(data) == body
    assert [len(d) for d in data] == [READ_SIZE, READ_SIZE, len(body) - 2 * READ_SIZE, 0]
    assert set(stream.asked) == {READ_SIZE}
    assert isinstance(server.protocol.events[-1], Closed)


class Terminated:
    """hypercorn's worker context, as the idle task sees it: ``terminated`` is set at shutdown."""

    def __init__(self) -> None:
        self.terminated = trio.Event()


class ClosingStream:
    def __init__(self) -> None:
        self.closed = False

    async def aclose(self) -> None:
        self.closed = True


def keep_alive_server(timeout: float) -> tuple[WriteDeadlineServer, ClosingStream]:
    config = Config()
    config.keep_alive_timeout = timeout
    stream = ClosingStream()
    server = WriteDeadlineServer(lambda *a: None, config, Terminated(), None, stream)
    server.protocol = Recorder()  # type: ignore[assignment]
    return server, stream


async def test_an_idle_connection_is_closed_when_its_keep_alive_runs_out():
    server, stream = keep_alive_server(0.01)  # no request since it opened
    await server._idle_timeout()
    assert stream.closed and isinstance(server.protocol.events[-1], Closed)


async def test_a_request_that_arrived_as_the_keep_alive_ran_out_keeps_its_connection():
    """The request began (hypercorn's ``Updated(idle=False)``) after the keep-alive's wait had run out
    but before the idle task went on to close: the request is served, the connection stays open."""
    server, stream = keep_alive_server(0)
    await server.protocol_send(Updated(idle=False))
    await server._idle_timeout()
    assert not stream.closed and server.protocol.events == []
