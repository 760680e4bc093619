"""``awaken ledger copy --from CONFIG_A --to CONFIG_B``: move the whole history between backends.

Every thread of the source ledger (its owner, runs, messages with their ids and sequence numbers,
pending calls, agent state, last-update time, and its branches: every branch's messages, the active
branch, each run's branch) is written to the destination in one ``import_thread`` transaction per
thread; then every branch's path and the counts are read back from both and compared. A thread that already exists in
the destination stops the copy before anything is written for it.

What it refuses before writing anything (exit 1, one line saying why): a source ledger that does not
exist (a SQLite file or a file ledger's directory that is not there: opening it would create an empty
one), a source that holds no thread while the destination holds none either (nothing to copy: most
likely ``--from`` names the wrong config), and a destination that is the source itself. Relative paths
in either config file are read from that file's directory (``awaken.config.paths``), so the command
does the same from any working directory.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import attrs
import trio

from awaken.config import AppConfig, load_config
from awaken.config.paths import FILE_BACKENDS
from awaken.core.errors import ConfigError, StoreUnavailable
from awaken.core.messages import Message
from awaken.ledger.interface import Branch, Ledger
from awaken.ledger.registry import build_ledger

_ALL = 1_000_000_000


@attrs.frozen
class CopyReport:
    threads: int
    runs: int
    messages: int
    pending: int


class Refused(Exception):
    """The copy would do nothing useful or would harm the source; nothing was opened for writing."""


def _where(config: AppConfig) -> str:
    return f"{config.ledger.backend} at {config.ledger.path}"


def check_pair(source: AppConfig, dest: AppConfig) -> None:
    """Refuse a source ledger that does not exist and a destination that is the source."""
    a, b = source.ledger, dest.ledger
    on_disk = a.backend in FILE_BACKENDS
    if on_disk and not Path(a.path).exists():
        raise Refused(f"the source ledger does not exist: {_where(source)} (relative paths in a config file are "
                      "read from that file's directory); nothing was copied or created")
    same = a.backend == b.backend and (Path(a.path).resolve() == Path(b.path).resolve() if on_disk
                                       else (a.path, a.options) == (b.path, b.options))
    if same:
        raise Refused(f"the destination is the source ledger itself ({_where(source)}): a ledger cannot be "
                      "copied into itself; name another ledger in --to")


async def check_not_both_empty(source: Ledger, dest: Ledger, where: str) -> None:
    """Refuse a copy from a ledger with no thread into one with none: it would succeed doing nothing."""
    if not await source.list_threads() and not await dest.list_threads():
        raise Refused(f"the source ledger ({where}) holds no thread, and the destination holds none either: "
                      "nothing to copy (does --from name the config whose ledger holds the history?)")


async def copy_ledger(source: Ledger, dest: Ledger, progress=None) -> CopyReport:  # noqa: ANN001
    """Copy every thread; raise ``ValueError`` if a thread exists in ``dest`` or counts differ."""
    threads = await source.list_threads()
    runs = messages = pending = 0
    for index, thread in enumerate(threads, 1):
        if await dest.get_thread(thread.thread_id) is not None:
            raise ValueError(f"thread {thread.thread_id!r} already exists in the destination ledger")
        thread_runs = await source.list_runs(thread.thread_id)
        branches = await source.list_branches(thread.thread_id)
        thread_messages = await _every_message(source, thread.thread_id, branches)
        thread_pending = await source.pending_calls(thread.thread_id)
        summary = await source.thread_summary(thread.thread_id)
        updated_at = summary.updated_at if summary is not None else None
        await dest.import_thread(thread, thread_runs, thread_messages, thread_pending, updated_at, branches=branches)
        if await dest.list_branches(thread.thread_id) != branches:
            raise ValueError(f"thread {thread.thread_id!r}: the copied branches differ from the source")
        for b in branches:
            copied = await dest.read_messages(thread.thread_id, 0, _ALL, branch=b.branch)
            original = await source.read_messages(thread.thread_id, 0, _ALL, branch=b.branch)
            if [(m.id, m.seq) for m in copied] != [(m.id, m.seq) for m in original]:
                raise ValueError(f"thread {thread.thread_id!r}: the copied messages differ from the source")
        if len(await dest.list_runs(thread.thread_id)) != len(thread_runs):
            raise ValueError(f"thread {thread.thread_id!r}: the copied runs differ from the source")
        if await dest.thread_summary(thread.thread_id) != summary:
            raise ValueError(f"thread {thread.thread_id!r}: the copied summary (owner, title, times) differs")
        runs += len(thread_runs)
        messages += len(thread_messages)
        pending += len(thread_pending)
        if progress is not None:
            progress(index, len(threads))
    if len(await dest.list_threads()) < len(threads):
        raise ValueError("the destination holds fewer threads than were copied")
    return CopyReport(len(threads), runs, messages, pending)


async def _every_message(source: Ledger, thread_id: str, branches: list[Branch]) -> list[Message]:
    """Every message of the thread on any branch, by seq: each branch's own messages, read from its path."""
    if len(branches) <= 1:
        return await source.read_messages(thread_id, 0, _ALL)
    out: list[Message] = []
    for b in branches:
        out += [m for m in await source.read_messages(thread_id, 0, _ALL, branch=b.branch) if m.branch == b.branch]
    return sorted(out, key=lambda m: m.seq)


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} threads", end="", file=sys.stderr,
          flush=True)


def _copy_command(args: argparse.Namespace) -> int:
    try:
        source_config, dest_config = load_config(args.source), load_config(args.dest)
        check_pair(source_config, dest_config)
        source, dest = build_ledger(source_config), build_ledger(dest_config)
    except ConfigError as exc:
        print(f"awaken: {exc}", file=sys.stderr)
        return 2
    except Refused as exc:
        print(f"awaken: ledger copy refused: {exc}", file=sys.stderr)
        return 1

    async def main() -> CopyReport:
        await source.open()
        try:
            await dest.open()
            try:
                await check_not_both_empty(source, dest, _where(source_config))
                return await copy_ledger(source, dest, _progress)
            finally:
                await dest.aclose()
        finally:
            await source.aclose()

    try:
        report = trio.run(main)
    except Refused as exc:
        print(f"awaken: ledger copy refused: {exc}", file=sys.stderr)
        return 1
    except (StoreUnavailable, ValueError) as exc:
        print(f"\nawaken: ledger copy failed: {exc}", file=sys.stderr)
        return 1
    print(f"\ncopied and verified {report.threads} threads, {report.runs} runs, {report.messages} messages, "
          f"{report.pending} pending calls")
    return 0


def add_copy_command(ledger_sub: argparse._SubParsersAction) -> None:
    p_copy = ledger_sub.add_parser("copy", help="copy the whole history from one config's ledger to another's")
    p_copy.add_argument("--from", dest="source", required=True, metavar="CONFIG_A")
    p_copy.add_argument("--to", dest="dest", required=True, metavar="CONFIG_B")
    p_copy.set_defaults(func=_copy_command)
