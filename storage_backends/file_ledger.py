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

Opening replays every log into the index (threads, runs, messages, pending calls, message-id sets,
last seq and agent state per thread). Replay stops at the first frame that is short, fails its
checksum or is not a JSON object; the file is truncated there. Runs left ``running`` are then
marked ``interrupted`` by a ``recover`` record. Reads are answered from memory; all blocking file
I/O goes through ``trio.to_thread.run_sync`` with a capacity limiter of one (one writer thread),
and writers are serialized by a ``trio.Lock`` held from validation until the index is updated.

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
import time
import zlib
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any, TypeVar

import attrs
import trio

from awaken.errors import StoreUnavailable
from awaken.ledger import (
    Commit,
    DuplicateRun,
    Ledger,
    PendingCall,
    RunRecord,
    ThreadRecord,
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


def thread_file_name(thread_id: str) -> str:
    """The log file name of a thread: never derived from the id's characters, only its digest."""
    return hashlib.sha256(thread_id.encode("utf-8", "surrogatepass")).hexdigest() + _LOG_SUFFIX


def encode_frame(record: dict[str, Any]) -> bytes:
    """One framed record: length, crc32, compact JSON payload."""
    payload = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    if len(payload) > _MAX_PAYLOAD:
        raise ValueError(f"a ledger record of {len(payload)} bytes exceeds the {_MAX_PAYLOAD}-byte limit")
    return _HEADER.pack(len(payload), zlib.crc32(payload)) + payload


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
            record = json.loads(payload.decode("utf-8", "surrogatepass"))
        except (UnicodeDecodeError, ValueError):
            break
        if not isinstance(record, dict) or not isinstance(record.get("type"), str):
            break
        records.append((offset, start + length, record))
        offset = start + length
    return records, offset


def _now_ms() -> int:
    return int(time.time() * 1000)


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


def _run_from_json(d: dict[str, Any]) -> RunRecord:
    return RunRecord(
        run_id=d["run_id"],
        thread_id=d["thread_id"],
        agent_id=d["agent_id"],
        status=RunStatus(d["status"]),
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        error_code=d.get("error_code"),
        error_message=d.get("error_message"),
        usage=Usage(*d.get("usage", (0, 0))),
        steps=d.get("steps", 0),
    )


def _pending_to_json(p: PendingCall) -> dict[str, Any]:
    return attrs.asdict(p)


def _pending_from_json(d: dict[str, Any]) -> PendingCall:
    return PendingCall(**d)


# -- the in-memory index ------------------------------------------------------------------------


@attrs.define
class _Thread:
    thread_id: str
    file_name: str
    created_at: int
    state: dict[str, Any] = attrs.field(factory=dict)
    last_seq: int = 0
    messages: list[Message] = attrs.field(factory=list)  # sorted by seq
    seqs: list[int] = attrs.field(factory=list)  # the seqs of ``messages``, for bisect
    ids: set[str] = attrs.field(factory=set)
    run_ids: list[str] = attrs.field(factory=list)  # insertion order
    pending: dict[str, PendingCall] = attrs.field(factory=dict)  # insertion order = commit order
    size: int = 0  # bytes of the log that hold applied records

    def record(self) -> ThreadRecord:
        return ThreadRecord(self.thread_id, self.created_at, copy.deepcopy(self.state), self.last_seq)


class CorruptRecord(Exception):
    """A whole, checksummed record that cannot be applied: a bug or a hand-edited file."""


@attrs.define
class _Index:
    threads: dict[str, _Thread] = attrs.field(factory=dict)
    runs: dict[str, RunRecord] = attrs.field(factory=dict)

    def apply(self, record: dict[str, Any], file_name: str, size_after: int) -> list[Message]:
        """Apply one decoded record (live or replayed); return the messages it appended.

        Live writes validate before they write, so a failure here means a corrupt log.
        """
        kind = record["type"]
        thread_id = record["thread"]
        if not isinstance(thread_id, str) or thread_file_name(thread_id) != file_name:
            raise CorruptRecord(f"record for thread {thread_id!r} found in {file_name}")
        thread = self.threads.get(thread_id)
        appended: list[Message] = []
        if kind == "start_run":
            run = _run_from_json(record["run"])
            if run.run_id in self.runs or run.thread_id != thread_id:
                raise CorruptRecord(f"start_run of run {run.run_id!r} cannot be applied")
            if thread is None:
                thread = self.threads[thread_id] = _Thread(thread_id, file_name, run.created_at)
            self.runs[run.run_id] = run
            thread.run_ids.append(run.run_id)
            appended = self._append(thread, record["messages"])
        elif kind == "commit":
            run_id = record["run"]
            run = self.runs.get(run_id)
            if thread is None or run is None or run.thread_id != thread_id:
                raise CorruptRecord(f"commit for unknown run {run_id!r}")
            appended = self._append(thread, record["messages"])
            for call_id in record["resolved"]:
                thread.pending.pop(call_id, None)
            for p in record["pending"]:
                call = _pending_from_json(p)
                if call.tool_call_id in thread.pending:
                    raise CorruptRecord(f"tool call {call.tool_call_id!r} is already pending")
                thread.pending[call.tool_call_id] = call
            if record.get("state") is not None:
                thread.state = record["state"]
            usage = Usage(*record["usage"])
            self.runs[run_id] = attrs.evolve(
                run,
                status=RunStatus(record["status"]),
                updated_at=record["updated_at"],
                error_code=record["error_code"],
                error_message=record["error_message"],
                usage=run.usage + usage,
                steps=run.steps + record["steps"],
            )
        elif kind == "import":
            if thread is not None:
                raise CorruptRecord(f"import of existing thread {thread_id!r}")
            t = record["thread_record"]
            thread = _Thread(thread_id, file_name, t["created_at"], t["state"], t["last_seq"])
            runs = [_run_from_json(r) for r in record["runs"]]
            if any(r.run_id in self.runs or r.thread_id != thread_id for r in runs):
                raise CorruptRecord(f"import of thread {thread_id!r} repeats a run id")
            messages = sorted((message_from_json(m) for m in record["messages"]), key=lambda m: m.seq)
            self.threads[thread_id] = thread
            for r in runs:
                self.runs[r.run_id] = r
                thread.run_ids.append(r.run_id)
            for m in messages:
                thread.messages.append(m)
                thread.seqs.append(m.seq)
                thread.ids.add(m.id)
            for p in record["pending"]:
                call = _pending_from_json(p)
                thread.pending[call.tool_call_id] = call
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
        thread.size = size_after
        return appended

    @staticmethod
    def _append(thread: _Thread, raw: list[dict[str, Any]]) -> list[Message]:
        out: list[Message] = []
        for d in raw:
            m = message_from_json(d)
            if m.seq != thread.last_seq + 1 or m.id in thread.ids:
                raise CorruptRecord(f"message {m.id!r} (seq {m.seq}) does not follow seq {thread.last_seq}")
            thread.messages.append(m)
            thread.seqs.append(m.seq)
            thread.ids.add(m.id)
            thread.last_seq = m.seq
            out.append(m)
        return out


# -- the backend --------------------------------------------------------------------------------


class FileLedger(Ledger):
    """``[ledger] backend = "files"``; options: ``path`` (a directory), ``fsync`` (default true).

    With ``fsync = false`` a commit survives a process kill but not a power loss.
    """

    def __init__(self, path: str = "./var/ledger", fsync: bool = True) -> None:
        self.path = Path(path)
        self.fsync = fsync
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

    def _fd(self, name: str) -> int:
        fd = self._fds.get(name)
        if fd is not None:
            self._fds.move_to_end(name)
            return fd
        path = self._threads_dir / name
        flags = os.O_WRONLY | os.O_CREAT | os.O_CLOEXEC
        try:
            fd = os.open(path, flags | os.O_EXCL, 0o644)
            created = True
        except FileExistsError:
            fd = os.open(path, flags, 0o644)
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

        JSON encoding and decoding happen in the writer thread too, so a large step (inline images)
        never stalls the event loop.
        """
        record["v"] = FORMAT_VERSION

        def work() -> tuple[dict[str, Any], int]:
            frame = encode_frame(record)
            self._append_frame(name, frame, offset)
            # Apply exactly what replay will see: the decoded payload, never the caller's objects.
            return json.loads(frame[_HEADER.size :].decode("utf-8", "surrogatepass")), len(frame)

        decoded, length = await self._io(work, "write a record")
        return index.apply(decoded, name, offset + length)

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._index is not None:
            return
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
                index.apply(record, name, end)
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
            index.apply(record, thread.file_name, thread.size + len(frame))

    async def aclose(self) -> None:
        if self._index is None and self._lock_fd is None:
            return
        self._index = None
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
        return [] if thread is None else list(thread.pending.values())

    async def read_messages(self, thread_id: str, after_seq: int, limit: int) -> list[Message]:
        await trio.lowlevel.checkpoint()
        thread = self._require().threads.get(thread_id)
        if thread is None or limit == 0:
            return []
        start = bisect_right(thread.seqs, after_seq)
        end = len(thread.messages) if limit < 0 else start + limit  # like SQL: a negative LIMIT is none
        return thread.messages[start:end]

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
            open_calls = set(thread.pending) - set(commit.resolved)
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
