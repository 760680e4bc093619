"""The append-only file ledger: one checksummed log per thread, an in-memory index rebuilt at open.

Layout of the ledger directory (``[ledger] backend = "files"``, option ``path``)::

    LOCK                    an exclusive ``flock`` held while a process has the ledger open
    threads/<sha256>.log    one append-only log per thread; the name is the SHA-256 hex digest of
                            the thread id's UTF-8 bytes, so no id can name a path outside the
                            directory (the raw id is stored inside every record)
    torn/                   bytes cut off a log at open (a torn or corrupt tail), kept for forensics

A log is a sequence of frames ``>I length, >I crc32(payload), payload``; the payload is one JSON
object. Every ``start_run``, ``commit``, ``import_thread`` call (and every crash recovery at open)
writes exactly one frame to one file and fsyncs it before returning, so a step is atomic: after a
crash a frame is either whole (and applied on replay) or torn (and cut off at open).

Opening replays every log into a compact index: per thread its metadata (created_at, agent state,
last seq, the applied length of its log), the set of its message ids (for dedup and duplicate
checks), where each message lives (runs of consecutive seqs and the offset of the frame that holds
them), its runs and its pending calls. Message bodies are not kept: a read locates the frames that
hold the wanted seqs, reads that one byte range of the log, checks and parses it (one worker-thread
round trip per call). A small LRU cache, bounded in bytes (``cache_bytes``, default 256 KiB), keeps
the whole history of recently read or created threads, and is extended by their commits, so a run's
admission (``thread_view``) and its steps stay off the disk while memory stays flat as history grows.

Replay stops at the first frame that is short, fails its checksum or is not a JSON object; the file
is truncated there. Runs left ``running`` are then marked ``interrupted`` by a ``recover`` record.
All blocking file I/O (and the JSON work of reads and writes) goes through
``trio.to_thread.run_sync`` with a capacity limiter of one (one I/O thread), and writers are
serialized by a ``trio.Lock`` held from validation until the index is updated. Logs only grow under
an open ledger (a failed write is cut back to the applied length), so the applied prefix a read
locates stays valid while the read is in flight.

Any ``OSError`` becomes ``StoreUnavailable``; a write that fails halfway is truncated back to the
file's previous length, so nothing partial is ever visible (in memory or after reopen).
"""

from __future__ import annotations

import copy
import errno
import fcntl
import hashlib
import json
import logging
import os
import struct
import sys
import time
import zlib
from array import array
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import orjson
import trio

from awaken.errors import StoreUnavailable
from awaken.ledger import (
    Commit,
    DuplicateRun,
    Ledger,
    PendingCall,
    RunRecord,
    ThreadRecord,
    ThreadView,
    Usage,
)
from awaken.messages import Message, message_from_json, message_to_json
from awaken.runstate import RunStatus

T = TypeVar("T")

logger = logging.getLogger("awaken.ledger.files")

FORMAT_VERSION = 1
_HEADER = struct.Struct(">II")  # payload length, crc32 of the payload
_MAX_PAYLOAD = 1 << 30
_MAX_OPEN_FILES = 64
_LOG_SUFFIX = ".log"
_SMALL_IDS = 8  # up to this many message ids per thread are kept in a tuple, more in a set


def thread_file_name(thread_id: str) -> str:
    """The log file name of a thread: never derived from the id's characters, only its digest."""
    return hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest() + _LOG_SUFFIX


def encode_frame(record: dict[str, Any]) -> bytes:
    """One framed record: length, crc32, compact JSON payload."""
    payload = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(payload) > _MAX_PAYLOAD:
        raise ValueError(f"a ledger record of {len(payload)} bytes exceeds the {_MAX_PAYLOAD}-byte limit")
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


def _loads(payload: bytes) -> Any:
    """Parse one record payload: ``orjson`` (fast) for what it accepts, else the ``json`` module, which
    wrote the payload and also reads what ``orjson`` refuses (lone surrogates, NaN, huge integers)."""
    try:
        return orjson.loads(payload)
    except orjson.JSONDecodeError:
        return json.loads(payload.decode("utf-8", "surrogatepass"))


def decode_frames(data: bytes) -> tuple[list[tuple[int, int, dict[str, Any]]], int]:
    """Decode the whole frames of ``data``: ``([(start, end, record), ...], length of the valid prefix)``.

    Decoding stops at the first short frame, checksum mismatch or payload that is not a JSON object.
    """
    records: list[tuple[int, int, dict[str, Any]]] = []
    offset = 0
    end = len(data)
    while offset < end:
        if end - offset < _HEADER.size:
            break
        length, crc = _HEADER.unpack_from(data, offset)
        start = offset + _HEADER.size
        if length > _MAX_PAYLOAD or start + length > end:
            break
        payload = data[start : start + length]
        if zlib.crc32(payload) != crc:
            break
        try:
            record = _loads(payload)
        except ValueError:  # includes UnicodeDecodeError
            break
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            break
        records.append((offset, start + length, record))
        offset = start + length
    return records, offset


def _now_ms() -> int:
    return int(time.time() * 1000)


def _read_exact(fd: int, offset: int, length: int) -> bytes:
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


def _write_all(fd: int, data: bytes, offset: int) -> None:
    """``pwrite`` all of ``data`` at ``offset`` (a short write is retried, an error raised)."""
    view = memoryview(data)
    while view:
        written = os.pwrite(fd, view, offset)
        if written <= 0:
            raise OSError(errno.EIO, "short write to the ledger file")
        view = view[written:]
        offset += written


# -- JSON forms of the records ------------------------------------------------------------------


def _run_to_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent_id": run.agent_id,
        "status": run.status.value,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "error_code": run.error_code,
        "error_message": run.error_message,
        "usage": [run.usage.input_tokens, run.usage.output_tokens],
        "steps": run.steps,
    }


_NO_USAGE = Usage()


def _usage(pair: Sequence[int]) -> Usage:
    return _NO_USAGE if not pair[0] and not pair[1] else Usage(*pair)


def _run_from_json(d: dict[str, Any], thread_id: str | None = None) -> RunRecord:
    """A run record; ``thread_id`` (the index's own copy of the id) is shared instead of kept twice."""
    if thread_id is not None and d["thread_id"] != thread_id:
        raise CorruptRecord(f"run {d['run_id']!r} names thread {d['thread_id']!r}")
    return RunRecord(
        run_id=d["run_id"],
        thread_id=d["thread_id"] if thread_id is None else thread_id,
        agent_id=sys.intern(d["agent_id"]),
        status=RunStatus(d["status"]),
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        error_code=d.get("error_code"),
        error_message=d.get("error_message"),
        usage=_usage(d.get("usage", (0, 0))),
        steps=d.get("steps", 0),
    )


def _pending_to_json(p: PendingCall) -> dict[str, Any]:
    return attrs.asdict(p)


def _pending_from_json(
    d: dict[str, Any], thread_id: str, run_id: str | None = None, ids: dict[str, str] | None = None
) -> PendingCall:
    """A pending call; the index's copies of the thread, run and message ids (``ids``) are shared,
    names interned."""
    if d["thread_id"] != thread_id:
        raise CorruptRecord(f"pending call {d['tool_call_id']!r} names thread {d['thread_id']!r}")
    return PendingCall(
        tool_call_id=d["tool_call_id"],
        run_id=run_id if run_id is not None and d["run_id"] == run_id else d["run_id"],
        thread_id=thread_id,
        name=sys.intern(d["name"]),
        arguments=d["arguments"],
        kind=sys.intern(d["kind"]),
        message_id=ids.get(d["message_id"], d["message_id"]) if ids else d["message_id"],
    )


# -- the in-memory index ------------------------------------------------------------------------


@attrs.define(weakref_slot=False)
class _Thread:
    """What the index keeps of a thread: metadata, message ids and locations, runs, pending calls.

    ``segments`` is a flat ``array('q')`` of triples ``(frame offset, first seq, count)``: each
    triple says that the messages with seqs ``first .. first + count - 1`` are in the frame starting
    at that offset. Triples are ordered by seq, and so by offset (an import is a thread's first
    record; every later record appends seqs above ``last_seq``).
    """

    thread_id: str
    created_at: int
    state: dict[str, Any] | None = None  # None: the empty state (no dict kept per thread)
    last_seq: int = 0
    size: int = 0  # bytes of the log that hold applied records
    # The message ids: a tuple while there are few (a set costs 216 bytes even when small).
    ids: tuple[str, ...] | set[str] = ()
    segments: array = attrs.field(factory=lambda: array("q"))
    run_ids: tuple[str, ...] = ()  # insertion order
    pending: tuple[PendingCall, ...] = ()  # commit order

    @property
    def file_name(self) -> str:
        return thread_file_name(self.thread_id)

    def record(self) -> ThreadRecord:
        return ThreadRecord(self.thread_id, self.created_at, copy.deepcopy(self.state or {}), self.last_seq)

    def add_ids(self, ids: Sequence[str]) -> None:
        if isinstance(self.ids, set):
            self.ids.update(ids)
        elif len(self.ids) + len(ids) <= _SMALL_IDS:
            self.ids += tuple(ids)
        else:
            self.ids = {*self.ids, *ids}

    def add_segment(self, offset: int, first: int, count: int) -> None:
        segments = self.segments
        if segments and segments[-3] == offset and segments[-2] + segments[-1] == first:
            segments[-1] += count
        elif len(segments) < 96:  # small: an exact-size copy (extend over-allocates by up to 7 items)
            self.segments = segments + array("q", (offset, first, count))
        else:
            segments.extend((offset, first, count))


@attrs.frozen
class _Span:
    """Where a read's messages are: the byte range ``[start, end)`` of the log, the seqs wanted."""

    start: int
    end: int
    first_seq: int
    last_seq: int
    count: int
    whole: bool  # the span is the thread's whole history


def _locate(thread: _Thread, after_seq: int, limit: int) -> _Span | None:
    """The span of up to ``limit`` (all if negative) messages with ``seq > after_seq``, or None."""
    segs = thread.segments
    n = len(segs) // 3
    lo, hi = 0, n
    while lo < hi:  # the first segment whose last seq is > after_seq
        mid = (lo + hi) // 2
        if segs[3 * mid + 1] + segs[3 * mid + 2] - 1 > after_seq:
            hi = mid
        else:
            lo = mid + 1
    if lo == n or limit == 0:
        return None
    first_seq = max(segs[3 * lo + 1], after_seq + 1)
    remaining = limit if limit > 0 else -1
    count = 0
    last_seq = first_seq - 1
    k = lo
    while k < n and remaining != 0:
        from_seq = first_seq if k == lo else segs[3 * k + 1]
        available = segs[3 * k + 1] + segs[3 * k + 2] - from_seq
        take = available if remaining < 0 else min(remaining, available)
        last_seq = from_seq + take - 1
        count += take
        if remaining > 0:
            remaining -= take
        k += 1
    last_offset = segs[3 * (k - 1)]
    m = k
    while m < n and segs[3 * m] == last_offset:
        m += 1
    end = segs[3 * m] if m < n else thread.size
    whole = lo == 0 and first_seq == segs[1] and k == n and last_seq == segs[-2] + segs[-1] - 1
    return _Span(segs[3 * lo], end, first_seq, last_seq, count, whole)


def _extract(data: bytes, span: _Span) -> list[Message]:
    """The messages of ``span`` from ``data`` (the span's bytes of the log), checked against the index."""
    records, valid = decode_frames(data)
    if valid != len(data):
        raise OSError(
            errno.EIO, f"a ledger record at or after offset {span.start + valid} fails its checksum"
        )
    out: list[Message] = []
    for _, _, record in records:
        for d in record.get("messages") or ():
            if span.first_seq <= d["seq"] <= span.last_seq:
                out.append(message_from_json(d))
    out.sort(key=lambda m: m.seq)
    if len(out) != span.count or (out and (out[0].seq, out[-1].seq) != (span.first_seq, span.last_seq)):
        raise OSError(errno.EIO, "a ledger file does not hold the messages its index locates there")
    return out


class CorruptRecord(Exception):
    """A whole, checksummed record that cannot be applied: a bug or a hand-edited file."""


@attrs.define
class _Index:
    threads: dict[str, _Thread] = attrs.field(factory=dict)
    runs: dict[str, RunRecord] = attrs.field(factory=dict)

    def apply(self, record: dict[str, Any], file_name: str, start: int, end: int, parse: bool = True) -> None:
        """Apply one decoded record (live or replayed) found in ``file_name`` at ``[start, end)``.

        Live writes validate before they write, so a failure here means a corrupt log. Replay
        parses every message to check it (``parse``); a live write has parsed them already.
        """
        kind = record["type"]
        thread_id = record["thread"]
        if not isinstance(thread_id, str) or thread_file_name(thread_id) != file_name:
            raise CorruptRecord(f"record for thread {thread_id!r} found in {file_name}")
        thread = self.threads.get(thread_id)
        if kind == "start_run":
            run = _run_from_json(record["run"], thread_id if thread is None else thread.thread_id)
            if run.run_id in self.runs:
                raise CorruptRecord(f"start_run of run {run.run_id!r} cannot be applied")
            messages = record["messages"]
            if thread is None:
                thread = _Thread(thread_id, run.created_at)
            self._append(thread, messages, start, parse)  # checks everything before changing the index
            self.threads[thread_id] = thread
            self.runs[run.run_id] = run
            thread.run_ids += (run.run_id,)
        elif kind == "commit":
            run_id = record["run"]
            run = self.runs.get(run_id)
            if thread is None or run is None or run.thread_id != thread_id:
                raise CorruptRecord(f"commit for unknown run {run_id!r}")
            status = RunStatus(record["status"])
            usage = run.usage + Usage(*record["usage"])
            resolved = set(record["resolved"])
            pending = [p for p in thread.pending if p.tool_call_id not in resolved]
            open_calls = {p.tool_call_id for p in pending}
            # a pending call names a message of its own step: share that message's id string
            own = {d["id"]: d["id"] for d in record["messages"]}
            for p in record["pending"]:
                call = _pending_from_json(p, thread.thread_id, run.run_id, own)
                if call.tool_call_id in open_calls:
                    raise CorruptRecord(f"tool call {call.tool_call_id!r} is already pending")
                open_calls.add(call.tool_call_id)
                pending.append(call)
            self._append(thread, record["messages"], start, parse)
            thread.pending = tuple(pending)
            if record.get("state") is not None:
                thread.state = record["state"] or None
            self.runs[run_id] = attrs.evolve(
                run,
                status=status,
                updated_at=record["updated_at"],
                error_code=record["error_code"],
                error_message=record["error_message"],
                usage=_NO_USAGE if usage == _NO_USAGE else usage,
                steps=run.steps + record["steps"],
            )
        elif kind == "import":
            if thread is not None:
                raise CorruptRecord(f"import of existing thread {thread_id!r}")
            t = record["thread_record"]
            thread = _Thread(thread_id, t["created_at"], t["state"] or None, t["last_seq"])
            runs = [_run_from_json(r, thread_id) for r in record["runs"]]
            if any(r.run_id in self.runs for r in runs) or len({r.run_id for r in runs}) != len(runs):
                raise CorruptRecord(f"import of thread {thread_id!r} repeats a run id")
            raw = sorted(record["messages"], key=lambda d: d["seq"])
            for d in raw:
                if parse:  # a malformed message refuses the record here, not at a later read
                    message_from_json(d)
                seq, message_id = d["seq"], d["id"]
                if (
                    type(seq) is not int
                    or type(message_id) is not str
                    or not 0 < seq <= thread.last_seq
                    or message_id in thread.ids
                ):
                    raise CorruptRecord(f"imported message {message_id!r} (seq {seq}) cannot be applied")
                if thread.segments and thread.segments[-2] + thread.segments[-1] > seq:
                    raise CorruptRecord(f"imported message {message_id!r} repeats seq {seq}")
                thread.add_ids((message_id,))
                thread.add_segment(start, seq, 1)
            thread.pending = tuple(_pending_from_json(p, thread_id) for p in record["pending"])
            self.threads[thread_id] = thread
            for r in runs:
                self.runs[r.run_id] = r
            thread.run_ids = tuple(r.run_id for r in runs)
        elif kind == "recover":
            if thread is None:
                raise CorruptRecord(f"recovery for unknown thread {thread_id!r}")
            for run_id in record["runs"]:
                run = self.runs[run_id]
                self.runs[run_id] = attrs.evolve(
                    run, status=RunStatus.INTERRUPTED, error_code=None, updated_at=record["updated_at"]
                )
        else:
            raise CorruptRecord(f"unknown record type {kind!r}")
        thread.size = end

    @staticmethod
    def _append(thread: _Thread, raw: list[dict[str, Any]], offset: int, parse: bool) -> None:
        """Record the messages of the frame at ``offset``: they must continue the thread's seqs.

        Every message is checked (and, when ``parse``, parsed) before the thread changes, so a bad
        one changes nothing.
        """
        batch: set[str] = set()
        seq = thread.last_seq
        for d in raw:
            if parse:
                message_from_json(d)
            seq += 1
            if type(d["id"]) is not str or d["seq"] != seq or d["id"] in thread.ids or d["id"] in batch:
                raise CorruptRecord(f"message {d['id']!r} (seq {d['seq']}) does not follow seq {seq - 1}")
            batch.add(d["id"])
        if raw:
            thread.add_ids([d["id"] for d in raw])
            thread.add_segment(offset, thread.last_seq + 1, len(raw))
            thread.last_seq = seq


# -- a bounded cache of whole thread histories --------------------------------------------------


_PART_FIELDS: dict[type, tuple[str, ...]] = {}


def _cost(messages: Sequence[Message]) -> int:
    """Roughly the bytes of heap ``messages`` hold (objects and strings), for the cache budget.

    Computed in the I/O thread, next to the parsing, so the event loop only adds numbers.
    """
    size = 0
    for m in messages:
        size += 240 + sys.getsizeof(m.id) + (sys.getsizeof(m.run_id) if m.run_id else 0)
        for part in m.parts:
            names = _PART_FIELDS.get(type(part))
            if names is None:
                names = _PART_FIELDS[type(part)] = tuple(f.name for f in attrs.fields(type(part)))
            size += 140
            for name in names:
                value = getattr(part, name)
                if isinstance(value, str):
                    size += sys.getsizeof(value)
    return size


class _HistoryCache:
    """An LRU map: thread id -> (applied log length it reflects, its whole history, cost in bytes).

    An entry is valid only while its length equals the thread's applied length; writes to the
    thread extend it (or drop it if it is stale). At most ``budget`` bytes (by ``_cost``)
    are held, and no single history larger than a quarter of the budget is cached.
    """

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.total = 0
        self._entries: OrderedDict[str, tuple[int, list[Message], int]] = OrderedDict()

    def get(self, thread_id: str, version: int) -> list[Message] | None:
        entry = self._entries.get(thread_id)
        if entry is None:
            return None
        if entry[0] != version:
            self.drop(thread_id)
            return None
        self._entries.move_to_end(thread_id)
        return entry[1]

    def put(self, thread_id: str, version: int, messages: list[Message], cost: int) -> None:
        self.drop(thread_id)
        cost += 100 + 8 * len(messages)
        if cost * 4 > self.budget:
            return
        self._entries[thread_id] = (version, list(messages), cost)
        self.total += cost
        self._evict()

    def extend(self, thread_id: str, before: int, after: int, messages: list[Message], added: int) -> None:
        """A write moved the thread's log from ``before`` to ``after`` bytes, appending ``messages``
        (which cost ``added`` bytes)."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return
        version, history, cost = entry
        if version != before:
            self.drop(thread_id)
            return
        added += 8 * len(messages)
        if (cost + added) * 4 > self.budget:
            self.drop(thread_id)
            return
        history.extend(messages)
        self._entries[thread_id] = (after, history, cost + added)
        self._entries.move_to_end(thread_id)
        self.total += added
        self._evict()

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            self.total -= entry[2]

    def clear(self) -> None:
        self._entries.clear()
        self.total = 0

    def _evict(self) -> None:
        while self.total > self.budget and self._entries:
            _, (_, _, cost) = self._entries.popitem(last=False)
            self.total -= cost


# -- the backend --------------------------------------------------------------------------------


class FileLedger(Ledger):
    """``[ledger] backend = "files"``; options: ``path`` (a directory), ``fsync`` (default true),
    ``cache_bytes`` (the budget of the cache of whole thread histories; default 256 KiB, 0 disables it).

    With ``fsync = false`` a commit survives a process kill but not a power loss.
    """

    def __init__(self, path: str = "./var/ledger", fsync: bool = True, cache_bytes: int = 256 * 1024) -> None:
        self.path = Path(path)
        self.fsync = fsync
        self._cache = _HistoryCache(max(0, int(cache_bytes)))
        self._threads_dir = self.path / "threads"
        self._limiter = trio.CapacityLimiter(1)
        self._write_lock = trio.Lock()
        self._index: _Index | None = None
        self._lock_fd: int | None = None
        # Touched only inside the writer thread (serialized by the limiter).
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._dirty: dict[str, int] = {}  # file name -> length to truncate back to before the next write

    # -- plumbing -------------------------------------------------------------------------------

    def _require(self) -> _Index:
        if self._index is None:
            raise StoreUnavailable("the file ledger is closed")
        return self._index

    async def _io(self, fn: Callable[[], T], what: str) -> T:
        try:
            return await trio.to_thread.run_sync(fn, limiter=self._limiter)
        except OSError as exc:
            raise StoreUnavailable(
                f"the file ledger at {self.path} failed to {what}: {_describe(exc)}"
            ) from None

    def _fsync_dir(self, path: Path) -> None:
        if not self.fsync:
            return
        fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)

    def _fd(self, name: str, create: bool = True) -> int:
        """The cached read-write descriptor of a log (runs in the I/O thread); ``create`` makes the log
        if it is missing (a write), otherwise a missing log is an error (a read)."""
        fd = self._fds.get(name)
        if fd is not None:
            self._fds.move_to_end(name)
            return fd
        path = os.path.join(self._threads_dir, name)  # not pathlib: it interns every name it parses
        flags = os.O_RDWR | os.O_CLOEXEC
        if not create:
            fd = os.open(path, flags)
            created = False
        else:
            try:
                fd = os.open(path, flags | os.O_CREAT | os.O_EXCL, 0o644)
                created = True
            except FileExistsError:
                fd = os.open(path, flags | os.O_CREAT, 0o644)
                created = False
        try:
            if created:
                self._fsync_dir(self._threads_dir)
        except OSError:
            os.close(fd)
            raise
        self._fds[name] = fd
        while len(self._fds) > _MAX_OPEN_FILES:
            _, old = self._fds.popitem(last=False)
            os.close(old)
        return fd

    def _append_frame(self, name: str, frame: bytes, offset: int) -> None:
        """Write one frame at ``offset`` (the log's applied length) and make it durable.

        Runs in the writer thread. On failure the file is cut back to ``offset``; if even that
        fails, the cut is retried before the next write to the file.
        """
        fd = self._fd(name)
        if name in self._dirty:
            os.ftruncate(fd, self._dirty[name])
            del self._dirty[name]
        try:
            _write_all(fd, frame, offset)
            if self.fsync:
                os.fsync(fd)
        except BaseException:
            try:
                os.ftruncate(fd, offset)
            except OSError:
                self._dirty[name] = offset
            raise

    def _close_files(self) -> None:
        fds = list(self._fds.values())
        self._fds.clear()
        for fd in fds:
            try:
                os.close(fd)
            except OSError:
                pass
        if self._lock_fd is not None:
            lock_fd, self._lock_fd = self._lock_fd, None
            try:
                os.close(lock_fd)  # releases the flock
            except OSError:
                pass

    async def _write(self, index: _Index, name: str, offset: int, record: dict[str, Any]) -> list[Message]:
        """Frame, write and fsync ``record``, then apply it to ``index`` (caller holds the write lock).

        Returns the messages the record appended. JSON encoding and decoding (and building the
        messages) happen in the I/O thread too, so a large step (inline images) never stalls the
        event loop.
        """
        record["v"] = FORMAT_VERSION

        def work() -> tuple[dict[str, Any], int, list[Message], int]:
            frame = encode_frame(record)
            self._append_frame(name, frame, offset)
            # Apply exactly what replay will see: the decoded payload, never the caller's objects.
            decoded = _loads(frame[_HEADER.size :])
            messages = (
                [] if decoded["type"] == "import" else [message_from_json(d) for d in decoded["messages"]]
            )
            return decoded, len(frame), messages, _cost(messages)

        decoded, length, messages, cost = await self._io(work, "write a record")
        thread_id = decoded["thread"]
        index.apply(decoded, name, offset, offset + length, parse=False)
        if self._index is not index:  # closed while writing: the cache is no longer this index's
            pass
        elif offset == 0 and decoded["type"] == "start_run":  # a new thread: its history is these inputs
            self._cache.put(thread_id, offset + length, messages, cost)
        else:
            self._cache.extend(thread_id, offset, offset + length, messages, cost)
        return messages

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._index is not None:
            return
        self._cache.clear()
        try:
            self._index = await trio.to_thread.run_sync(self._open_sync, limiter=self._limiter)
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the file ledger at {self.path}: {_describe(exc)}") from None

    def _open_sync(self) -> _Index:
        try:
            os.makedirs(self._threads_dir, exist_ok=True)
            self._take_lock()
            index = _Index()
            names = sorted(n for n in os.listdir(self._threads_dir) if _is_log_name(n))
            for name in names:
                self._replay(index, name)
            self._fsync_dir(self._threads_dir)
            self._recover(index)
            return index
        except BaseException:
            self._close_files()
            raise

    def _take_lock(self) -> None:
        fd = os.open(self.path / "LOCK", os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            holder = os.pread(fd, 32, 0).decode("ascii", "replace").strip()
            os.close(fd)
            if exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                who = f" (pid {holder})" if holder.isdigit() else ""
                raise StoreUnavailable(
                    f"ledger directory is locked by another process{who}: {self.path} "
                    "(stop that process, or point [ledger] path at another directory)"
                ) from None
            raise
        self._lock_fd = fd
        try:
            os.ftruncate(fd, 0)
            _write_all(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is a courtesy for the error message above, not part of the lock

    def _replay(self, index: _Index, name: str) -> None:
        path = self._threads_dir / name
        data = path.read_bytes()
        records, valid = decode_frames(data)
        for offset, end, record in records:
            try:
                index.apply(record, name, offset, end)
            except (CorruptRecord, KeyError, TypeError, ValueError) as exc:
                raise StoreUnavailable(
                    f"the ledger file {path} holds a record (offset {offset}) that cannot be applied: {exc}; "
                    "move the file aside or restore it from a backup"
                ) from None
        if valid < len(data):
            self._cut_tail(path, data, valid)

    def _cut_tail(self, path: Path, data: bytes, valid: int) -> None:
        dropped = len(data) - valid
        logger.warning(
            "ledger file %s: cutting off a torn or corrupt tail of %d bytes at offset %d",
            path,
            dropped,
            valid,
        )
        try:  # best effort: keep the bytes for forensics
            torn = self.path / "torn"
            torn.mkdir(exist_ok=True)
            (torn / f"{path.name}.{valid}.{time.time_ns()}").write_bytes(data[valid:])
        except OSError as exc:
            logger.warning("could not keep the cut-off bytes of %s: %s", path, exc)
        fd = os.open(path, os.O_WRONLY | os.O_CLOEXEC)
        try:
            os.ftruncate(fd, valid)
            if self.fsync:
                os.fsync(fd)
        finally:
            os.close(fd)

    def _recover(self, index: _Index) -> None:
        stale: dict[str, list[str]] = {}
        for run in index.runs.values():
            if run.status is RunStatus.RUNNING:
                stale.setdefault(run.thread_id, []).append(run.run_id)
        now = _now_ms()
        for thread_id, run_ids in stale.items():
            thread = index.threads[thread_id]
            record = {
                "type": "recover",
                "thread": thread_id,
                "runs": run_ids,
                "updated_at": now,
                "v": FORMAT_VERSION,
            }
            frame = encode_frame(record)
            self._append_frame(thread.file_name, frame, thread.size)
            index.apply(record, thread.file_name, thread.size, thread.size + len(frame))

    async def aclose(self) -> None:
        if self._index is None and self._lock_fd is None:
            return
        self._index = None
        self._cache.clear()
        with trio.CancelScope(shield=True):
            async with self._write_lock:
                await trio.to_thread.run_sync(self._close_files, limiter=self._limiter)

    async def ping(self) -> None:
        self._require()
        await self._io(lambda: os.stat(self._threads_dir), "read its directory")

    # -- reads ----------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        await trio.lowlevel.checkpoint()
        thread = self._require().threads.get(thread_id)
        return None if thread is None else thread.record()

    async def committed_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        await trio.lowlevel.checkpoint()
        thread = self._require().threads.get(thread_id)
        return set() if thread is None else {i for i in ids if i in thread.ids}

    async def get_run(self, run_id: str) -> RunRecord | None:
        await trio.lowlevel.checkpoint()
        return self._require().runs.get(run_id)

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        await trio.lowlevel.checkpoint()
        index = self._require()
        thread = index.threads.get(thread_id)
        if thread is None:
            return []
        return sorted((index.runs[r] for r in thread.run_ids), key=lambda r: r.created_at)

    async def waiting_run(self, thread_id: str) -> RunRecord | None:
        for run in await self.list_runs(thread_id):
            if run.status is RunStatus.WAITING:
                return run
        return None

    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        await trio.lowlevel.checkpoint()
        thread = self._require().threads.get(thread_id)
        return [] if thread is None else list(thread.pending)

    async def read_messages(self, thread_id: str, after_seq: int, limit: int) -> list[Message]:
        await trio.lowlevel.checkpoint()
        index = self._require()
        thread = index.threads.get(thread_id)
        if thread is None or limit == 0:
            return []
        return await self._messages(index, thread, after_seq, limit)

    async def thread_view(self, thread_id: str) -> ThreadView:
        """The thread, its whole history and its pending calls as of one instant: from the cache, or
        with one read of the log in the I/O thread."""
        await trio.lowlevel.checkpoint()
        index = self._require()
        thread = index.threads.get(thread_id)
        if thread is None:
            return ThreadView(None, (), ())
        record = thread.record()
        pending = thread.pending
        messages = await self._messages(index, thread, 0, -1)
        return ThreadView(record, tuple(messages), pending)

    async def _messages(self, index: _Index, thread: _Thread, after_seq: int, limit: int) -> list[Message]:
        """Up to ``limit`` (all if negative) messages after ``after_seq``, as of the call: from the
        cache if it holds the thread, else one read of the byte range that holds them (whole history
        reads then fill the cache)."""
        version = thread.size
        cached = self._cache.get(thread.thread_id, version)
        if cached is not None:
            start = bisect_right(cached, after_seq, key=lambda m: m.seq)
            return cached[start:] if limit < 0 else cached[start : start + limit]
        span = _locate(thread, after_seq, limit)
        if span is None:
            return []
        name = thread.file_name

        def work() -> tuple[list[Message], int]:
            if self._index is not index:
                raise StoreUnavailable("the file ledger is closed")
            data = _read_exact(self._fd(name, create=False), span.start, span.end - span.start)
            messages = _extract(data, span)
            return messages, _cost(messages) if span.whole else 0

        messages, cost = await self._io(work, "read a thread's history")
        if span.whole and self._index is index and thread.size == version:
            self._cache.put(thread.thread_id, version, messages, cost)
        return messages

    async def list_threads(self) -> list[ThreadRecord]:
        await trio.lowlevel.checkpoint()
        threads = sorted(self._require().threads.values(), key=lambda t: (t.created_at, t.thread_id))
        return [t.record() for t in threads]

    # -- writes ---------------------------------------------------------------------------------

    async def start_run(self, run: RunRecord, inputs: Sequence[Message]) -> list[Message]:
        async with self._write_lock:
            index = self._require()
            if run.run_id in index.runs:
                raise DuplicateRun(run.run_id)
            thread = index.threads.get(run.thread_id)
            name = thread_file_name(run.thread_id)
            offset = thread.size if thread is not None else 0
            record = {
                "type": "start_run",
                "thread": run.thread_id,
                "run": _run_to_json(run),
                "messages": _stamp(thread, run.thread_id, inputs),
            }
            return await self._write(index, name, offset, record)

    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        async with self._write_lock:
            index = self._require()
            thread = index.threads.get(thread_id)
            run = index.runs.get(run_id)
            if thread is None or run is None or run.thread_id != thread_id:
                raise ValueError(f"run {run_id!r} is not a run of thread {thread_id!r}")
            messages = _stamp(thread, thread_id, commit.messages)
            open_calls = {p.tool_call_id for p in thread.pending} - set(commit.resolved)
            pending: list[dict[str, Any]] = []
            for p in commit.pending:
                if p.tool_call_id in open_calls:
                    raise ValueError(
                        f"tool call {p.tool_call_id!r} is already pending on thread {thread_id!r}"
                    )
                open_calls.add(p.tool_call_id)
                pending.append(_pending_to_json(attrs.evolve(p, thread_id=thread_id)))
            record = {
                "type": "commit",
                "thread": thread_id,
                "run": run_id,
                "messages": messages,
                "resolved": list(commit.resolved),
                "pending": pending,
                "state": commit.state,
                "usage": [commit.usage.input_tokens, commit.usage.output_tokens],
                "steps": commit.steps,
                "status": commit.status.value,
                "error_code": commit.error_code,
                "error_message": commit.error_message,
                "updated_at": _now_ms(),
            }
            return await self._write(index, thread.file_name, thread.size, record)

    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
    ) -> None:
        async with self._write_lock:
            index = self._require()
            thread_id = thread.thread_id
            if thread_id in index.threads:
                raise ValueError(f"thread {thread_id!r} already exists in the ledger")
            seen_runs: set[str] = set()
            for run in runs:
                if run.run_id in index.runs or run.run_id in seen_runs:
                    raise DuplicateRun(run.run_id)
                if run.thread_id != thread_id:
                    raise ValueError(
                        f"run {run.run_id!r} belongs to thread {run.thread_id!r}, not {thread_id!r}"
                    )
                seen_runs.add(run.run_id)
            ids: set[str] = set()
            seqs: set[int] = set()
            for m in messages:
                if m.id in ids or m.seq in seqs or not 0 < m.seq <= thread.last_seq:
                    raise ValueError(
                        f"message {m.id!r} (seq {m.seq}) repeats an id or seq, or lies beyond last_seq "
                        f"{thread.last_seq}"
                    )
                ids.add(m.id)
                seqs.add(m.seq)
            calls = {p.tool_call_id for p in pending}
            if len(calls) != len(pending) or any(p.thread_id != thread_id for p in pending):
                raise ValueError("pending calls repeat a tool call id or belong to another thread")
            record = {
                "type": "import",
                "thread": thread_id,
                "thread_record": {
                    "created_at": thread.created_at,
                    "state": thread.state,
                    "last_seq": thread.last_seq,
                },
                "runs": [_run_to_json(r) for r in runs],
                "messages": [message_to_json(m) for m in messages],
                "pending": [_pending_to_json(p) for p in pending],
            }
            await self._write(index, thread_file_name(thread_id), 0, record)


def _stamp(thread: _Thread | None, thread_id: str, messages: Sequence[Message]) -> list[dict[str, Any]]:
    """Assign seqs and timestamps to ``messages``; a repeated id raises ``ValueError`` (nothing written)."""
    last = thread.last_seq if thread is not None else 0
    taken = thread.ids if thread is not None else set()
    batch: set[str] = set()
    now = _now_ms()
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.id in taken or m.id in batch:
            raise ValueError(f"message id {m.id!r} is already committed on thread {thread_id!r}")
        batch.add(m.id)
        last += 1
        out.append(message_to_json(attrs.evolve(m, seq=last, created_at=m.created_at or now)))
    return out


def _is_log_name(name: str) -> bool:
    stem = name.removesuffix(_LOG_SUFFIX)
    return name.endswith(_LOG_SUFFIX) and len(stem) == 64 and all(c in "0123456789abcdef" for c in stem)


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full (free some space)"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{exc.strerror or exc} (check that the directory is writable)"
    return str(exc)
