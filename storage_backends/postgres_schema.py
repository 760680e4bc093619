"""The Postgres ledger's schema: numbered migrations and the one function that applies them.

``MIGRATIONS`` is append-only: a released migration is never edited, a change is a new entry.
``migrate`` applies the missing ones in order, each in its own transaction that first takes a
transaction-scoped advisory lock, so any number of processes may open the ledger at once: one
applies a migration, the others wait for it and then find nothing left to do. Applied versions are
rows of ``schema_migrations``. A database whose schema is newer than this code refuses to open.

Ids (thread, run, message, tool call) are client strings that may hold any Unicode, NUL included,
which a Postgres ``text`` cannot; they are stored as their UTF-8 bytes in ``bytea`` columns (byte
order, as SQLite's ``BINARY`` collation sorts them). JSON bodies (``state``, ``parts``) are ``text``
as ``json.dumps`` writes it (NUL escaped), never ``jsonb`` (which refuses ``\\u0000``).

A migration is SQL text, or a function of the connection for one that must compute in Python (the
titles of existing threads).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import psycopg

from awaken.core.messages import Message, parts_from_json
from awaken.ledger.interface import thread_title

#: pg_advisory_xact_lock key serialising schema changes (the bytes of "awkn-sch")
ADVISORY_KEY = int.from_bytes(b"awkn-sch", "big") & 0x7FFF_FFFF_FFFF_FFFF

def _fill_thread_summaries(conn: psycopg.Connection) -> None:
    """Migration 2: the listing columns of existing threads, computed from their history."""
    conn.execute(
        """
        ALTER TABLE threads ADD COLUMN owner bytea, ADD COLUMN title bytea, ADD COLUMN agent_id text,
            ADD COLUMN updated_at bigint NOT NULL DEFAULT 0, ADD COLUMN message_count bigint NOT NULL DEFAULT 0;
        UPDATE threads t SET
            message_count = (SELECT count(*) FROM messages m WHERE m.thread_id = t.id),
            updated_at = greatest(t.created_at,
                                  coalesce((SELECT max(updated_at) FROM runs r WHERE r.thread_id = t.id), 0)),
            agent_id = (SELECT agent_id FROM runs r WHERE r.thread_id = t.id ORDER BY created_at DESC, ord DESC
                        LIMIT 1);
        CREATE INDEX threads_updated ON threads (updated_at, id);
        CREATE INDEX threads_owner_updated ON threads (owner, updated_at, id);
        CREATE INDEX threads_agent_updated ON threads (agent_id, updated_at, id);
        """
    )
    titles = []
    for (thread_id,) in conn.execute("SELECT id FROM threads").fetchall():
        rows = conn.execute("SELECT parts FROM messages WHERE thread_id = %s AND role = 'user' ORDER BY seq",
                            (thread_id,))
        for (parts,) in rows:
            title = thread_title([Message("", "user", parts_from_json(json.loads(parts)))])
            if title is not None:
                titles.append((title.encode("utf-8", "surrogatepass"), thread_id))
                break
    if titles:
        with conn.cursor() as cur:
            cur.executemany("UPDATE threads SET title = %s WHERE id = %s", titles)


Migration = str | Callable[[psycopg.Connection], None]

#: (version, name, SQL or function), in order; never edit a released entry
MIGRATIONS: tuple[tuple[int, str, Migration], ...] = (
    (
        1,
        "threads, runs, messages and pending calls",
        """
        CREATE TABLE threads (
            id bytea PRIMARY KEY,
            created_at bigint NOT NULL,
            state text NOT NULL DEFAULT '{}',
            last_seq bigint NOT NULL DEFAULT 0
        );
        CREATE TABLE runs (
            id bytea PRIMARY KEY,
            ord bigint GENERATED ALWAYS AS IDENTITY,
            thread_id bytea NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            agent_id text NOT NULL,
            status text NOT NULL,
            created_at bigint NOT NULL,
            updated_at bigint NOT NULL,
            error_code text,
            error_message text,
            cause text,
            input_tokens bigint NOT NULL DEFAULT 0,
            output_tokens bigint NOT NULL DEFAULT 0,
            steps bigint NOT NULL DEFAULT 0
        );
        CREATE INDEX runs_by_thread ON runs (thread_id, created_at, ord);
        CREATE INDEX runs_running ON runs (id) WHERE status = 'running';
        CREATE TABLE messages (
            thread_id bytea NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            seq bigint NOT NULL,
            id bytea NOT NULL,
            role text NOT NULL,
            run_id bytea,
            parts text NOT NULL,
            created_at bigint NOT NULL,
            PRIMARY KEY (thread_id, seq),
            UNIQUE (thread_id, id)
        );
        CREATE TABLE pending (
            thread_id bytea NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            tool_call_id bytea NOT NULL,
            run_id bytea NOT NULL,
            name text NOT NULL,
            arguments text NOT NULL,
            kind text NOT NULL,
            message_id bytea NOT NULL,
            ord bigint GENERATED ALWAYS AS IDENTITY,
            PRIMARY KEY (thread_id, tool_call_id)
        );
        """,
    ),
    (2, "thread owners and listing summaries", _fill_thread_summaries),
    (
        3,
        "server processes with a lease, and thread claims",
        """
        CREATE TABLE processes (
            id bigint PRIMARY KEY,
            name text NOT NULL,
            started_at timestamptz NOT NULL DEFAULT now(),
            lease_until timestamptz NOT NULL
        );
        CREATE TABLE thread_claims (
            thread_id bytea PRIMARY KEY,
            process_id bigint NOT NULL,
            token text NOT NULL,
            claimed_at timestamptz NOT NULL DEFAULT now()
        );
        CREATE INDEX thread_claims_by_process ON thread_claims (process_id);
        """,
    ),
    (4, "the tools a client declared for a run", "ALTER TABLE runs ADD COLUMN tools text NOT NULL DEFAULT '[]'"),
    (
        5,
        "the row /readyz writes to prove the database takes commits",
        "CREATE TABLE write_probe (id integer PRIMARY KEY, at timestamptz NOT NULL)",
    ),
    (
        6,
        "the run relay: streaming runs' events for watchers on other processes (postgres_relay)",
        """
        CREATE TABLE relay_runs (
            run_key bytea PRIMARY KEY,
            thread_id bytea NOT NULL,
            process_id bigint NOT NULL,
            owner bytea,
            ended boolean NOT NULL DEFAULT false,
            ended_at timestamptz,
            created_at timestamptz NOT NULL DEFAULT clock_timestamp()
        );
        CREATE INDEX relay_runs_by_thread ON relay_runs (thread_id);
        CREATE TABLE relay_events (
            run_key bytea NOT NULL REFERENCES relay_runs (run_key) ON DELETE CASCADE,
            first_seq bigint NOT NULL,
            last_seq bigint NOT NULL,
            data bytea NOT NULL,
            PRIMARY KEY (run_key, first_seq)
        );
        """,
    ),
    (
        7,
        "threads that branch: a branch per message and run, branches, the active branch and its path",
        # Every existing message, run and thread is on branch 0 (the thread never branched: no branch
        # row, ``path_branches`` NULL). A message id is unique per (thread, id, branch), whose index
        # also answers "which of these ids are committed" by its (thread_id, id) prefix. The active
        # path is kept on the thread's row (``path_branches``: the path's branches, root first;
        # ``path_starts``: the first seq of each range after the first), so a read of it is one
        # statement: ``branch = path_branches[width_bucket(seq, path_starts) + 1]``.
        """
        ALTER TABLE threads ADD COLUMN active_branch bigint NOT NULL DEFAULT 0,
            ADD COLUMN last_branch bigint NOT NULL DEFAULT 0,
            ADD COLUMN path_branches bigint[], ADD COLUMN path_starts bigint[];
        ALTER TABLE runs ADD COLUMN branch bigint NOT NULL DEFAULT 0;
        ALTER TABLE messages ADD COLUMN branch bigint NOT NULL DEFAULT 0;
        ALTER TABLE messages DROP CONSTRAINT messages_thread_id_id_key;
        ALTER TABLE messages ADD CONSTRAINT messages_thread_id_id_branch_key UNIQUE (thread_id, id, branch);
        CREATE TABLE branches (
            thread_id bytea NOT NULL REFERENCES threads (id) ON DELETE CASCADE,
            branch bigint NOT NULL,
            parent bigint NOT NULL,
            fork_seq bigint NOT NULL,
            created_at bigint NOT NULL,
            run_id bytea,
            reason text NOT NULL,
            PRIMARY KEY (thread_id, branch)
        );
        """,
    ),
)

LATEST = MIGRATIONS[-1][0]


class SchemaTooNew(RuntimeError):
    """The database was migrated by a newer awaken than this one."""


def current_version(conn: psycopg.Connection) -> int:
    """The highest applied version (0 for an empty database)."""
    exists = conn.execute("SELECT to_regclass('schema_migrations') IS NOT NULL").fetchone()
    if not exists or not exists[0]:
        return 0
    row = conn.execute("SELECT coalesce(max(version), 0) FROM schema_migrations").fetchone()
    return int(row[0]) if row else 0


def migrate(conn: psycopg.Connection) -> list[int]:
    """Apply every missing migration (``conn`` in autocommit mode); return the versions applied."""
    applied: list[int] = []
    for version, name, step in MIGRATIONS:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (ADVISORY_KEY,))
            conn.execute(
                "CREATE TABLE IF NOT EXISTS schema_migrations ("
                " version integer PRIMARY KEY, name text NOT NULL,"
                " applied_at timestamptz NOT NULL DEFAULT now())"
            )
            have = current_version(conn)
            if have > LATEST:
                raise SchemaTooNew(
                    f"the database schema is at version {have}, newer than this awaken knows ({LATEST}); "
                    "upgrade awaken"
                )
            if have >= version:
                continue
            if isinstance(step, str):
                conn.execute(step)
            else:
                step(conn)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied.append(version)
    return applied
