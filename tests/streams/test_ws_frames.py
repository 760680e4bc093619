"""WebSocket text frames made by the transport itself (``text_frames``, behind ``WS_OWN_FRAMING``) are
byte for byte what wsproto, hypercorn's WebSocket library, makes of the same messages; the transport
uses them only where wsproto would make exactly those bytes."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto.connection import Connection, ConnectionType
from wsproto.events import CloseConnection, TextMessage
from wsproto.extensions import PerMessageDeflate

from awaken.runtime.tcp import Writes
from awaken.transports.ws import HypercornWire, _frames_plainly, text_frames


def server_connection(*, deflate: bool = False) -> Connection:
    """A server connection as hypercorn makes it: permessage-deflate offered to wsproto, enabled only
    when the client's offer was accepted."""
    extension = PerMessageDeflate()
    if deflate:
        extension.accept("permessage-deflate")
    return Connection(ConnectionType.SERVER, [extension])


def wsproto_frames(texts: list[str]) -> bytes:
    connection = server_connection()
    return b"".join(connection.send(TextMessage(data=text)) for text in texts)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.text(max_size=300), max_size=8))
def test_own_frames_are_wsprotos_for_any_texts(texts):
    assert text_frames([t.encode() for t in texts]) == wsproto_frames(texts)


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
def test_own_frames_are_wsprotos_at_every_length_boundary(size):
    texts = ["é" * (size // 2) + "x" * (size % 2), "after"]
    assert text_frames([t.encode() for t in texts]) == wsproto_frames(texts)


def test_an_open_connection_without_extensions_is_framed_plainly():
    assert _frames_plainly(server_connection())


def test_a_connection_that_negotiated_compression_is_framed_by_wsproto():
    assert not _frames_plainly(server_connection(deflate=True))


def test_a_closing_connection_is_framed_by_wsproto():
    connection = server_connection()
    connection.send(CloseConnection(code=1000))
    assert not _frames_plainly(connection)


def test_an_unexpected_connection_object_is_framed_by_wsproto():
    assert not _frames_plainly(object())


class _Stream:
    """What ``HypercornWire`` uses of hypercorn's ``WSStream``: its wsproto connection and whether it closed."""

    def __init__(self, connection: Connection) -> None:
        self.connection = connection
        self.closed = False
        self.stream_id = 1


def _client_messages(data: bytes) -> list[str]:
    """The text messages a client that negotiated permessage-deflate reads from ``data``."""
    extension = PerMessageDeflate()
    extension.finalize("permessage-deflate")
    client = Connection(ConnectionType.CLIENT, [extension])
    client.receive_data(data)
    messages, parts = [], []
    for event in client.events():
        assert isinstance(event, TextMessage), event
        parts.append(event.data)
        if event.message_finished:
            messages.append("".join(parts))
            parts = []
    return messages


def test_a_compressed_frame_the_socket_cannot_take_now_waits_whole_and_is_not_framed_again():
    """A write of hypercorn's under way (the send lock held): the frame made for an at-once write is
    queued as it is. Framing it again would move a compressing connection's state twice for one message,
    and the client could no longer decompress what follows."""
    wire_bytes = bytearray()
    busy = True

    def write_now(data: bytes) -> int:
        if busy:
            return -1
        wire_bytes.extend(data)
        return len(data)

    writes = Writes()
    writes.write_now = write_now
    wire = HypercornWire(None, _Stream(server_connection(deflate=True)), writes)  # type: ignore[arg-type]
    first, second = b'{"type":"RUN_STARTED","n":1}', b'{"type":"RUN_STARTED","n":2}'
    rest = wire.write_now(first)
    busy = False
    # what the connection's writer sends first: the rest, or (had nothing been framed) the payload framed
    wire_bytes.extend(rest if rest is not None else wire._text_frames([first]) or b"")
    assert wire.write_now(second) == b""
    assert _client_messages(bytes(wire_bytes)) == [first.decode(), second.decode()]
