"""``awaken ledger migrate --config PATH``: apply the ledger's schema migrations and nothing else.

A backend with a versioned schema (Postgres) has an async ``migrate()`` returning the versions it
applied; ``open`` applies them too, so this command is for running them ahead of a deploy (or by a
role allowed to change the schema). Backends without one (SQLite, files) create their layout when
they open, and the command says so.
"""

from __future__ import annotations

import argparse
import sys

import trio

from awaken.config import load_config
from awaken.core.errors import ConfigError, StoreUnavailable
from awaken.ledger.registry import build_ledger


def _migrate_command(args: argparse.Namespace) -> int:
    try:
        config = load_config(args.config)
        ledger = build_ledger(config)
    except ConfigError as exc:
        print(f"awaken: {exc}", file=sys.stderr)
        return 2
    migrate = getattr(ledger, "migrate", None)
    if migrate is None:
        print(f"the {config.ledger.backend} ledger has no versioned schema: it creates its layout when it opens")
        return 0
    try:
        applied: list[int] = trio.run(migrate)
    except StoreUnavailable as exc:
        print(f"awaken: ledger migrate failed: {exc.message}", file=sys.stderr)
        return 1
    if applied:
        print(f"applied migrations {', '.join(map(str, applied))}; the schema is at version {applied[-1]}")
    else:
        print("the schema is up to date")
    return 0


def add_migrate_command(ledger_sub: argparse._SubParsersAction) -> None:
    p = ledger_sub.add_parser("migrate", help="apply the ledger's schema migrations (Postgres) and exit")
    p.add_argument("--config", default="config.toml", help="config file (default: ./config.toml)")
    p.set_defaults(func=_migrate_command)
