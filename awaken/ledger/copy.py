"""``awaken ledger copy --from CONFIG_A --to CONFIG_B``: move the whole history between backends.

Every thread of the source ledger (its owner, runs, messages with their ids and sequence numbers,
pending calls, agent state and last-update time) is written to the destination in one ``import_thread`` transaction per
thread; then the counts are read back from both and compared. A thread that already exists in
the destination stops the copy before anything is written for it.
"""

from __future__ import annotations

import argparse
import sys

import attrs
import trio

from awaken.config import load_config
from awaken.core.errors import ConfigError, StoreUnavailable
from awaken.ledger.interface import Ledger
from awaken.ledger.registry import build_ledger

_ALL = 1_000_000_000


@attrs.frozen
class CopyReport:
    threads: int
    runs: int
    messages: int
    pending: int


def _open(config_path: str) -> Ledger:
    return build_ledger(load_config(config_path))


async def copy_ledger(source: Ledger, dest: Ledger, progress=None) -> CopyReport:  # noqa: ANN001
    """Copy every thread; raise ``ValueError`` if a thread exists in ``dest`` or counts differ."""
    threads = await source.list_threads()
    runs = messages = pending = 0
    for index, thread in enumerate(threads, 1):
        if await dest.get_thread(thread.thread_id) is not None:
            raise ValueError(f"thread {thread.thread_id!r} already exists in the destination ledger")
        thread_runs = await source.list_runs(thread.thread_id)
        thread_messages = await source.read_messages(thread.thread_id, 0, _ALL)
        thread_pending = await source.pending_calls(thread.thread_id)
        summary = await source.thread_summary(thread.thread_id)
        updated_at = summary.updated_at if summary is not None else None
        await dest.import_thread(thread, thread_runs, thread_messages, thread_pending, updated_at)
        copied = await dest.read_messages(thread.thread_id, 0, _ALL)
        if [m.id for m in copied] != [m.id for m in thread_messages]:
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


def _progress(done: int, total: int) -> None:
    width = 30
    filled = width * done // max(total, 1)
    print(f"\r  [{'#' * filled}{'.' * (width - filled)}] {done}/{total} threads", end="", file=sys.stderr,
          flush=True)


def _copy_command(args: argparse.Namespace) -> int:
    try:
        source, dest = _open(args.source), _open(args.dest)
    except ConfigError as exc:
        print(f"awaken: {exc}", file=sys.stderr)
        return 2

    async def main() -> CopyReport:
        await source.open()
        try:
            await dest.open()
            try:
                return await copy_ledger(source, dest, _progress)
            finally:
                await dest.aclose()
        finally:
            await source.aclose()

    try:
        report = trio.run(main)
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
