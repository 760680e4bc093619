"""Idle threads do not grow the process beyond their index entry: ``python -m bench.idle``.

For each backend a fresh child process opens a ledger, writes 10,000 threads (``--turns`` completed
runs of two messages each, ~1 KB of text per run; default 2: four messages) and reads each thread's
whole history once right after writing it (what admission and the history route do to a hot thread),
so every thread passes through whatever the backend keeps for hot threads and then goes idle. The
process's resident memory is read after ``--warm`` threads (default 2,000) and after 10,000;
(RSS at 10,000 - RSS at 2,000) / 8,000 is what one idle thread costs. The caches of hot threads are
capped at 1 MiB here (``--cache-bytes``) so that they are full before the first reading and their
filling is not counted as a cost per idle thread: the hot-thread cache (``awaken.ledger.hotcache``,
``cache_bytes``: SQLite, files, Postgres) and the file ledger's held index details
(``index_cache_bytes``: message ids, log segments, runs, pending calls); both are printed with their
caps. What remains per idle thread is the backend's index of it (SQLite: nothing, the known thread
ids are a fixed-size Bloom filter; files: the compact entry a listing reads, and one run id -> thread
entry per run for ``get_run``).

Then the cost of a cold access: ``get_thread`` (which needs the thread's state, so the file ledger
rebuilds the detail from the log: one read of it) on 100 idle threads, then on the same 100 again
(hot), in microseconds per call.

    python -m bench.idle [--threads 10000] [--turns 2] [--warm 2000] [--backends sqlite,files] [--trace]

``--trace`` also runs tracemalloc from the first reading to the second and prints the bytes Python
allocated per idle thread, by the line that allocated them (the RSS figure is then slightly higher:
tracemalloc's own records are not in the breakdown, but they are in the RSS).
"""

from __future__ import annotations

import argparse
import gc
import json
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import trio

from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, RunRecord, ledger_class


def rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


async def child(backend: str, root: str, threads: int, turns: int, cap: int, warm: int,
                trace: bool = False) -> dict[str, Any]:
    options = ({"fsync": False, "cache_bytes": cap, "index_cache_bytes": cap} if backend == "files"
               else {"cache_bytes": cap})
    path = str(Path(root) / ("awaken.db" if backend == "sqlite" else "ledger"))
    ledger = ledger_class(backend)(path=path, **options)
    await ledger.open()
    marks: dict[int, int] = {}
    try:
        for n in range(threads):
            thread_id = f"idle-{n}"
            for t in range(turns):
                run_id = f"idle-r{n}-{t}"
                await ledger.start_run(RunRecord(run_id, thread_id, "assistant", RunStatus.RUNNING, n, n), [
                    Message(f"u{n}-{t}", "user", (TextPart("a question of some length " * 20),))])
                await ledger.commit(thread_id, run_id, Commit(RunStatus.COMPLETED, (
                    Message(f"a{n}-{t}", "assistant", (TextPart("an answer of some length " * 20),), run_id),)))
            await ledger.thread_view(thread_id)
            if n + 1 in (warm, threads):
                gc.collect()
                marks[n + 1] = rss_kb()
                if trace and n + 1 == warm:
                    tracemalloc.start(1)
                    first = tracemalloc.take_snapshot()
        sites: list[tuple[float, str]] = []
        if trace:
            stats = tracemalloc.take_snapshot().compare_to(first, "lineno")
            tracemalloc.stop()
            idle = threads - warm
            sites = [(s.size_diff / idle, f"{s.traceback[0].filename.split('/work/')[-1].split('site-packages/')[-1]}"
                      f":{s.traceback[0].lineno}") for s in stats if abs(s.size_diff) >= idle]
        hot, details = getattr(ledger, "_hot", None), getattr(ledger, "_details", None)
        out = {"rss_kb_warm": marks[warm], f"rss_kb_{threads}": marks[threads],
               "bytes_per_idle_thread": (marks[threads] - marks[warm]) * 1024 / (threads - warm)}
        if hot is not None:
            out |= {"hot_bytes": hot.total, "hot_cap": hot.budget, "hot_threads": len(hot)}
        if details is not None:
            out |= {"details_bytes": details.total, "details_cap": details.budget, "held_details": len(details)}
        if sites:
            out["traced_bytes_per_idle_thread"] = sum(b for b, _ in sites)
            out["sites"] = sites[:15]
        for label in ("cold", "hot"):
            started = time.perf_counter()
            for n in range(100):
                assert await ledger.get_thread(f"idle-{n}") is not None
            out[f"{label}_get_thread_us"] = (time.perf_counter() - started) / 100 * 1e6
        return out
    finally:
        await ledger.aclose()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=10_000)
    parser.add_argument("--turns", type=int, default=2, help="completed runs per thread (2: four messages)")
    parser.add_argument("--warm", type=int, default=2000,
                        help="threads written before the first reading (the caches are full by then)")
    parser.add_argument("--backends", default="sqlite,files")
    parser.add_argument("--cache-bytes", type=int, default=1 << 20,
                        help="every ledger's cache_bytes, and the file ledger's index_cache_bytes")
    parser.add_argument("--trace", action="store_true",
                        help="also trace the bytes Python allocated per idle thread, by the line that allocated them")
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        with tempfile.TemporaryDirectory() as root:
            print(json.dumps(trio.run(child, args.child, root, args.threads, args.turns, args.cache_bytes,
                                      args.warm, args.trace)))
        return
    print(f"{args.turns} completed run(s) of 2 messages per thread\n")
    print(f"| backend | RSS after {args.warm:,} threads | after {args.threads:,} | per idle thread | hot-thread cache "
          "| held index details | get_thread cold / hot µs |")
    print("|---|---|---|---|---|---|---|")
    traced: dict[str, dict[str, Any]] = {}
    for backend in args.backends.split(","):
        done = subprocess.run([sys.executable, "-m", "bench.idle", "--child", backend, "--threads", str(args.threads),
                               "--turns", str(args.turns), "--warm", str(args.warm), "--cache-bytes", str(args.cache_bytes),
                               *(["--trace"] if args.trace else [])],
                              capture_output=True, text=True, check=True)
        r = json.loads(done.stdout)
        hot = (f"{r['hot_bytes'] / 1024:.0f} KiB of {r['hot_cap'] / 1024:.0f} KiB cap "
               f"({r['hot_threads']} threads)" if "hot_cap" in r else "none")
        details = (f"{r['details_bytes'] / 1024:.0f} KiB of {r['details_cap'] / 1024:.0f} KiB cap "
                   f"({r['held_details']} threads)" if "details_cap" in r else "none")
        print(f"| {backend} | {r['rss_kb_warm'] / 1024:.1f} MiB | {r[f'rss_kb_{args.threads}'] / 1024:.1f} MiB | "
              f"{r['bytes_per_idle_thread']:.0f} B | {hot} | {details} | "
              f"{r['cold_get_thread_us']:.0f} / {r['hot_get_thread_us']:.0f} |")
        traced[backend] = r
    for backend, r in traced.items():
        if "sites" in r:
            print(f"\n{backend}: {r['traced_bytes_per_idle_thread']:.0f} B per idle thread traced by Python "
                  "(tracemalloc, the sites of at least 1 B per thread):\n")
            for size, where in r["sites"]:
                print(f"    {size:7.1f} B  {where}")


if __name__ == "__main__":
    main()
