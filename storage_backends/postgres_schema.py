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

Planned, for several server processes on one database (each a later migration): a ``processes``
table of live servers with a lease, and a per-thread claim row (``thread_claims``: thread id, run id,
owner process, lease expiry) so "one active run per thread" and recovery of a dead process's runs
live in the database. Both only add tables; nothing here has to change shape for them.
"""

from __future__ import annotations

import psycopg

#: pg_advisory_xact_lock key serialising schema changes (the bytes of "awkn-sch")
ADVISORY_KEY = int.from_bytes(b"awkn-sch", "big") & 0x7FFF_FFFF_FFFF_FFFF

#: (version, name, SQL), in order; never edit a released entry
MIGRATIONS: tuple[tuple[int, str, str], ...] = (
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
    for version, name, statements in MIGRATIONS:
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
            conn.execute(statements)
            conn.execute("INSERT INTO schema_migrations (version, name) VALUES (%s, %s)", (version, name))
            applied.append(version)
    return applied
