"""Thread claims in Postgres: one active run per thread across every server process on a database.

Tables (``postgres_schema`` migration 3): ``processes`` (one row per live server process: a random
63-bit id, ``host:pid``, a lease) and ``thread_claims`` (thread id → claiming process and the run's
token). A claim is one ``INSERT … ON CONFLICT`` that succeeds when the thread is free or already this
process's (a release still in flight; the registry guarantees the old run is over); a release deletes
the claim only if it still holds the run's token.

``serve`` (a task of the server's nursery) keeps the process alive and the database tidy, once per
``lease_seconds / 3``:

* the heartbeat moves this process's ``lease_until`` forward (database clock, so the processes'
  clocks never need to agree) and drops claims this process leaked (a release that failed while the
  database was away: a token no run of this process holds);
* the sweep, in one statement, deletes the processes whose lease lapsed and their claims, and marks
  the runs still ``running`` on those threads ``interrupted`` with cause ``owner_died``: the threads
  are free again, without waiting for anyone's restart;
* a dedicated connection ``LISTEN``s on ``awaken_stop``; ``request_stop`` sends ``NOTIFY`` to the
  holding process (payload: its id and the thread id in hex), which stops its run as a local stop.

The ledger's ``open`` registers the process (after recovering only the runs no live process claims)
and ``aclose`` removes it and its claims, so a clean shutdown frees its threads at once.
"""

from __future__ import annotations

import logging
import os
import secrets
import socket
from collections.abc import Awaitable, Callable
from typing import Any, Protocol, TypeVar

import psycopg
import trio

from awaken.core.errors import StoreUnavailable
from awaken.engine.claims import StopHandler, ThreadClaims
from awaken.engine.state import Cause, recovery

T = TypeVar("T")


class ClaimsStore(Protocol):
    """What the claims use of their ledger (``PostgresLedger``): its DSN and connection arguments, and
    its pooled call in a worker thread."""

    dsn: str
    _kwargs: dict[str, Any]

    def _call(self, fn: Callable[[psycopg.Connection], T]) -> Awaitable[T]: ...


log = logging.getLogger("awaken.ledger.interface.postgres")

CHANNEL = "awaken_stop"


class PostgresClaims(ThreadClaims):
    def __init__(self, ledger: ClaimsStore, lease_seconds: float) -> None:
        self.ledger = ledger
        self.lease_seconds = lease_seconds
        self.id = secrets.randbits(63)
        self.process_id = f"{socket.gethostname()}:{os.getpid()}"
        #: the heartbeat's own connection and thread slot: it never queues behind the runs' commits on
        #: the pool's limiter, so a busy process keeps its lease however many commits are waiting
        self._beat_conn: psycopg.Connection | None = None
        self._beat_limiter = trio.CapacityLimiter(1)
        self._tokens: Callable[[], frozenset[str]] = frozenset
        #: claims made lately, by token (when): the heartbeat keeps them even when its snapshot of the
        #: live tokens was taken before their runs were registered (else it deleted a fresh claim)
        self._claimed: dict[str, float] = {}

    def live_tokens(self, tokens: Callable[[], frozenset[str]]) -> None:
        self._tokens = tokens

    # -- run in the ledger's open/aclose (a worker thread, a direct connection) -----------------------

    def register(self, conn: psycopg.Connection) -> None:
        conn.execute(
            "INSERT INTO processes (id, name, lease_until) VALUES (%s, %s, now() + make_interval(secs => %s))",
            (self.id, self.process_id, self.lease_seconds),
        )

    def unregister(self, conn: psycopg.Connection) -> None:
        with conn.transaction():
            conn.execute("DELETE FROM thread_claims WHERE process_id = %s", (self.id,))
            conn.execute("DELETE FROM processes WHERE id = %s", (self.id,))

    # -- the interface ----------------------------------------------------------------------------

    async def claim(self, thread_id: str, token: str) -> bool:
        self._claimed[token] = trio.current_time()

        def q(conn: psycopg.Connection) -> bool:
            row = conn.execute(
                "INSERT INTO thread_claims (thread_id, process_id, token) VALUES (%s, %s, %s) "
                "ON CONFLICT (thread_id) DO UPDATE SET token = EXCLUDED.token, claimed_at = now() "
                "WHERE thread_claims.process_id = EXCLUDED.process_id RETURNING 1",
                (thread_id.encode("utf-8"), self.id, token),
            ).fetchone()
            return row is not None

        return await self.ledger._call(q)

    async def release(self, thread_id: str, token: str) -> None:
        try:
            await self.ledger._call(lambda conn: conn.execute(
                "DELETE FROM thread_claims WHERE thread_id = %s AND token = %s", (thread_id.encode("utf-8"), token)))
        except StoreUnavailable as exc:  # the heartbeat drops it once the database answers
            log.warning("thread %r: the claim could not be released now: %s", thread_id, exc.message)

    async def _holder(self, thread_id: str) -> tuple[int, str] | None:
        def q(conn: psycopg.Connection) -> tuple[int, str] | None:
            return conn.execute(
                "SELECT p.id, p.name FROM thread_claims c JOIN processes p ON p.id = c.process_id "
                "WHERE c.thread_id = %s",
                (thread_id.encode("utf-8"),),
            ).fetchone()

        return await self.ledger._call(q)

    async def holder(self, thread_id: str) -> str | None:
        found = await self._holder(thread_id)
        return None if found is None else found[1]

    async def request_stop(self, thread_id: str) -> str | None:
        found = await self._holder(thread_id)
        if found is None or found[0] == self.id:
            return None  # free, or this process's own claim with no run left to stop
        payload = f"{found[0]} {thread_id.encode('utf-8').hex()}"
        await self.ledger._call(lambda conn: conn.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload)))
        return found[1]

    # -- upkeep -----------------------------------------------------------------------------------

    async def serve(self, on_stop: StopHandler, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._listen, on_stop)
            task_status.started()
            while True:
                try:
                    await self.tick()
                except StoreUnavailable as exc:
                    log.warning("lease upkeep: %s", exc.message)
                await trio.sleep(self.lease_seconds / 3)

    async def tick(self) -> list[str]:
        """One heartbeat and one sweep; returns the runs this sweep interrupted (a dead owner's)."""
        now = trio.current_time()
        for token, at in list(self._claimed.items()):
            if now - at > self.lease_seconds:
                del self._claimed[token]
        tokens = sorted(self._tokens())
        claimed = self._claimed

        change = recovery(Cause.OWNER_DIED)  # the run state's table decides what the sweep writes

        def q(conn: psycopg.Connection) -> list[str]:
            with conn.transaction():
                alive = conn.execute(
                    "UPDATE processes SET lease_until = now() + make_interval(secs => %s) WHERE id = %s RETURNING 1",
                    (self.lease_seconds, self.id),
                ).fetchone()
                if alive is None:  # others took this process for dead: it is back, its claims are gone
                    log.warning("this process's lease had lapsed; registering again")
                    self.register(conn)
                # a claim made after ``tokens`` was read (its run not registered yet) is in ``claimed``
                conn.execute("DELETE FROM thread_claims WHERE process_id = %s AND NOT (token = ANY(%s))",
                             (self.id, tokens + list(claimed)))
                rows = conn.execute(
                    "WITH dead AS (DELETE FROM processes WHERE lease_until < now() RETURNING id), "
                    "freed AS (DELETE FROM thread_claims c WHERE c.process_id IN (SELECT id FROM dead) "
                    "          OR NOT EXISTS (SELECT 1 FROM processes p WHERE p.id = c.process_id) "
                    "          RETURNING thread_id) "
                    "UPDATE runs SET status = %s, cause = %s, error_code = %s, error_message = %s, "
                    "updated_at = (extract(epoch from clock_timestamp()) * 1000)::bigint "
                    "WHERE status = %s AND thread_id IN (SELECT thread_id FROM freed) RETURNING id",
                    (change.status.value, change.cause_value, change.error_code, change.error_message,
                     change.previous.value),
                ).fetchall()
            return [bytes(r[0]).decode("utf-8") for r in rows]

        interrupted = await self._on_own_connection(q)
        if interrupted:
            log.warning("interrupted %d run(s) of a process whose lease lapsed", len(interrupted))
        return interrupted

    async def _listen(self, on_stop: StopHandler) -> None:
        """Receive stop requests addressed to this process, reconnecting while the database is away."""
        async with trio.open_nursery() as nursery:
            while True:
                try:
                    conn = await trio.to_thread.run_sync(self._listener)
                except psycopg.Error:
                    await trio.sleep(1)
                    continue
                try:
                    while True:
                        # the thread returns every half second, so a cancellation is seen promptly
                        payloads = await trio.to_thread.run_sync(_wait_notifies, conn, abandon_on_cancel=True)
                        for payload in payloads:
                            target, _, thread_hex = payload.partition(" ")
                            if target == str(self.id):
                                nursery.start_soon(on_stop, bytes.fromhex(thread_hex).decode("utf-8"))
                except psycopg.Error:
                    await trio.sleep(1)
                finally:
                    _close_later(conn)

    async def _on_own_connection(self, fn: Callable[[psycopg.Connection], list[str]]) -> list[str]:
        """Run the heartbeat on its own connection in its own thread slot (reconnecting after a failure)."""

        def run() -> list[str]:
            try:
                if self._beat_conn is None or self._beat_conn.closed:
                    self._beat_conn = psycopg.connect(self.ledger.dsn, **self.ledger._kwargs)
                return fn(self._beat_conn)
            except psycopg.Error as exc:
                if self._beat_conn is not None:
                    self._beat_conn.close()
                    self._beat_conn = None
                raise StoreUnavailable(f"the Postgres lease upkeep failed: {exc}".splitlines()[0]) from None

        return await trio.to_thread.run_sync(run, limiter=self._beat_limiter)

    def close_heartbeat(self) -> None:
        if self._beat_conn is not None:
            self._beat_conn.close()
            self._beat_conn = None

    def _listener(self) -> psycopg.Connection:
        conn = psycopg.connect(self.ledger.dsn, **self.ledger._kwargs)
        conn.execute(f"LISTEN {CHANNEL}")
        return conn


def _wait_notifies(conn: psycopg.Connection) -> list[str]:
    """The notifications of the next packet that brings any, at once (``stop_after``: without it the
    generator collects until its whole timeout ran, so every wake-up waited up to half a second), or
    none after half a second."""
    return [n.payload for n in conn.notifies(timeout=0.5, stop_after=1)]


def _close_later(conn: psycopg.Connection) -> None:
    """Close a listener that a worker thread may still be reading (it returns within half a second)."""

    def close() -> None:
        try:
            conn.close()
        except psycopg.Error:
            pass

    trio.lowlevel.spawn_system_task(trio.to_thread.run_sync, close)
