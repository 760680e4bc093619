"""The Postgres ledger: psycopg 3 and a psycopg-pool connection pool, called from Trio in threads.

``[ledger] backend = "postgres"``, ``path`` = the DSN (``postgresql://user@host:port/db``), and the
password in the environment variable named by ``options.password_env`` (a DSN holding a password is
refused: it would sit in the config file). Every call runs one blocking function in a worker thread
(``trio.to_thread.run_sync``) behind a ``trio.CapacityLimiter`` as wide as the pool, so the event
loop never blocks and no caller waits inside the pool. Connections are in autocommit mode; each
``start_run``/``commit``/``import_thread`` is one explicit transaction whose first write to the
thread's row (``UPDATE threads SET last_seq = last_seq + n … RETURNING``) locks it and reserves the
seqs, so concurrent commits to one thread take seqs in turn; reads that must agree (``thread_view``)
share one ``REPEATABLE READ`` snapshot, sent as one pipeline.

``open`` applies the schema migrations (``postgres_schema``) and then recovers: runs left
``running`` on a thread that no live server process claims become ``interrupted`` with cause
``server_restart`` (another process's runs are left alone; ``postgres_claims`` interrupts a dead
process's runs once its lease lapses). Then it registers this process (``claims()``: several server
processes may share one database).

Each thread row also carries its listing summary (owner, title, agent of the latest run,
``updated_at``, message count), kept by the same transactions that write the thread, so a listing
page is one index scan on ``(updated_at, id)``. ``updated_at`` comes from this ledger's
``WriteClock`` (strictly increasing per ledger object, continued from the newest stored value at
open). ``delete_thread`` deletes the thread's row in one transaction; its messages, runs and
pending calls go with it (``ON DELETE CASCADE``), so a crash leaves it wholly present or gone.

Branches (``awaken.ledger.interface.Branch``, migration 7): every message and run has a ``branch``;
branch rows exist only for branches above 0, so a thread that never branched stores what it did
before. The thread's row keeps its ``active_branch`` and, once it branched, its active path as two
arrays (``path_branches``, ``path_starts``), so every read of the active path is the same single
statement as before, the messages joined with their thread's row and filtered by
``branch = path_branches[width_bucket(seq, path_starts) + 1]`` (no filter when the arrays are NULL).
A fork locks the thread's row, checks its ``after_seq`` against the active path, inserts the branch
and rewrites the row's path, in ``start_run``'s transaction. Ids are unique per (thread, id, branch);
an id already on an older branch of the path a commit extends is refused by a lookup on that key.

Admission (``admission_facts``) is one worker call and one round trip: the thread's row, its
pending calls and, for a thread this process holds in its hot-thread cache (``awaken/ledger/hotcache.py``,
capped by ``cache_bytes``, default 8 MiB, 0: none), only the messages committed since the cache
last saw it, from one ``REPEATABLE READ`` snapshot; a cold thread reads its latest messages and its
committed ids (index only) in that same round trip. Other processes write the same threads, so a
cached entry is never trusted alone: it is keyed by the thread's ``created_at`` and ``last_seq``
read in the snapshot (messages are append-only under their seq), extended by what others appended,
and dropped when it cannot be matched (the thread was deleted and recreated); pending calls and
state always come from the snapshot. Cache updates run on the event loop, never in worker threads.

``probe_write`` (``/readyz``) upserts the one row of ``write_probe`` (migration 5) in a transaction: a
read-only database (a hot standby, ``default_transaction_read_only``) fails it while reads still work.

A connection that fails (the server is down or restarting) raises ``StoreUnavailable``; the pool
checks each connection as it hands it out and reconnects in the background, so the ledger recovers
by itself once the database answers again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Collection, Sequence
from collections.abc import Set as AbstractSet
from typing import Any, TypeVar

import psycopg
import psycopg_pool
import trio
from psycopg.conninfo import conninfo_to_dict

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, Usage, parts_from_json, parts_to_json
from awaken.engine.state import Cause, RunStatus, recovery
from awaken.ledger.hotcache import DEFAULT_BUDGET, MIN_KEEP, HotThread, HotThreads, cached_facts, entry_for
from awaken.ledger.interface import (
    ALL_OWNERS,
    MAX_SEQ,
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
from storage_backends.branch_sql import path_condition

from .postgres_claims import PostgresClaims
from .postgres_relay import PostgresRelay
from .postgres_schema import SchemaTooNew, migrate

T = TypeVar("T")


def _now_ms() -> int:
    return int(time.time() * 1000)


def _dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


def _b(text: str) -> bytes:
    """An id as stored (its UTF-8 bytes); an id that is not valid Unicode is a ValueError."""
    return text.encode("utf-8")


def _s(data: bytes | memoryview | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8")


def _enc(text: str | None) -> bytes | None:
    """A free text (title, owner) as stored: UTF-8 bytes, whatever code points it holds."""
    return None if text is None else text.encode("utf-8", "surrogatepass")


def _dec(data: bytes | memoryview | None) -> str | None:
    return None if data is None else bytes(data).decode("utf-8", "surrogatepass")


class PostgresLedger(Ledger):
    """``[ledger] backend = "postgres"``; ``path`` is the DSN. Options: ``password_env`` (the name of the
    variable holding the password), ``pool_size`` (connections, default 8), ``connect_timeout``
    (seconds to wait for a connection before ``StoreUnavailable``, default 5), ``lease_seconds`` (how
    long a process that stopped renewing its lease keeps its runs before another process interrupts
    them, default 10), ``cache_bytes`` (the cap of the hot-thread cache, default 8 MiB; 0 disables it)."""

    shared_by_processes = True

    def __init__(
        self,
        path: str,
        password_env: str | None = None,
        pool_size: int = 8,
        connect_timeout: float = 5.0,
        lease_seconds: float = 10.0,
        cache_bytes: int = DEFAULT_BUDGET,
    ) -> None:
        if not isinstance(path, str) or not path.startswith(("postgresql://", "postgres://")):
            raise ValueError(f"path must be a DSN postgresql://user@host:port/database, not {path!r}")
        try:
            params = conninfo_to_dict(path)
        except psycopg.ProgrammingError as exc:
            raise ValueError(f"path is not a valid DSN: {exc}") from None
        if "password" in params:
            raise ValueError("the DSN holds a password: put it in an environment variable named by password_env")
        if isinstance(pool_size, bool) or not isinstance(pool_size, int) or pool_size < 1:
            raise ValueError(f"pool_size must be a positive integer, not {pool_size!r}")
        if isinstance(connect_timeout, bool) or not isinstance(connect_timeout, int | float) or connect_timeout <= 0:
            raise ValueError(f"connect_timeout must be a positive number of seconds, not {connect_timeout!r}")
        self._kwargs: dict[str, Any] = {"autocommit": True, "connect_timeout": max(2, int(connect_timeout))}
        if password_env is not None:
            if not isinstance(password_env, str) or not password_env:
                raise ValueError(f"password_env must name an environment variable, not {password_env!r}")
            password = os.environ.get(password_env)
            if password is None:
                raise ValueError(f"the environment variable {password_env} (password_env) is not set")
            self._kwargs["password"] = password
        if isinstance(lease_seconds, bool) or not isinstance(lease_seconds, int | float) or lease_seconds <= 0:
            raise ValueError(f"lease_seconds must be a positive number of seconds, not {lease_seconds!r}")
        if isinstance(cache_bytes, bool) or not isinstance(cache_bytes, int) or cache_bytes < 0:
            raise ValueError(f"cache_bytes must be a non-negative integer, not {cache_bytes!r}")
        #: hot threads' tails and committed ids, validated against every snapshot (module docstring)
        self._hot = HotThreads(cache_bytes)
        self.dsn = path
        self.pool_size = pool_size
        self.connect_timeout = float(connect_timeout)
        self._pool: psycopg_pool.ConnectionPool | None = None
        self._limiter = trio.CapacityLimiter(pool_size)
        self._clock = WriteClock()
        self._claims = PostgresClaims(self, float(lease_seconds))
        self._relay = PostgresRelay(self, self._claims)
        self._registered = False

    def claims(self) -> PostgresClaims:
        return self._claims

    def relay(self) -> PostgresRelay:
        return self._relay

    # -- plumbing -------------------------------------------------------------------------------

    def _new_pool(self) -> psycopg_pool.ConnectionPool:
        return psycopg_pool.ConnectionPool(
            self.dsn,
            kwargs=self._kwargs,
            min_size=1,
            max_size=self.pool_size,
            open=False,
            timeout=self.connect_timeout,
            check=psycopg_pool.ConnectionPool.check_connection,
            reconnect_timeout=0,  # keep trying in the background for as long as the database is away
            name="awaken-ledger",
        )

    async def _call(self, fn: Callable[[psycopg.Connection], T]) -> T:
        pool = self._pool
        if pool is None:
            raise StoreUnavailable("the ledger is closed")

        def run() -> T:
            try:
                with pool.connection() as conn:
                    return fn(conn)
            except (DuplicateRun, ValueError):
                raise
            except psycopg.DataError as exc:  # e.g. a NUL character in a text field
                raise ValueError(f"the Postgres ledger cannot store this value: {exc}") from None
            except (psycopg.Error, psycopg_pool.PoolTimeout, psycopg_pool.PoolClosed) as exc:
                raise StoreUnavailable(f"the Postgres ledger failed: {_one_line(exc)}") from None

        return await trio.to_thread.run_sync(run, limiter=self._limiter)

    # -- lifecycle ------------------------------------------------------------------------------

    async def open(self) -> None:
        """Connect, apply the migrations and recover runs left ``running`` (see the module doc)."""
        pool = self._new_pool()

        def setup() -> None:
            # one direct connection first: its failure says why (a refused password, no such database)
            with psycopg.connect(self.dsn, **self._kwargs) as conn:
                migrate(conn)
                _recover(conn)
                self._claims.register(conn)
                row = conn.execute("SELECT coalesce(max(updated_at), 0) FROM threads").fetchone()
                self._clock.advance_to(row[0])
            try:
                pool.open(wait=True, timeout=self.connect_timeout)
            except BaseException:
                pool.close()
                raise

        try:
            await trio.to_thread.run_sync(setup, limiter=self._limiter)
        except SchemaTooNew as exc:
            raise StoreUnavailable(f"cannot open the Postgres ledger: {exc}") from None
        except (psycopg.Error, psycopg_pool.PoolTimeout) as exc:
            raise StoreUnavailable(
                f"cannot open the Postgres ledger at {self._where()}: {_one_line(exc)}"
            ) from None
        self._pool = pool
        self._registered = True

    async def migrate(self) -> list[int]:
        """Apply the missing schema migrations without opening the ledger; return their versions."""

        def run() -> list[int]:
            with psycopg.connect(self.dsn, **self._kwargs) as conn:
                return migrate(conn)

        try:
            return await trio.to_thread.run_sync(run, limiter=self._limiter)
        except SchemaTooNew as exc:
            raise StoreUnavailable(str(exc)) from None
        except psycopg.Error as exc:
            raise StoreUnavailable(f"cannot migrate the Postgres ledger at {self._where()}: {_one_line(exc)}") from None

    def _where(self) -> str:
        info = conninfo_to_dict(self.dsn)
        return f"{info.get('host', 'localhost')}:{info.get('port', 5432)}/{info.get('dbname', '')}"

    async def aclose(self) -> None:
        """Remove this process and its claims (its threads are free at once), then close the pool."""
        pool, self._pool = self._pool, None
        if pool is None:
            return

        def close() -> None:
            try:
                if self._registered:
                    with pool.connection(timeout=self.connect_timeout) as conn:
                        self._claims.unregister(conn)
            except (psycopg.Error, psycopg_pool.PoolTimeout):
                pass  # the database is away: the lease lapses and another process cleans up
            finally:
                self._registered = False
                self._claims.close_heartbeat()
                pool.close()

        with trio.CancelScope(shield=True):
            await trio.to_thread.run_sync(close, limiter=self._limiter)

    async def ping(self) -> None:
        await self._call(lambda conn: conn.execute("SELECT 1").fetchone())

    async def probe_write(self) -> None:
        """Whether a commit can happen now: an UPSERT of the one ``write_probe`` row in its own
        transaction. A read-only database (``default_transaction_read_only``, a hot standby after a
        failover, revoked privileges) or one that cannot write its WAL fails it."""

        def probe(conn: psycopg.Connection) -> None:
            with conn.transaction():
                conn.execute(
                    "INSERT INTO write_probe (id, at) VALUES (1, now()) ON CONFLICT (id) DO UPDATE SET at = excluded.at"
                )

        await self._call(probe)

    # -- reads ----------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        return await self._call(lambda conn: _thread(conn, thread_id))

    async def get_run(self, run_id: str) -> RunRecord | None:
        def q(conn: psycopg.Connection) -> RunRecord | None:
            row = conn.execute(f"SELECT {_RUN_COLS} FROM runs WHERE id = %s", (_b(run_id),)).fetchone()
            return None if row is None else _run(row)

        return await self._call(q)

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        def q(conn: psycopg.Connection) -> list[RunRecord]:
            rows = conn.execute(
                f"SELECT {_RUN_COLS} FROM runs WHERE thread_id = %s ORDER BY created_at, ord", (_b(thread_id),)
            )
            return [_run(r) for r in rows]

        return await self._call(q)

    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        return await self._call(lambda conn: _pending(conn, thread_id))

    async def thread_view(self, thread_id: str) -> ThreadView:
        """The thread, its history and its pending calls from one snapshot, in one worker call."""

        def q(conn: psycopg.Connection) -> ThreadView:
            tid = _b(thread_id)
            with conn.pipeline():  # one round trip: four statements, one snapshot
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                thread = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = %s", (tid,))
                messages = conn.execute(f"SELECT {_ACTIVE_MESSAGES} ORDER BY m.seq", (tid,))
                pending = conn.execute(f"SELECT {_PENDING_COLS} FROM pending WHERE thread_id = %s ORDER BY ord",
                                       (tid,))
                conn.execute("COMMIT")
            row = thread.fetchone()
            if row is None:
                return ThreadView(None, (), ())
            return ThreadView(_thread_record(row), tuple(map(_message, messages)), tuple(map(_pending_call, pending)))

        return await self._call(q)

    async def committed_ids(self, thread_id: str, ids: Collection[str]) -> frozenset[str]:
        """From the ``(thread_id, id, branch)`` index: no message body is read (the thread's row says
        which of the hits are on its active path)."""
        if not ids:
            return frozenset()
        return await self._call(lambda conn: _committed_ids(conn, _b(thread_id), ids))

    async def admission_facts(self, thread_id: str, asked: AbstractSet[str], tail: int) -> AdmissionFacts:
        """One worker call, one round trip in the common case (see the module docstring)."""
        entry = self._hot.get(thread_id)
        keep = max(MIN_KEEP, tail)
        most = self._hot.most_messages()
        since = entry.thread.last_seq if entry is not None else None

        def q(conn: psycopg.Connection) -> tuple[Any, ...]:
            tid = _b(thread_id)
            ids = None
            with conn.pipeline():  # one round trip, one snapshot
                conn.execute("BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY")
                thread = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = %s", (tid,))
                pending = conn.execute(f"SELECT {_PENDING_COLS} FROM pending WHERE thread_id = %s ORDER BY ord",
                                       (tid,))
                if since is not None:  # what others appended to the active path since the cache saw the thread
                    messages = conn.execute(f"SELECT {_ACTIVE_MESSAGES} AND m.seq > %s ORDER BY m.seq", (tid, since))
                else:  # the active path's latest (the newest ``keep`` seqs of a thread that never branched)
                    messages = conn.execute(f"SELECT {_ACTIVE_MESSAGES} ORDER BY m.seq DESC LIMIT %s", (tid, keep))
                    ids = conn.execute(f"SELECT m.id FROM messages m JOIN threads t ON t.id = m.thread_id "
                                       f"WHERE m.thread_id = %s AND {_ON_ACTIVE_PATH} AND t.last_seq <= %s",
                                       (tid, most))
                conn.execute("COMMIT")
            row = thread.fetchone()
            if row is None:
                return None, (), (), None, 0
            found = [_message(r) for r in messages]
            return (_thread_record(row), tuple(map(_pending_call, pending)),
                    found if since is not None else found[::-1], None if ids is None else [_s(r[0]) for r in ids],
                    _path_length(row))

        record, pending, messages, ids, length = await self._call(q)
        if record is None:
            self._hot.drop(thread_id)
            return NO_THREAD
        if entry is not None:
            entry = self._refresh(entry, record, pending, messages)
            if entry is None:  # the thread is not the one cached (deleted and recreated, forked): read it cold
                return await self.admission_facts(thread_id, asked, tail)
        elif ids is not None and self._hot.fits(record.last_seq):
            entry = entry_for(record, messages, keep, pending, ids, length)
            self._hot.put(thread_id, entry)
        if entry is not None:
            facts = cached_facts(entry, asked, tail)
            if facts is not None:
                return facts
        return await self._uncached_facts(record, pending, messages if since is None else None, asked, tail)

    def _refresh(self, entry: HotThread, record: ThreadRecord, pending: tuple[PendingCall, ...],
                 newer: list[Message]) -> HotThread | None:
        """Bring a cached entry to the snapshot ``record``/``pending``/``newer`` (messages after its
        ``last_seq``); None (and dropped) when it cannot be."""
        thread_id = record.thread_id
        cached = entry.thread
        if (self._hot.get(thread_id) is not entry or record.created_at != cached.created_at
                or record.owner != cached.owner or record.active_branch != cached.active_branch
                or record.last_seq != cached.last_seq + len(newer)
                or any(m.seq != cached.last_seq + i + 1 for i, m in enumerate(newer))):
            self._hot.drop(thread_id)
            return None
        self._hot.committed(thread_id, newer, (), (), None)
        entry.thread = record
        entry.pending = pending
        return entry if self._hot.get(thread_id) is entry else None

    async def _uncached_facts(self, record: ThreadRecord, pending: tuple[PendingCall, ...],
                              latest: list[Message] | None, asked: AbstractSet[str], tail: int) -> AdmissionFacts:
        """The facts from the store (a thread too big for the cache); ``latest``: the active path's latest
        messages (at least ``tail`` of them, or all), None when they were not read."""
        thread_id = record.thread_id
        if tail <= 0:
            tail_messages: tuple[Message, ...] = ()
        elif latest is not None:
            tail_messages = tuple(latest[max(0, len(latest) - tail):])
        else:
            tail_messages = tuple(await self._call(lambda conn: _path_tail(conn, _b(thread_id), tail)))
        return AdmissionFacts(record, tail_messages, pending, await self.committed_ids(thread_id, asked))

    async def answered_calls(self, thread_id: str, call_ids: Collection[str]) -> frozenset[str]:
        wanted = frozenset(call_ids)
        if not wanted:
            return frozenset()

        def scan(conn: psycopg.Connection) -> frozenset[str]:
            rows = conn.execute("SELECT m.parts FROM messages m JOIN threads t ON t.id = m.thread_id "
                                f"WHERE m.thread_id = %s AND m.role = 'tool' AND {_ON_ACTIVE_PATH}", (_b(thread_id),))
            return answered_in(Message("", "tool", parts_from_json(json.loads(r[0]))) for r in rows)

        return await self._call(scan) & wanted

    async def read_messages(
        self, thread_id: str, after_seq: int, limit: int, branch: int | None = None
    ) -> list[Message]:
        """The active path: one statement (its filter is on the thread's row); another branch's reads the
        thread's branches first."""
        if branch is not None and (isinstance(branch, bool) or not isinstance(branch, int)):
            raise ValueError(f"a branch is a non-negative integer, not {branch!r}")
        return await self._call(lambda conn: _messages(conn, thread_id, after_seq, limit, branch))

    async def list_branches(self, thread_id: str) -> list[Branch]:
        def q(conn: psycopg.Connection) -> list[Branch]:
            row = conn.execute("SELECT created_at, last_branch FROM threads WHERE id = %s", (_b(thread_id),)).fetchone()
            if row is None:
                return []
            return _branches(conn, _b(thread_id), row[0]) if row[1] else [Branch(0, None, 0, row[0])]

        return await self._call(q)

    async def list_threads(self) -> list[ThreadRecord]:
        def q(conn: psycopg.Connection) -> list[ThreadRecord]:
            rows = conn.execute(f"SELECT {_THREAD_COLS} FROM threads ORDER BY created_at, id")
            return [_thread_record(r) for r in rows]

        return await self._call(q)

    # -- writes ---------------------------------------------------------------------------------

    async def start_run(
        self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *, fork: Fork | None = None
    ) -> list[Message]:
        """One transaction. Without ``fork`` the run goes on the thread's active branch (the update of
        the thread's row that reserves the seqs returns it); with ``fork`` the thread's row is locked
        first, the fork checked against its active path, the branch inserted and the row updated to it."""
        title = _enc(thread_title(inputs))
        if fork is not None:
            check_fork(fork)

        def body(conn: psycopg.Connection) -> list[Message]:
            with conn.transaction():
                thread_id = _b(run.thread_id)
                n = len(inputs)
                if fork is not None:
                    branch, path, last = self._fork(conn, run, fork, n, title)
                else:
                    conn.execute(
                        "INSERT INTO threads (id, created_at, owner) VALUES (%s, %s, %s) ON CONFLICT (id) DO NOTHING",
                        (thread_id, run.created_at, _enc(owner)),
                    )
                    row = conn.execute(  # locks the thread's row, reserves the seqs and updates the summary
                        "UPDATE threads SET last_seq = last_seq + %s, message_count = message_count + %s, "
                        "title = coalesce(title, %s), agent_id = %s, updated_at = %s WHERE id = %s "
                        "RETURNING last_seq, active_branch, path_branches, path_starts",
                        (n, n, title, run.agent_id, self._clock.now(), thread_id),
                    ).fetchone()
                    last, branch = row[0] - n, row[1]
                    path = _path_from_arrays(row[2], row[3])
                if not _insert_run(conn, run, branch):
                    raise DuplicateRun(run.run_id)
                return _append(conn, run.thread_id, last, inputs, branch, path)

        try:
            appended = await self._call(body)
        except BaseException:
            self._hot.drop(run.thread_id)
            raise
        if fork is not None:  # a new active path: the entry held the old one
            self._hot.drop(run.thread_id)
        else:
            self._appended(run.thread_id, appended)
        return appended

    def _fork(self, conn: psycopg.Connection, run: RunRecord, fork: Fork, n: int,
              title: bytes | None) -> tuple[int, BranchPath, int]:
        """``start_run``'s fork, inside its transaction: lock the thread's row, check ``after_seq`` is on
        its active path, insert the branch and make it the active one (its path on the row); the
        branch, its path and the thread's last seq before the inputs."""
        tid = _b(run.thread_id)
        row = conn.execute("SELECT created_at, active_branch, last_branch FROM threads WHERE id = %s FOR UPDATE",
                           (tid,)).fetchone()
        if row is None:
            raise ValueError(f"cannot fork thread {run.thread_id!r}: it does not exist")
        created_at, active, last_branch = row
        branches = _branches(conn, tid, created_at) if last_branch else [Branch(0, None, 0, created_at)]
        active_path = branch_path(branches, active)
        held = conn.execute("SELECT branch FROM messages WHERE thread_id = %s AND seq = %s",
                            (tid, fork.after_seq)).fetchone() if fork.after_seq else None
        number = last_branch + 1
        created = forked_branch(run.thread_id, number, active_path, fork, run, held[0] if held else None)
        path = branch_path([*branches, created], number)
        where, args = path_condition(active_path if last_branch else None, prefix="m.", placeholder="%s")
        kept = conn.execute(f"SELECT count(*) FROM messages m WHERE m.thread_id = %s AND m.seq <= %s{where}",
                            (tid, fork.after_seq, *args)).fetchone()[0]
        conn.execute(
            "INSERT INTO branches (thread_id, branch, parent, fork_seq, created_at, run_id, reason) "
            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
            (tid, number, created.parent, fork.after_seq, created.created_at, _b(run.run_id), fork.reason),
        )
        branches_of_path, starts = _path_arrays(path)
        last = conn.execute(
            "UPDATE threads SET last_seq = last_seq + %s, message_count = %s, title = coalesce(title, %s), "
            "agent_id = %s, updated_at = %s, active_branch = %s, last_branch = %s, path_branches = %s, "
            "path_starts = %s WHERE id = %s RETURNING last_seq",
            (n, kept + n, title, run.agent_id, self._clock.now(), number, number, branches_of_path, starts, tid),
        ).fetchone()[0]
        return number, path, last - n

    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        title = _enc(thread_title(commit.messages))
        now = self._clock.now()

        def body(conn: psycopg.Connection) -> list[Message]:
            tid = _b(thread_id)
            with conn.transaction():
                n = len(commit.messages)
                # one statement checks the run is the thread's, locks the thread's row (commits to one
                # thread queue here), reserves the seqs, replaces the state and updates the summary (the
                # active path's count grows only by a commit to the active branch)
                row = conn.execute(
                    "UPDATE threads SET last_seq = last_seq + %s, "
                    "message_count = message_count + CASE WHEN r.branch = threads.active_branch THEN %s ELSE 0 END, "
                    "title = coalesce(title, %s), state = coalesce(%s, state), updated_at = %s "
                    "FROM runs r WHERE threads.id = %s AND r.id = %s AND r.thread_id = %s "
                    "RETURNING threads.last_seq, r.branch, threads.active_branch, threads.path_branches, "
                    "threads.path_starts, threads.created_at",
                    (n, n, title, None if commit.state is None else _dumps(commit.state), now, tid, _b(run_id), tid),
                ).fetchone()
                if row is None:
                    raise ValueError(f"run {run_id!r} is not a run of thread {thread_id!r}")
                branch = row[1]
                if row[3] is None or not n:  # never branched (or nothing to append): no path to check
                    path = None
                elif branch == row[2]:
                    path = _path_from_arrays(row[3], row[4])
                else:  # a run the fork left behind closing on its own path
                    path = _path(conn, tid, row[5], branch)
                appended = _append(conn, thread_id, row[0] - n, commit.messages, branch, path)
                if commit.resolved:
                    conn.execute(
                        "DELETE FROM pending WHERE thread_id = %s AND tool_call_id = ANY(%s)",
                        (tid, [_b(c) for c in commit.resolved]),
                    )
                _insert_pending(conn, commit.pending)
                conn.execute(
                    "UPDATE runs SET status = %s, updated_at = %s, error_code = %s, error_message = %s, "
                    "cause = %s, input_tokens = input_tokens + %s, output_tokens = output_tokens + %s, "
                    "steps = steps + %s WHERE id = %s",
                    (
                        commit.status.value,
                        now,
                        commit.error_code,
                        commit.error_message,
                        commit.cause,
                        commit.usage.input_tokens,
                        commit.usage.output_tokens,
                        commit.steps,
                        _b(run_id),
                    ),
                )
            return appended

        try:
            appended = await self._call(body)
        except BaseException:
            self._hot.drop(thread_id)
            raise
        # pending calls and state are read from every admission's snapshot, never from the cache
        self._appended(thread_id, appended)
        return appended

    def _appended(self, thread_id: str, appended: list[Message]) -> None:
        """This process committed ``appended`` to the thread: extend its entry if they follow it (else
        another process wrote in between, and the next admission catches up from the store)."""
        entry = self._hot.get(thread_id)
        if entry is None or not appended:
            return
        if appended[0].seq != entry.thread.last_seq + 1:
            self._hot.drop(thread_id)
            return
        self._hot.committed(thread_id, appended, (), (), None)

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
        latest = last_run_of(runs)
        ordered = sorted(messages, key=lambda m: m.seq)
        title = _enc(thread_title(ordered))
        if any(r.thread_id != thread_id for r in runs) or any(p.thread_id != thread_id for p in pending):
            raise ValueError(f"import of thread {thread_id!r}: a run or pending call is of another thread")
        if any(not 0 < m.seq <= thread.last_seq for m in messages):
            raise ValueError(f"import of thread {thread_id!r}: a message seq is outside 1..{thread.last_seq}")
        if len({m.seq for m in messages}) != len(messages) or len({(m.branch, m.id) for m in messages}) != len(messages):
            raise ValueError(f"import of thread {thread_id!r}: a message id or seq repeats")
        tree = check_import_branches(thread, runs, messages, branches)
        last_branch = tree[-1].branch
        path = branch_path(tree, thread.active_branch) if last_branch else None
        path_branches, path_starts = _path_arrays(path) if path is not None else (None, None)
        count = len(messages) if path is None else len(path_of(path, ordered))

        def body(conn: psycopg.Connection) -> None:
            tid = _b(thread_id)
            with conn.transaction():
                created = conn.execute(
                    "INSERT INTO threads (id, created_at, state, last_seq, owner, title, agent_id, updated_at, "
                    "message_count, active_branch, last_branch, path_branches, path_starts) "
                    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
                    "ON CONFLICT (id) DO NOTHING RETURNING 1",
                    (tid, thread.created_at, _dumps(thread.state), thread.last_seq, _enc(thread.owner), title,
                     latest.agent_id if latest else None, updated_at, count, thread.active_branch, last_branch,
                     path_branches, path_starts),
                ).fetchone()
                if created is None:
                    raise ValueError(f"thread {thread_id!r} already exists in the ledger")
                for run in runs:
                    if not _insert_run(conn, run, run.branch):
                        raise DuplicateRun(run.run_id)
                with conn.cursor() as cur:
                    cur.executemany(
                        "INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at, branch) "
                        "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                        [_message_row(tid, m, m.seq, m.created_at, m.branch) for m in messages],
                    )
                    if last_branch:
                        cur.executemany(
                            "INSERT INTO branches (thread_id, branch, parent, fork_seq, created_at, run_id, reason) "
                            "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                            [(tid, b.branch, b.parent, b.fork_seq, b.created_at,
                              None if b.run_id is None else _b(b.run_id), b.reason) for b in tree[1:]],
                        )
                _insert_pending(conn, pending)

        await self._call(body)
        self._clock.advance_to(updated_at)

    # -- listing and deletion ---------------------------------------------------------------------

    async def thread_summary(self, thread_id: str) -> ThreadSummary | None:
        def q(conn: psycopg.Connection) -> ThreadSummary | None:
            row = conn.execute(f"SELECT {_SUMMARY_COLS} FROM threads t WHERE id = %s", (_b(thread_id),)).fetchone()
            return None if row is None else _summary(row)

        return await self._call(q)

    async def list_thread_summaries(
        self, owner: OwnerFilter, agent: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ThreadPage:
        check_limit(limit)
        where: list[str] = []
        args: list[Any] = []
        if owner is not ALL_OWNERS:
            where.append("owner IS NOT DISTINCT FROM %s")
            args.append(_enc(owner))  # type: ignore[arg-type]
        if agent is not None:
            where.append("agent_id = %s")
            args.append(agent)
        if cursor is not None:
            after_updated, after_id = decode_cursor(cursor)
            where.append("(updated_at, id) < (%s, %s)")  # a row value: the index seeks to the cursor
            args += [after_updated, _b(after_id)]
        query = (f"SELECT {_SUMMARY_COLS} FROM threads t {'WHERE ' + ' AND '.join(where) if where else ''} "
                 "ORDER BY updated_at DESC, id DESC LIMIT %s")

        def q(conn: psycopg.Connection) -> ThreadPage:
            rows = conn.execute(query, (*args, limit + 1)).fetchall()
            items = tuple(_summary(row) for row in rows[:limit])
            more = len(rows) > limit
            return ThreadPage(items, encode_cursor(items[-1].updated_at, items[-1].thread_id) if more else None)

        return await self._call(q)

    async def delete_thread(self, thread_id: str) -> bool:
        """One statement, one transaction: the thread's row and, by ``ON DELETE CASCADE``, its messages,
        runs and pending calls."""

        def body(conn: psycopg.Connection) -> bool:
            row = conn.execute("DELETE FROM threads WHERE id = %s RETURNING 1", (_b(thread_id),)).fetchone()
            return row is not None

        self._hot.drop(thread_id)
        try:
            return await self._call(body)
        finally:
            self._hot.drop(thread_id)


# -- SQL helpers (run inside a worker thread) -----------------------------------------------------

_RUN_COLS = (
    "id, thread_id, agent_id, status, created_at, updated_at, error_code, error_message, "
    "input_tokens, output_tokens, steps, cause, tools, branch"
)


def _one_line(exc: BaseException) -> str:
    return " ".join(str(exc).split()) or type(exc).__name__


def _recover(conn: psycopg.Connection) -> None:
    """Runs left ``running`` by a dead process become ``interrupted``, cause ``server_restart``: every
    running run whose thread no live process (lease not lapsed) claims.

    The table lock waits for any transaction still writing runs (a killed client's, being rolled
    back or committed right now), so a run it commits cannot slip past this update.
    """
    change = recovery(Cause.SERVER_RESTART)  # the run state's table decides what recovery writes
    with conn.transaction():
        conn.execute("LOCK TABLE runs IN SHARE ROW EXCLUSIVE MODE")
        conn.execute(
            "UPDATE runs SET status = %s, error_code = %s, error_message = %s, cause = %s, updated_at = %s "
            "WHERE status = %s "
            "AND NOT EXISTS (SELECT 1 FROM thread_claims c JOIN processes p ON p.id = c.process_id "
            "                WHERE c.thread_id = runs.thread_id AND p.lease_until >= now())",
            (change.status.value, change.error_code, change.error_message, change.cause_value, _now_ms(),
             change.previous.value),
        )


_THREAD_COLS = "id, created_at, state, last_seq, owner, active_branch, last_branch, message_count"
#: a listing row: the thread's summary columns, whether it has pending calls, and its latest run
_SUMMARY_COLS = (
    "id, title, agent_id, created_at, updated_at, message_count, owner, "
    "EXISTS (SELECT 1 FROM pending p WHERE p.thread_id = t.id), "
    "(SELECT ARRAY[r.id, convert_to(r.status, 'UTF8'), convert_to(r.cause, 'UTF8'), "
    "convert_to(r.error_code, 'UTF8')] FROM runs r WHERE r.thread_id = t.id ORDER BY r.created_at DESC, r.ord DESC "
    "LIMIT 1)"
)
_MESSAGE_COLS = "m.id, m.role, m.parts, m.run_id, m.seq, m.created_at, m.branch"
#: whether the message ``m`` is on the active path of its thread ``t``: every message of a thread that
#: never branched (``path_branches`` NULL), else the branch of the path's range its seq falls in
_ON_ACTIVE_PATH = "(t.path_branches IS NULL OR m.branch = t.path_branches[width_bucket(m.seq, t.path_starts) + 1])"
#: the active path's messages of the thread ``%s`` (add ``AND …`` conditions and an order)
_ACTIVE_MESSAGES = (f"{_MESSAGE_COLS} FROM messages m JOIN threads t ON t.id = m.thread_id "
                    f"WHERE m.thread_id = %s AND {_ON_ACTIVE_PATH}")
_PENDING_COLS = "tool_call_id, run_id, thread_id, name, arguments, kind, message_id"


def _message(r: tuple[Any, ...]) -> Message:
    return Message(_s(r[0]), r[1], parts_from_json(json.loads(r[2])), _s(r[3]), r[4], r[5], r[6])  # type: ignore[arg-type]


def _pending_call(r: tuple[Any, ...]) -> PendingCall:
    return PendingCall(_s(r[0]), _s(r[1]), _s(r[2]), r[3], r[4], r[5], _s(r[6]))  # type: ignore[arg-type]


def _thread_record(row: tuple[Any, ...]) -> ThreadRecord:
    return ThreadRecord(_s(row[0]), row[1], json.loads(row[2]), row[3], _dec(row[4]), row[5])  # type: ignore[arg-type]


def _path_length(row: tuple[Any, ...]) -> int | None:
    """The active path's length of a ``_THREAD_COLS`` row, None for a thread that never branched (every
    message: its ``last_seq``)."""
    return row[7] if row[6] else None


def _summary(row: tuple[Any, ...]) -> ThreadSummary:
    run = row[8]
    return ThreadSummary(
        thread_id=_s(row[0]),  # type: ignore[arg-type]
        title=_dec(row[1]),
        agent_id=row[2],
        created_at=row[3],
        updated_at=row[4],
        message_count=row[5],
        last_run=None if run is None else RunSummary(_s(run[0]), RunStatus(_s(run[1])), _s(run[2]), _s(run[3])),  # type: ignore[arg-type]
        waiting=bool(row[7]),
        owner=_dec(row[6]),
    )


def _thread(conn: psycopg.Connection, thread_id: str) -> ThreadRecord | None:
    row = conn.execute(f"SELECT {_THREAD_COLS} FROM threads WHERE id = %s", (_b(thread_id),)).fetchone()
    return None if row is None else _thread_record(row)


def _messages(conn: psycopg.Connection, thread_id: str, after_seq: int, limit: int,
              branch: int | None = None) -> list[Message]:
    """The path of ``branch`` (None: the active one, filtered by the thread's row in the same statement)."""
    tid = _b(thread_id)
    if branch is None:
        rows = conn.execute(f"SELECT {_ACTIVE_MESSAGES} AND m.seq > %s ORDER BY m.seq LIMIT %s",
                            (tid, after_seq, max(0, limit)))
        return [_message(r) for r in rows]
    row = conn.execute("SELECT created_at, last_branch FROM threads WHERE id = %s", (tid,)).fetchone()
    if row is None:
        return []
    if not row[1] and branch:
        raise ValueError(f"no branch {branch} on thread {thread_id!r}")
    where, args = path_condition(_path(conn, tid, row[0], branch) if row[1] else None, prefix="m.", placeholder="%s")
    rows = conn.execute(f"SELECT {_MESSAGE_COLS} FROM messages m WHERE m.thread_id = %s AND m.seq > %s{where} "
                        "ORDER BY m.seq LIMIT %s", (tid, after_seq, *args, max(0, limit)))
    return [_message(r) for r in rows]


def _path_tail(conn: psycopg.Connection, tid: bytes, count: int) -> list[Message]:
    """The latest ``count`` messages of the thread's active path, oldest first."""
    rows = conn.execute(f"SELECT {_ACTIVE_MESSAGES} ORDER BY m.seq DESC LIMIT %s", (tid, max(0, count))).fetchall()
    return [_message(r) for r in reversed(rows)]


def _committed_ids(conn: psycopg.Connection, tid: bytes, ids: Collection[str]) -> frozenset[str]:
    """Which of ``ids`` are on the thread's active path, by the ``(thread_id, id, branch)`` index."""
    rows = conn.execute(f"SELECT m.id FROM messages m JOIN threads t ON t.id = m.thread_id "
                        f"WHERE m.thread_id = %s AND m.id = ANY(%s) AND {_ON_ACTIVE_PATH}",
                        (tid, [_b(i) for i in ids]))
    return frozenset(_s(r[0]) for r in rows)  # type: ignore[misc]


def _branches(conn: psycopg.Connection, tid: bytes, created_at: int) -> list[Branch]:
    """Every branch of a thread that branched, branch 0 first."""
    rows = conn.execute("SELECT branch, parent, fork_seq, created_at, run_id, reason FROM branches "
                        "WHERE thread_id = %s ORDER BY branch", (tid,))
    return [Branch(0, None, 0, created_at), *(Branch(r[0], r[1], r[2], r[3], _s(r[4]), r[5]) for r in rows)]


def _path(conn: psycopg.Connection, tid: bytes, created_at: int, branch: int) -> BranchPath:
    """The path of ``branch`` of a thread that branched (``ValueError`` for a branch it does not have)."""
    return branch_path(_branches(conn, tid, created_at), branch)


def _path_arrays(path: BranchPath) -> tuple[list[int], list[int]]:
    """A path as the thread row keeps its active one: its branches, root first, and the first seq of
    each of its ranges after the first (``width_bucket``'s thresholds)."""
    return [branch for branch, _ in path], [max_seq + 1 for _, max_seq in path[:-1]]


def _path_from_arrays(branches: list[int] | None, starts: list[int] | None) -> BranchPath | None:
    """The active path a thread row keeps (``_path_arrays``); None for a thread that never branched."""
    if branches is None:
        return None
    ends = [start - 1 for start in starts or ()] + [MAX_SEQ]
    return tuple(zip(branches, ends, strict=True))


def _pending(conn: psycopg.Connection, thread_id: str) -> list[PendingCall]:
    rows = conn.execute(f"SELECT {_PENDING_COLS} FROM pending WHERE thread_id = %s ORDER BY ord", (_b(thread_id),))
    return [_pending_call(r) for r in rows]


def _run(row: tuple[Any, ...]) -> RunRecord:
    return RunRecord(
        run_id=_s(row[0]),  # type: ignore[arg-type]
        thread_id=_s(row[1]),  # type: ignore[arg-type]
        agent_id=row[2],
        status=RunStatus(row[3]),
        created_at=row[4],
        updated_at=row[5],
        error_code=row[6],
        error_message=row[7],
        usage=Usage(row[8], row[9]),
        steps=row[10],
        cause=row[11],
        tools=tools_from_json(json.loads(row[12])),
        branch=row[13],
    )


def _insert_run(conn: psycopg.Connection, run: RunRecord, branch: int) -> bool:
    """Insert the run on ``branch``; False if its id is taken (nothing written)."""
    return conn.execute(
        f"INSERT INTO runs ({_RUN_COLS}) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
        "ON CONFLICT (id) DO NOTHING RETURNING 1",
        (
            _b(run.run_id),
            _b(run.thread_id),
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
            _dumps(tools_to_json(run.tools)),
            branch,
        ),
    ).fetchone() is not None


def _insert_pending(conn: psycopg.Connection, calls: Sequence[PendingCall]) -> None:
    if not calls:
        return
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO pending (thread_id, tool_call_id, run_id, name, arguments, kind, message_id) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s)",
                [
                    (_b(p.thread_id), _b(p.tool_call_id), _b(p.run_id), p.name, p.arguments, p.kind, _b(p.message_id))
                    for p in calls
                ],
            )
    except psycopg.errors.UniqueViolation:
        raise ValueError("a pending tool call id is already pending on the thread") from None


def _message_row(thread_id: bytes, m: Message, seq: int, created: int, branch: int) -> tuple[Any, ...]:
    return (thread_id, seq, _b(m.id), m.role, None if m.run_id is None else _b(m.run_id),
            _dumps(parts_to_json(m.parts)), created, branch)


def _append(conn: psycopg.Connection, thread_id: str, last: int, messages: Sequence[Message], branch: int,
            path: BranchPath | None) -> list[Message]:
    """Insert ``messages`` on ``branch`` at seqs ``last + 1…`` (the caller locked the thread's row and
    reserved them). ``path``: the branch's path on a thread that branched (None: one that never did, where
    the ``(thread_id, id, branch)`` key alone refuses a repeated id); an id already on the path (on an
    older branch of it) is refused too."""
    if not messages:
        return []
    tid = _b(thread_id)
    now = _now_ms()
    out = [Message(m.id, m.role, m.parts, m.run_id, last + i + 1, m.created_at or now, branch)
           for i, m in enumerate(messages)]
    if len({m.id for m in out}) != len(out):
        raise ValueError(f"a message id repeats in one commit on thread {thread_id!r}")
    if path is not None:
        where, args = path_condition(path, prefix="m.", placeholder="%s")
        taken = conn.execute(f"SELECT m.id FROM messages m WHERE m.thread_id = %s AND m.id = ANY(%s){where} LIMIT 1",
                             (tid, [_b(m.id) for m in out], *args)).fetchone()
        if taken is not None:
            raise ValueError(f"message id {_s(taken[0])!r} is already committed on the path of branch {branch} "
                             f"of thread {thread_id!r}")
    try:
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO messages (thread_id, seq, id, role, run_id, parts, created_at, branch) "
                "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)",
                [_message_row(tid, m, m.seq, m.created_at, branch) for m in out],
            )
    except psycopg.errors.UniqueViolation:
        raise ValueError(f"a message id is already committed on thread {thread_id!r}") from None
    return out
