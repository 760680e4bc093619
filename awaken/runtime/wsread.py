"""A WebSocket client's text message read straight from the connection's read, where nothing else can.

hypercorn hands a WebSocket read to the app through five layers: its protocol wrapper, its HTTP/1.1
protocol (which copies the bytes into a buffer and out again), its ``WSStream``, wsproto (a frame
decoder, a message decoder and an incremental UTF-8 decoder, each with its objects) and the stream's
message buffer. A request on a socket is one unfragmented, masked text frame, which arrives in one
read; ``client_text`` reads such a frame in a few operations, and ``deliver`` hands its text to the
app exactly as hypercorn would (``app_put`` of the same ``websocket.receive`` event).

Only when the result is certainly the same: the socket is hypercorn's HTTP/1.1 WebSocket, accepted and
open, with no extension negotiated (browsers offer permessage-deflate: their frames go through
wsproto) and nothing of an earlier frame or message held by any layer, and the read is exactly one
whole, valid, unfragmented text frame within hypercorn's message size limit. Anything else (a ping, a
close, a binary or fragmented message, two frames in one read, a frame split over reads, invalid
UTF-8, a non-minimal length, an unmasked frame) goes through hypercorn as before, so every error and
close code stays wsproto's. Skipping a whole frame leaves wsproto's state as its own parse would: with
no extension and no message under way, a complete text frame changes nothing in it.

Behind ``awaken.runtime.tuning.WS_OWN_READING`` (False: every read goes through hypercorn); a property
test holds ``client_text`` to wsproto's parse of any frames.
"""

from __future__ import annotations

from typing import Any

from hypercorn.protocol.h11 import H11Protocol, H11WSConnection
from hypercorn.protocol.ws_stream import ASGIWebsocketState, WSStream
from wsproto.connection import ConnectionState

#: FIN and the text opcode, no reserved bit: the first byte of a whole text message's only frame
_TEXT_FIN = 0x81
#: the mask bit of the second byte (every client frame is masked)
_MASKED = 0x80


def client_text(data: bytes, limit: int) -> str | None:
    """The text of ``data`` when it is exactly one whole, valid, unfragmented, masked text frame of a
    client, with a payload of at most ``limit`` bytes (None: anything else, which wsproto reads)."""
    size = len(data)
    if size < 6 or data[0] != _TEXT_FIN or not data[1] & _MASKED:
        return None
    length = data[1] & 0x7F
    start = 2
    if length == 126:
        length = int.from_bytes(data[2:4], "big")
        start = 4
        if length < 126:  # not the minimal encoding: wsproto refuses it
            return None
    elif length == 127:
        length = int.from_bytes(data[2:10], "big")
        start = 10
        if length < 0x10000 or length >> 63:
            return None
    if length > limit or size != start + 4 + length:
        return None
    mask = data[start : start + 4]
    payload = data[start + 4 :]
    if length:
        key = int.from_bytes((mask * (length // 4 + 1))[:length], "little")
        payload = (int.from_bytes(payload, "little") ^ key).to_bytes(length, "little")
    try:
        return payload.decode()
    except UnicodeDecodeError:
        return None


def plain_connection(ws: Any) -> bool:
    """Whether wsproto's server connection ``ws`` is open with no extension enabled (browsers negotiate
    permessage-deflate), so its frames are RFC 6455's plain ones both ways. The one place that reads
    wsproto's extension state; anything unexpected in its internals answers no."""
    extensions = getattr(getattr(ws, "_proto", None), "extensions", None)
    return (
        getattr(ws, "state", None) is ConnectionState.OPEN
        and extensions is not None
        and not any(extension.enabled() for extension in extensions)
    )


def plain_stream(protocol: Any) -> WSStream | None:
    """The ``WSStream`` of a connection's protocol wrapper when a text frame may be read here: an
    accepted HTTP/1.1 WebSocket on a plain connection (``plain_connection``) with nothing held of an
    earlier frame or message (None: hypercorn reads it)."""
    inner = getattr(protocol, "protocol", None)
    if not isinstance(inner, H11Protocol):
        return None
    connection = inner.connection
    stream = inner.stream
    if not isinstance(connection, H11WSConnection) or connection.buffer or not isinstance(stream, WSStream):
        return None
    if stream.closed or stream.state is not ASGIWebsocketState.CONNECTED or stream.buffer.value is not None:
        return None
    proto = getattr(stream.connection, "_proto", None)
    decoder = getattr(proto, "_frame_decoder", None)
    message = getattr(proto, "_message_decoder", None)
    return stream if (
        plain_connection(stream.connection)
        and decoder is not None and message is not None
        and decoder.header is None and not len(decoder.buffer)
        and message.opcode is None
    ) else None


async def deliver(protocol: Any, data: bytes) -> bool:
    """Hand ``data`` to the app as hypercorn would when it is a text message that may be read here
    (True), else leave it to hypercorn (False)."""
    stream = plain_stream(protocol)
    if stream is None or stream.app_put is None:
        return False
    text = client_text(data, stream.config.websocket_max_message_size)
    if text is None:
        return False
    await stream.app_put({"type": "websocket.receive", "bytes": None, "text": text})
    return True
