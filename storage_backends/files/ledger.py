"""``FileLedger``: the I/O of the file ledger (locking, replay and recovery at open, framed writes, reads
of located byte ranges) over the index and the record forms, with the hot-thread cache
(``awaken.ledger.hotcache``) kept exact by every write."""

from __future__ import annotations

import copy
import errno
import fcntl
import heapq
import logging
import os
import threading
import time
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from functools import partial
from pathlib import Path
from typing import Any, NoReturn, TypeVar

import attrs
import trio

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, message_from_json, message_to_json
from awaken.engine.state import Cause, RunStatus, recovery
from awaken.ledger.groupsync import GroupSync
from awaken.ledger.hotcache import DEFAULT_BUDGET, MIN_KEEP, HotThreads, cached_facts, entry_for
from awaken.ledger.interface import (
    ALL_OWNERS,
    NO_THREAD,
    AdmissionFacts,
    Branch,
    Commit,
    DuplicateRun,
    Fork,
    Ledger,
    OwnerFilter,
    PendingCall,
    RunRecord,
    ThreadPage,
    ThreadRecord,
    ThreadSummary,
    ThreadView,
    WriteClock,
    branch_path,
    check_fork,
    check_import_branches,
    check_limit,
    decode_cursor,
    encode_cursor,
    forked_branch,
    imported_updated_at,
)
from awaken.ledger.serial import SerialCalls

from .frames import (
    FORMAT_VERSION,
    decode_frames,
    decode_pieces,
    encode_frame,
    encode_pieces,
    is_log_name,
    read_exact,
    thread_file_name,
    write_all,
)
from .index import (
    HeldDetails,
    Index,
    Span,
    ThreadDetail,
    ThreadEntry,
    branched,
    extract,
    listing_key,
    load_detail,
    locate,
    locate_path,
)
from .records import CorruptRecord, branch_to_json, pending_to_json, run_to_json

T = TypeVar("T")

logger = logging.getLogger("awaken.ledger.interface.files")

_MAX_OPEN_FILES = 64
#: the file ``probe_write`` creates, fsyncs and removes in the threads directory (never a log name)
PROBE_NAME = ".write-probe"


def _now_ms() -> int:
    return int(time.time() * 1000)


# -- the backend --------------------------------------------------------------------------------


class FileLedger(Ledger):
    """``[ledger] backend = "files"``; options: ``path`` (a directory), ``fsync`` (default true),
    ``cache_bytes`` (the cap of the hot-thread cache, ``awaken.ledger.hotcache``: recently used
    threads' record, latest messages, pending calls and committed ids, from which admission and
    history reads of them are answered; default 8 MiB, 0 disables it),
    ``index_cache_bytes`` (the budget of hot threads' index details: message ids and locations, runs,
    pending calls; default 8 MiB, which holds thousands of short threads or a few of 10,000 messages;
    0 keeps none, so every access rebuilds a thread's detail from its log). ``tail_cache_bytes`` is
    accepted and ignored (the cache of long threads' latest messages it capped is now the hot-thread
    cache, capped by ``cache_bytes``).

    A commit is acknowledged once fsynced, its log's directory too when it created the log. The fsync
    is a group commit (``awaken/ledger/groupsync.py``): records are written under the write lock and
    synced outside it, one sync at a time, each covering every log written since the one before
    (each log once) and the directory once; a read returns once what it reports is on disk. A sync
    that fails cuts its records off and is final until the ledger is opened again. With ``fsync =
    false`` a commit survives a process kill but not a power loss.
    """

    def __init__(self, path: str = "./var/ledger", fsync: bool = True, cache_bytes: int = DEFAULT_BUDGET,
                 tail_cache_bytes: int | None = None, index_cache_bytes: int = 8 * 1024 * 1024) -> None:
        self.path = Path(path)
        self.fsync = fsync
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, not {cache_bytes!r}")
        self._hot = HotThreads(cache_bytes)
        self._details = HeldDetails(max(0, int(index_cache_bytes)))
        self._threads_dir = self.path / "threads"
        self._limiter = trio.CapacityLimiter(1)
        #: the calls of ``_io``, the ones queued while a hop runs sharing the next one
        self._calls = SerialCalls(self._limiter)
        self._write_lock = trio.Lock()
        self._index: Index | None = None
        self._clock = WriteClock()
        self._lock_fd: int | None = None
        # Touched only inside the writer thread (serialized by the limiter).
        self._fds: OrderedDict[str, int] = OrderedDict()
        self._dirty: dict[str, int] = {}  # file name -> length to truncate back to before the next write
        #: (st_dev, st_ino) of the threads directory as opened: a write into another directory (the
        #: ledger's was deleted, moved or replaced) is refused
        self._dir_identity: tuple[int, int] | None = None
        #: logs found deleted or replaced under the ledger: their threads refuse reads and writes
        #: (what they held is gone at the next open) until the ledger is reopened
        self._lost: set[str] = set()
        #: with ``fsync``, the group commit (``awaken/ledger/groupsync.py``): a record is written under
        #: the write lock and fsynced by the next shared sync outside it, and every call returns only
        #: once what it wrote or read is on disk
        self.group = GroupSync(self._sync_logs, f"the file ledger at {self.path}") if fsync else None
        #: what the next sync covers: log name -> (a descriptor of its own, the log's length before the
        #: first record it covers), and whether the directory gained a log; the I/O thread adds, the
        #: sync's thread takes, under ``_sync_guard``
        self._unsynced: dict[str, tuple[int, int]] = {}
        self._dir_unsynced = False
        self._sync_guard = threading.Lock()

    # -- plumbing -------------------------------------------------------------------------------

    def _require(self) -> Index:
        if self._index is None:
            raise StoreUnavailable("the file ledger is closed")
        return self._index

    def _usable(self, thread: ThreadEntry | None) -> None:
        """Refuse a thread whose log was lost (see ``_lose``): what it holds is not on disk."""
        if thread is not None and thread.file_name in self._lost:
            raise StoreUnavailable(_lost_message(os.path.join(self._threads_dir, thread.file_name)))

    async def _io(self, fn: Callable[[], T], what: str) -> T:
        try:
            return await self._calls.run(fn)
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

    def _check_dir(self) -> None:
        """Refuse to commit when the threads directory is not the one opened (runs in the I/O thread)."""
        try:
            st = os.stat(self._threads_dir)
        except FileNotFoundError:
            raise StoreUnavailable(
                f"the file ledger's directory {self._threads_dir} is gone (deleted or moved away); "
                "nothing is committed until it is back"
            ) from None
        if (st.st_dev, st.st_ino) != self._dir_identity:
            raise StoreUnavailable(
                f"the file ledger's directory {self._threads_dir} was replaced since the ledger was opened; "
                "nothing is committed (restart the server to open the ledger there)"
            )

    @staticmethod
    def _intact(fd: int, offset: int) -> bool:
        """Whether the open log is still linked in the directory and holds at least what the index
        applied from it (a shorter file replaced it); runs in the I/O thread."""
        st = os.fstat(fd)
        return st.st_nlink > 0 and st.st_size >= offset

    def _lose(self, name: str) -> NoReturn:
        """Mark a log as lost (deleted or replaced under the ledger) and refuse this call."""
        self._lost.add(name)
        fd = self._fds.pop(name, None)
        if fd is not None:
            os.close(fd)
        self._dirty.pop(name, None)
        raise StoreUnavailable(_lost_message(os.path.join(self._threads_dir, name)))

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
            if created and self.group is not None:
                with self._sync_guard:  # the next shared sync fsyncs the directory too
                    self._dir_unsynced = True
            elif created:
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
        """Write one frame at ``offset`` (the log's applied length) for the next shared sync (``group``,
        ``_sync_logs``) to make durable.

        Runs in the writer thread. On failure the file is cut back to ``offset``; if even that
        fails, the cut is retried before the next write to the file.

        The directory must still be the one opened and the log still linked in it, before the write
        and again after the write, and the sync checks again after its fsync (a deletion racing the
        write is caught too): a commit into a deleted log would be acknowledged and then be gone at
        the next open. A thread's log is
        created only by its first record (``offset`` 0); a later record finding it missing refuses.
        """
        self._check_dir()
        try:
            fd = self._fd(name, create=offset == 0)
        except FileNotFoundError:
            if offset == 0:
                raise
            self._lose(name)
        if not self._intact(fd, offset):
            self._lose(name)
        if name in self._dirty:
            os.ftruncate(fd, self._dirty[name])
            del self._dirty[name]
        try:
            write_all(fd, frame, offset)
            if self.group is not None:
                with self._sync_guard:
                    if name not in self._unsynced:
                        self._unsynced[name] = (os.dup(fd), offset)
                self.group.wrote()
            self._check_dir()
            intact = self._intact(fd, offset)
        except BaseException:
            try:
                os.ftruncate(fd, offset)
            except OSError:
                self._dirty[name] = offset
            raise
        if not intact:
            self._lose(name)

    def _sync_logs(self) -> None:
        """The group commit's sync (in its own thread): fsync every log written since the last one, and
        the directory if it gained a log; then the directory and each log must still be in place. On
        any failure the logs are cut back to what the syncs before made durable (the failure is final:
        ``GroupSync``)."""
        with self._sync_guard:
            batch, self._unsynced = self._unsynced, {}
            directory, self._dir_unsynced = self._dir_unsynced, False
        try:
            for fd, _ in batch.values():
                os.fsync(fd)
            if directory:
                self._fsync_dir(self._threads_dir)
            self._check_dir()
            for name, (fd, _) in batch.items():
                if os.fstat(fd).st_nlink == 0:
                    raise StoreUnavailable(_lost_message(os.path.join(self._threads_dir, name)))
        except BaseException:
            for fd, start in batch.values():  # nothing of it is acknowledged: cut it off
                try:
                    os.ftruncate(fd, start)
                except OSError:
                    pass
            raise
        finally:
            for fd, _ in batch.values():
                os.close(fd)

    async def _seen(self, result: T) -> T:
        """``result`` of a read, once every commit applied before it is on disk (a read never reports
        a commit the group commit has not made durable yet)."""
        group = self.group
        if group is not None and group.durable < group.written:
            await group.durable_to(group.written)
        return result

    async def _acknowledged(self, mark: int) -> None:
        """Return once the first ``mark`` records written are on disk (outside the write lock, so the
        records written meanwhile share the sync)."""
        if self.group is not None:
            await self.group.durable_to(mark)

    def _close_files(self) -> None:
        fds = list(self._fds.values())
        self._fds.clear()
        with self._sync_guard:  # never acknowledged (a failed sync's, or a cancelled call's): dropped
            fds += [fd for fd, _ in self._unsynced.values()]
            self._unsynced.clear()
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

    async def _write(self, index: Index, name: str, offset: int, record: dict[str, Any],
                     detail: ThreadDetail | None = None,
                     stamp: Callable[[], list[dict[str, Any]]] | None = None) -> list[Message]:
        """Frame, write and fsync ``record``, then apply it to ``index`` (caller holds the write lock;
        ``detail``: the thread's current detail, None for a new thread).

        Returns the messages the record appended. ``stamp`` (when given) makes the record's
        ``messages``. Stamping, JSON encoding and decoding (and building the messages) happen in the
        I/O thread too, so a large step (inline images) or input (10,000 messages) never stalls the
        event loop; a ``ValueError`` from ``stamp`` is raised with nothing written.
        """
        record["v"] = FORMAT_VERSION
        if self.group is not None and self.group.failed is not None:
            raise StoreUnavailable(f"the file ledger at {self.path} could not make its commits durable "
                                   f"({self.group.failed}); nothing is written until it is opened again")

        def work() -> tuple[dict[str, Any], int, list[Message]]:
            if stamp is not None:
                record["messages"] = stamp()
            frame, pieces = encode_pieces(record)
            self._append_frame(name, frame, offset)
            # Apply exactly what replay will see: the decoded payload, never the caller's objects.
            decoded = decode_pieces(pieces)
            messages = (
                [] if decoded["type"] == "import" else [message_from_json(d) for d in decoded["messages"]]
            )
            return decoded, len(frame), messages

        decoded, length, messages = await self._io(work, "write a record")
        thread_id = decoded["thread"]
        thread = index.apply(decoded, name, offset, offset + length, parse=False, detail=detail)
        if self._index is not index:  # closed while writing: the caches are no longer this index's
            thread.detail = None
            return messages
        applied = thread.detail  # the hold below may let it go (when the details' budget is 0)
        assert applied is not None
        self._details.hold(thread)
        kind = decoded["type"]
        if kind == "start_run" and offset == 0:  # a new thread: its history is these inputs
            self._hot.started(thread.record(applied), messages, True)
        elif kind == "start_run" and "fork" in decoded:  # a new active path: the entry held the old one
            self._hot.drop(thread_id)
        elif kind == "start_run":
            self._hot.committed(thread_id, messages, (), (), None)
        elif kind == "commit" and applied.runs[decoded["run"]].branch != applied.active:
            self._hot.drop(thread_id)  # messages off the active path (a run the fork left behind)
        elif kind == "commit":
            added = len(decoded["pending"])
            pending = applied.pending
            self._hot.committed(thread_id, messages, pending[len(pending) - added:] if added else (),
                                decoded["resolved"], copy.deepcopy(decoded["state"]))
        else:  # an import makes a new thread: nothing of it is cached yet
            self._hot.drop(thread_id)
        return messages

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        if self._index is not None:
            return
        self._hot.clear()
        self._details.clear()
        try:
            self._index = await trio.to_thread.run_sync(self._open_sync, limiter=self._limiter)
            self._clock = WriteClock(self._index.latest)
            if self.group is not None:
                self.group.reset()
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the file ledger at {self.path}: {_describe(exc)}") from None

    def _open_sync(self) -> Index:
        try:
            os.makedirs(self._threads_dir, exist_ok=True)
            st = os.stat(self._threads_dir)
            self._dir_identity = (st.st_dev, st.st_ino)
            self._lost.clear()
            self._take_lock()
            index = Index()
            # a run id whose hash names a thread replay has made idle: that thread's log says (rare)
            index.load = partial(self._load_idle, index)
            names = sorted(n for n in os.listdir(self._threads_dir) if is_log_name(n))
            stale: list[ThreadEntry] = []
            # The most recently updated threads keep the detail replay built, within the budget (a
            # heap by updated_at: never more than the budget held at once); the others go idle.
            recent: list[tuple[int, str, ThreadEntry, int]] = []
            held = 0
            for name in names:
                thread = self._replay(index, name)
                if thread is None or thread.detail is None:
                    continue
                if any(r.status is RunStatus.RUNNING for r in thread.detail.runs.values()):
                    stale.append(thread)  # recovered below; its detail is dropped then
                    continue
                cost = thread.detail.cost()
                if cost * 2 > self._details.budget:
                    thread.detail = None
                    continue
                heapq.heappush(recent, (thread.updated_at, thread.thread_id, thread, cost))
                held += cost
                while held > self._details.budget:
                    _, _, idle, spent = heapq.heappop(recent)
                    idle.detail = None  # idle until accessed: only the compact entry stays
                    held -= spent
            self._fsync_dir(self._threads_dir)
            self._recover(index, stale)
            for _, _, thread, _ in sorted(recent, key=lambda r: (r[0], r[1])):
                self._details.hold(thread)  # oldest first: the newest is the most recently used
            index.load = None  # open: the ledger checks a run id before it writes one
            return index
        except BaseException:
            self._close_files()
            raise

    def _load_idle(self, index: Index, thread: ThreadEntry) -> ThreadDetail:
        """An idle thread's detail while the ledger opens (in its I/O thread), kept off the thread."""
        data = (self._threads_dir / thread.file_name).read_bytes()[:thread.size]
        return load_detail(data, thread.file_name, thread.thread_id)

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
            write_all(fd, f"{os.getpid()}\n".encode(), 0)
        except OSError:
            pass  # the pid is a courtesy for the error message above, not part of the lock

    def _replay(self, index: Index, name: str) -> ThreadEntry | None:
        """Apply one log to ``index``; returns its thread (with its detail), if it holds any record."""
        path = self._threads_dir / name
        data = path.read_bytes()
        records, valid = decode_frames(data)
        thread: ThreadEntry | None = None
        ordered = branched(records)
        for offset, end, record in records:
            try:
                thread = index.apply(record, name, offset, end, ordered=ordered)
            except (CorruptRecord, KeyError, TypeError, ValueError) as exc:
                raise StoreUnavailable(
                    f"the ledger file {path} holds a record (offset {offset}) that cannot be applied: {exc}; "
                    "move the file aside or restore it from a backup"
                ) from None
        if valid < len(data):
            self._cut_tail(path, data, valid)
        return thread

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

    def _recover(self, index: Index, stale: list[ThreadEntry]) -> None:
        now = _now_ms()
        change = recovery(Cause.SERVER_RESTART)  # the run state's table decides what recovery writes
        for thread in stale:
            assert thread.detail is not None
            run_ids = [r.run_id for r in thread.detail.runs.values() if r.status is change.previous]
            record = {
                "type": "recover",
                "thread": thread.thread_id,
                "runs": run_ids,
                "status": change.status.value,
                "cause": change.cause_value,
                "error_message": change.error_message,
                "updated_at": now,
                "v": FORMAT_VERSION,
            }
            frame = encode_frame(record)
            self._append_frame(thread.file_name, frame, thread.size)
            index.apply(record, thread.file_name, thread.size, thread.size + len(frame))
            thread.detail = None

    async def aclose(self) -> None:
        if self._index is None and self._lock_fd is None:
            return
        self._index = None
        self._hot.clear()
        self._details.clear()
        with trio.CancelScope(shield=True):
            async with self._write_lock:
                await trio.to_thread.run_sync(self._close_files, limiter=self._limiter)

    async def ping(self) -> None:
        self._require()
        await self._io(self._check_dir, "read its directory")

    async def probe_write(self) -> None:
        """Whether a commit can happen now: the directory is the one opened, and a probe file can be
        created, written, fsynced and removed in it (a full disk, a read-only filesystem or a deleted
        directory fail it)."""
        self._require()

        def probe() -> None:
            self._check_dir()
            path = os.path.join(self._threads_dir, PROBE_NAME)
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_CLOEXEC, 0o644)
            try:
                write_all(fd, b"awaken write probe\n", 0)
                os.fsync(fd)
            finally:
                os.close(fd)
            os.unlink(path)

        await self._io(probe, "write a probe file")

    # -- reads ----------------------------------------------------------------------------------

    async def _detail(self, index: Index, thread: ThreadEntry) -> ThreadDetail | None:
        """The thread's current detail: held (hot), or rebuilt from its log with one read of its
        applied bytes in the I/O thread (then held, within the budget). None if the thread was
        deleted meanwhile. No await separates the return from the caller's use of the entry, so the
        detail matches ``thread.size``."""
        while True:
            detail = thread.detail
            if detail is not None:
                self._details.touch(thread)
                return detail
            size, thread_id = thread.size, thread.thread_id
            loaded = await self._io(partial(self._load_sync, index, thread.file_name, thread_id, size),
                                    "read a thread's log")
            if self._index is not index:
                raise StoreUnavailable("the file ledger is closed")
            if index.threads.get(thread_id) is not thread:
                return None
            if thread.detail is None and thread.size == size:
                thread.detail = loaded
                self._details.hold(thread)
                return loaded
            # a write landed while the log was read: use (or rebuild) the newer detail

    def _load_sync(self, index: Index, name: str, thread_id: str, size: int, ordered: bool = False) -> ThreadDetail:
        """Rebuild a thread's detail from its log (runs in the I/O thread); a log gone or replaced
        under the ledger is lost (``_lose``), as for a history read."""
        fd = self._intact_log(index, name, size)
        return load_detail(read_exact(fd, 0, size), name, thread_id, ordered)

    async def _ordered_detail(self, index: Index, thread: ThreadEntry) -> ThreadDetail:
        """The detail of a thread about to fork for the first time, rebuilt from its log with a
        ``BranchTree`` (a thread that never branched keeps none: its ids are not kept in seq order).
        The caller holds the write lock, so the log does not change meanwhile."""
        size = thread.size
        loaded = await self._io(partial(self._load_sync, index, thread.file_name, thread.thread_id, size, True),
                                "read a thread's log")
        if self._index is not index:
            raise StoreUnavailable("the file ledger is closed")
        thread.detail = loaded
        self._details.hold(thread)
        return loaded

    def _intact_log(self, index: Index, name: str, size: int) -> int:
        """The descriptor of log ``name``, checked to still hold its first ``size`` bytes (in the I/O
        thread); a closed ledger is ``StoreUnavailable``, a log gone or replaced is lost (``_lose``):
        what is no longer on disk is never served."""
        if self._index is not index:
            raise StoreUnavailable("the file ledger is closed")
        self._check_dir()
        try:
            fd = self._fd(name, create=False)
        except FileNotFoundError:
            self._lose(name)
        if not self._intact(fd, size):
            self._lose(name)
        return fd

    async def _thread(
        self, thread_id: str, refuse_lost: bool = False
    ) -> tuple[Index, ThreadEntry, ThreadDetail] | None:
        """The thread and its current detail, or None; ``refuse_lost``: a thread whose log was lost
        is ``StoreUnavailable`` (history reads; see ``_lose``)."""
        await trio.lowlevel.checkpoint()
        index = self._require()
        thread = index.threads.get(thread_id)
        if refuse_lost:
            self._usable(thread)
        if thread is None:
            return None
        detail = await self._detail(index, thread)
        return None if detail is None else (index, thread, detail)

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        found = await self._thread(thread_id)
        return await self._seen(None if found is None else found[1].record(found[2]))

    async def get_run(self, run_id: str) -> RunRecord | None:
        await trio.lowlevel.checkpoint()
        index = self._require()
        found = await self._run_thread(index, run_id)
        return await self._seen(None if found is None else found[1].runs[run_id])

    async def _run_thread(self, index: Index, run_id: str) -> tuple[ThreadEntry, ThreadDetail] | None:
        """The thread holding run ``run_id`` and its detail, or None: the threads the id's hash names
        (usually one or none), confirmed by their runs (an idle one's read from its log)."""
        for thread in list(index.run_threads.candidates(run_id)):
            detail = await self._detail(index, thread)
            if detail is not None and run_id in detail.runs:
                return thread, detail
        return None

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        found = await self._thread(thread_id)
        if found is None:
            return []
        return await self._seen(sorted(found[2].runs.values(), key=lambda r: r.created_at))

    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        found = await self._thread(thread_id)
        return await self._seen([] if found is None else list(found[2].pending))

    async def read_messages(
        self, thread_id: str, after_seq: int, limit: int, branch: int | None = None
    ) -> list[Message]:
        found = await self._thread(thread_id, refuse_lost=True)
        if found is None:
            return []
        if branch is not None:
            _check_branch(found[2], branch)
        if limit == 0:
            return []
        return await self._seen(await self._messages(*found, after_seq, limit, branch))

    async def list_branches(self, thread_id: str) -> list[Branch]:
        found = await self._thread(thread_id)
        if found is None:
            return []
        _, thread, detail = found
        tree = detail.tree
        return await self._seen(list(tree.branches) if tree is not None
                                else [Branch(0, None, 0, thread.created_at)])

    async def thread_view(self, thread_id: str) -> ThreadView:
        """The thread, its whole history and its pending calls as of one instant: from the caches, or
        with one read of the log in the I/O thread (two for an idle thread: its detail, its history)."""
        found = await self._thread(thread_id, refuse_lost=True)
        if found is None:
            return ThreadView(None, (), ())
        _, thread, detail = found
        record = thread.record(detail)
        pending = detail.pending
        messages = await self._messages(*found, 0, -1)
        return await self._seen(ThreadView(record, tuple(messages), pending))

    async def committed_ids(self, thread_id: str, ids: Collection[str]) -> frozenset[str]:
        """From the thread's index of message ids (its detail): no message body is read."""
        found = await self._thread(thread_id)
        if found is None:
            return frozenset()
        held = found[2].ids
        return await self._seen(frozenset(i for i in ids if i in held))

    async def admission_facts(self, thread_id: str, ids: AbstractSet[str], tail: int) -> AdmissionFacts:
        """A hot thread is answered from the hot-thread cache, with no I/O. A cold one: the thread,
        pending calls and committed ids from its detail (held, or rebuilt from its log), its latest
        messages (at least ``MIN_KEEP``) with one read of their byte range; then it is cached."""
        entry = self._hot.get(thread_id)
        if entry is not None:
            facts = cached_facts(entry, ids, tail)
            if facts is not None:
                await trio.lowlevel.checkpoint()
                return facts
        found = await self._thread(thread_id)
        if found is None:
            return NO_THREAD
        index, thread, detail = found
        record, pending, held, version = thread.record(detail), detail.pending, detail.ids, thread.size
        keep = max(MIN_KEEP, tail)
        tree = detail.tree
        after = max(0, thread.last_seq - keep) if tree is None else tree.tail_after(tree.limits(), keep)
        latest = await self._messages(index, thread, detail, after, keep)
        if self._index is index and thread.size == version and self._hot.fits(thread.last_seq):
            entry = entry_for(record, latest, keep, pending, held, _path_length(thread, detail))
            self._hot.put(thread_id, entry)
            facts = cached_facts(entry, ids, tail)
            if facts is not None:
                return facts
        messages = tuple(latest[max(0, len(latest) - tail):]) if tail > 0 else ()
        # the index keeps a short thread's ids as a tuple, a longer one's as a set
        committed = ids.intersection(held) if isinstance(held, set) else frozenset(i for i in held if i in ids)
        return AdmissionFacts(record, messages, pending, committed)

    async def _messages(
        self, index: Index, thread: ThreadEntry, detail: ThreadDetail, after_seq: int, limit: int,
        branch: int | None = None,
    ) -> list[Message]:
        """Up to ``limit`` (all if negative) messages of the path of ``branch`` (None: the active one)
        after ``after_seq``, as of the call (``detail`` is current): from the hot-thread cache if its
        entry holds them (it holds the active path's), else one read of the byte range that holds them
        (a whole history read then caches the thread)."""
        tree = detail.tree
        active = branch is None or branch == detail.active
        if tree is not None and len(tree.branches) > 1 and not active:
            return await self._path_messages(index, thread, detail, after_seq, limit, branch)
        entry = self._hot.get(thread.thread_id) if active else None
        if entry is not None and entry.thread.last_seq == thread.last_seq:
            tail = entry.tail
            # the entry holds every message after ``after_seq``: all the thread's, or a suffix
            # beginning at or before the first of them (seqs are unique and ascending)
            if len(tail) == thread.message_count or (tail and tail[0].seq <= after_seq + 1):
                start = bisect_right(tail, after_seq, key=lambda m: m.seq)
                return tail[start:] if limit < 0 else tail[start : start + limit]
        if tree is not None and len(tree.branches) > 1:
            return await self._path_messages(index, thread, detail, after_seq, limit, branch)
        version = thread.size
        span = locate(detail, version, after_seq, limit)
        if span is None:
            return []
        messages = await self._read_span(index, thread.file_name, span)
        if (span.whole and self._index is index and thread.size == version
                and self._hot.fits(thread.last_seq)):
            self._hot.put(thread.thread_id, entry_for(thread.record(detail), messages[-MIN_KEEP:], MIN_KEEP,
                                                      detail.pending, detail.ids))
        return messages

    async def _read_span(self, index: Index, name: str, span: Span) -> list[Message]:
        """The messages ``span`` locates in log ``name``: one read of its byte range, in a worker thread."""

        def work() -> list[Message]:
            fd = self._intact_log(index, name, span.end)
            data = read_exact(fd, span.start, span.end - span.start)
            return extract(data, span)

        return await self._io(work, "read a thread's history")

    async def _path_messages(
        self, index: Index, thread: ThreadEntry, detail: ThreadDetail, after_seq: int, limit: int,
        branch: int | None,
    ) -> list[Message]:
        """``_messages`` of a thread that branched: the path's messages are located by its tree and
        read with one read of the byte range from the first to the last (other branches' messages in
        between are skipped); a whole read of the active path caches the thread."""
        tree = detail.tree
        assert tree is not None
        indexes = tree.indexes(tree.limits(branch), after_seq, limit)
        if not indexes:
            return []
        version = thread.size
        span = locate_path(detail, tree, version, indexes)
        messages = await self._read_span(index, thread.file_name, span)
        whole = after_seq == 0 and limit < 0 and (branch is None or branch == tree.active)
        if whole and self._index is index and thread.size == version and self._hot.fits(thread.last_seq):
            self._hot.put(thread.thread_id, entry_for(thread.record(detail), messages[-MIN_KEEP:], MIN_KEEP,
                                                      detail.pending, detail.ids, thread.message_count))
        return messages

    async def list_threads(self) -> list[ThreadRecord]:
        """Every thread's record: idle threads' details are rebuilt one by one (a migration's read)."""
        await trio.lowlevel.checkpoint()
        index = self._require()
        out: list[ThreadRecord] = []
        for thread in sorted(index.threads.values(), key=lambda t: (t.created_at, t.thread_id)):
            detail = await self._detail(index, thread)
            if detail is not None:
                out.append(thread.record(detail))
        return await self._seen(out)

    # -- writes ---------------------------------------------------------------------------------

    async def start_run(
        self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *, fork: Fork | None = None
    ) -> list[Message]:
        """A fork writes its branch in the ``start_run`` record (``fork``): one frame, so the branch, the
        run on it and its inputs are one atomic write; the thread's first fork rebuilds its detail
        with a ``BranchTree`` first (one read of its log)."""
        async with self._write_lock:
            index = self._require()
            if await self._run_thread(index, run.run_id) is not None:
                raise DuplicateRun(run.run_id)
            thread = index.threads.get(run.thread_id)
            self._usable(thread)
            detail = await self._detail(index, thread) if thread is not None else None
            name = thread_file_name(run.thread_id)
            offset = thread.size if thread is not None else 0
            at = self._clock.now()
            record: dict[str, Any] = {
                "type": "start_run",
                "thread": run.thread_id,
                "run": None,
                "messages": [],  # stamped in the I/O thread
                "at": at,
            }
            taken: Collection[str] = detail.ids if detail is not None else ()
            if fork is not None:
                check_fork(fork)
                if thread is None or detail is None:
                    raise ValueError(f"thread {run.thread_id!r} does not exist: there is nothing to fork")
                if detail.tree is None:
                    detail = await self._ordered_detail(index, thread)
                tree = detail.tree
                assert tree is not None
                after = fork.after_seq
                branch = forked_branch(run.thread_id, max(b.branch for b in tree.branches) + 1,
                                       branch_path(tree.branches, tree.active), fork, run,
                                       tree.branch_at(after) if after else None)
                limits = tree.limits()
                record["fork"] = branch_to_json(branch)
                run = attrs.evolve(run, branch=branch.branch)
                taken = tree.path_ids(limits, upto=after)
            else:
                run = attrs.evolve(run, branch=detail.active if detail is not None else 0)
            record["run"] = run_to_json(run)
            if thread is None:
                record["owner"] = owner
            last = thread.last_seq if thread is not None else 0
            committed = await self._write(index, name, offset, record, detail,
                                          lambda: _stamp(last, taken, run.thread_id, inputs, run.branch))
            mark = self.group.written if self.group is not None else 0
        await self._acknowledged(mark)
        return committed

    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        async with self._write_lock:
            index = self._require()
            thread = index.threads.get(thread_id)
            self._usable(thread)
            detail = await self._detail(index, thread) if thread is not None else None
            run = detail.runs.get(run_id) if detail is not None else None
            if thread is None or detail is None or run is None or run.thread_id != thread_id:
                raise ValueError(f"run {run_id!r} is not a run of thread {thread_id!r}")
            open_calls = {p.tool_call_id for p in detail.pending} - set(commit.resolved)
            pending: list[dict[str, Any]] = []
            for p in commit.pending:
                if p.tool_call_id in open_calls:
                    raise ValueError(
                        f"tool call {p.tool_call_id!r} is already pending on thread {thread_id!r}"
                    )
                open_calls.add(p.tool_call_id)
                pending.append(pending_to_json(attrs.evolve(p, thread_id=thread_id)))
            record = {
                "type": "commit",
                "thread": thread_id,
                "run": run_id,
                "messages": [],  # stamped in the I/O thread
                "resolved": list(commit.resolved),
                "pending": pending,
                "state": commit.state,
                "usage": [commit.usage.input_tokens, commit.usage.output_tokens],
                "steps": commit.steps,
                "status": commit.status.value,
                "error_code": commit.error_code,
                "error_message": commit.error_message,
                "cause": commit.cause,
                "updated_at": self._clock.now(),
            }
            taken = detail.path_ids(run.branch)
            last = thread.last_seq
            committed = await self._write(index, thread.file_name, thread.size, record, detail,
                                          lambda: _stamp(last, taken, thread_id, commit.messages, run.branch))
            mark = self.group.written if self.group is not None else 0
        await self._acknowledged(mark)
        return committed

    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
        updated_at: int | None = None,
        branches: Sequence[Branch] = (),
    ) -> None:
        if updated_at is None:
            updated_at = imported_updated_at(thread, runs, messages)
        tree = check_import_branches(thread, runs, messages, branches)
        async with self._write_lock:
            index = self._require()
            thread_id = thread.thread_id
            if thread_id in index.threads:
                raise ValueError(f"thread {thread_id!r} already exists in the ledger")
            seen_runs: set[str] = set()
            for run in runs:
                if run.run_id in seen_runs or await self._run_thread(index, run.run_id) is not None:
                    raise DuplicateRun(run.run_id)
                if run.thread_id != thread_id:
                    raise ValueError(
                        f"run {run.run_id!r} belongs to thread {run.thread_id!r}, not {thread_id!r}"
                    )
                seen_runs.add(run.run_id)
            ids: set[tuple[int, str]] = set()
            seqs: set[int] = set()
            for m in messages:
                if (m.branch, m.id) in ids or m.seq in seqs or not 0 < m.seq <= thread.last_seq:
                    raise ValueError(
                        f"message {m.id!r} (seq {m.seq}) repeats an id or seq, or lies beyond last_seq "
                        f"{thread.last_seq}"
                    )
                ids.add((m.branch, m.id))
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
                    "owner": thread.owner,
                    "updated_at": updated_at,
                    **({"active_branch": thread.active_branch} if thread.active_branch else {}),
                },
                **({"branches": [branch_to_json(b) for b in tree[1:]]} if len(tree) > 1 else {}),
                "runs": [run_to_json(r) for r in runs],
                "messages": [message_to_json(m) for m in messages],
                "pending": [pending_to_json(p) for p in pending],
            }
            await self._write(index, thread_file_name(thread_id), 0, record)
            self._clock.advance_to(updated_at)
            mark = self.group.written if self.group is not None else 0
        await self._acknowledged(mark)

    # -- listing and deletion ---------------------------------------------------------------------

    async def thread_summary(self, thread_id: str) -> ThreadSummary | None:
        await trio.lowlevel.checkpoint()
        thread = self._require().threads.get(thread_id)
        return await self._seen(None if thread is None else thread.summary())

    async def list_thread_summaries(
        self, owner: OwnerFilter, agent: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ThreadPage:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor is not None else None
        await trio.lowlevel.checkpoint()
        index = self._require()
        keys = index.order if owner is ALL_OWNERS else index.by_owner.get(owner, [])
        i = len(keys) if after is None else bisect_left(keys, after, key=listing_key)
        items: list[ThreadSummary] = []
        more = False
        while i > 0:
            i -= 1
            thread = keys[i]
            if agent is not None and thread.agent_id != agent:
                continue
            if len(items) == limit:
                more = True
                break
            items.append(thread.summary())
        last = items[-1] if more else None
        return await self._seen(ThreadPage(tuple(items), encode_cursor(last.updated_at, last.thread_id)
                                           if last else None))

    async def delete_thread(self, thread_id: str) -> bool:
        """Unlink the thread's log (one atomic rename-free step: the log holds all of the thread) and
        fsync the directory; then forget it."""
        async with self._write_lock:
            index = self._require()
            thread = index.threads.get(thread_id)
            if thread is None:
                return False
            if thread.file_name in self._lost:  # its log is gone: the detail cannot be rebuilt
                detail = thread.detail
            else:
                detail = await self._detail(index, thread)
                if detail is None:
                    return False
            name = thread.file_name

            def work() -> OSError | None:
                fd = self._fds.pop(name, None)
                if fd is not None:
                    os.close(fd)
                self._dirty.pop(name, None)
                with self._sync_guard:  # a log about to go needs no sync
                    unsynced = self._unsynced.pop(name, None)
                if unsynced is not None:
                    os.close(unsynced[0])
                try:
                    os.unlink(os.path.join(self._threads_dir, name))
                except FileNotFoundError:
                    if name not in self._lost:  # a lost log is already gone: forgetting it is the delete
                        raise
                self._lost.discard(name)
                try:  # the log is gone from here on, durable or not: the index must forget it
                    self._fsync_dir(self._threads_dir)
                except OSError as exc:
                    return exc
                return None

            unsynced = await self._io(work, "delete a thread")
            self._details.drop(thread_id)
            self._hot.drop(thread_id)
            index.remove(thread_id, detail)
            if unsynced is not None:
                raise StoreUnavailable(f"the file ledger at {self.path} deleted a thread but could not "
                                       f"make it durable: {_describe(unsynced)}")
            return True


def _stamp(
    last: int, taken: Collection[str], thread_id: str, messages: Sequence[Message], branch: int
) -> list[dict[str, Any]]:
    """Assign seqs (after ``last``), timestamps and ``branch`` to ``messages``; an id repeated or already
    on the path they extend (``taken``) raises ``ValueError`` (nothing written)."""
    batch: set[str] = set()
    now = _now_ms()
    out: list[dict[str, Any]] = []
    for m in messages:
        if m.id in taken or m.id in batch:
            raise ValueError(f"message id {m.id!r} is already committed on thread {thread_id!r}")
        batch.add(m.id)
        last += 1
        out.append(message_to_json(attrs.evolve(m, seq=last, created_at=m.created_at or now, branch=branch)))
    return out


def _path_length(thread: ThreadEntry, detail: ThreadDetail) -> int | None:
    """The active path's length for a hot-thread entry (None: every message, a thread that never branched)."""
    return thread.message_count if detail.tree is not None and len(detail.tree.branches) > 1 else None


def _check_branch(detail: ThreadDetail, branch: int) -> None:
    """A read of ``branch``'s path: the thread must have that branch (``ValueError``)."""
    tree = detail.tree
    if type(branch) is not int or not (branch == 0 if tree is None else tree.knows(branch)):
        raise ValueError(f"no branch {branch!r} on the thread")


def _lost_message(path: str) -> str:
    return (f"the ledger file {path} was deleted or replaced under the server; its thread takes no more "
            "commits (restart the server to reopen the ledger, or restore the file from a backup)")


def _describe(exc: OSError) -> str:
    if exc.errno == errno.ENOSPC:
        return "the disk is full (free some space)"
    if exc.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return f"{exc.strerror or exc} (check that the directory is writable)"
    return str(exc)
