"""Server-sent events, sans-IO: bytes in, complete ``Event`` values out (CR, LF or CRLF lines)."""

from __future__ import annotations

import re

import attrs

from awaken.models.openai.failure import Failed

#: an SSE line longer than this is a broken stream, not a chunk
MAX_LINE_BYTES = 8 * 1024 * 1024


@attrs.define
class Event:
    data: str
    event: str = ""


class SSEParser:
    """Server-sent events, sans-IO: ``feed(bytes)`` returns the complete events (CR, LF or CRLF lines)."""

    _EOL = re.compile(rb"\r\n|\r|\n")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = b""

    def feed(self, data: bytes) -> list[Event]:
        self._buffer += data
        events: list[Event] = []
        start = 0
        while (match := self._EOL.search(self._buffer, start)) is not None:
            if match.group() == b"\r" and match.end() == len(self._buffer):
                break  # maybe the first half of a CRLF split across reads
            event = self._line(self._buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = self._buffer[start:]
        if len(self._buffer) > MAX_LINE_BYTES:
            raise Failed("MODEL_ERROR", "the model stream sent an over-long line")
        return events

    def close(self) -> list[Event]:
        """The end of the body: a last event without its blank line still counts."""
        events = self.feed(b"\n") if self._buffer else []
        event = self._line(b"")
        return events + ([event] if event is not None else [])

    def _line(self, line: bytes) -> Event | None:
        if not line:
            if not self._data:
                self._event = b""
                return None
            try:
                event = Event(b"\n".join(self._data).decode(), self._event.decode(errors="replace"))
            except UnicodeDecodeError:
                raise Failed("MODEL_ERROR", "the model stream sent a chunk that is not UTF-8") from None
            self._data, self._event = [], b""
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        return None
