"""The file ledger's bytes: frame codec, log file names, exact positional reads and writes.

A log is a sequence of frames ``>I length, >I crc32(payload), payload``; the payload is one JSON object
(a record) with a string ``type``.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import struct
import zlib
from typing import Any

import orjson

FORMAT_VERSION = 1
HEADER = struct.Struct(">II")  # payload length, crc32 of the payload
MAX_PAYLOAD = 1 << 30
LOG_SUFFIX = ".log"


def thread_file_name(thread_id: str) -> str:
    """The log file name of a thread: never derived from the id's characters, only its digest."""
    return hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest() + LOG_SUFFIX


#: a record's list value longer than this is encoded (and decoded back) an item at a time: one encoder
#: call over a 10,000-message, 32 MB record holds the interpreter for tens of milliseconds, during
#: which the event loop cannot run; between items other threads can
SPLIT_ITEMS = 256

#: a record's JSON, key by key: ``(key, text)`` or, for a long list, ``(key, [item text, ...])``
Pieces = list[tuple[str, "str | list[str]"]]


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def encode_pieces(record: dict[str, Any]) -> tuple[bytes, Pieces]:
    """One framed record (length, crc32, compact JSON payload) and the JSON texts it was made of."""
    pieces: Pieces = [(key, [_dumps(item) for item in value] if isinstance(value, list) and len(value) > SPLIT_ITEMS
                       else _dumps(value)) for key, value in record.items()]
    text = "{" + ",".join(f"{_dumps(key)}:" + (f"[{','.join(piece)}]" if isinstance(piece, list) else piece)
                          for key, piece in pieces) + "}"
    payload = text.encode("utf-8", "surrogatepass")
    if len(payload) > MAX_PAYLOAD:
        raise ValueError(f"a ledger record of {len(payload)} bytes exceeds the {MAX_PAYLOAD}-byte limit")
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload, pieces


def encode_frame(record: dict[str, Any]) -> bytes:
    """One framed record: length, crc32, compact JSON payload."""
    return encode_pieces(record)[0]


def decode_pieces(pieces: Pieces) -> dict[str, Any]:
    """The record a replay of the frame ``encode_pieces`` made decodes (``loads_payload`` of its payload),
    decoded a piece at a time."""
    return {key: [loads_payload(item) for item in piece] if isinstance(piece, list) else loads_payload(piece)
            for key, piece in pieces}


#: every ASCII digit mapped to ``0`` (and nothing else changed): ``_LONG_RUN`` in a payload so
#: translated is a run of 19 digits in the payload, an integer literal that long may be outside the
#: 64 bits ``orjson`` reads exactly
_DIGITS_TO_ZERO = bytes.maketrans(b"0123456789", b"0" * 10)
_STR_DIGITS_TO_ZERO = str.maketrans("0123456789", "0" * 10)
_LONG_RUN = b"0" * 19


def loads_payload(payload: bytes | str) -> Any:
    """Parse one record payload: ``orjson`` (fast) for what it reads exactly, else the ``json`` module,
    which wrote the payload and also reads what ``orjson`` refuses (lone surrogates, NaN) or would read
    inexactly: an integer beyond 64 bits, which ``orjson`` turns into a float. A payload holding a run of
    19 or more digits anywhere (two C passes find it) is read by ``json``."""
    if isinstance(payload, bytes):
        long_digits = _LONG_RUN in payload.translate(_DIGITS_TO_ZERO)
    else:
        long_digits = _LONG_RUN.decode() in payload.translate(_STR_DIGITS_TO_ZERO)
    if not long_digits:
        try:
            return orjson.loads(payload)
        except orjson.JSONDecodeError:
            pass
    return json.loads(payload if isinstance(payload, str) else payload.decode("utf-8", "surrogatepass"))


def decode_frames(data: bytes) -> tuple[list[tuple[int, int, dict[str, Any]]], int]:
    """Decode the whole frames of ``data``: ``([(start, end, record), ...], length of the valid prefix)``.

    Decoding stops at the first short frame, checksum mismatch or payload that is not a JSON object.
    """
    records: list[tuple[int, int, dict[str, Any]]] = []
    offset = 0
    end = len(data)
    while offset < end:
        if end - offset < HEADER.size:
            break
        length, crc = HEADER.unpack_from(data, offset)
        start = offset + HEADER.size
        if length > MAX_PAYLOAD or start + length > end:
            break
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            break
        try:
            record = loads_payload(payload)
        except ValueError:  # includes UnicodeDecodeError
            break
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            break
        records.append((offset, start + length, record))
        offset = start + length
    return records, offset


def read_exact(fd: int, offset: int, length: int) -> bytes:
    """``pread`` exactly ``length`` bytes at ``offset``; a log shorter than that is an error."""
    chunks: list[bytes] = []
    while length > 0:
        chunk = os.pread(fd, length, offset)
        if not chunk:
            raise OSError(errno.EIO, "a ledger file is shorter than its index says")
        chunks.append(chunk)
        offset += len(chunk)
        length -= len(chunk)
    return chunks[0] if len(chunks) == 1 else b"".join(chunks)


def write_all(fd: int, data: bytes, offset: int) -> None:
    """``pwrite`` all of ``data`` at ``offset`` (a short write is retried, an error raised)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, "short write to the ledger file")
        view = view[written:]
        offset += written


def is_log_name(name: str) -> bool:
    stem = name.removesuffix(LOG_SUFFIX)
    return name.endswith(LOG_SUFFIX) and len(stem) == 64 and all(c in "0123456789abcdef" for c in stem)

