"""``/healthz`` while one user starts 100 runs at once (issue 26, item 6): ``python -m bench.limits``.

    python -m bench.limits [--parallel 100] [--bursts 3] [--words 300] [--delay-ms 5] [--out bench/results]

Two Awaken servers are started in turn (SQLite, ``[auth] mode = "tokens"`` with one ``user`` key,
pinned to CPU 0 like every bench server): one with the shipped ``[limits]`` (8 runs at once, 60 new
runs a minute per user), one with the caps off (``0``), for comparison. Against each, the load
generator sends ``--bursts`` bursts of ``--parallel`` AG-UI runs at once, all with that one user's
token, each run streaming ``--words`` words ``--delay-ms`` apart; a burst ends when every response
has ended. The ``/healthz`` probe of ``bench.stall`` (a separate process, every 5 ms over one
kept-alive connection) measures the answers during the bursts, and first for a few seconds with no
load (the idle row).

Each row: the probe's p50/p99/max during the bursts, and how the runs ended (``RUN_FINISHED``, or the
refusal's code: ``RATE_LIMITED`` for the ones over the caps), the server's CPU seconds and the seconds
it was runnable but waiting for a CPU (other jobs on the machine: when that is large, so is every
latency), and the load average. The verdict is p99 < 50 ms with the
shipped limits. The table goes to stdout and ``limits.md`` / ``limits.json`` in ``--out``, and one
line per run is appended to ``limits.log`` there.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

from .client import new_id
from .servers import REPO, ServerProcess, awaken_config, free_port, pin_self
from .stall import Probe

TARGET_P99_MS = 50.0
USER_ENV = "AWAKEN_BENCH_USER_KEY"
USER_KEY = "bench-user-key-0123456789abcdef"
IDLE_SECONDS = 3.0


def limited_config(data_dir: Path, *, limits: bool) -> str:
    """The repo's config (SQLite under ``data_dir``) with tokens auth for one user and ``[limits]``
    as shipped, or with both caps off."""
    text = awaken_config("sqlite", data_dir)
    text = re.sub(r'(?m)^mode\s*=\s*"none"\s*$', 'mode = "tokens"', text, count=1)
    text += (f'\n[[auth.tokens]]\nname = "bench"\nenv = "{USER_ENV}"\nrole = "user"\nsubject = "bench-user"\n')
    if not limits:
        text = re.sub(r"(?ms)^\[limits\]\s*$.*?(?=^\[)", "", text, count=1)
        text += "\n[limits]\nmax_concurrent_runs = 0\nruns_per_minute = 0\n"
    return text


def server(name: str, root: Path, *, limits: bool) -> ServerProcess:
    data = root / name
    data.mkdir(parents=True, exist_ok=True)
    config = data / "config.toml"
    config.write_text(limited_config(data, limits=limits))
    port = free_port()
    argv = [sys.executable, "-m", "awaken", "serve", "--config", str(config), "--bind", f"127.0.0.1:{port}"]
    return ServerProcess(name, argv, root / "logs" / f"{name}.log", port, extra_env={USER_ENV: USER_KEY})


def ending(raw: bytes) -> str:
    """How a run's stream ended: ``RUN_FINISHED`` or the refusal's (or failure's) code."""
    frames = [line[6:] for line in raw.split(b"\n") if line.startswith(b"data: ")]
    if not frames:
        return "no events"
    last = orjson.loads(frames[-1])
    return last.get("code") or last.get("type", "?")


async def burst(client: httpx.AsyncClient, parallel: int, words: int, delay_ms: int) -> dict[str, int]:
    outcomes: dict[str, int] = {}
    text = f"/words {words}\n/delay {delay_ms}"

    async def one() -> None:
        thread = new_id("limits")
        body = {"threadId": thread, "runId": new_id("run"), "state": {}, "tools": [], "context": [],
                "forwardedProps": {}, "messages": [{"id": new_id("u"), "role": "user", "content": text}]}
        try:
            response = await client.post("/v1/ag-ui", json=body)
            outcome = ending(response.content) if response.status_code == 200 else f"HTTP {response.status_code}"
        except httpx.HTTPError as exc:
            outcome = type(exc).__name__
        outcomes[outcome] = outcomes.get(outcome, 0) + 1

    async with trio.open_nursery() as nursery:
        for _ in range(parallel):
            nursery.start_soon(one)
    return outcomes


def summary(samples: list[float]) -> dict[str, float]:
    if not samples:
        return {"n": 0, "p50": float("nan"), "p99": float("nan"), "max": float("nan")}
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, int(q * len(ordered)))]

    return {"n": len(ordered), "p50": statistics.median(ordered), "p99": pct(0.99), "max": ordered[-1]}


async def measure(proc: ServerProcess, args: argparse.Namespace) -> dict[str, Any]:
    await proc.start()
    probe = Probe(proc.port)
    await probe.start()
    try:
        await probe.mark("idle")
        await trio.sleep(IDLE_SECONDS)
        await probe.mark("-")
        outcomes: dict[str, int] = {}
        limits = httpx.Limits(max_connections=args.parallel + 10, max_keepalive_connections=args.parallel + 10)
        async with httpx.AsyncClient(base_url=proc.base_url, timeout=120, limits=limits,
                                     headers={"Authorization": f"Bearer {USER_KEY}"}) as client:
            started, (cpu, waited) = time.perf_counter(), proc.sched()
            await probe.mark("burst")
            for _ in range(args.bursts):
                for outcome, n in (await burst(client, args.parallel, args.words, args.delay_ms)).items():
                    outcomes[outcome] = outcomes.get(outcome, 0) + n
            await probe.mark("-")
            ran, wait = proc.sched()
            seconds, cpu, waited = time.perf_counter() - started, ran - cpu, wait - waited
        result = await probe.stop()
    finally:
        await proc.stop()
    return {"server": proc.name, "idle": summary(result["samples"].get("idle", [])),
            "burst": summary(result["samples"].get("burst", [])), "probe_errors": result["errors"].get("burst", 0),
            "outcomes": dict(sorted(outcomes.items())), "seconds": round(seconds, 2),
            "server_cpu_seconds": round(cpu, 2), "server_cpu_wait_seconds": round(waited, 2),
            "loadavg": os.getloadavg()[0]}


def table(rows: list[dict[str, Any]], args: argparse.Namespace) -> str:
    lines = [f"{args.bursts} bursts of {args.parallel} parallel AG-UI runs by one user token "
             f"(/words {args.words}, /delay {args.delay_ms} ms), SQLite; /healthz probed every 5 ms",
             "", "| server | idle p99 ms | burst p50 ms | burst p99 ms | burst max ms | probes | runs ended | s | server CPU s | server waited for a CPU s | load | verdict |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for row in rows:
        b, i = row["burst"], row["idle"]
        ended = ", ".join(f"{k} {v}" for k, v in row["outcomes"].items())
        verdict = ("met" if b["p99"] < TARGET_P99_MS else "MISSED") if row["server"] == "limits-default" else "(reference)"
        lines.append(f"| {row['server']} | {i['p99']:.1f} | {b['p50']:.1f} | {b['p99']:.1f} | {b['max']:.1f} | "
                     f"{b['n']} | {ended} | {row['seconds']} | {row['server_cpu_seconds']} | "
                     f"{row['server_cpu_wait_seconds']} | {row['loadavg']:.1f} | {verdict} |")
    return "\n".join(lines) + "\n"


async def collect(args: argparse.Namespace) -> list[dict[str, Any]]:
    pin_self()
    rows = []
    with tempfile.TemporaryDirectory(prefix="awaken-bench-limits-") as tmp:
        root = Path(tmp)
        servers = [server("limits-default", root, limits=True)]
        if not args.only_default:
            servers.append(server("limits-off", root, limits=False))
        for proc in servers:
            print(f"measuring {proc.name} ...", file=sys.stderr)
            rows.append(await measure(proc, args))
    return rows


def write_report(rows: list[dict[str, Any]], args: argparse.Namespace) -> bool:
    """Print the table, write ``limits.md`` and ``limits.json``, append the report line; whether the target was met."""
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    report = table(rows, args)
    print(report)
    default = rows[0]
    met = default["burst"]["p99"] < TARGET_P99_MS
    (out / "limits.md").write_text("# bench.limits\n\n" + report)
    (out / "limits.json").write_text(json.dumps({"args": vars(args), "rows": rows, "met": met}, indent=2))
    line = (f"{time.strftime('%Y-%m-%dT%H:%M:%SZ', time.gmtime())} cpus={os.cpu_count()} "
            f"bursts={args.bursts}x{args.parallel} default p50={default['burst']['p50']:.1f} "
            f"p99={default['burst']['p99']:.1f} max={default['burst']['max']:.1f} ms "
            f"ended={default['outcomes']} server-waited={default['server_cpu_wait_seconds']}s "
            f"load={default['loadavg']:.1f} target p99<{TARGET_P99_MS:g} ms {'met' if met else 'MISSED'}")
    with open(out / "limits.log", "a") as log:
        log.write(line + "\n")
    print(line)
    return met


def parse(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.limits", description=__doc__.split("\n")[0])
    parser.add_argument("--parallel", type=int, default=100)
    parser.add_argument("--bursts", type=int, default=3)
    parser.add_argument("--words", type=int, default=300)
    parser.add_argument("--delay-ms", type=int, default=5)
    parser.add_argument("--only-default", action="store_true", help="skip the server with the caps off")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    return parser.parse_args(argv)


if __name__ == "__main__":
    arguments = parse()
    sys.exit(0 if write_report(trio.run(collect, arguments), arguments) else 1)
