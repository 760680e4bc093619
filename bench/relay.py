"""Any process serves any thread: what a watcher on another server process pays (the run relay).

    python -m bench.relay [--quick] [--samples N] [--words N] [--streams N] [--out bench/results]

Two Awaken servers (``a`` and ``b``) on one Postgres database of a throwaway cluster (``bench/pgcluster.py``),
unpinned, as two hosts would be. Two measures:

- **Watchers.** ``samples`` runs on ``a``, each held after its first word (scripted ``/hold``): a watcher
  rejoins it (``GET /v1/ag-ui/threads/{id}/stream``) on ``a`` (the run's own process: its broadcast) or on
  ``b`` (another process: through the run relay, Postgres ``LISTEN/NOTIFY``), alternating which goes first.
  *Rejoin first delta*: from the watcher's request to its first ``TEXT_MESSAGE_CONTENT`` (the missed
  positions). Then ``/release`` on ``a`` lets the run stream ``words`` unpaced words: the watcher's
  *events/s* (its text deltas after the release ÷ the time from the run's first delta after the release,
  as the run's own stream got it, to the watcher's ``RUN_FINISHED``) and its *end lag* (its
  ``RUN_FINISHED`` after the run's own stream's). Reported as other ÷ own.
- **Paced streams behind a load balancer.** ``streams`` streams of ``/words 100`` paced ``/delay 10``
  (the sweep's load, ``measure.sweep_level``) through HAProxy (``tests/balancer.py``: round robin, no
  stickiness) over ``a`` and ``b``, against the same streams on ``a`` alone: wall time, lateness, errors,
  as 2 processes behind the balancer ÷ 1 process.

Each server keeps its own CPU share; the machine is shared, so read the ratios, not the times.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from contextlib import AsyncExitStack
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

from . import measure, pgcluster
from .client import Endpoint, new_id
from .servers import REPO, awaken_server, pin_self
from .stats import ratio, summary

clock = time.perf_counter
TEXT = "TEXT_MESSAGE_CONTENT"
FINISHED = "RUN_FINISHED"


def _body(thread: str, text: str) -> dict[str, Any]:
    return {"threadId": thread, "runId": new_id("relay-r"), "state": {}, "tools": [], "context": [],
            "forwardedProps": {}, "messages": [{"id": new_id("relay-u"), "role": "user", "content": text}]}


async def _read(lines: Any, stop: str, seen: list[tuple[float, str]] | None = None) -> float:
    """Read SSE ``data:`` lines until an event of type ``stop``; returns its arrival time. With ``seen``,
    records ``(time, type)`` of every text delta and of ``stop``."""
    async for line in lines:
        if not line.startswith("data: "):
            continue
        kind = TEXT if TEXT in line else orjson.loads(line[6:])["type"]
        now = clock()
        if seen is not None and kind in (TEXT, stop):
            seen.append((now, kind))
        if kind == stop:
            return now
        if kind == "RUN_ERROR":
            raise RuntimeError(f"the stream ended with {line[6:]}")
    raise RuntimeError(f"the stream ended before {stop}")


async def watcher_sample(client: httpx.AsyncClient, origin_url: str, watch_url: str, words: int) -> dict[str, float]:
    """One held run on ``origin_url``, rejoined on ``watch_url``, released, followed to its end."""
    thread = new_id("relay-t")
    gate = f"g-{thread}"
    async with AsyncExitStack() as stack:
        origin = await stack.enter_async_context(
            client.stream("POST", f"{origin_url}/v1/ag-ui", json=_body(thread, f"/hold {gate}\n/words {words}")))
        origin_lines = origin.aiter_lines()
        await _read(origin_lines, TEXT)
        t_request = clock()
        watching = await stack.enter_async_context(client.stream("GET", f"{watch_url}/v1/ag-ui/threads/{thread}/stream"))
        if watching.status_code != 200:
            raise RuntimeError(f"the rejoin answered {watching.status_code}")
        watch_lines = watching.aiter_lines()
        t_first = await _read(watch_lines, TEXT)
        seen: list[tuple[float, str]] = []
        origin_seen: list[tuple[float, str]] = []
        ends: dict[str, float] = {}

        async def follow(name: str, lines: Any, into: list[tuple[float, str]] | None) -> None:
            ends[name] = await _read(lines, FINISHED, into)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(follow, "origin", origin_lines, origin_seen)
            nursery.start_soon(follow, "watcher", watch_lines, seen)
            release = await client.post(f"{origin_url}/v1/ag-ui", json=_body(new_id("relay-rel"), f"/release {gate}"))
            if release.status_code != 200:
                raise RuntimeError(f"the release answered {release.status_code}")
    deltas = [t for t, kind in seen if kind == TEXT]
    # from the run's first delta after the release (as its own stream got it) to the watcher's end: what
    # the watcher was delivered per second while the run streamed
    span = ends["watcher"] - origin_seen[0][0] if origin_seen else float("nan")
    return {"rejoin_first_delta_ms": (t_first - t_request) * 1000,
            "events_per_s": len(deltas) / span if deltas and span > 0 else float("nan"),
            "end_lag_ms": (ends["watcher"] - ends["origin"]) * 1000, "deltas": len(deltas)}


async def watchers(a: str, b: str, samples: int, words: int) -> dict[str, Any]:
    """``samples`` watcher samples on each side, alternating which goes first."""
    got: dict[str, list[dict[str, float]]] = {"own": [], "other": []}
    errors: list[str] = []
    async with httpx.AsyncClient(timeout=60) as client:
        for i in range(samples):
            for side in (("own", "other") if i % 2 == 0 else ("other", "own")):
                try:
                    got[side].append(await watcher_sample(client, a, a if side == "own" else b, words))
                except (RuntimeError, httpx.HTTPError) as exc:
                    errors.append(f"{side}: {type(exc).__name__}: {exc}")
    rows = {}
    for side, results in got.items():
        rows[side] = {"samples": len(results),
                      "rejoin_first_delta_ms": summary(r["rejoin_first_delta_ms"] for r in results),
                      "events_per_s": summary(r["events_per_s"] for r in results),
                      "end_lag_ms": summary(r["end_lag_ms"] for r in results)}
    own, other = rows["own"], rows["other"]
    return {"words": words, "samples": samples, "errors": len(errors), "error_samples": sorted(set(errors))[:3],
            "own": own, "other": other,
            "ratio": {"rejoin_first_delta_p50": ratio(other["rejoin_first_delta_ms"]["p50"],
                                                      own["rejoin_first_delta_ms"]["p50"]),
                      "events_per_s_p50": ratio(other["events_per_s"]["p50"], own["events_per_s"]["p50"])}}


def _paced_row(name: str, result: dict[str, Any]) -> dict[str, Any]:
    return {"subject": name, "streams": result["concurrency"], "wall_s": result["wall_s"],
            "ideal_s": result["ideal_s"], "lateness_ms": summary(result["lateness_ms"]),
            "first_delta_ms": summary(result["first_delta_ms"]), "errors": result["errors"],
            "error_samples": result["error_samples"]}


async def paced(a: str, b: str, workdir: Path, streams: int, words: int, delay_ms: float) -> dict[str, Any]:
    """``streams`` paced streams through HAProxy over ``a`` and ``b``, and on ``a`` alone (balancer first)."""
    sys.path.insert(0, str(REPO))  # tests/balancer.py: the HAProxy settings the tests and docs use
    from tests.balancer import balancer

    async with balancer([a, b], workdir) as url:
        both = await measure.sweep_level(Endpoint("2 processes behind HAProxy", "agui", "sse", f"{url}/v1/ag-ui"),
                                         streams, words, delay_ms)
    one = await measure.sweep_level(Endpoint("1 process", "agui", "sse", f"{a}/v1/ag-ui"), streams, words, delay_ms)
    rows = [_paced_row("2 processes behind HAProxy", both), _paced_row("1 process", one)]
    return {"words": words, "delay_ms": delay_ms, "rows": rows,
            "ratio": {"wall_s": ratio(rows[0]["wall_s"], rows[1]["wall_s"]),
                      "lateness_p99": ratio(rows[0]["lateness_ms"]["p99"], rows[1]["lateness_ms"]["p99"])}}


async def run_relay(pg: pgcluster.PgCluster, tmp: Path, logs: Path, *, samples: int, words: int, streams: int,
                    stream_words: int = 100, delay_ms: float = 10.0, database: str = "bench_relay") -> dict[str, Any]:
    """Both measures on two servers sharing a new database of ``pg`` (started)."""
    dsn = await trio.to_thread.run_sync(pg.database, database)
    servers = [awaken_server(f"awaken[postgres] relay {n}", "postgres", tmp / f"relay-{n}", logs, dsn=dsn,
                             pinned=False) for n in "ab"]
    try:
        for server in servers:
            await server.start()
        a, b = (s.base_url for s in servers)
        out = {"watchers": await watchers(a, b, samples, words)}
        out["paced"] = await paced(a, b, tmp, streams, stream_words, delay_ms)
    finally:
        for server in servers:
            await server.stop()
    return out


def _f(value: Any, digits: int = 1) -> str:
    return "–" if value is None else f"{value:.{digits}f}" if isinstance(value, float) else str(value)


def _x(value: Any) -> str:
    return "–" if value is None else f"{value:.2f}×"


def _pct(s: dict[str, Any]) -> str:
    return " / ".join(_f(s.get(k)) for k in ("p50", "p90", "p99"))


def markdown(section: dict[str, Any], *, quick: bool = False) -> list[str]:
    md = ["## Any process serves any thread: watchers on another process (run relay)", ""]
    if quick:
        md += ["**Quick mode: these figures are noisy (tiny counts); do not judge by them.**", ""]
    w = section["watchers"]
    md += [f"Two servers on one Postgres database. A run on process A is held after its first word; a watcher "
           f"rejoins it on A (its own process) or on B (another: the run relay, `LISTEN/NOTIFY`), alternating, "
           f"{w['samples']} samples each. *Rejoin first delta*: the watcher's request to its first text delta. "
           f"Then the run streams `/words {w['words']}` unpaced: the watcher's text deltas per second (from the run's "
           "first delta after the release, as its own stream got it, to the watcher's end), and its *end lag* "
           "behind the run's own stream. Ratios: other process ÷ own.", ""]
    md += ["| watcher on | samples | rejoin first delta p50/p90/p99 ms | events/s p50 | end lag p50/p99 ms |",
           "|---|---|---|---|---|"]
    for side in ("own", "other"):
        r = w[side]
        md.append(f"| {side} process | {r['samples']} | {_pct(r['rejoin_first_delta_ms'])} | "
                  f"{_f(r['events_per_s']['p50'], 0)} | {_f(r['end_lag_ms']['p50'])} / {_f(r['end_lag_ms']['p99'])} |")
    md += ["", f"Other ÷ own: rejoin first delta p50 {_x(w['ratio']['rejoin_first_delta_p50'])}, events/s p50 "
           f"{_x(w['ratio']['events_per_s_p50'])}; errors: {w['errors']}"
           + (f" ({'; '.join(w['error_samples'])})" if w["error_samples"] else "") + ".", ""]
    p = section["paced"]
    md += [f"Paced streams (`/words {p['words']}` paced `/delay {p['delay_ms']:g}`) split over A and B by HAProxy "
           "(round robin, no stickiness) against the same streams on A alone.", "",
           "| server | streams | wall s | ideal s | lateness p50/p90/p99 ms | first delta p50/p90/p99 ms | errors |",
           "|---|---|---|---|---|---|---|"]
    for r in p["rows"]:
        md.append(f"| {r['subject']} | {r['streams']} | {_f(r['wall_s'], 3)} | {r['ideal_s']} | {_pct(r['lateness_ms'])} "
                  f"| {_pct(r['first_delta_ms'])} | {r['errors']} |")
    md += ["", f"2 processes behind HAProxy ÷ 1 process: wall {_x(p['ratio']['wall_s'])}, lateness p99 "
           f"{_x(p['ratio']['lateness_p99'])}.", ""]
    return md


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.relay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true", help="tiny counts: shows it runs, figures are noise")
    parser.add_argument("--samples", type=int, help="watcher samples per side (default 40; quick 4)")
    parser.add_argument("--words", type=int, help="words each watched run streams (default 2000; quick 300)")
    parser.add_argument("--streams", type=int, help="paced streams (default 200; quick 20)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"), help="writes relay.json and relay.md there")
    args = parser.parse_args(argv)
    ok, why = pgcluster.available()
    if not ok:
        print(f"bench.relay: {why}", file=sys.stderr)
        return 2
    print(f"bench.relay: {pin_self()}", file=sys.stderr)
    samples = args.samples or (4 if args.quick else 40)
    words = args.words or (300 if args.quick else 2000)
    streams = args.streams or (20 if args.quick else 200)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    pg = pgcluster.PgCluster()
    tmp = Path(tempfile.mkdtemp(prefix="awaken-bench-relay-"))
    try:
        pg.start()
        section = trio.run(lambda: run_relay(pg, tmp, out / "logs", samples=samples, words=words, streams=streams))
    finally:
        pg.stop()
    (out / "relay.json").write_bytes(orjson.dumps(section, option=orjson.OPT_INDENT_2))
    text = "\n".join(markdown(section, quick=args.quick))
    (out / "relay.md").write_text(text + "\n")
    print(text, file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
