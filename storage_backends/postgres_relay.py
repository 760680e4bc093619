"""The run relay in Postgres (``awaken.ledger.relay``): a run's events staged in the database, watchers
woken by ``LISTEN/NOTIFY``; no broker beside the database the deployment already runs.

Tables (``postgres_schema`` migration 6): ``relay_runs`` (a run streaming now: its key, thread, the
process that runs it, the subject who started it, whether it ended) and ``relay_events`` (its events
in batches: sequence numbers ``first_seq``..``last_seq`` and their JSON, one row per batch).

* ``publish`` only appends to a buffer. ``serve`` writes what is buffered every ``FLUSH_SECONDS``
  (while anything is): every run's new events as one row, in one transaction with one
  ``pg_notify('awaken_relay', '<key hex> <last seq>')`` per run; a notification stays far under
  NOTIFY's 8000-byte payload limit whatever a delta holds, and a delta costs a list append here and a
  share of one row there.
* Bounded in bytes: a run keeps at most ``limit`` bytes of batches (``[server] replay_bytes``); older
  ones go, except the first (the run's ``RunStarted``). A watcher that starts after that starts at the
  run's next step boundary, as a late channel does. A process's buffer is bounded the same way.
* Bounded in time: an ended run's rows go ``KEEP_ENDED_SECONDS`` after its end, those of a process
  whose lease lapsed (no ``processes`` row: the claims' sweep removed it) at the next cleanup.
* A reader learns that a run ended (``relay_runs.ended``) or that the process running it died (its
  ``processes`` row is gone: its lease lapsed), which it reports as ``OWNER_DIED``.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import orjson
import psycopg
import trio

from awaken.core import events as ev
from awaken.core.errors import StoreUnavailable
from awaken.ledger.relay import Batch, RelayedRun, RunRelay, event_from_json, event_to_json

if TYPE_CHECKING:
    from storage_backends.postgres_claims import ClaimsStore, PostgresClaims

log = logging.getLogger("awaken.ledger.relay.postgres")

CHANNEL = "awaken_relay"
#: how long staged events wait to be written with those that follow (one row, one NOTIFY per run)
FLUSH_SECONDS = 0.005
#: how long an ended run's events stay readable (a watcher reading its last batch)
KEEP_ENDED_SECONDS = 30
#: how often ended and orphaned runs are cleaned up
CLEANUP_SECONDS = 5.0
#: the payload of a run's end in the buffer
_END = object()


class _Staged:
    __slots__ = ("bytes", "ended", "events", "new", "next_seq", "owner", "rows", "thread_id")

    def __init__(self, thread_id: str, owner: str | None) -> None:
        self.thread_id = thread_id
        self.owner = owner
        self.events: list[bytes] = []
        self.bytes = 0
        self.next_seq = 1
        self.new = True
        self.ended = False
        #: ``(first_seq, size)`` of the rows written, oldest first (the byte bound)
        self.rows: list[tuple[int, int]] = []


class PostgresRelay(RunRelay):
    def __init__(self, ledger: ClaimsStore, claims: PostgresClaims, limit: int = 8 << 20) -> None:
        self.ledger = ledger
        self.claims = claims
        self.limit = limit
        self.following = {}
        self._staged: dict[str, _Staged] = {}
        self._wake = trio.Event()
        self._seen: dict[str, int] = {}
        self._waiters: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None

    # -- the process that runs the run --------------------------------------------------------------

    def publish(self, run_key: str, thread_id: str, owner: str | None, event: ev.AgentEvent) -> None:
        staged = self._staged.get(run_key)
        if staged is None:
            staged = self._staged[run_key] = _Staged(thread_id, owner)
        data = orjson.dumps(event_to_json(event))
        staged.events.append(data)
        staged.bytes += len(data)
        if staged.bytes > self.limit and len(staged.events) > 1:  # the database is away: keep the newest
            dropped = staged.events.pop(0)
            staged.bytes -= len(dropped)
            staged.next_seq += 1
        self._wake.set()

    def end(self, run_key: str) -> None:
        staged = self._staged.get(run_key)
        if staged is not None:
            staged.ended = True
            self._wake.set()

    async def _flush(self) -> None:
        batch = []
        for key, staged in self._staged.items():
            if staged.events or staged.ended or staged.new:
                batch.append((key, staged, staged.events, staged.next_seq, staged.ended))
                staged.next_seq += len(staged.events)
                staged.events, staged.bytes = [], 0
        if not batch:
            return
        me = self.claims.id

        def q(conn: psycopg.Connection) -> None:
            with conn.transaction():
                for key, staged, events, first, ended in batch:
                    k = key.encode("utf-8")
                    if staged.new:
                        conn.execute(
                            "INSERT INTO relay_runs (run_key, thread_id, process_id, owner) VALUES (%s, %s, %s, %s) "
                            "ON CONFLICT (run_key) DO NOTHING",
                            (k, staged.thread_id.encode("utf-8"), me,
                             None if staged.owner is None else staged.owner.encode("utf-8")))
                    if events:
                        data = b"[" + b",".join(events) + b"]"
                        conn.execute("INSERT INTO relay_events (run_key, first_seq, last_seq, data) "
                                     "VALUES (%s, %s, %s, %s)", (k, first, first + len(events) - 1, data))
                        staged.rows.append((first, len(data)))
                        gone = []
                        while sum(size for _, size in staged.rows) > self.limit and len(staged.rows) > 2:
                            gone.append(staged.rows.pop(1)[0])  # never the first: the run's RunStarted
                        if gone:
                            conn.execute("DELETE FROM relay_events WHERE run_key = %s AND first_seq = ANY(%s)",
                                         (k, gone))
                    if ended:
                        conn.execute("UPDATE relay_runs SET ended = true, ended_at = now() WHERE run_key = %s", (k,))
                    conn.execute("SELECT pg_notify(%s, %s)",
                                 (CHANNEL, f"{k.hex()} {first + len(events) - 1}"))

        try:
            await self.ledger._call(q)
        except StoreUnavailable as exc:
            log.warning("the run relay could not stage events: %s", exc.message)
            for _key, staged, events, first, _ended in batch:  # kept, in order, for the next attempt
                staged.events = events + staged.events
                staged.next_seq = first
                staged.bytes = sum(map(len, staged.events))
            await trio.sleep(1)
            return
        for key, staged, _events, _first, ended in batch:
            staged.new = False
            if ended and self._staged.get(key) is staged and not staged.events:
                del self._staged[key]

    async def _cleanup(self) -> None:
        await self.ledger._call(lambda conn: conn.execute(
            "DELETE FROM relay_runs WHERE (ended AND ended_at < now() - make_interval(secs => %s)) "
            "OR NOT EXISTS (SELECT 1 FROM processes p WHERE p.id = relay_runs.process_id)",
            (KEEP_ENDED_SECONDS,)))

    # -- the processes that watch ---------------------------------------------------------------

    async def find(self, thread_id: str) -> RelayedRun | None:
        me = self.claims.id

        def q(conn: psycopg.Connection) -> Any:
            return conn.execute(
                "SELECT r.run_key, r.owner FROM relay_runs r JOIN thread_claims c ON c.thread_id = r.thread_id "
                "AND c.process_id = r.process_id WHERE r.thread_id = %s AND NOT r.ended AND r.process_id <> %s "
                "ORDER BY r.created_at DESC LIMIT 1", (thread_id.encode("utf-8"), me)).fetchone()

        row = await self.ledger._call(q)
        if row is None:
            return None
        return RelayedRun(bytes(row[0]).decode("utf-8"), thread_id,
                          None if row[1] is None else bytes(row[1]).decode("utf-8"))

    async def read(self, run_key: str, after: int) -> Batch:
        k = run_key.encode("utf-8")

        def q(conn: psycopg.Connection) -> tuple[Any, list[Any]]:
            with conn.transaction():
                state = conn.execute(
                    "SELECT r.ended, p.id IS NULL FROM relay_runs r LEFT JOIN processes p ON p.id = r.process_id "
                    "WHERE r.run_key = %s", (k,)).fetchone()
                rows = conn.execute("SELECT first_seq, data FROM relay_events WHERE run_key = %s AND last_seq > %s "
                                    "ORDER BY first_seq", (k, after)).fetchall()
            return state, rows

        state, rows = await self.ledger._call(q)
        events: list[tuple[int, ev.AgentEvent]] = []
        for first, data in rows:
            for i, item in enumerate(orjson.loads(bytes(data))):
                events.append((first + i, event_from_json(item)))
        if state is None:  # cleaned up: it ended long ago, or its process is gone
            return Batch(events, ended=True)
        ended, dead = state
        lost = ("OWNER_DIED", "the server process running this run died; its history holds what it committed") \
            if dead and not ended else None
        return Batch(events, ended=bool(ended), lost=lost)

    async def wait(self, run_key: str, after: int, seconds: float) -> None:
        if self._seen.get(run_key, 0) > after:
            return
        waiter = self._waiters.setdefault(run_key, trio.Event())
        with trio.move_on_after(seconds):
            await waiter.wait()

    # -- upkeep -------------------------------------------------------------------------------------

    async def serve(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            nursery.start_soon(self._listen)
            task_status.started()
            last_cleanup = trio.current_time()
            while True:
                with trio.move_on_after(CLEANUP_SECONDS):
                    await self._wake.wait()
                    await trio.sleep(FLUSH_SECONDS)
                self._wake = trio.Event()
                await self._flush()
                if trio.current_time() - last_cleanup >= CLEANUP_SECONDS:
                    last_cleanup = trio.current_time()
                    try:
                        await self._cleanup()
                    except StoreUnavailable as exc:
                        log.warning("the run relay's cleanup: %s", exc.message)
                if any(s.events or s.ended for s in self._staged.values()):
                    self._wake.set()

    def spawn(self, fn: Any, *args: Any) -> None:
        if self._nursery is None:
            raise StoreUnavailable("the run relay is not serving")
        self._nursery.start_soon(fn, *args)

    def _heard(self, payload: str) -> None:
        key_hex, _, seq = payload.partition(" ")
        try:
            key = bytes.fromhex(key_hex).decode("utf-8")
        except ValueError:
            return
        if key not in self._waiters and key not in self.following:
            return
        self._seen[key] = max(self._seen.get(key, 0), int(seq or 0))
        waiter = self._waiters.pop(key, None)
        if waiter is not None:
            waiter.set()

    async def _listen(self) -> None:
        """Hear which runs have new events, reconnecting while the database is away."""
        from storage_backends.postgres_claims import _close_later, _wait_notifies

        while True:
            try:
                conn = await trio.to_thread.run_sync(self._listener)
            except psycopg.Error:
                await trio.sleep(1)
                continue
            try:
                while True:
                    for payload in await trio.to_thread.run_sync(_wait_notifies, conn, abandon_on_cancel=True):
                        self._heard(payload)
                    for key in [k for k in self._seen if k not in self.following]:
                        del self._seen[key]
            except psycopg.Error:
                await trio.sleep(1)
            finally:
                _close_later(conn)

    def _listener(self) -> psycopg.Connection:
        conn = psycopg.connect(self.ledger.dsn, **self.ledger._kwargs)
        conn.execute(f"LISTEN {CHANNEL}")
        return conn
