"""Request bodies read without copying: h11's receive buffer, holding a read's bytes as they came.

hypercorn hands each read of a connection to h11 (``Connection.receive_data``), which appends it to a
``bytearray`` (one copy), hands a body's bytes on as a slice of that array (``maybe_extract_at_most``
slices twice: two more copies), and hypercorn turns the slice into ``bytes`` for the app (a fourth). A
684 KB replayed history went through those four copies of every byte before the app joined its chunks
(``python -m bench.threads``; the figures are in ``bench/REPORT.md``).

``HeldReceiveBuffer`` is h11's ``ReceiveBuffer`` that keeps a read of at least ``HELD_CHUNK_BYTES``
which arrives while it holds nothing else as that very ``bytes`` object. When h11's body reader then
takes all of it (a read that is wholly body: what a large body mostly is), the object itself is handed
on, and hypercorn's ``bytes()`` of a ``bytes`` is the object again: the app gets the bytes the socket
read returned. Anything else (a request head, part of the read, a second read before the first was
taken) first moves the held read into the array, and h11 goes on exactly as before. An extraction that
takes the whole array hands the array itself on instead of a copy of it.

``hold_chunks(protocol)`` gives a connection's HTTP/1.1 protocol this buffer (``WriteDeadlineServer``
does, for every connection it serves). It relies on the names inside h11's ``ReceiveBuffer`` (``_data``
and the two search offsets), which h11 keeps private: when they are not what this module expects, the
connection keeps h11's own buffer. ``tests/runtime/test_heldchunks.py`` holds the events this buffer
gives to those of h11's own, byte stream by byte stream. ``HELD_CHUNK_BYTES = 0`` turns it off.
"""

from __future__ import annotations

from typing import Any

import h11
from h11._receivebuffer import ReceiveBuffer

from awaken.runtime.tuning import HELD_CHUNK_BYTES


class HeldReceiveBuffer(ReceiveBuffer):
    """h11's receive buffer; a read that arrives while it is empty is held as it came (``_held``)."""

    def __init__(self) -> None:
        super().__init__()
        #: a read kept as the ``bytes`` it arrived as, while ``_data`` holds nothing
        self._held: bytes | None = None

    def _unhold(self) -> None:
        held = self._held
        if held is not None:
            self._held = None
            self._data += held

    def __iadd__(self, byteslike: bytes | bytearray) -> HeldReceiveBuffer:
        if (self._held is None and not self._data and type(byteslike) is bytes
                and len(byteslike) >= HELD_CHUNK_BYTES > 0):
            self._held = byteslike
            return self
        self._unhold()
        self._data += byteslike
        return self

    def __len__(self) -> int:
        held = self._held
        return len(self._data) if held is None else len(held)

    def __bytes__(self) -> bytes:
        held = self._held
        return bytes(self._data) if held is None else held

    def _extract(self, count: int) -> bytearray:
        self._unhold()
        data = self._data
        if count >= len(data):  # all of it: the array itself, not a copy of it
            self._data = bytearray()
            self._next_line_search = 0
            self._multiple_lines_search = 0
            return data
        return super()._extract(count)

    def maybe_extract_at_most(self, count: int) -> Any:
        held = self._held
        if held is not None and count >= len(held):
            # the whole read is what the reader takes (a body's bytes): handed on as it came
            self._held = None
            self._next_line_search = 0
            self._multiple_lines_search = 0
            return held
        self._unhold()
        if count <= 0 or not self._data:
            return None
        return self._extract(count)

    def maybe_extract_next_line(self) -> Any:
        self._unhold()
        return super().maybe_extract_next_line()

    def maybe_extract_lines(self) -> Any:
        self._unhold()
        return super().maybe_extract_lines()

    def is_next_line_obviously_invalid_request_line(self) -> bool:
        self._unhold()
        return super().is_next_line_obviously_invalid_request_line()


def _fits(buffer: Any) -> bool:
    """Whether ``buffer`` is h11's own, empty, with the private names this module relies on."""
    return (type(buffer) is ReceiveBuffer and type(getattr(buffer, "_data", None)) is bytearray
            and not buffer._data and hasattr(buffer, "_next_line_search")
            and hasattr(buffer, "_multiple_lines_search"))


def hold_chunks(connection: Any) -> bool:
    """Give the ``h11.Connection`` ``connection`` a ``HeldReceiveBuffer`` (before it received anything);
    False where it is not one, has received bytes, or its buffer is not the one this module knows."""
    if HELD_CHUNK_BYTES <= 0 or type(connection) is not h11.Connection:
        return False
    if not _fits(getattr(connection, "_receive_buffer", None)):
        return False
    connection._receive_buffer = HeldReceiveBuffer()
    return True
