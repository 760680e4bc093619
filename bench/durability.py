"""Durability as a measured config choice (issue 12, item 8): ``python -m bench.durability``.

What an acknowledged commit costs under each durability setting, in one run, interleaved:

* SQLite ``synchronous = "full"`` (the default: every commit fsynced before it is acknowledged;
  survives a power loss) against ``"normal"`` (WAL fsynced only at checkpoints; survives a process
  kill, an OS crash or power loss may lose the newest commits);
* the file ledger with ``fsync = true`` (the default) against ``fsync = false`` (for reference only:
  a process kill is survived, a power loss is not);
* the file ledger's vanish checks (is the directory the one opened, is the log still linked: one
  ``stat`` and one ``fstat`` before the write and again after the fsync), against the same ledger with
  the checks turned off, with fsync on and off (off is where they weigh most).

Each configuration keeps its own ledger on the chosen file system (never tmpfs: the report names the
file system type of the data directory). A round runs ``--runs`` runs of every configuration
(a run is the engine's two commits: ``start_run`` with the user message, then a completed ``commit``
with the assistant message) in batches of 25, the configurations taking turns batch by batch and the
order reversed every other turn, so changes in the machine's load hit all of them alike. Each
configuration runs two shapes: runs continuing one of 20 existing threads, and runs each on a new
thread. **Read the ratios, not the absolute times**: the machine is shared.

    python -m bench.durability [--rounds 5] [--runs 200] [--data-dir DIR] [--out bench/results]

Writes ``durability.md`` and ``durability.json`` to ``--out`` (default ``bench/results``); the
snapshot kept in the repository is ``bench/DURABILITY.md``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import tempfile
import time
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import trio

from awaken.core.messages import Message, TextPart, Usage
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Ledger, RunRecord
from storage_backends.files import FileLedger
from storage_backends.sqlite_ledger import SqliteLedger

from .stats import summary


class UncheckedFileLedger(FileLedger):
    """The file ledger without its vanish checks: the reference that prices them."""

    def _check_dir(self) -> None:
        pass

    @staticmethod
    def _intact(fd: int, offset: int) -> bool:
        return True


#: name -> (what it promises, how to build it on a directory)
CONFIGS: dict[str, tuple[str, Callable[[Path], Ledger]]] = {
    "sqlite full": ("default; survives power loss", lambda d: SqliteLedger(str(d / "awaken.db"), synchronous="full")),
    "sqlite normal": ("survives a process kill only", lambda d: SqliteLedger(str(d / "awaken.db"), synchronous="normal")),
    "files fsync": ("default; survives power loss", lambda d: FileLedger(str(d / "ledger"), fsync=True)),
    "files no fsync": ("reference; survives a process kill only", lambda d: FileLedger(str(d / "ledger"), fsync=False)),
    "files fsync, unchecked": ("reference: no vanish checks", lambda d: UncheckedFileLedger(str(d / "ledger"), fsync=True)),
    "files no fsync, unchecked": ("reference: no vanish checks",
                                  lambda d: UncheckedFileLedger(str(d / "ledger"), fsync=False)),
}

#: (numerator, denominator, what the ratio says)
RATIOS = (
    ("sqlite full", "sqlite normal", "commit latency p50 of FULL ÷ NORMAL: what surviving power loss costs SQLite"),
    ("files fsync", "files no fsync", "the same for the file ledger (its fsync stays on)"),
    ("files fsync", "sqlite full", "file ledger ÷ SQLite, both durable to power loss"),
    ("files fsync", "files fsync, unchecked", "the vanish checks' cost with fsync on (the default)"),
    ("files no fsync", "files no fsync, unchecked", "the vanish checks' cost without fsync (their worst case)"),
)


def fs_type(path: Path) -> str:
    """The file system type of ``path`` as ``stat -f`` names it (``tmpfs`` would measure no disk)."""
    try:
        out = subprocess.run(["stat", "-f", "-c", "%T", str(path)], capture_output=True, text=True, check=True)
        return out.stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def sample(run_id: str, n: int) -> tuple[Message, Message]:
    text = "alpha bravo charlie delta " * 8
    return (Message(f"u-{n}-{run_id}", "user", (TextPart(text),)),
            Message(f"a-{n}-{run_id}", "assistant", (TextPart(text * 2),), run_id))


async def measure(ledger: Ledger, runs: int, threads: list[str] | None = None) -> tuple[list[float], float]:
    """``runs`` runs of two commits each, on ``threads`` in turn (on a new thread each when None):
    (commit latencies in ms, wall seconds)."""
    latencies: list[float] = []
    clock = time.perf_counter
    t0 = clock()
    for n in range(runs):
        run_id = f"r-{uuid.uuid4().hex}"
        thread_id = threads[n % len(threads)] if threads else f"t-{uuid.uuid4().hex}"
        user, assistant = sample(run_id, n)
        now = int(time.time() * 1000)
        a = clock()
        await ledger.start_run(RunRecord(run_id, thread_id, "assistant", RunStatus.RUNNING, now, now), [user])
        b = clock()
        await ledger.commit(thread_id, run_id, Commit(status=RunStatus.COMPLETED, messages=(assistant,),
                                                      usage=Usage(2, 20), steps=1))
        c = clock()
        latencies += [(b - a) * 1000, (c - b) * 1000]
    return latencies, clock() - t0


async def checks_micro(path: Path, n: int = 20000) -> dict[str, float]:
    """The vanish checks alone, timed in a loop on an open ledger's log: µs per commit (they run twice
    per commit), against appending 400 bytes and an ``fsync`` (what a commit makes durable)."""
    ledger = FileLedger(str(path), fsync=True)
    await ledger.open()
    try:
        await measure(ledger, 1)
        name = next(iter(ledger._fds))
        fd = ledger._fds[name]

        def time_it() -> dict[str, float]:
            clock = time.perf_counter
            t0 = clock()
            for _ in range(n):
                ledger._check_dir()
                ledger._intact(fd, 0)
            checks = (clock() - t0) / n * 2 * 1e6
            scratch = os.open(path / "scratch", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
            try:
                t0 = clock()
                for _ in range(200):  # what a commit's fsync does: make a few hundred new bytes durable
                    os.write(scratch, b"x" * 400)
                    os.fsync(scratch)
                fsync = (clock() - t0) / 200 * 1e6
            finally:
                os.close(scratch)
            return {"checks_us_per_commit": round(checks, 2), "fsync_us": round(fsync, 1),
                    "checks_share_of_fsync": round(checks / fsync, 4)}

        return await trio.to_thread.run_sync(time_it, limiter=ledger._limiter)
    finally:
        await ledger.aclose()


#: the two shapes of load: runs continuing one of 20 existing threads (the common case), and runs
#: each on a new thread (the file ledger then also creates the log and fsyncs the directory)
SHAPES = ("existing threads", "new threads")
HOT_THREADS = [f"hot-{i}" for i in range(20)]
#: runs per configuration before the next one takes its turn
BATCH = 25


def shown(data_dir: Path) -> str:
    """Where the ledgers were, as a report may say it: relative to the repository (the default, its
    ``var/``), else only the directory's name (a report names no machine's paths)."""
    repo = Path(__file__).resolve().parent.parent
    try:
        return str(data_dir.resolve().parent.relative_to(repo)) + "/"
    except ValueError:
        return f"a directory given by --data-dir ({data_dir.parent.name}/)"


async def run(rounds: int, runs: int, data_dir: Path) -> dict[str, Any]:
    ledgers = {name: build(data_dir / name.replace(" ", "-").replace(",", "")) for name, (_, build) in CONFIGS.items()}
    for ledger in ledgers.values():
        await ledger.open()
    latencies = {(shape, name): [] for shape in SHAPES for name in CONFIGS}
    walls = dict.fromkeys(latencies, 0.0)
    try:
        for ledger in ledgers.values():  # warm up: the hot threads created, files opened, pages cached
            await measure(ledger, len(HOT_THREADS), HOT_THREADS)
        batches = [BATCH] * (runs // BATCH) + ([runs % BATCH] if runs % BATCH else [])
        turn = 0
        for _ in range(rounds):
            for batch in batches:  # small batches, all configurations in turn: load changes hit each alike
                order = list(CONFIGS) if turn % 2 == 0 else list(reversed(CONFIGS))
                turn += 1
                for name in order:
                    for shape in SHAPES:
                        lat, wall = await measure(ledgers[name], batch, HOT_THREADS if shape == SHAPES[0] else None)
                        latencies[shape, name] += lat
                        walls[shape, name] += wall
    finally:
        for ledger in ledgers.values():
            await ledger.aclose()
    out: dict[str, Any] = {}
    for shape in SHAPES:
        rows = {}
        for name, (promise, _) in CONFIGS.items():
            total_runs = rounds * runs
            rows[name] = {"promise": promise, "runs": total_runs, "commits": 2 * total_runs,
                          "commit_ms": summary(latencies[shape, name], 4),
                          "runs_per_s": round(total_runs / walls[shape, name], 1)}
        ratios = []
        for num, den, says in RATIOS:
            a, b = rows[num], rows[den]
            ratios.append({"ratio": f"{num} ÷ {den}", "says": says,
                           "commit_p50": round(a["commit_ms"]["p50"] / b["commit_ms"]["p50"], 3),
                           "commit_p99": round(a["commit_ms"]["p99"] / b["commit_ms"]["p99"], 3),
                           "runs_per_s": round(a["runs_per_s"] / b["runs_per_s"], 3)})
        out[shape] = {"configs": rows, "ratios": ratios}
    return {"meta": {"rounds": rounds, "runs_per_round": runs, "data_dir": shown(data_dir),
                     "fs_type": fs_type(data_dir), "cpus": os.cpu_count(),
                     "load_avg": [round(x, 2) for x in os.getloadavg()],
                     "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())},
            "shapes": out, "checks_micro": await checks_micro(data_dir / "micro")}


def report(result: dict[str, Any]) -> str:
    meta = result["meta"]
    md = ["## Durability: what an fsynced commit costs (`python -m bench.durability`)", "",
          f"{meta['when']}; {meta['rounds']} rounds × {meta['runs_per_round']} runs per configuration and shape, "
          f"interleaved in batches of {BATCH} (order reversed every other turn); data on `{meta['fs_type']}` ({meta['data_dir']}); "
          f"{meta['cpus']} CPUs, load average {meta['load_avg'][0]} at the end. A run is two commits "
          "(`start_run` with the user message, a completed `commit` with the assistant message), one at a time, "
          "through the `Ledger` API in-process.", ""]
    for shape, block in result["shapes"].items():
        md += [f"### Runs on {shape}", "",
               "| configuration | promises | commits | commit ms p50 | p90 | p99 | runs/s |",
               "|---|---|---|---|---|---|---|"]
        for name, row in block["configs"].items():
            c = row["commit_ms"]
            md.append(f"| {name} | {row['promise']} | {row['commits']} | {c['p50']} | {c['p90']} | {c['p99']} | "
                      f"{row['runs_per_s']} |")
        md += ["", "| ratio (same run) | commit p50 | commit p99 | runs/s | what it says |", "|---|---|---|---|---|"]
        for r in block["ratios"]:
            md.append(f"| {r['ratio']} | {r['commit_p50']}x | {r['commit_p99']}x | {r['runs_per_s']}x | {r['says']} |")
        md.append("")
    micro = result["checks_micro"]
    md += ["The file ledger's vanish checks (one `stat` of the directory and one `fstat` of the log, before the "
           f"write and again after the fsync) timed alone in a loop: {micro['checks_us_per_commit']} µs per commit, "
           f"against {micro['fsync_us']} µs for appending 400 bytes and an `fsync` in the same directory "
           f"({micro['checks_share_of_fsync'] * 100:.2f} %)."]
    return "\n".join(md) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200, help="runs per configuration per round")
    parser.add_argument("--data-dir", help="where the ledgers go (default: a temporary directory under the "
                                           "repository's var/, a real disk; the system temp dir may be tmpfs)")
    parser.add_argument("--out", default="bench/results")
    args = parser.parse_args()
    base = Path(args.data_dir) if args.data_dir else Path(__file__).resolve().parent.parent / "var"
    base.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="durability-", dir=base) as tmp:
        if fs_type(Path(tmp)) == "tmpfs":
            print(f"warning: {tmp} is on tmpfs: fsync costs nothing there; pass --data-dir on a disk")
        result = trio.run(run, args.rounds, args.runs, Path(tmp))
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "durability.json").write_text(json.dumps(result, indent=2))
    text = report(result)
    (out / "durability.md").write_text(text)
    print(text)


if __name__ == "__main__":
    main()
