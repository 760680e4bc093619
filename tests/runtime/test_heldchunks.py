"""h11 with a ``HeldReceiveBuffer`` parses every byte stream as h11 with its own buffer
(``awaken/runtime/heldchunks.py``), and hands a read that is wholly body on as the object it arrived as."""

from __future__ import annotations

from typing import Any

import h11
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.runtime import heldchunks
from awaken.runtime.heldchunks import HeldReceiveBuffer, hold_chunks
from awaken.runtime.tuning import HELD_CHUNK_BYTES


def held_connection() -> h11.Connection:
    connection = h11.Connection(h11.SERVER)
    assert hold_chunks(connection)
    return connection


def framed_request(body: bytes, *, chunked: bool = False, upgrade: bool = False) -> bytes:
    head = b"POST /v1/ag-ui HTTP/1.1\r\nhost: 127.0.0.1\r\n"
    if upgrade:
        head += b"connection: upgrade\r\nupgrade: websocket\r\n"
    if chunked:
        framed = b"".join(b"%x\r\n%s\r\n" % (len(part), part)
                          for part in (body[i:i + 5000] for i in range(0, len(body), 5000)))
        return head + b"transfer-encoding: chunked\r\n\r\n" + framed + b"0\r\n\r\n"
    return head + b"content-length: %d\r\n\r\n" % len(body) + body


def events(connection: h11.Connection, reads: list[bytes]) -> list[Any]:
    """What the connection gives for ``reads`` (a server answering each request at once), the trailing
    bytes of an upgrade last; each event as plain data (a body's bytes as ``bytes``)."""
    seen: list[Any] = []
    for read in reads:
        connection.receive_data(read)
        while True:
            try:
                event = connection.next_event()
            except h11.RemoteProtocolError as exc:
                seen.append(("error", str(exc)))
                return seen
            if event is h11.NEED_DATA:
                break
            if event is h11.PAUSED:
                seen.append(("paused", connection.trailing_data))
                return seen
            if type(event) is h11.Data:
                seen.append(("data", bytes(event.data)))
            elif type(event) is h11.Request:
                seen.append(("request", event.method, event.target, list(event.headers)))
            else:
                seen.append((type(event).__name__,))
            if type(event) is h11.EndOfMessage:
                connection.send(h11.Response(status_code=200, headers=[("content-length", "0")]))
                connection.send(h11.EndOfMessage())
                connection.start_next_cycle()
    seen.append(("left", len(connection.trailing_data[0])))
    return seen


def cut(stream: bytes, sizes: list[int]) -> list[bytes]:
    reads, at = [], 0
    for size in sizes:
        if at >= len(stream):
            break
        reads.append(stream[at:at + size])
        at += size
    if at < len(stream):
        reads.append(stream[at:])
    return reads


bodies = st.one_of(st.binary(max_size=64), st.integers(0, 3 * HELD_CHUNK_BYTES).map(lambda n: bytes(range(256)) * (n // 256)))


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(bodies, st.booleans()), min_size=1, max_size=4), st.booleans(), st.booleans(),
       st.lists(st.one_of(st.integers(1, 64), st.integers(HELD_CHUNK_BYTES - 8, 2 * HELD_CHUNK_BYTES + 8)),
                min_size=1, max_size=40))
def test_a_held_buffer_parses_every_stream_as_h11s_own(requests: list[tuple[bytes, bool]], upgrade: bool,
                                                        garbage: bool, sizes: list[int]) -> None:
    stream = b"".join(framed_request(body, chunked=chunked) for body, chunked in requests)
    if upgrade:
        stream += framed_request(b"", upgrade=True) + b"\x81\x05hello" * 10
    if garbage:
        stream += b"\x16\x03\x01 not http\r\n\r\n"
    reads = cut(stream, sizes)
    assert events(held_connection(), reads) == events(h11.Connection(h11.SERVER), reads)


def test_a_read_that_is_wholly_body_is_handed_on_as_it_came() -> None:
    connection = held_connection()
    body = b"x" * (3 * HELD_CHUNK_BYTES)
    head = framed_request(body)[:-len(body)]
    connection.receive_data(head)
    assert type(connection.next_event()) is h11.Request
    second = body[:2 * HELD_CHUNK_BYTES]
    connection.receive_data(second)
    data = connection.next_event()
    assert type(data) is h11.Data and data.data is second
    rest = body[2 * HELD_CHUNK_BYTES:]
    connection.receive_data(rest)
    data = connection.next_event()
    assert type(data) is h11.Data and data.data is rest
    assert type(connection.next_event()) is h11.EndOfMessage


def test_a_short_read_is_not_held() -> None:
    buffer = HeldReceiveBuffer()
    buffer += b"x" * (HELD_CHUNK_BYTES - 1)
    assert buffer._held is None and len(buffer) == HELD_CHUNK_BYTES - 1


def test_only_an_h11_connection_that_has_received_nothing_takes_the_buffer(monkeypatch: pytest.MonkeyPatch) -> None:
    used = h11.Connection(h11.SERVER)
    used.receive_data(b"GET / HTTP/1.1\r\n")
    assert not hold_chunks(used)
    assert not hold_chunks(object())
    monkeypatch.setattr(heldchunks, "HELD_CHUNK_BYTES", 0)
    fresh = h11.Connection(h11.SERVER)
    assert not hold_chunks(fresh)
    assert type(fresh._receive_buffer) is not HeldReceiveBuffer
