"""The SQLite ledger: sqlite-utils over one connection, WAL, one writer thread.

Every call runs in a worker thread through ``trio.to_thread.run_sync`` with a capacity limiter of
one, so transactions never interleave on the connection and the event loop never blocks; the calls
queued while one is in the thread go there together next (``awaken.ledger.serial``). Each
``start_run``/``commit`` is one ``BEGIN IMMEDIATE … COMMIT`` transaction.

Durability is the ``synchronous`` option (WAL either way):

* ``"full"`` (the default): every commit is fsynced before it is acknowledged; an acknowledged
  commit survives a process kill, an OS crash and a power loss. The fsync is a group commit
  (``awaken/ledger/groupsync.py``): the connection runs ``PRAGMA synchronous = NORMAL`` (SQLite
  syncs the WAL only around checkpoints), and every call, write or read, returns only once an fsync
  of the WAL file that began after it has returned. One fsync is in flight at a time, and the commits
  that arrive meanwhile share the next one: 200 runs starting together cost a few fsyncs, not 200.
  The WAL is append-only between checkpoints, so an fsync makes every commit before it durable, and a
  read never reports a commit that is not.
* ``"normal"``: no fsync per commit (WAL is fsynced at checkpoints); an acknowledged commit
  survives a process kill, but an OS crash, power loss or a filesystem that goes read-only may lose
  the newest commits (never consistency). It buys commit latency (one fsync fewer per commit):
  ``python -m bench.durability`` measures both in one run (``bench/DURABILITY.md``).

Every call (read or write) first checks that the database file is still the one it opened (same
inode): a file deleted or replaced under the server is ``StoreUnavailable``; it never writes into,
or serves history from, an unlinked file that would be gone at restart.

Any ``sqlite3.Error`` other than a constraint violation becomes ``StoreUnavailable``.

A database that cannot be written when the ledger opens (a full disk, a read-only file or
filesystem) is opened read-only instead of refusing to start: history, listings and ``/readyz``'s
read answer, every write is ``StoreUnavailable`` saying why. Each write (and each ``/readyz`` probe)
first tries to reopen it for writing, so the ledger takes commits again, with the usual recovery of
runs a dead process left ``running``, as soon as space is freed.

Hot threads (``awaken/ledger/hotcache.py``): the admission state of recently used threads (record,
latest messages, pending calls, every committed message id) is kept in an LRU capped at
``cache_bytes`` (default 8 MiB, 0: none). This object is the only writer of the file (the lock), and
every write updates the cache in the same worker-thread call that committed it (or drops the
thread's entry when its outcome is unknown), so an admission on a hot thread reads nothing.
"""

from __future__ import annotations

import errno
import fcntl
import json
import logging
import os
import sqlite3
import time
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote

import sqlite_utils
import trio

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, Usage, parts_from_json, parts_to_json
from awaken.engine.state import Cause, RunStatus, recovery
from awaken.ledger.groupsync import GroupSync
from awaken.ledger.hotcache import DEFAULT_BUDGET, MIN_KEEP, HotThreads, cached_facts, entry_for
from awaken.ledger.interface import (
    ALL_OWNERS,
    NO_THREAD,
    AdmissionFacts,
    Branch,
    BranchPath,
    Commit,
    DuplicateRun,
    Fork,
    Ledger,
    OwnerFilter,
    PendingCall,
    RunRecord,
    RunSummary,
    ThreadPage,
    ThreadRecord,
    ThreadSummary,
    ThreadView,
    WriteClock,
    answered_in,
    branch_path,
    check_fork,
    check_import_branches,
    check_limit,
    decode_cursor,
    encode_cursor,
    forked_branch,
    imported_updated_at,
    last_run_of,
    path_of,
    thread_title,
    tools_from_json,
    tools_to_json,
)
from awaken.ledger.serial import SerialCalls
from storage_backends.branch_sql import path_condition

from .known_threads import KnownThreads

T = TypeVar("T")
log = logging.getLogger("awaken.ledger.interface.sqlite")


def _unwritable(exc: BaseException) -> str:
    """Why a database cannot be written, in words an operator acts on."""
    text = str(exc)
    if "disk is full" in text or getattr(exc, "errno", None) == errno.ENOSPC:
        return f"the disk is full (free some space): {text}"
    if "readonly" in text or "read-only" in text or getattr(exc, "errno", None) in (errno.EROFS, errno.EACCES):
        return f"the database or its directory cannot be written: {text}"
    return text

#: a message is stored on one branch; ids are unique per (thread, branch) here, per path by the ledger
_MESSAGES_TABLE = """
CREATE TABLE IF NOT EXISTS messages (
    thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, role TEXT NOT NULL,
    run_id TEXT, parts TEXT NOT NULL, created_at INTEGER NOT NULL, branch INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (thread_id, seq), UNIQUE (thread_id, id, branch)
);
"""

#: branch 0 of every thread is implicit: a thread that never branched has no row here
_BRANCHES_TABLE = """
CREATE TABLE IF NOT EXISTS branches (
    thread_id TEXT NOT NULL, branch INTEGER NOT NULL, parent INTEGER NOT NULL, fork_seq INTEGER NOT NULL,
    created_at INTEGER NOT NULL, run_id TEXT, reason TEXT NOT NULL,
    PRIMARY KEY (thread_id, branch)
);
"""

_SCHEMA = """
CREATE TABLE IF NOT EXISTS threads (
    id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, state TEXT NOT NULL, last_seq INTEGER NOT NULL,
    owner TEXT, title TEXT, agent_id TEXT, updated_at INTEGER NOT NULL DEFAULT 0,
    message_count INTEGER NOT NULL DEFAULT 0,
    active_branch INTEGER NOT NULL DEFAULT 0, last_branch INTEGER NOT NULL DEFAULT 0
);
CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, error_code TEXT, error_message TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0, cause TEXT, tools TEXT, branch INTEGER NOT NULL DEFAULT 0
);
CREATE INDEX IF NOT EXISTS runs_thread ON runs (thread_id, status);
""" + _MESSAGES_TABLE + """
CREATE TABLE IF NOT EXISTS pending (
    thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, run_id TEXT NOT NULL, name TEXT NOT NULL,
    arguments TEXT NOT NULL, kind TEXT NOT NULL, message_id TEXT NOT NULL, ord INTEGER NOT NULL,
    PRIMARY KEY (thread_id, tool_call_id)
);
""" + _BRANCHES_TABLE

_INDEXES = """
CREATE INDEX IF NOT EXISTS threads_updated ON threads (updated_at, id);
CREATE INDEX IF NOT EXISTS threads_owner_updated ON threads (owner, updated_at, id);
CREATE INDEX IF NOT EXISTS threads_agent_updated ON threads (agent_id, updated_at, id);
CREATE INDEX IF NOT EXISTS runs_thread_created ON runs (thread_id, created_at);
"""

#: Schema changes since the first release, in order; ``PRAGMA user_version`` counts those applied.
#: A new database gets ``_SCHEMA`` (which includes them all); an existing one runs the missing ones.
_MIGRATIONS: tuple[Callable[[sqlite3.Connection], None], ...] = (
    # 1: why an interrupted run stopped
    lambda conn: conn.execute("ALTER TABLE runs ADD COLUMN cause TEXT"),
    # 2: thread owner and the columns a thread listing reads
    lambda conn: _add_thread_summaries(conn),
    # 3: the tools a client declared for a run
    lambda conn: conn.execute("ALTER TABLE runs ADD COLUMN tools TEXT"),
    # 4: threads that branch
    lambda conn: _add_branches(conn),
)


def _add_branches(conn: sqlite3.Connection) -> None:
    """Migration 4: every existing message, run and thread is on branch 0 (the thread never branched);
    the messages table is rebuilt for its ``(thread_id, id, branch)`` uniqueness."""
    conn.execute("ALTER TABLE threads ADD COLUMN active_branch INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE threads ADD COLUMN last_branch INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE runs ADD COLUMN branch INTEGER NOT NULL DEFAULT 0")
    conn.execute("ALTER TABLE messages RENAME TO messages_before_branches")
    conn.execute(_MESSAGES_TABLE)
    conn.execute("INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at, branch) "
                 "SELECT thread_id, seq, id, role, run_id, parts, created_at, 0 FROM messages_before_branches")
    conn.execute("DROP TABLE messages_before_branches")
    conn.execute(_BRANCHES_TABLE)


def _add_thread_summaries(conn: sqlite3.Connection) -> None:
    """Migration 2: owner (NULL for every existing thread) and the listing columns, filled from history."""
    for column in ("owner TEXT", "title TEXT", "agent_id TEXT", "updated_at INTEGER NOT NULL DEFAULT 0",
                   "message_count INTEGER NOT NULL DEFAULT 0"):
        conn.execute(f"ALTER TABLE threads ADD COLUMN {column}")
    conn.execute(
        "UPDATE threads SET "
        "message_count = (SELECT count(*) FROM messages m WHERE m.thread_id = threads.id), "
        "updated_at = max(created_at, coalesce((SELECT max(updated_at) FROM runs r WHERE r.thread_id = threads.id), 0)), "
        "agent_id = (SELECT agent_id FROM runs r WHERE r.thread_id = threads.id ORDER BY created_at DESC, rowid DESC LIMIT 1)"
    )
    titles = []
    for (thread_id,) in conn.execute("SELECT id FROM threads").fetchall():
        for role, parts in conn.execute(
            "SELECT role, parts FROM messages WHERE thread_id = ? AND role = 'user' ORDER BY seq", (thread_id,)
        ):
            title = thread_title([Message("", role, parts_from_json(json.loads(parts)))])
            if title is not None:
                titles.append((title, thread_id))
                break
    conn.executemany("UPDATE threads SET title = ? WHERE id = ?", titles)
    for statement in _INDEXES.split(";"):
        if statement.strip():
            conn.execute(statement)


def _migrate(conn: sqlite3.Connection) -> None:
    """Create the schema, or bring an existing database up to date, in one transaction."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        version = conn.execute("PRAGMA user_version").fetchone()[0]
        exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'threads'").fetchone()
        if not exists:
            for statement in (_SCHEMA + _INDEXES).split(";"):
                if statement.strip():
                    conn.execute(statement)
        elif version > len(_MIGRATIONS):
            raise StoreUnavailable(
                f"the database schema (version {version}) is newer than this Awaken understands "
                f"({len(_MIGRATIONS)}); upgrade Awaken"
            )
        else:
            for migration in _MIGRATIONS[version:]:
                migration(conn)
        conn.execute(f"PRAGMA user_version = {len(_MIGRATIONS)}")
        conn.execute("COMMIT")
    except BaseException:
        if conn.in_transaction:
            conn.execute("ROLLBACK")
        raise


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


class SqliteLedger(Ledger):
    """``[ledger] backend = "sqlite"``; options: ``path`` (the database file), ``busy_timeout_ms``,
    ``synchronous`` (``"full"``, the default, or ``"normal"``: see the module docstring), ``cache_bytes``
    (the cap of the hot-thread cache, default 8 MiB; 0 disables it)."""

    def __init__(self, path: str = "./var/awaken.db", busy_timeout_ms: int = 2000, synchronous: str = "full",
                 cache_bytes: int = DEFAULT_BUDGET) -> None:
        if isinstance(busy_timeout_ms, bool) or not isinstance(busy_timeout_ms, int) or busy_timeout_ms < 0:
            raise ValueError(f"busy_timeout_ms must be a non-negative integer, not {busy_timeout_ms!r}")
        if synchronous not in ("full", "normal"):
            raise ValueError(f'synchronous must be "full" or "normal", not {synchronous!r}')
        self.synchronous = synchronous
        #: (st_dev, st_ino) of the database file as opened
        self._identity: tuple[int, int] | None = None
        self.path = Path(path)
        self.busy_timeout_ms = busy_timeout_ms
        self._db: sqlite_utils.Database | None = None
        self._limiter = trio.CapacityLimiter(1)
        #: the calls of ``_call``, the ones queued while a hop runs sharing the next one
        self._calls = SerialCalls(self._limiter)
        #: the thread ids in the database, in a fixed-size Bloom filter (no entry per thread): a run on
        #: a thread never seen before needs no read at admission. Only this object writes threads, so
        #: an id it holds is always in the filter; a false "maybe" costs the read.
        self._threads = KnownThreads()
        #: the threads that may have branched (every one that did, maybe a few more: a fork whose commit
        #: failed): a read of any other thread takes every message, with no branch read or filter
        self._branched: set[str] = set()
        #: the descriptor holding ``<db>.lock``: one process owns a ledger (recovery at open marks the
        #: runs another live process is streaming as interrupted, so two owners would corrupt history)
        self._lock_fd: int | None = None
        self._clock = WriteClock()
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, not {cache_bytes!r}")
        #: hot threads' admission state, kept exact by every write (see the module docstring)
        self._hot = HotThreads(cache_bytes)
        #: the last call to the store failed: admission reads the store (and says so) until one succeeds
        self._failing = False
        #: why the database could not be opened for writing (None: it was): history is served
        #: read-only, and every write first tries to reopen it for writing
        self._read_only: str | None = None
        #: ``"full"``: the shared fsyncs of the WAL every call waits for (None with ``"normal"``)
        self.group = GroupSync(self._sync_wal, f"the SQLite ledger at {self.path}") if synchronous == "full" else None
        #: the WAL file, open for its fsyncs (the writable connection's)
        self._wal_fd: int | None = None

    # -- plumbing -------------------------------------------------------------------------------

    async def _call(self, fn: Callable[[sqlite_utils.Database], T]) -> T:
        db = self._db
        if db is None:
            raise StoreUnavailable("the ledger is closed")

        group = self.group

        def run() -> tuple[T, int]:
            try:
                self._check_file()  # never serve or commit through a file no longer in its place
                result = fn(db)
            except (DuplicateRun, ValueError):
                raise
            except sqlite3.Error as exc:
                self._failing = True
                raise StoreUnavailable(f"the SQLite ledger failed: {exc}") from None
            except StoreUnavailable:
                self._failing = True
                raise
            self._failing = False
            # the commits this call made or saw: it returns once they are on disk
            return result, group.written if group is not None else 0

        result, mark = await self._calls.run(run)
        if group is not None and group.durable < mark:
            try:
                await group.durable_to(mark)
            except StoreUnavailable:
                self._failing = True
                raise
        return result

    def _sync_wal(self) -> None:
        """The group commit's fsync (``group``): the WAL holds every commit not yet checkpointed, and
        a checkpoint fsyncs the database file before the WAL is reused."""
        fd = self._wal_fd
        if fd is None:
            raise OSError(errno.EBADF, "the SQLite ledger's WAL file is not open")
        os.fsync(fd)

    def _transaction(self, db: sqlite_utils.Database, body: Callable[[sqlite3.Connection], T]) -> T:
        conn = self._writable(db).conn
        self._check_file()
        conn.execute("BEGIN IMMEDIATE")
        try:
            result = body(conn)
            conn.execute("COMMIT")
            if self.group is not None:
                self.group.wrote()
        except BaseException:
            # A failed COMMIT (or an error SQLite already rolled back) must not leave the connection
            # inside a transaction: every later BEGIN would fail.
            if conn.in_transaction:
                conn.execute("ROLLBACK")
            raise
        return result

    def _write(self, db: sqlite_utils.Database, thread_id: str, body: Callable[[sqlite3.Connection], T],
               apply: Callable[[T], None]) -> T:
        """One transaction, then its effect on the thread's hot entry (in the same worker-thread
        call, so no read of the store or the cache comes between); a write that fails (committed or
        not) drops the entry."""
        try:
            result = self._transaction(db, body)
            apply(result)
        except BaseException:
            self._hot.drop(thread_id)
            raise
        return result

    def _check_file(self) -> None:
        """Refuse to write when the database file was deleted or replaced since it was opened."""
        try:
            st = os.stat(self.path)
        except OSError:
            raise StoreUnavailable(f"the SQLite ledger file {self.path} is gone") from None
        if (st.st_dev, st.st_ino) != self._identity:
            raise StoreUnavailable(f"the SQLite ledger file {self.path} was replaced")

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Open for writing; when the database cannot be written (a full disk, a read-only file or
        filesystem), open it read-only instead: history is served, every write (and ``/readyz``)
        tries to reopen it for writing first and says why it cannot (``StoreUnavailable``)."""
        try:
            self._db = await trio.to_thread.run_sync(self._open_writable, limiter=self._limiter)
            self._read_only = None
            return
        except (sqlite3.Error, OSError) as exc:
            failure = exc
        try:
            self._db = await trio.to_thread.run_sync(self._open_read_only, limiter=self._limiter)
        except (sqlite3.Error, OSError, StoreUnavailable):
            self._unlock()
            raise StoreUnavailable(f"cannot open the SQLite ledger at {self.path}: {failure}") from None
        self._read_only = _unwritable(failure)
        log.warning("the SQLite ledger at %s cannot be written (%s): serving its history read-only until it can",
                    self.path, self._read_only)

    def _open_writable(self) -> sqlite_utils.Database:
        """The read-write connection: schema brought up to date, runs a dead process left ``running``
        marked interrupted (in a worker thread, under the limiter)."""
        if self.path.parent and not self.path.parent.exists():
            os.makedirs(self.path.parent, exist_ok=True)
        if self._lock_fd is None:
            self._lock_fd = _lock(self.path.with_name(self.path.name + ".lock"))
        conn = sqlite3.connect(
            str(self.path), check_same_thread=False, isolation_level=None, timeout=self.busy_timeout_ms / 1000
        )
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            db = sqlite_utils.Database(conn)
            db.enable_wal()
            # "full" is the group commit's fsync of the WAL (``group``), not SQLite's fsync per commit
            conn.execute("PRAGMA synchronous = NORMAL")
            st = os.stat(self.path)
            self._identity = (st.st_dev, st.st_ino)
            # SQLite's own page cache (2 MB by default) is redundant with the OS page cache for
            # this access pattern (appends, and reads of recent threads); 512 KiB keeps the
            # server's memory flat as history grows.
            conn.execute("PRAGMA cache_size = -512")
            _migrate(conn)
            now = _now_ms()
            change = recovery(Cause.SERVER_RESTART)  # the run state's table decides what recovery writes
            conn.execute(
                "UPDATE runs SET status = ?, error_code = ?, error_message = ?, cause = ?, updated_at = ? "
                "WHERE status = ?",
                (change.status.value, change.error_code, change.error_message, change.cause_value, now,
                 change.previous.value),
            )
            self._load_known(conn)
            if self.group is not None:
                self._open_wal()
        except BaseException:
            conn.close()  # a failed open must not leak the connection (or its locks)
            self._unlock()
            raise
        return db

    def _open_wal(self) -> None:
        """Open the WAL file for the group commit's fsyncs, and make what the open wrote (migration,
        recovery) and the WAL's directory entry durable before anything is acknowledged."""
        self._close_wal()
        fd = os.open(f"{self.path}-wal", os.O_RDONLY | os.O_CREAT | os.O_CLOEXEC, 0o644)
        try:
            os.fsync(fd)
            directory = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
            try:
                os.fsync(directory)
            finally:
                os.close(directory)
        except BaseException:
            os.close(fd)
            raise
        self._wal_fd = fd
        assert self.group is not None
        self.group.reset()

    def _close_wal(self) -> None:
        fd, self._wal_fd = self._wal_fd, None
        if fd is not None:
            os.close(fd)

    def _open_read_only(self) -> sqlite_utils.Database:
        """A read-only connection to an existing database of the current schema (nothing is written:
        no migration, no recovery; runs a dead process left ``running`` stay so until it can write)."""
        if self._lock_fd is None:
            try:
                self._lock_fd = _lock(self.path.with_name(self.path.name + ".lock"))
            except OSError:  # the lock file cannot be created (the disk is full): nothing writes anyway
                pass
        if not self.path.exists():
            raise StoreUnavailable(f"no database at {self.path}")
        conn = sqlite3.connect(f"file:{quote(str(self.path.resolve()))}?mode=ro", uri=True, check_same_thread=False,
                               isolation_level=None, timeout=self.busy_timeout_ms / 1000)
        try:
            conn.execute(f"PRAGMA busy_timeout = {int(self.busy_timeout_ms)}")
            conn.execute("PRAGMA cache_size = -512")
            version = conn.execute("PRAGMA user_version").fetchone()[0]
            if version != len(_MIGRATIONS):
                raise StoreUnavailable(f"the database schema (version {version}) must be migrated, which needs a write")
            st = os.stat(self.path)
            self._identity = (st.st_dev, st.st_ino)
            self._load_known(conn)
        except BaseException:
            conn.close()
            raise
        return sqlite_utils.Database(conn)

    def _load_known(self, conn: sqlite3.Connection) -> None:
        """The thread ids (``_threads``) and the write clock, from the database just opened."""
        self._threads.clear()
        self._branched.clear()
        for thread_id, last_branch in conn.execute("SELECT id, last_branch FROM threads"):
            self._threads.add(thread_id)
            if last_branch:
                self._branched.add(thread_id)
        self._clock.advance_to(conn.execute("SELECT coalesce(max(updated_at), 0) FROM threads").fetchone()[0])

    def _writable(self, db: sqlite_utils.Database) -> sqlite_utils.Database:
        """``db``, or when the ledger was opened read-only, a read-write connection in its place (a
        ``StoreUnavailable`` saying why not, the read-only one kept). In the worker thread."""
        if self._read_only is None:
            return db
        db.conn.close()
        try:
            fresh = self._open_writable()
        except (sqlite3.Error, OSError) as exc:
            self._read_only = _unwritable(exc)
            self._db = self._open_read_only()
            raise StoreUnavailable(f"the SQLite ledger is read-only: {self._read_only}") from None
        self._db, self._read_only = fresh, None
        self._hot.clear()  # views read before the restart recovery above
        log.warning("the SQLite ledger at %s takes writes again", self.path)
        return fresh

    async def aclose(self) -> None:
        self._hot.clear()
        db, self._db = self._db, None
        if db is not None:
            await trio.to_thread.run_sync(db.conn.close, limiter=self._limiter)
        self._close_wal()
        self._unlock()

    def _unlock(self) -> None:
        fd, self._lock_fd = self._lock_fd, None
        if fd is not None:
            os.close(fd)  # closing the descriptor releases the flock

    async def ping(self) -> None:
        await self._call(lambda db: db.conn.execute("SELECT count(*) FROM threads LIMIT 1").fetchone())

    async def probe_write(self) -> None:
        """A read of the ledger's tables and a real (tiny) committed write: a full disk, a read-only
        filesystem or a deleted file fail it."""

        def probe(db: sqlite_utils.Database) -> None:
            db.conn.execute("SELECT count(*) FROM threads LIMIT 1").fetchone()

            def write(conn: sqlite3.Connection) -> None:
                conn.execute("CREATE TABLE IF NOT EXISTS probe (id INTEGER PRIMARY KEY, at REAL)")
                conn.execute("INSERT OR REPLACE INTO probe VALUES (1, ?)", (time.time(),))

            self._transaction(db, write)

        await self._call(probe)

    # -- reads ----------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        def q(db: sqlite_utils.Database) -> ThreadRecord | None:
            row = db.conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            return None if row is None else _thread(row)

        return await self._call(q)

    async def get_run(self, run_id: str) -> RunRecord | None:
        def q(db: sqlite_utils.Database) -> RunRecord | None:
            row = db.conn.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id = ?", (run_id,)).fetchone()
            return None if row is None else _run(row)

        return await self._call(q)

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        def q(db: sqlite_utils.Database) -> list[RunRecord]:
            rows = db.conn.execute(
                f"SELECT {_RUN_COLS} FROM runs WHERE thread_id = ? ORDER BY created_at, rowid", (thread_id,)
            )
            return [_run(r) for r in rows]

        return await self._call(q)

    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        def q(db: sqlite_utils.Database) -> list[PendingCall]:
            rows = db.conn.execute(
                "SELECT tool_call_id, run_id, thread_id, name, arguments, kind, message_id "
                "FROM pending WHERE thread_id = ? ORDER BY ord",
                (thread_id,),
            )
            return [PendingCall(*r) for r in rows]

        return await self._call(q)

    async def thread_view(self, thread_id: str) -> ThreadView:
        """One worker-thread round trip: the thread, its active path and its pending calls.

        All calls share one connection behind a limiter of one, so no commit can land between the
        reads.
        """

        if thread_id not in self._threads:
            return ThreadView(None, (), ())

        def q(db: sqlite_utils.Database) -> ThreadView:
            conn = db.conn
            row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                return ThreadView(None, (), ())
            thread = _thread(row)
            where, args = path_condition(_active_path(conn, row))
            messages = tuple(
                _message(r)
                for r in conn.execute(
                    f"SELECT {_MESSAGE_COLS} FROM messages WHERE thread_id = ?{where} ORDER BY seq", (thread_id, *args)
                )
            )
            return ThreadView(thread, messages, _pending(conn, thread_id))

        return await self._call(q)

    async def committed_ids(self, thread_id: str, ids: Collection[str]) -> frozenset[str]:
        """From the ``(thread_id, id, branch)`` index: no message body is read (a thread that branched
        also reads the branch and seq of the hits, to keep those on its active path)."""
        if not ids or thread_id not in self._threads:
            return frozenset()

        def q(db: sqlite_utils.Database) -> frozenset[str]:
            conn = db.conn
            if thread_id in self._branched:
                row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
                if row is None:
                    return frozenset()
                return _committed_ids(conn, thread_id, ids, _active_path(conn, row))
            return _committed_ids(conn, thread_id, ids, None)

        return await self._call(q)

    async def admission_facts(self, thread_id: str, ids: AbstractSet[str], tail: int) -> AdmissionFacts:
        """One worker-thread round trip: the thread, the latest ``tail`` messages of its active path,
        its pending calls, and the asked ids looked up in the ``(thread_id, id, branch)`` index.

        A hot thread is answered from the cache without a round trip (unless the last call to the
        store failed: then the admission is refused ``StoreUnavailable`` before its stream starts); a cold one (after a restart,
        or evicted) is loaded into it by this same round trip: its latest messages, its pending
        calls and its committed ids (one index-only read of short strings)."""
        if thread_id not in self._threads:
            return NO_THREAD
        entry = None if self._failing else self._hot.get(thread_id)
        if entry is not None:
            facts = cached_facts(entry, ids, tail)
            if facts is not None:
                await trio.lowlevel.checkpoint()
                return facts

        def q(db: sqlite_utils.Database) -> AdmissionFacts:
            conn = db.conn
            row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                return NO_THREAD
            thread = _thread(row)
            path = _active_path(conn, row)
            if self._hot.fits(row[_MESSAGE_COUNT] if path is not None else thread.last_seq):
                facts = self._load_hot(conn, thread, path, ids, tail)
                if facts is not None:
                    return facts
            messages = _path_tail(conn, thread, path, tail)
            return AdmissionFacts(thread, messages, _pending(conn, thread_id), _committed_ids(conn, thread_id, ids, path))

        return await self._call(q)

    async def answered_calls(self, thread_id: str, call_ids: Collection[str]) -> frozenset[str]:
        wanted = frozenset(call_ids)
        if not wanted:
            return frozenset()

        def q(db: sqlite_utils.Database) -> frozenset[str]:
            conn = db.conn
            path = None
            if thread_id in self._branched:
                row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
                if row is None:
                    return frozenset()
                path = _active_path(conn, row)
            where, args = path_condition(path)
            results = (
                answered_in([Message("", "tool", parts_from_json(json.loads(r[0])))])
                for r in conn.execute(f"SELECT parts FROM messages WHERE thread_id = ? AND role = 'tool'{where}",
                                      (thread_id, *args))
            )
            return frozenset().union(*results) & wanted

        return await self._call(q)

    def _load_hot(self, conn: sqlite3.Connection, thread: ThreadRecord, path: BranchPath | None,
                  ids: AbstractSet[str], tail: int) -> AdmissionFacts | None:
        """Load a cold thread into the cache (in the worker thread) and answer from it: its active
        path's latest messages and ids (``path`` None: a thread that never branched, every message)."""
        keep = max(MIN_KEEP, tail)
        thread_id = thread.thread_id
        messages = _path_tail(conn, thread, path, keep)
        where, args = path_condition(path)
        held = [r[0] for r in conn.execute(f"SELECT id FROM messages WHERE thread_id = ?{where}", (thread_id, *args))]
        entry = entry_for(thread, messages, keep, _pending(conn, thread_id), held,
                          None if path is None else len(held))
        self._hot.put(thread_id, entry)
        return cached_facts(entry, ids, tail)

    async def read_messages(
        self, thread_id: str, after_seq: int, limit: int, branch: int | None = None
    ) -> list[Message]:
        if branch is not None and (isinstance(branch, bool) or not isinstance(branch, int)):
            raise ValueError(f"a branch is a non-negative integer, not {branch!r}")

        def q(db: sqlite_utils.Database) -> list[Message]:
            conn = db.conn
            path = None
            if thread_id in self._branched:
                row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
                if row is None:
                    return []
                path = _active_path(conn, row, branch)
            elif branch:
                if conn.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,)).fetchone() is None:
                    return []
                raise ValueError(f"no branch {branch} on thread {thread_id!r}")
            where, args = path_condition(path)
            rows = conn.execute(
                f"SELECT {_MESSAGE_COLS} FROM messages WHERE thread_id = ? AND seq > ?{where} ORDER BY seq LIMIT ?",
                (thread_id, after_seq, *args, limit),
            )
            return [_message(r) for r in rows]

        return await self._call(q)

    async def list_branches(self, thread_id: str) -> list[Branch]:
        def q(db: sqlite_utils.Database) -> list[Branch]:
            conn = db.conn
            row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
            if row is None:
                return []
            return _branches(conn, thread_id, row[1]) if row[_LAST_BRANCH] else [Branch(0, None, 0, row[1])]

        return await self._call(q)

    async def list_threads(self) -> list[ThreadRecord]:
        def q(db: sqlite_utils.Database) -> list[ThreadRecord]:
            rows = db.conn.execute(f"SELECT {_THREAD_COLS} FROM threads ORDER BY created_at, id")
            return [_thread(r) for r in rows]

        return await self._call(q)

    # -- writes ---------------------------------------------------------------------------------

    async def start_run(
        self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *, fork: Fork | None = None
    ) -> list[Message]:
        if fork is not None:
            check_fork(fork)

        def body(conn: sqlite3.Connection) -> tuple[list[Message], bool]:
            if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.run_id,)).fetchone():
                raise DuplicateRun(run.run_id)
            if fork is not None:
                branch, path = self._fork(conn, run, fork)
                new = False
            else:
                new = conn.execute(
                    "INSERT OR IGNORE INTO threads (id, created_at, state, last_seq, owner) VALUES (?, ?, '{}', 0, ?)",
                    (run.thread_id, run.created_at, owner),
                ).rowcount == 1
                branch, path = 0, None
                if not new and run.thread_id in self._branched:
                    row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (run.thread_id,)).fetchone()
                    branch, path = row[_ACTIVE], _active_path(conn, row)
            _insert_run(conn, run, branch)
            appended = _append(conn, run.thread_id, inputs, branch, path, on_active=True)
            conn.execute("UPDATE threads SET agent_id = ?, updated_at = ? WHERE id = ?",
                         (run.agent_id, self._clock.now(), run.thread_id))
            return appended, new

        def apply(result: tuple[list[Message], bool]) -> None:
            appended, new = result
            if fork is not None:  # the active path changed: the entry is read again at the next admission
                self._hot.drop(run.thread_id)
                return
            thread = ThreadRecord(run.thread_id, run.created_at, {}, len(appended), owner)
            self._hot.started(thread, appended, new)

        committed, _ = await self._call(lambda db: self._write(db, run.thread_id, body, apply))
        self._threads.add(run.thread_id)
        return committed

    def _fork(self, conn: sqlite3.Connection, run: RunRecord, fork: Fork) -> tuple[int, BranchPath]:
        """``start_run``'s fork, inside its transaction: check ``after_seq`` is on the active path,
        create the branch, make it active; its number and path."""
        thread_id = run.thread_id
        row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
        if row is None:
            raise ValueError(f"cannot fork thread {thread_id!r}: it does not exist")
        branches = _branches(conn, thread_id, row[1]) if row[_LAST_BRANCH] else [Branch(0, None, 0, row[1])]
        active = branch_path(branches, row[_ACTIVE])
        held = conn.execute("SELECT branch FROM messages WHERE thread_id = ? AND seq = ?",
                            (thread_id, fork.after_seq)).fetchone() if fork.after_seq else None
        number = row[_LAST_BRANCH] + 1
        created = forked_branch(thread_id, number, active, fork, run, held[0] if held else None)
        where, args = path_condition(active if row[_LAST_BRANCH] else None)
        kept = conn.execute(f"SELECT count(*) FROM messages WHERE thread_id = ? AND seq <= ?{where}",
                            (thread_id, fork.after_seq, *args)).fetchone()[0]
        self._branched.add(thread_id)  # before it commits: a thread taken as branched is only read slower
        conn.execute(
            "INSERT INTO branches (thread_id, branch, parent, fork_seq, created_at, run_id, reason) "
            "VALUES (?, ?, ?, ?, ?, ?, ?)",
            (thread_id, number, created.parent, fork.after_seq, created.created_at, created.run_id, created.reason),
        )
        conn.execute("UPDATE threads SET active_branch = ?, last_branch = ?, message_count = ? WHERE id = ?",
                     (number, number, kept, thread_id))
        return number, branch_path([*branches, created], number)

    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        def body(conn: sqlite3.Connection) -> list[Message]:
            owner = conn.execute("SELECT thread_id, branch FROM runs WHERE id = ?", (run_id,)).fetchone()
            if owner is None or owner[0] != thread_id:
                raise ValueError(f"run {run_id!r} is not a run of thread {thread_id!r}")
            branch, path, on_active = owner[1], None, True
            if thread_id in self._branched:
                row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = ?", (thread_id,)).fetchone()
                path, on_active = _active_path(conn, row, branch), branch == row[_ACTIVE]
            appended = _append(conn, thread_id, commit.messages, branch, path, on_active)
            if commit.resolved:
                conn.executemany(
                    "DELETE FROM pending WHERE thread_id = ? AND tool_call_id = ?",
                    [(thread_id, cid) for cid in commit.resolved],
                )
            if commit.pending:
                base = conn.execute("SELECT coalesce(max(ord), 0) FROM pending").fetchone()[0]
                _insert_pending(
                    conn,
                    [
                        (thread_id, p.tool_call_id, p.run_id, p.name, p.arguments, p.kind, p.message_id, base + i + 1)
                        for i, p in enumerate(commit.pending)
                    ],
                )
            if commit.state is not None:
                conn.execute("UPDATE threads SET state = ? WHERE id = ?", (stored_state := _dumps(commit.state),
                                                                            thread_id))
                states.append(stored_state)
            now = self._clock.now()
            conn.execute("UPDATE threads SET updated_at = ? WHERE id = ?", (now, thread_id))
            conn.execute(
                "UPDATE runs SET status = ?, updated_at = ?, error_code = ?, error_message = ?, cause = ?, "
                "input_tokens = input_tokens + ?, output_tokens = output_tokens + ?, steps = steps + ? "
                "WHERE id = ?",
                (
                    commit.status.value,
                    now,
                    commit.error_code,
                    commit.error_message,
                    commit.cause,
                    commit.usage.input_tokens,
                    commit.usage.output_tokens,
                    commit.steps,
                    run_id,
                ),
            )
            return appended

        states: list[str] = []

        def apply(appended: list[Message]) -> None:
            # the state as a read gives it back (through its JSON), not the caller's objects
            state = json.loads(states[-1]) if states else None
            self._hot.committed(thread_id, appended, commit.pending, commit.resolved, state)

        return await self._call(lambda db: self._write(db, thread_id, body, apply))

    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
        updated_at: int | None = None,
        branches: Sequence[Branch] = (),
    ) -> None:
        thread_id = thread.thread_id
        if updated_at is None:
            updated_at = imported_updated_at(thread, runs, messages)
        ordered = sorted(messages, key=lambda m: m.seq)
        latest = last_run_of(runs)
        if any(r.thread_id != thread_id for r in runs) or any(p.thread_id != thread_id for p in pending):
            raise ValueError(f"import of thread {thread_id!r}: a run or pending call is of another thread")
        if any(not 0 < m.seq <= thread.last_seq for m in messages):
            raise ValueError(f"import of thread {thread_id!r}: a message seq is outside 1..{thread.last_seq}")
        if len({m.seq for m in messages}) != len(messages):
            raise ValueError(f"import of thread {thread_id!r}: a message seq repeats")
        tree = check_import_branches(thread, runs, messages, branches)
        last_branch = tree[-1].branch
        on_active = path_of(branch_path(tree, thread.active_branch), ordered) if last_branch else ordered

        def body(conn: sqlite3.Connection) -> None:
            if conn.execute("SELECT 1 FROM threads WHERE id = ?", (thread_id,)).fetchone():
                raise ValueError(f"thread {thread_id!r} already exists in the ledger")
            conn.execute(
                "INSERT INTO threads (id, created_at, state, last_seq, owner, title, agent_id, updated_at, "
                "message_count, active_branch, last_branch) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (thread_id, thread.created_at, _dumps(thread.state), thread.last_seq, thread.owner,
                 thread_title(ordered), latest.agent_id if latest else None, updated_at, len(on_active),
                 thread.active_branch, last_branch),
            )
            for run in runs:
                if conn.execute("SELECT 1 FROM runs WHERE id = ?", (run.run_id,)).fetchone():
                    raise DuplicateRun(run.run_id)
                _insert_run(conn, run, run.branch)
            rows = [
                (thread_id, m.seq, m.id, m.role, m.run_id, _dumps(parts_to_json(m.parts)), m.created_at, m.branch)
                for m in messages
            ]
            try:
                conn.executemany(
                    "INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at, branch) "
                    "VALUES (?,?,?,?,?,?,?,?)",
                    rows,
                )
            except sqlite3.IntegrityError:
                raise ValueError(f"import of thread {thread_id!r}: a message id or seq repeats") from None
            conn.executemany(
                "INSERT INTO branches (thread_id, branch, parent, fork_seq, created_at, run_id, reason) "
                "VALUES (?, ?, ?, ?, ?, ?, ?)",
                [(thread_id, b.branch, b.parent, b.fork_seq, b.created_at, b.run_id, b.reason) for b in tree[1:]],
            )
            _insert_pending(
                conn,
                [
                    (p.thread_id, p.tool_call_id, p.run_id, p.name, p.arguments, p.kind, p.message_id, i + 1)
                    for i, p in enumerate(pending)
                ],
            )

        if last_branch:
            self._branched.add(thread_id)
        await self._call(lambda db: self._write(db, thread_id, body, lambda _: self._hot.drop(thread_id)))
        self._threads.add(thread.thread_id)
        self._clock.advance_to(updated_at)

    # -- listing and deletion ---------------------------------------------------------------------

    async def thread_summary(self, thread_id: str) -> ThreadSummary | None:
        def q(db: sqlite_utils.Database) -> ThreadSummary | None:
            row = db.conn.execute(f"SELECT {_SUMMARY_COLS} FROM threads t WHERE id = ?", (thread_id,)).fetchone()
            return None if row is None else _summary(db.conn, row)

        return await self._call(q)

    async def list_thread_summaries(
        self, owner: OwnerFilter, agent: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ThreadPage:
        check_limit(limit)
        where: list[str] = []
        args: list[Any] = []
        if owner is not ALL_OWNERS:
            where.append("owner IS ?")
            args.append(owner)
        if agent is not None:
            where.append("agent_id = ?")
            args.append(agent)
        if cursor is not None:
            after_updated, after_id = decode_cursor(cursor)
            where.append("(updated_at, id) < (?, ?)")  # a row value: the index seeks to the cursor
            args += [after_updated, after_id]
        sql = (f"SELECT {_SUMMARY_COLS} FROM threads t {'WHERE ' + ' AND '.join(where) if where else ''} "
               "ORDER BY updated_at DESC, id DESC LIMIT ?")

        def q(db: sqlite_utils.Database) -> ThreadPage:
            rows = db.conn.execute(sql, (*args, limit + 1)).fetchall()
            items = tuple(_summary(db.conn, row) for row in rows[:limit])
            more = len(rows) > limit
            return ThreadPage(items, encode_cursor(items[-1].updated_at, items[-1].thread_id) if more else None)

        return await self._call(q)

    async def delete_thread(self, thread_id: str) -> bool:
        def body(conn: sqlite3.Connection) -> bool:
            for table in ("messages", "pending", "runs", "branches"):
                conn.execute(f"DELETE FROM {table} WHERE thread_id = ?", (thread_id,))
            return conn.execute("DELETE FROM threads WHERE id = ?", (thread_id,)).rowcount > 0

        deleted = await self._call(lambda db: self._write(db, thread_id, body, lambda _: self._hot.drop(thread_id)))
        self._branched.discard(thread_id)
        return deleted


def _lock(path: Path) -> int:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        os.close(fd)
        raise StoreUnavailable(
            f"the SQLite ledger {path.with_suffix('')} is in use by another process (stop it first)"
        ) from None
    return fd


_RUN_COLS = (
    "id, thread_id, agent_id, status, created_at, updated_at, error_code, error_message, "
    "input_tokens, output_tokens, steps, cause, tools, branch"
)

_THREAD_COLS = "id, created_at, state, last_seq, owner, active_branch, last_branch, message_count"
#: positions in a ``_THREAD_COLS`` row
_ACTIVE, _LAST_BRANCH, _MESSAGE_COUNT = 5, 6, 7

_MESSAGE_COLS = "id, role, parts, run_id, seq, created_at, branch"


def _thread(row: tuple[Any, ...]) -> ThreadRecord:
    return ThreadRecord(row[0], row[1], json.loads(row[2]), row[3], row[4], row[_ACTIVE])


def _message(row: tuple[Any, ...]) -> Message:
    return Message(row[0], row[1], parts_from_json(json.loads(row[2])), row[3], row[4], row[5], row[6])


def _pending(conn: sqlite3.Connection, thread_id: str) -> tuple[PendingCall, ...]:
    return tuple(PendingCall(*r) for r in conn.execute(
        "SELECT tool_call_id, run_id, thread_id, name, arguments, kind, message_id FROM pending WHERE thread_id = ? "
        "ORDER BY ord", (thread_id,)))


def _branches(conn: sqlite3.Connection, thread_id: str, created_at: int) -> list[Branch]:
    """Every branch of a thread that branched, branch 0 first."""
    rows = conn.execute("SELECT branch, parent, fork_seq, created_at, run_id, reason FROM branches "
                        "WHERE thread_id = ? ORDER BY branch", (thread_id,))
    return [Branch(0, None, 0, created_at), *(Branch(*r) for r in rows)]


def _active_path(conn: sqlite3.Connection, row: tuple[Any, ...], branch: int | None = None) -> BranchPath | None:
    """The path of ``branch`` (None: the active one) of the thread ``row`` (a ``_THREAD_COLS`` row); None
    for a thread that never branched (every message is on branch 0's path: no branch read, no filter).
    A branch the thread does not have raises ``ValueError``."""
    if not row[_LAST_BRANCH]:
        if branch:
            raise ValueError(f"no branch {branch} on thread {row[0]!r}")
        return None
    return branch_path(_branches(conn, row[0], row[1]), row[_ACTIVE] if branch is None else branch)


def _path_tail(conn: sqlite3.Connection, thread: ThreadRecord, path: BranchPath | None,
               count: int) -> tuple[Message, ...]:
    """The latest ``count`` messages on ``path``, oldest first."""
    if path is None:  # seqs are gapless on a thread that never branched: a range of the primary key
        rows = conn.execute(f"SELECT {_MESSAGE_COLS} FROM messages WHERE thread_id = ? AND seq > ? ORDER BY seq",
                            (thread.thread_id, thread.last_seq - max(0, count)))
        return tuple(_message(r) for r in rows)
    where, args = path_condition(path)
    rows = conn.execute(f"SELECT {_MESSAGE_COLS} FROM messages WHERE thread_id = ?{where} ORDER BY seq DESC LIMIT ?",
                        (thread.thread_id, *args, max(0, count))).fetchall()
    return tuple(_message(r) for r in reversed(rows))


_SUMMARY_COLS = (
    "id, title, agent_id, created_at, updated_at, message_count, owner, "
    "EXISTS (SELECT 1 FROM pending p WHERE p.thread_id = t.id)"
)


def _summary(conn: sqlite3.Connection, row: tuple[Any, ...]) -> ThreadSummary:
    run = conn.execute(
        "SELECT id, status, cause, error_code FROM runs WHERE thread_id = ? ORDER BY created_at DESC, rowid DESC "
        "LIMIT 1",
        (row[0],),
    ).fetchone()
    return ThreadSummary(
        thread_id=row[0],
        title=row[1],
        agent_id=row[2],
        created_at=row[3],
        updated_at=row[4],
        message_count=row[5],
        last_run=None if run is None else RunSummary(run[0], RunStatus(run[1]), run[2], run[3]),
        waiting=bool(row[7]),
        owner=row[6],
    )


def _run(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=row[0],
        thread_id=row[1],
        agent_id=row[2],
        status=RunStatus(row[3]),
        created_at=row[4],
        updated_at=row[5],
        error_code=row[6],
        error_message=row[7],
        usage=Usage(row[8], row[9]),
        steps=row[10],
        cause=row[11],
        tools=tools_from_json(json.loads(row[12])) if row[12] else (),
        branch=row[13],
    )


def _insert_run(conn: sqlite3.Connection, run: RunRecord, branch: int) -> None:
    conn.execute(
        f"INSERT INTO runs ({_RUN_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?,?,?,?)",
        (
            run.run_id,
            run.thread_id,
            run.agent_id,
            run.status.value,
            run.created_at,
            run.updated_at,
            run.error_code,
            run.error_message,
            run.usage.input_tokens,
            run.usage.output_tokens,
            run.steps,
            run.cause,
            json.dumps(tools_to_json(run.tools)) if run.tools else None,
            branch,
        ),
    )


def _insert_pending(conn: sqlite3.Connection, rows: list[tuple[Any, ...]]) -> None:
    try:
        conn.executemany(
            "INSERT INTO pending (thread_id, tool_call_id, run_id, name, arguments, kind, message_id, ord)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            rows,
        )
    except sqlite3.IntegrityError:
        raise ValueError("a pending tool call id is already pending on the thread") from None


def _committed_ids(conn: sqlite3.Connection, thread_id: str, ids: Collection[str],
                   path: BranchPath | None) -> frozenset[str]:
    """Which of ``ids`` are committed on ``path`` (None: a thread that never branched), by the
    ``(thread_id, id, branch)`` index."""
    if not ids:
        return frozenset()
    where, args = path_condition(path)
    rows = conn.execute(
        f"SELECT id FROM messages WHERE thread_id = ? AND id IN (SELECT value FROM json_each(?)){where}",
        (thread_id, json.dumps(list(ids)), *args),
    )
    return frozenset(r[0] for r in rows)


def _append(conn: sqlite3.Connection, thread_id: str, messages: Sequence[Message], branch: int,
            path: BranchPath | None, on_active: bool) -> list[Message]:
    """Append ``messages`` to ``branch`` (whose path is ``path``; None: a thread that never branched)."""
    if not messages:
        return []
    if path is not None:  # the index holds ids per branch; the path may hold one on an older branch
        taken = _committed_ids(conn, thread_id, [m.id for m in messages], path)
        if taken:
            raise ValueError(f"message id {sorted(taken)[0]!r} is already committed on the path of branch {branch} "
                             f"of thread {thread_id!r}")
    last = conn.execute("SELECT last_seq FROM threads WHERE id = ?", (thread_id,)).fetchone()[0]
    out: list[Message] = []
    now = _now_ms()
    for m in messages:
        last += 1
        created = m.created_at or now
        try:
            conn.execute(
                "INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at, branch) "
                "VALUES (?,?,?,?,?,?,?,?)",
                (thread_id, last, m.id, m.role, m.run_id, _dumps(parts_to_json(m.parts)), created, branch),
            )
        except sqlite3.IntegrityError:
            raise ValueError(f"message id {m.id!r} is already committed on thread {thread_id!r}") from None
        out.append(Message(m.id, m.role, m.parts, m.run_id, last, created, branch))
    conn.execute(
        "UPDATE threads SET last_seq = ?, message_count = message_count + ?, title = coalesce(title, ?) WHERE id = ?",
        (last, len(out) if on_active else 0, thread_title(out), thread_id),
    )
    return out
