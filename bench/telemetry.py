"""What telemetry costs with nothing configured: ``python -m bench.telemetry``.

Two Awaken servers on the SQLite ledger, started from the same tree with the same config in the same run:

* **shipped** — ``awaken serve`` as a user starts it with no ``OTEL_*`` variable and no ``[telemetry]``
  table: every run keeps its timeline (the console's), the Prometheus counters and histograms count,
  every request passes the observer, and ``GET /metrics`` is served;
* **untraced** — the same server with the telemetry seams replaced by no-ops (``bench/untraced.py``),
  what a build without telemetry would run.

Measured, alternating the two servers within every round (A B, B A, …) so that whatever else the machine
does hits both alike:

* **first text delta** of one AG-UI client over SSE on a kept-alive connection (``--runs`` runs per round),
  p50 and mean;
* **server CPU per delta** of ``--streams`` paced streams × ``--words`` deltas released at once (the sweep's
  measurement: ``/proc/<pid>/task/*/schedstat`` before and after, divided by the deltas delivered), while a
  scraper reads ``GET /metrics`` of the shipped server every ``--scrape-s`` seconds (as Prometheus would).

The target (issue: telemetry with nothing configured) is each ratio shipped ÷ untraced ≤ 1.03. The report
goes to ``bench/results/telemetry.json`` and ``telemetry.md``; the figures vary with the machine's load,
which the report prints beside them.

    python -m bench.telemetry [--rounds 5] [--runs 200] [--streams 200] [--words 100] [--delay-ms 10]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
from pathlib import Path
from typing import Any

import trio

from .client import Endpoint, HttpConnection
from .measure import latency_interleaved, sweep_level
from .servers import REPO, ServerProcess, awaken_server, pin_self
from .stats import summary

RESULTS = REPO / "bench" / "results"
#: the target: telemetry with nothing configured costs at most 3 % on either figure
TARGET = 1.03


def untraced(server: ServerProcess) -> ServerProcess:
    """``server``'s command line through ``bench.untraced`` (the same config, port and log)."""
    i = server.argv.index("awaken")
    server.argv = [*server.argv[: i - 1], "-m", "bench.untraced", *server.argv[i + 1:]]
    return server


def endpoint(name: str, server: ServerProcess) -> Endpoint:
    return Endpoint(name, "agui", "sse", server.base_url + "/v1/ag-ui")


async def scrape(server: ServerProcess, every_s: float, counts: list[int]) -> None:
    """Read ``GET /metrics`` every ``every_s`` seconds until cancelled; ``counts`` gets one entry per read."""
    while True:
        conn = HttpConnection("127.0.0.1", server.port)
        try:
            await conn.connect()
            status, _ = await conn.get_status("/metrics")
            counts.append(status)
        finally:
            await conn.aclose()
        await trio.sleep(every_s)


async def measure(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    logs = root / "logs"
    shipped = awaken_server("shipped", "sqlite", root / "shipped", logs)
    bare = untraced(awaken_server("untraced", "sqlite", root / "untraced", logs))
    servers = {"shipped": shipped, "untraced": bare}
    first: dict[str, list[float]] = {name: [] for name in servers}
    cpu: dict[str, list[float]] = {name: [] for name in servers}
    errors: dict[str, int] = {name: 0 for name in servers}
    scrapes: list[int] = []
    try:
        for server in servers.values():
            await server.start()
        endpoints = [endpoint(name, s) for name, s in servers.items()]
        for round_ in range(args.rounds):
            print(f"round {round_ + 1}/{args.rounds}: first delta", file=sys.stderr)
            results = await latency_interleaved(endpoints, args.runs, fresh=False)
            for name, series in zip(servers, results, strict=True):
                first[name].extend(r.first_delta_ms for r in series if r.ok)
                errors[name] += sum(not r.ok for r in series)
            order = list(servers) if round_ % 2 == 0 else list(servers)[::-1]
            for name in order:
                print(f"round {round_ + 1}/{args.rounds}: {args.streams} paced streams on {name}", file=sys.stderr)
                async with trio.open_nursery() as nursery:
                    if name == "shipped":
                        nursery.start_soon(scrape, shipped, args.scrape_s, scrapes)
                    level = await sweep_level(endpoint(name, servers[name]), args.streams, args.words,
                                              args.delay_ms, servers[name])
                    nursery.cancel_scope.cancel()
                errors[name] += level["errors"]
                delivered = args.streams * args.words
                if level["server_cpu_s"] is not None:
                    cpu[name].append(level["server_cpu_s"] / delivered * 1e6)
    finally:
        for server in servers.values():
            await server.stop()

    def ratio(a: float | None, b: float | None) -> float | None:
        return round(a / b, 4) if a and b else None

    first_s = {name: summary(v, 4) for name, v in first.items()}
    cpu_s = {name: {"per_round_us": [round(x, 2) for x in v], "median_us": round(statistics.median(v), 2) if v else None}
             for name, v in cpu.items()}
    ratios = {
        "first_delta_p50": ratio(first_s["shipped"]["p50"], first_s["untraced"]["p50"]),
        "first_delta_mean": ratio(first_s["shipped"]["mean"], first_s["untraced"]["mean"]),
        "cpu_per_delta": ratio(cpu_s["shipped"]["median_us"], cpu_s["untraced"]["median_us"]),
    }
    return {
        "meta": {"rounds": args.rounds, "runs_per_round": args.runs, "streams": args.streams, "words": args.words,
                 "delay_ms": args.delay_ms, "scrape_s": args.scrape_s, "loadavg": list(os.getloadavg()),
                 "pinning": args.pinning},
        "first_delta_ms": first_s, "cpu_per_delta": cpu_s, "ratios": ratios, "target": TARGET,
        "met": {k: (v is not None and v <= TARGET) for k, v in ratios.items()},
        "errors": errors, "metrics_scrapes": {"count": len(scrapes), "ok": scrapes.count(200)},
    }


def markdown(result: dict[str, Any]) -> str:
    meta, first, cpu, ratios, met = (result["meta"], result["first_delta_ms"], result["cpu_per_delta"],
                                     result["ratios"], result["met"])
    lines = [
        "# Telemetry with nothing configured: shipped ÷ untraced",
        "",
        f"{meta['rounds']} rounds; per round {meta['runs_per_round']} kept-alive AG-UI/SSE runs on each server "
        f"(interleaved) and {meta['streams']} paced streams × {meta['words']} deltas at {meta['delay_ms']} ms on each "
        f"(alternating which goes first); `GET /metrics` of the shipped server scraped every {meta['scrape_s']} s "
        f"during its paced streams ({result['metrics_scrapes']['ok']} of {result['metrics_scrapes']['count']} "
        f"answered 200). Load average at the end: {', '.join(f'{x:.2f}' for x in meta['loadavg'])}; "
        f"{meta['pinning']}.",
        "",
        "| figure | shipped | untraced | ratio | target ≤ 1.03 |",
        "|---|---|---|---|---|",
        f"| first text delta p50 (ms) | {first['shipped']['p50']} | {first['untraced']['p50']} | "
        f"{ratios['first_delta_p50']} | {'met' if met['first_delta_p50'] else 'missed'} |",
        f"| first text delta mean (ms) | {first['shipped']['mean']} | {first['untraced']['mean']} | "
        f"{ratios['first_delta_mean']} | {'met' if met['first_delta_mean'] else 'missed'} |",
        f"| server CPU per paced delta, median of rounds (µs) | {cpu['shipped']['median_us']} | "
        f"{cpu['untraced']['median_us']} | {ratios['cpu_per_delta']} | {'met' if met['cpu_per_delta'] else 'missed'} |",
        "",
        f"CPU per delta by round (µs): shipped {cpu['shipped']['per_round_us']}, untraced "
        f"{cpu['untraced']['per_round_us']}. Failed streams: {result['errors']}.",
        "",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.telemetry", description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--runs", type=int, default=200, help="kept-alive runs per server per round")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--words", type=int, default=100)
    parser.add_argument("--delay-ms", type=float, default=10.0)
    parser.add_argument("--scrape-s", type=float, default=1.0)
    args = parser.parse_args(argv)
    for key in [k for k in os.environ if k.startswith("OTEL_") or k.startswith("AWAKEN_TELEMETRY")]:
        del os.environ[key]  # "nothing configured" for both servers
    args.pinning = pin_self()
    with tempfile.TemporaryDirectory(prefix="awaken-bench-telemetry-") as tmp:
        result = trio.run(measure, args, Path(tmp))
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "telemetry.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (RESULTS / "telemetry.md").write_text(text)
    print(text)
    return 0 if all(result["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
