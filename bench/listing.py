"""``python -m bench.listing``: what the first page of a thread listing costs out of 10 threads and out
of 10,000 (issue 13 item 5: about the same, since listings are keyset-paged on an index).

For each built-in backend it fills a ledger with N threads (one committed run each, half of them one
user's), then times ``list_thread_summaries`` for the first page (limit ``PAGE``, 5) and for the page after a
cursor, for an admin (every thread) and for that one user; median of ``--rounds`` calls, printed as a
table. A figure, not a timed test.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from pathlib import Path

import trio

from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.ledger.interface import ALL_OWNERS, Commit, Ledger, RunRecord
from storage_backends.files import FileLedger
from storage_backends.sqlite_ledger import SqliteLedger

SIZES = (10, 10_000)
#: the page size: 5, so that a page is as full out of 10 threads (5 of them the user's) as out of 10,000
PAGE = 5


async def fill(ledger: Ledger, n: int) -> None:
    for i in range(n):
        thread = f"t{i:06d}"
        record = RunRecord(f"r{i:06d}", thread, "assistant", RunStatus.RUNNING, i, i)
        await ledger.start_run(record, [Message(f"m{i}", "user", (TextPart(f"question {i}"),))],
                               owner="alice" if i % 2 else "bob")
        await ledger.commit(thread, record.run_id, Commit(RunStatus.COMPLETED))


async def timed(ledger: Ledger, owner, cursor: str | None, rounds: int) -> float:  # noqa: ANN001
    samples = []
    for _ in range(rounds):
        start = time.perf_counter()
        page = await ledger.list_thread_summaries(owner, cursor=cursor, limit=PAGE)
        samples.append(time.perf_counter() - start)
        assert page.items
    return statistics.median(samples) * 1000


async def measure(backend: str, n: int, rounds: int, root: Path) -> dict[str, float]:
    ledger: Ledger = (SqliteLedger(str(root / "awaken.db")) if backend == "sqlite"
                      else FileLedger(str(root / "ledger"), fsync=False))
    await ledger.open()
    try:
        await fill(ledger, n)
        first = await ledger.list_thread_summaries(ALL_OWNERS, limit=5)
        return {
            "admin first page": await timed(ledger, ALL_OWNERS, None, rounds),
            "admin next page": await timed(ledger, ALL_OWNERS, first.cursor, rounds) if first.cursor else 0.0,
            "user first page": await timed(ledger, "alice", None, rounds),
        }
    finally:
        await ledger.aclose()


async def main(rounds: int, backends: list[str]) -> None:
    print(f"thread listing, first page of {PAGE}: median ms over {rounds} calls")
    print(f"{'backend':8} {'threads':>8} {'admin first page':>17} {'admin next page':>16} {'user first page':>16}")
    for backend in backends:
        for n in SIZES:
            with tempfile.TemporaryDirectory() as tmp:
                started = time.perf_counter()
                figures = await measure(backend, n, rounds, Path(tmp))
                filled = time.perf_counter() - started
            print(f"{backend:8} {n:>8} {figures['admin first page']:>17.3f} {figures['admin next page']:>16.3f} "
                  f"{figures['user first page']:>16.3f}   (filled and measured in {filled:.0f}s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=50)
    parser.add_argument("--backend", action="append", choices=["sqlite", "files"])
    args = parser.parse_args()
    trio.run(main, args.rounds, args.backend or ["sqlite", "files"])
