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

from awaken.transports.ws import _frames_plainly, text_frames


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
