"""The built-in backends (and Postgres on the session's throwaway cluster) as ledger factories for the importable suites (``awaken.ledger.testkit``).

``BACKENDS`` maps a backend name to a module-level factory ``factory(root, **options)`` that builds an
unopened ledger under ``root``; tests parametrise ``ledger_factory`` over it, so adding a backend here
runs the whole conformance suite and the crash test against it.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

from awaken.ledger.interface import Ledger
from awaken.ledger.testkit import harness
from storage_backends.files import FileLedger
from storage_backends.postgres_ledger import PostgresLedger
from storage_backends.sqlite_ledger import SqliteLedger
from tests import pg_cluster


def sqlite_ledger(root: Path, **options: Any) -> Ledger:
    return SqliteLedger(str(root / "ledger.db"), **options)


def file_ledger(root: Path, **options: Any) -> Ledger:
    return FileLedger(str(root / "ledger"), **options)


def cold_file_ledger(root: Path, **options: Any) -> Ledger:
    """The file ledger holding no hot thread: every access rebuilds the thread's detail from its log
    and reads its history from disk (the path an idle thread takes)."""
    return FileLedger(str(root / "ledger"), **{"index_cache_bytes": 0, "cache_bytes": 0, **options})


def postgres_ledger(root: Path, **options: Any) -> Ledger:
    """A schema of the session's throwaway cluster, one per root (nothing is written under it)."""
    return PostgresLedger(pg_cluster.dsn_for(root), password_env=pg_cluster.PASSWORD_ENV, **options)


#: backend name -> factory(root directory, **backend options) -> an unopened ledger
BACKENDS: dict[str, Callable[..., Ledger]] = {
    "sqlite": sqlite_ledger,
    "files": file_ledger,
    "postgres": postgres_ledger,
}


#: the backends, plus configurations of one the conformance suite also runs
VARIANTS: dict[str, Callable[..., Ledger]] = {**BACKENDS, "files-cold": cold_file_ledger}


def make_ledger(backend: str, root: Path | str, **options: Any) -> Ledger:
    return BACKENDS[backend](Path(root), **options)


def opened(backend: str, root: Path | str, **options: Any) -> AsyncIterator[Ledger]:
    """Open a ledger of ``backend`` under ``root`` and close it on exit (even on error)."""
    return harness.opened(BACKENDS[backend], root, **options)  # type: ignore[return-value]
