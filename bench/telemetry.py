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
import time
from pathlib import Path
from typing import Any

import trio
import trio.testing

from .client import Endpoint, HttpConnection, request_body, script
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
    #: per round: each server's first-delta p50 (the paired ratio of a round cancels the load it met)
    round_p50: dict[str, list[float]] = {name: [] for name in servers}
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
                values = [r.first_delta_ms for r in series if r.ok]
                first[name].extend(values)
                round_p50[name].append(summary(values, 4)["p50"] or 0.0)
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
    def paired(values: dict[str, list[float]]) -> dict[str, Any]:
        per_round = [ratio(a, b) for a, b in zip(values["shipped"], values["untraced"], strict=True)]
        kept = [r for r in per_round if r is not None]
        return {"per_round": per_round, "median": round(statistics.median(kept), 4) if kept else None}

    by_round = {"first_delta_p50": paired(round_p50), "cpu_per_delta": paired(cpu)}
    ratios = {
        "first_delta_p50": by_round["first_delta_p50"]["median"],
        "first_delta_p50_pooled": ratio(first_s["shipped"]["p50"], first_s["untraced"]["p50"]),
        "first_delta_mean_pooled": ratio(first_s["shipped"]["mean"], first_s["untraced"]["mean"]),
        "cpu_per_delta": by_round["cpu_per_delta"]["median"],
    }
    return {
        "meta": {"rounds": args.rounds, "runs_per_round": args.runs, "streams": args.streams, "words": args.words,
                 "delay_ms": args.delay_ms, "scrape_s": args.scrape_s, "loadavg": list(os.getloadavg()),
                 "pinning": args.pinning},
        "first_delta_ms": first_s, "cpu_per_delta": cpu_s, "ratios": ratios, "by_round": by_round,
        "target": TARGET, "met": {k: (ratios[k] is not None and ratios[k] <= TARGET)
                                  for k in ("first_delta_p50", "cpu_per_delta")},
        "errors": errors, "metrics_scrapes": {"count": len(scrapes), "ok": scrapes.count(200)},
    }


async def loop_cpu(args: argparse.Namespace, root: Path) -> dict[str, Any]:
    """The same comparison in this process, by the event loop's CPU time rather than the wall clock.

    Two servers (``ServerContext`` and ``build_asgi``, no socket), the second built and run with the
    telemetry seams cut (``cut_telemetry``, put back after each of its requests), get one AG-UI request
    each in turn (``--cpu-runs`` each, after warm-up). For each request: the event-loop thread's CPU time
    (``time.thread_time_ns``) from the call until the ``send`` that carries the first text delta, and
    until every task the request started is blocked again (the whole run, its commits included). Other
    work on the machine does not count in either figure."""
    import tomllib

    from awaken.config import parse_config
    from awaken.http.app import build_asgi
    from awaken.http.context import ServerContext

    from .servers import awaken_config
    from .untraced import cut_telemetry

    def context(name: str) -> ServerContext:
        (root / name).mkdir(parents=True, exist_ok=True)
        data = tomllib.loads(awaken_config("sqlite", root / name))
        return ServerContext.build(parse_config(data, source=f"bench {name}"))

    shipped = context("shipped")
    restore = cut_telemetry()
    try:
        bare = context("untraced")
        apps = {"shipped": (shipped, build_asgi(shipped)), "untraced": (bare, build_asgi(bare))}
    finally:
        restore()
    first: dict[str, list[float]] = {name: [] for name in apps}
    whole: dict[str, list[float]] = {name: [] for name in apps}
    mark = b'"TEXT_MESSAGE_CONTENT"'

    async def one(app: Any, n: int) -> tuple[float, float]:
        body = request_body("agui", script(3))
        scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "POST",
                 "scheme": "http", "path": "/v1/ag-ui", "raw_path": b"/v1/ag-ui", "query_string": b"",
                 "root_path": "", "client": ("127.0.0.1", 50000 + n % 10000), "server": ("127.0.0.1", 8000),
                 "headers": [(b"host", b"127.0.0.1:8000"), (b"content-type", b"application/json"),
                             (b"accept", b"text/event-stream"), (b"content-length", str(len(body)).encode())]}
        done = trio.Event()
        sent = [False]
        seen: list[int] = []

        async def receive() -> dict[str, Any]:
            if not sent[0]:
                sent[0] = True
                return {"type": "http.request", "body": body, "more_body": False}
            await done.wait()
            return {"type": "http.disconnect"}

        async def send(message: dict[str, Any]) -> None:
            if not seen and mark in message.get("body", b""):
                seen.append(time.thread_time_ns())
            if message["type"] == "http.response.body" and not message.get("more_body"):
                done.set()

        start = time.thread_time_ns()
        await app(scope, receive, send)
        await trio.testing.wait_all_tasks_blocked()
        end = time.thread_time_ns()
        if not seen:
            raise RuntimeError("a run streamed no text delta")
        return (seen[0] - start) / 1e3, (end - start) / 1e3

    for ctx, _ in apps.values():
        await ctx.open()
    try:
        async with shipped.app.hosting(), bare.app.hosting():
            for i in range(args.cpu_runs + 50):
                for name in (("shipped", "untraced") if i % 2 == 0 else ("untraced", "shipped")):
                    restore = cut_telemetry() if name == "untraced" else None
                    try:
                        f, w = await one(apps[name][1], i)
                    finally:
                        if restore is not None:
                            restore()
                    if i >= 50:
                        first[name].append(f)
                        whole[name].append(w)
    finally:
        for ctx, _ in apps.values():
            await ctx.aclose()
    firsts = {name: summary(v, 2) for name, v in first.items()}
    wholes = {name: summary(v, 2) for name, v in whole.items()}
    return {"runs": args.cpu_runs, "first_delta_cpu_us": firsts, "run_cpu_us": wholes,
            "ratios": {"first_delta_cpu_p50": round(firsts["shipped"]["p50"] / firsts["untraced"]["p50"], 4),
                       "run_cpu_p50": round(wholes["shipped"]["p50"] / wholes["untraced"]["p50"], 4)}}


def loop_lines(result: dict[str, Any]) -> list[str]:
    cpu = result.get("loop_cpu")
    if not cpu:
        return []
    f, w, r = cpu["first_delta_cpu_us"], cpu["run_cpu_us"], cpu["ratios"]
    return [
        f"In process ({cpu['runs']} AG-UI runs of three words per server, alternating; the event loop's CPU time, "
        "so the machine's other work does not count):",
        "",
        "| figure | shipped | untraced | ratio | target ≤ 1.03 |",
        "|---|---|---|---|---|",
        f"| loop CPU to the first text delta p50 (µs) | {f['shipped']['p50']} | {f['untraced']['p50']} | "
        f"{r['first_delta_cpu_p50']} | {'met' if r['first_delta_cpu_p50'] <= TARGET else 'missed'} |",
        f"| loop CPU per whole run p50 (µs) | {w['shipped']['p50']} | {w['untraced']['p50']} | {r['run_cpu_p50']} | |",
        "",
    ]


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
        "The headline ratios are the median over rounds of each round's paired ratio (both servers measured in",
        "the same round meet the same load); the pooled ratios beside them take every sample of the run at once.",
        "",
        "| figure | shipped | untraced | ratio (median of rounds) | target ≤ 1.03 |",
        "|---|---|---|---|---|",
        f"| first text delta p50 (ms, pooled) | {first['shipped']['p50']} | {first['untraced']['p50']} | "
        f"{ratios['first_delta_p50']} (pooled {ratios['first_delta_p50_pooled']}, mean "
        f"{ratios['first_delta_mean_pooled']}) | {'met' if met['first_delta_p50'] else 'missed'} |",
        f"| server CPU per paced delta (µs, median of rounds) | {cpu['shipped']['median_us']} | "
        f"{cpu['untraced']['median_us']} | {ratios['cpu_per_delta']} | {'met' if met['cpu_per_delta'] else 'missed'} |",
        "",
        *loop_lines(result),
        f"Ratios by round: first delta p50 {result['by_round']['first_delta_p50']['per_round']}; CPU per delta "
        f"{result['by_round']['cpu_per_delta']['per_round']}.",
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
    parser.add_argument("--cpu-runs", type=int, default=600, help="in-process runs per server (0: none)")
    args = parser.parse_args(argv)
    for key in [k for k in os.environ if k.startswith("OTEL_") or k.startswith("AWAKEN_TELEMETRY")]:
        del os.environ[key]  # "nothing configured" for both servers
    args.pinning = pin_self()
    with tempfile.TemporaryDirectory(prefix="awaken-bench-telemetry-") as tmp:
        result = trio.run(measure, args, Path(tmp))
        if args.cpu_runs:
            print("in process: the event loop's CPU time per run", file=sys.stderr)
            result["loop_cpu"] = trio.run(loop_cpu, args, Path(tmp) / "in-process")
            result["met"]["first_delta_cpu_p50"] = result["loop_cpu"]["ratios"]["first_delta_cpu_p50"] <= TARGET
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "telemetry.json").write_text(json.dumps(result, indent=2) + "\n")
    text = markdown(result)
    (RESULTS / "telemetry.md").write_text(text)
    print(text)
    return 0 if all(result["met"].values()) else 1


if __name__ == "__main__":
    sys.exit(main())
