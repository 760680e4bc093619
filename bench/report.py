"""Summaries, targets, the JSON report, report.md, the PNG plots and the profile digest."""

from __future__ import annotations

import math
import pstats
from pathlib import Path
from typing import Any

import orjson

from . import bursts as bursts_mod
from . import relay as relay_mod
from .plan import Collected
from .stats import median, ratio, summary

SECTIONS = ("meta", "comparison", "latency", "lateness", "throughput", "sweep", "short_runs", "memory", "bursts",
            "ledger", "targets", "profile", "skipped", "contention", "scaleout", "postgres_vs_sqlite",
            "relay", "branched")

QUICK_NOTE = ("quick mode: these figures are noisy (tiny counts, one round, a shared machine); they show that the "
              "bench runs, not how fast anything is")
#: the peer's name among the subjects (bench/peer.py)
PEER = "peer"

TARGETS = {
    "first_delta": "time to first text delta (p50) <= 1.3x the floor",
    "events_per_s": "one-stream events/s >= 1.0x the floor",
    "sweep": "widest sweep (C={level}) wall time <= 1.3x the floor, zero errors",
    "memory_active": "<= 40 KB per active stream",
    "memory_waiting": "<= 5 KB per waiting run",
    "scaleout": "scale-out (C={level}): aggregate events/s of 2 processes >= 1.6x one, zero errors",
    "branched": "a turn on a {messages:,}-message thread with {branches} branches: first delta (p50) <= 1.5x a new "
                "thread's",
    "reload": "the first turn after a page reload on a {messages:,}-message thread with {branches} branches (the "
              "history read back and sent whole): first delta (p50) <= 3x a new thread's",
}


def _r(value: float | None, digits: int = 3) -> float | None:
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else round(value, digits)


# ------------------------------------------------------------------------------------------------
# summarise


def summarise(bench: Collected) -> dict[str, Any]:
    raw = bench.raw
    floor = bench.floor.name if bench.floor else "floor"
    out: dict[str, Any] = {k: [] for k in ("latency", "lateness", "throughput", "sweep", "short_runs", "ledger")}
    out["memory"] = {"active": [], "waiting": [], "detached": []}

    lat: dict[tuple[str, str, str], dict[str, Any]] = {}
    for key, results in raw.items():
        if key[0] != "latency":
            continue
        _, subject, channel, mode = key
        ok = [r for r in results if r.ok]
        row = {
            "subject": subject, "channel": channel, "conn": mode, "runs": len(results),
            "errors": len(results) - len(ok),
            "error_samples": sorted({r.error for r in results if r.error})[:3],
            "ttfb_ms": summary(r.ttfb_ms for r in ok),
            "first_delta_ms": summary(r.first_delta_ms for r in ok),
        }
        lat[(subject, channel, mode)] = row
    for (subject, channel, mode), row in lat.items():
        base = lat.get((floor, channel, mode))
        if base and subject != floor:
            row["ratio"] = {
                "ttfb_p50": ratio(row["ttfb_ms"]["p50"], base["ttfb_ms"]["p50"]),
                "first_delta_p50": ratio(row["first_delta_ms"]["p50"], base["first_delta_ms"]["p50"]),
                "first_delta_p90": ratio(row["first_delta_ms"]["p90"], base["first_delta_ms"]["p90"]),
                "first_delta_p99": ratio(row["first_delta_ms"]["p99"], base["first_delta_ms"]["p99"]),
            }
        out["latency"].append(row)

    pace: dict[tuple[str, str], dict[str, Any]] = {}
    for key, runs in raw.items():
        if key[0] != "lateness":
            continue
        _, subject, channel = key
        samples = [x for r in runs for x in r["lateness_ms"]]
        pace[(subject, channel)] = {
            "subject": subject, "channel": channel, "streams": len(runs),
            "errors": sum(1 for r in runs if not r["ok"]),
            "words": bench.plan.lateness_words, "delay_ms": bench.plan.lateness_delay_ms,
            "lateness_ms": summary(samples),
        }
    for (subject, channel), row in pace.items():
        base = pace.get((floor, channel))
        if base and subject != floor:
            row["vs_floor_ms"] = {q: _r(row["lateness_ms"][q] - base["lateness_ms"][q])
                                  if row["lateness_ms"][q] is not None and base["lateness_ms"][q] is not None else None
                                  for q in ("p50", "p99")}
            row["ratio"] = {q: ratio(row["lateness_ms"][q], base["lateness_ms"][q]) for q in ("p50", "p99")}
        out["lateness"].append(row)

    thr: dict[tuple[str, str], dict[str, Any]] = {}
    for key, runs in raw.items():
        if key[0] != "throughput":
            continue
        _, subject, channel = key
        eps = [r["events_per_s"] for r in runs if r["ok"]]
        cpu = [r["cpu_us_per_event"] for r in runs if r["ok"] and r["cpu_us_per_event"] is not None]
        thr[(subject, channel)] = {
            "subject": subject, "channel": channel, "words": bench.plan.throughput_words,
            "events_per_s": _r(median(eps), 0), "per_round": [_r(e, 0) for e in eps],
            "cpu_us_per_event": _r(median(cpu), 2),
            "client_cpu_share": _r(median(r["client_cpu_share"] for r in runs if r["ok"]
                                          and r.get("client_cpu_share") is not None), 2),
            "server_wait_share": _r(median(r["server_wait_share"] for r in runs if r["ok"]
                                           and r.get("server_wait_share") is not None), 2),
            "errors": sum(1 for r in runs if not r["ok"]),
            "error_samples": sorted({r["error"] for r in runs if r["error"]})[:3],
        }
    for (subject, channel), row in thr.items():
        base = thr.get((floor, channel))
        if base and subject != floor:
            row["ratio"] = {"events_per_s": ratio(row["events_per_s"], base["events_per_s"]),
                            "cpu_us_per_event": ratio(row["cpu_us_per_event"], base["cpu_us_per_event"])}
        out["throughput"].append(row)

    sw: dict[tuple[str, str, int], dict[str, Any]] = {}
    for key, runs in raw.items():
        if key[0] != "sweep":
            continue
        _, subject, channel, level = key
        walls = [r["wall_s"] for r in runs if r["wall_s"] is not None]
        sw[(subject, channel, level)] = {
            "subject": subject, "channel": channel, "concurrency": level,
            "words": bench.plan.sweep_words, "delay_ms": bench.plan.sweep_delay_ms, "ideal_s": runs[0]["ideal_s"],
            "wall_s": _r(median(walls)), "per_round": [_r(w) for w in walls],
            "errors": sum(r["errors"] for r in runs),
            "error_samples": sorted({e for r in runs for e in r["error_samples"]})[:3],
            "lateness_ms": summary(x for r in runs for x in r["lateness_ms"]),
            "first_delta_ms": summary(x for r in runs for x in r["first_delta_ms"]),
            "server_cpu_s": _r(median(r["server_cpu_s"] for r in runs if r["server_cpu_s"] is not None)),
            "server_wait_s": _r(median(r["server_wait_s"] for r in runs if r["server_wait_s"] is not None)),
            "cpu_us_per_event": _r(median(r["server_cpu_s"] / r["events"] * 1e6 for r in runs
                                          if r["server_cpu_s"] is not None and r["events"]), 1),
            "client_cpu_s": _r(median(r["client_cpu_s"] for r in runs)),
            "client_wait_s": _r(median(r["client_wait_s"] for r in runs)),
        }
    for (subject, channel, level), row in sw.items():
        base = sw.get((floor, channel, level))
        if base and subject != floor:
            row["ratio"] = {"wall_s": ratio(row["wall_s"], base["wall_s"]),
                            "cpu_us_per_event": ratio(row["cpu_us_per_event"], base["cpu_us_per_event"]),
                            "lateness_p50": ratio(row["lateness_ms"]["p50"], base["lateness_ms"]["p50"]),
                            "lateness_p99": ratio(row["lateness_ms"]["p99"], base["lateness_ms"]["p99"])}
        out["sweep"].append(row)
    out["sweep"].sort(key=lambda r: (r["channel"], r["concurrency"], r["subject"] != floor, r["subject"]))

    runs_rows: dict[str, dict[str, Any]] = {}
    for key, runs in raw.items():
        if key[0] != "http_runs":
            continue
        subject = key[1]
        runs_rows[subject] = {"subject": subject, "channel": "agui/sse", "concurrency": bench.plan.http_concurrency,
                              "runs_per_s": _r(median(r["runs_per_s"] for r in runs), 1),
                              "per_round": [_r(r["runs_per_s"], 1) for r in runs],
                              "errors": sum(r["errors"] for r in runs)}
    for subject, row in runs_rows.items():
        if subject != floor and floor in runs_rows:
            row["ratio"] = {"runs_per_s": ratio(row["runs_per_s"], runs_rows[floor]["runs_per_s"])}
        out["short_runs"].append(row)

    active = {key[1]: runs[0] for key, runs in raw.items() if key[0] == "memory_active"}
    for subject, row in active.items():
        row = {"subject": subject, "channel": "agui/sse", **row}
        if subject != floor and floor in active:
            row["ratio"] = {"kb_per_stream": ratio(row["kb_per_stream"], active[floor]["kb_per_stream"])}
        out["memory"]["active"].append(row)
    completed = {key[1]: runs[0] for key, runs in raw.items() if key[0] == "memory_completed"}
    for key, runs in raw.items():
        if key[0] == "memory_waiting":
            control = completed.get(key[1])
            out["memory"]["waiting"].append({"subject": key[1], "channel": "agui/sse", **runs[0],
                                             "control_completed": control})
    for key, runs in raw.items():
        if key[0] == "memory_detached":
            out["memory"]["detached"].append({"subject": key[1], "channel": "agui/sse", **runs[0]})
    out["contention"] = _contention(out)

    for key, runs in raw.items():
        if key[0] != "ledger":
            continue
        _, backend, concurrency = key
        led, base = runs[0]["ledger"], runs[0]["floor"]
        out["ledger"].append({
            "backend": backend, "concurrency": concurrency, "commits": led["commits"],
            "commits_per_s": _r(led["commits_per_s"], 0), "commit_ms": led["commit_ms"],
            "floor_commits_per_s": _r(base["commits_per_s"], 0),
            "ratio": {"commits_per_s": ratio(led["commits_per_s"], base["commits_per_s"])},
        })

    # bench/threads.py's thread that branched, against new threads on the same server
    out["branched"] = [{"backend": key[1], **runs[0]} for key, runs in raw.items() if key[0] == "branched"]

    _peer_ratios(out)
    out["scaleout"] = _scaleout(raw, bench)
    out["postgres_vs_sqlite"] = _postgres_vs_sqlite(out)
    out["skipped"] = [{"subject": s.name, "channel": c, "reason": why} for s in bench.subjects
                      for c, why in s.skipped.items()]
    out["targets"] = evaluate_targets(out, floor, bench)
    return out


#: per section: the row key beside the subject, and the ratio's name -> the path of the measure it divides
_PEER_MEASURES: dict[str, tuple[tuple[str, ...], dict[str, tuple[str, ...]]]] = {
    "latency": (("channel", "conn"), {"ttfb_p50": ("ttfb_ms", "p50"), "first_delta_p50": ("first_delta_ms", "p50"),
                                      "first_delta_p99": ("first_delta_ms", "p99")}),
    "lateness": (("channel",), {"p50": ("lateness_ms", "p50"), "p99": ("lateness_ms", "p99")}),
    "throughput": (("channel",), {"events_per_s": ("events_per_s",), "cpu_us_per_event": ("cpu_us_per_event",)}),
    "sweep": (("channel", "concurrency"), {"wall_s": ("wall_s",), "cpu_us_per_event": ("cpu_us_per_event",),
                                           "lateness_p99": ("lateness_ms", "p99")}),
    "short_runs": (("channel",), {"runs_per_s": ("runs_per_s",)}),
    "memory.active": (("channel",), {"kb_per_stream": ("kb_per_stream",)}),
}


def _dig(row: dict[str, Any], path: tuple[str, ...]) -> Any:
    for part in path:
        row = row.get(part) if isinstance(row, dict) else None
    return row


def _peer_ratios(out: dict[str, Any]) -> None:
    """Every row of a subject other than the peer gets ``ratio_peer``: its measure ÷ the peer's in the same run."""
    for section, (keys, measures) in _PEER_MEASURES.items():
        rows = _dig(out, tuple(section.split(".")))
        peer = {tuple(r.get(k) for k in keys): r for r in rows or [] if r["subject"] == PEER}
        for row in rows or []:
            base = peer.get(tuple(row.get(k) for k in keys))
            if base is not None and row["subject"] != PEER:
                row["ratio_peer"] = {name: ratio(_dig(row, path), _dig(base, path)) for name, path in measures.items()}


def comparison(results: dict[str, Any]) -> dict[str, Any]:
    """The issue's headline figures side by side: each measure for the floor, the peer and every Awaken, with
    Awaken's and the peer's ratio to the floor and Awaken's ratio to the peer (all from this run)."""
    sweep_levels = sorted({r["concurrency"] for r in results.get("sweep", []) if r["channel"] == "agui/sse"})
    paced = 200 if 200 in sweep_levels else (sweep_levels[-1] if sweep_levels else None)
    # (label, section, the row's other keys, the path of the figure in the row)
    measures: list[tuple[str, str, dict[str, Any], tuple[str, ...]]] = [
        ("first text delta p50, one client, keep-alive (ms)", "latency", {"channel": "agui/sse", "conn": "keepalive"},
         ("first_delta_ms", "p50")),
        ("first text delta p50, one client, fresh connection (ms)", "latency", {"channel": "agui/sse", "conn": "fresh"},
         ("first_delta_ms", "p50")),
    ]
    if paced is not None:
        words = results["sweep"][0]["words"]
        measures += [(f"{paced} paced streams x {words} deltas: wall (s)", "sweep",
                      {"channel": "agui/sse", "concurrency": paced}, ("wall_s",)),
                     (f"server CPU per paced delta at C={paced} (µs)", "sweep",
                      {"channel": "agui/sse", "concurrency": paced}, ("cpu_us_per_event",))]
    measures.append(("memory per open stream (KB)", "memory.active", {}, ("kb_per_stream",)))
    for n in (results.get("bursts") or {}).get("levels", []):
        for label, key in (("accept time (s)", "accept_s"), ("wall (s)", "wall_s"),
                           ("failed streams, all rounds", "failed")):
            measures.append((f"burst of {n} clients, SSE: {label}", "bursts.rows",
                             {"channel": "agui/sse", "clients": n}, (key,)))

    def value(subject: str, section: str, match: dict[str, Any], path: tuple[str, ...]) -> Any:
        for r in _dig(results, tuple(section.split("."))) or []:
            if r["subject"] == subject and all(r.get(k) == v for k, v in match.items()):
                return _dig(r, path)
        return None

    subjects = ["floor", PEER] + sorted({r["subject"] for r in results.get("latency", [])
                                         if r["subject"].startswith("awaken[")})
    rows = []
    for label, section, match, path in measures:
        values = {s: value(s, section, match, path) for s in subjects}
        floor, peer = values.get("floor"), values.get(PEER)
        rows.append({"measure": label, "better": "lower", "values": values,
                     "vs_floor": {s: ratio(v, floor) for s, v in values.items() if s != "floor"},
                     "vs_peer": {s: ratio(v, peer) for s, v in values.items() if s != PEER}})
    return {"subjects": subjects, "rows": rows}


def _scaleout(raw: dict[Any, Any], bench: Collected) -> list[dict[str, Any]]:
    """The scale-out sweep: per subject and level the sweep's figures plus aggregate events/s (data frames
    of every stream ÷ wall time); the 2-process rows carry ratios to the 1-process row of the same level."""
    rows: dict[tuple[str, int], dict[str, Any]] = {}
    for key, runs in raw.items():
        if key[0] != "scaleout":
            continue
        _, subject, level = key
        walls = [r["wall_s"] for r in runs if r["wall_s"] is not None]
        eps = [r["events"] / r["wall_s"] for r in runs if r["wall_s"]]
        rows[(subject, level)] = {
            "subject": subject, "processes": 2 if "2 processes" in subject else 1, "channel": "agui/sse",
            "concurrency": level, "words": bench.plan.sweep_words, "delay_ms": bench.plan.sweep_delay_ms,
            "ideal_s": runs[0]["ideal_s"], "wall_s": _r(median(walls)), "per_round": [_r(w) for w in walls],
            "events_per_s": _r(median(eps), 0), "events_per_s_per_round": [_r(e, 0) for e in eps],
            "errors": sum(r["errors"] for r in runs),
            "error_samples": sorted({e for r in runs for e in r["error_samples"]})[:3],
            "lateness_ms": summary(x for r in runs for x in r["lateness_ms"]),
            "first_delta_ms": summary(x for r in runs for x in r["first_delta_ms"]),
            "server_cpu_s": _r(median(r["server_cpu_s"] for r in runs if r["server_cpu_s"] is not None)),
            "server_wait_s": _r(median(r["server_wait_s"] for r in runs if r["server_wait_s"] is not None)),
            "client_cpu_s": _r(median(r["client_cpu_s"] for r in runs)),
            "client_wait_s": _r(median(r["client_wait_s"] for r in runs)),
        }
    for (_, level), row in rows.items():
        one = next((r for (_, lv), r in rows.items() if lv == level and r["processes"] == 1), None)
        if row["processes"] == 2 and one is not None:
            row["ratio"] = {"events_per_s": ratio(row["events_per_s"], one["events_per_s"]),
                            "wall_s": ratio(row["wall_s"], one["wall_s"]),
                            "lateness_p50": ratio(row["lateness_ms"]["p50"], one["lateness_ms"]["p50"]),
                            "lateness_p99": ratio(row["lateness_ms"]["p99"], one["lateness_ms"]["p99"])}
    return sorted(rows.values(), key=lambda r: (r["concurrency"], r["processes"]))


def _postgres_vs_sqlite(out: dict[str, Any]) -> list[dict[str, Any]]:
    """Postgres ÷ SQLite in the same run, measure by measure (both measured interleaved with the floor)."""
    pg, lite = "awaken[postgres]", "awaken[sqlite]"
    rows: list[dict[str, Any]] = []

    def add(measure: str, channel: str, a: float | None, b: float | None, better: str) -> None:
        rows.append({"measure": measure, "channel": channel, "postgres": a, "sqlite": b, "ratio": ratio(a, b),
                     "better": better})

    def pair(section: list[dict[str, Any]], **match: Any) -> tuple[dict[str, Any], dict[str, Any]] | None:
        found = {r["subject"]: r for r in section if all(r.get(k) == v for k, v in match.items())}
        return (found[pg], found[lite]) if pg in found and lite in found else None

    for row in out["latency"]:
        if row["subject"] == pg and (p := pair(out["latency"], channel=row["channel"], conn=row["conn"])):
            for q in ("p50", "p99"):
                add(f"first text delta {q} (ms)", f"{row['channel']} {row['conn']}", p[0]["first_delta_ms"][q],
                    p[1]["first_delta_ms"][q], "lower")
    for row in out["throughput"]:
        if row["subject"] == pg and (p := pair(out["throughput"], channel=row["channel"])):
            add("one-stream events/s", row["channel"], p[0]["events_per_s"], p[1]["events_per_s"], "higher")
    for row in out["sweep"]:
        if row["subject"] == pg and (p := pair(out["sweep"], channel=row["channel"], concurrency=row["concurrency"])):
            add(f"sweep C={row['concurrency']} wall (s)", row["channel"], p[0]["wall_s"], p[1]["wall_s"], "lower")
    if p := pair(out["short_runs"]):
        add("short runs/s", "agui/sse", p[0]["runs_per_s"], p[1]["runs_per_s"], "higher")
    for kind, key, unit in (("active", "kb_per_stream", "KB per active stream"), ("waiting", "kb_per_run",
                                                                                 "KB per waiting run")):
        if p := pair(out["memory"][kind]):
            add(unit, "agui/sse", p[0][key], p[1][key], "lower")
    ledger = {(r["backend"], r["concurrency"]): r for r in out["ledger"]}
    for (backend, concurrency), row in sorted(ledger.items()):
        if backend == "postgres" and ("sqlite", concurrency) in ledger:
            add(f"ledger commits/s (concurrency {concurrency})", "in-process", row["commits_per_s"],
                ledger[("sqlite", concurrency)]["commits_per_s"], "higher")
    return rows


def _contention(out: dict[str, Any]) -> dict[str, Any]:
    """How much the servers and the load generator waited for a CPU (other work on the machine)."""
    run = sum(r["server_cpu_s"] or 0 for r in out["sweep"])
    wait = sum(r["server_wait_s"] or 0 for r in out["sweep"])
    crun = sum(r["client_cpu_s"] or 0 for r in out["sweep"])
    cwait = sum(r["client_wait_s"] or 0 for r in out["sweep"])
    return {
        "sweep_server_wait_per_cpu_s": _r(wait / run, 2) if run else None,
        "sweep_client_wait_per_cpu_s": _r(cwait / crun, 2) if crun else None,
        "note": "seconds spent runnable but waiting for a CPU per second spent running, during the sweep "
                "(/proc schedstat); well above 0 means other work shared the pinned CPUs and inflated the times",
    }


def evaluate_targets(out: dict[str, Any], floor: str, bench: Collected) -> list[dict[str, Any]]:
    awaken = {s.name for s in bench.subjects if s.kind == "awaken"}
    rows: list[dict[str, Any]] = []

    def add(target: str, kind: str, subject: str, channel: str, value: Any, limit: str, met: bool | None,
            detail: str) -> None:
        rows.append({"target": target, "kind": kind, "subject": subject, "channel": channel, "value": value,
                     "limit": limit, "met": met, "detail": detail})

    for row in out["latency"]:
        if row["subject"] in awaken and "ratio" in row:
            r = row["ratio"]["first_delta_p50"]
            add(TARGETS["first_delta"], "time", row["subject"], f"{row['channel']} {row['conn']}", r, "<= 1.3x",
                None if r is None else r <= 1.3,
                f"{row['first_delta_ms']['p50']} ms vs floor; errors {row['errors']}")
    for row in out["throughput"]:
        if row["subject"] in awaken and "ratio" in row:
            r = row["ratio"]["events_per_s"]
            add(TARGETS["events_per_s"], "time", row["subject"], row["channel"], r, ">= 1.0x",
                None if r is None else r >= 1.0, f"{row['events_per_s']} events/s")
    levels = [r["concurrency"] for r in out["sweep"]]
    if levels:
        top = max(levels)
        for row in out["sweep"]:
            if row["subject"] in awaken and row["concurrency"] == top and "ratio" in row:
                r = row["ratio"]["wall_s"]
                add(TARGETS["sweep"].format(level=top), "time", row["subject"], row["channel"], r, "<= 1.3x, 0 errors",
                    None if r is None else (r <= 1.3 and row["errors"] == 0),
                    f"{row['wall_s']} s (ideal {row['ideal_s']} s), {row['errors']} errors")
    if out.get("scaleout"):
        top = max(r["concurrency"] for r in out["scaleout"])
        for row in out["scaleout"]:
            if row["concurrency"] == top and "ratio" in row:
                r = row["ratio"]["events_per_s"]
                add(TARGETS["scaleout"].format(level=top), "scale", row["subject"], row["channel"], r,
                    ">= 1.6x, 0 errors", None if r is None else (r >= 1.6 and row["errors"] == 0),
                    f"{row['events_per_s']} events/s (1 process: {_r(row['events_per_s'] / r, 0) if r else None}); "
                    f"wall {row['ratio']['wall_s']}x, lateness p99 {row['ratio']['lateness_p99']}x; "
                    f"{row['errors']} errors")
    for case in out.get("branched", []):
        for mode in ("new-only", "replay", "reload"):
            if f"branched/{mode}" not in case["rows"]:
                continue
            row, plain = case["rows"][f"branched/{mode}"], case["rows"].get(f"linear/{mode}")
            value = _r(row["ratio"])
            limit = case.get("reload_target", 3.0) if mode == "reload" else case["target"]
            name = TARGETS["reload" if mode == "reload" else "branched"].format(
                messages=case["active_path"], branches=case["branches"] - 1)
            add(name, "time", f"awaken[{case['backend']}]", f"agui/sse {mode}", value, f"<= {limit}x", value <= limit,
                f"{_r(row['p50_ms'], 2)} ms, {case['active_path']} messages on the active path, "
                f"{case['branches']} branches" + (f"; never branched: {_r(plain['ratio'])}x" if plain else ""))
    for row in out["memory"]["active"]:
        if row["subject"] in awaken:
            v = row["kb_per_stream"]
            add(TARGETS["memory_active"], "memory", row["subject"], row["channel"], v, "<= 40 KB",
                None if v is None else v <= 40 and row["errors"] == 0,
                f"{row['streams']} streams; marginal {row['kb_per_stream_marginal']} KB; errors {row['errors']}")
    for row in out["memory"]["waiting"]:
        if row["subject"] in awaken:
            v = row["kb_per_run"]
            control = row.get("control_completed") or {}
            add(TARGETS["memory_waiting"], "memory", row["subject"], row["channel"], v, "<= 5 KB",
                None if v is None else v <= 5 and row["errors"] == 0,
                f"{row['runs']} runs; marginal {row['kb_per_run_marginal']} KB; a completed run on a new thread "
                f"costs {control.get('kb_per_run')} KB; errors {row['errors']}")
    return rows


# ------------------------------------------------------------------------------------------------
# profile


def _short_path(filename: str) -> str:
    from .servers import REPO

    if "site-packages/" in filename:
        return filename.split("site-packages/", 1)[1]
    if filename.startswith(str(REPO) + "/"):
        return filename[len(str(REPO)) + 1:]
    if "/lib/python" in filename:
        return "stdlib/" + filename.split("/lib/python", 1)[1].split("/", 1)[-1]
    return filename


def _group(filename: str, func: str) -> str:
    if filename == "~":
        if "epoll" in func or ("poll" in func and "select" in func):
            return "idle (epoll wait)"
        if "socket" in func:
            return "socket syscalls (C)"
        if "orjson" in func:
            return "orjson (C)"
        return "other C builtins"
    if filename.startswith("<attrs generated"):
        return "attrs-generated methods"
    short = _short_path(filename)
    if short.startswith(("stdlib/", "<frozen")):
        return "stdlib"
    head = short.split("/", 1)[0]
    if head == "awaken":
        return "awaken"
    return head


def _fmt_func(key: tuple[str, int, str]) -> str:
    filename, line, func = key
    if filename == "~":
        return func
    return f"{_short_path(filename)}:{line}({func})"


def profile_summary(path: Path, top: int = 25) -> dict[str, Any]:
    stats = pstats.Stats(str(path))
    entries = stats.stats  # type: ignore[attr-defined]
    total = sum(v[2] for v in entries.values())
    idle = sum(v[2] for k, v in entries.items() if _group(k[0], k[2]) == "idle (epoll wait)")
    busy = max(total - idle, 1e-9)
    groups: dict[str, float] = {}
    files: dict[str, float] = {}
    for key, (_cc, _nc, tt, _ct, _callers) in entries.items():
        group = _group(key[0], key[2])
        if group == "idle (epoll wait)":
            continue
        groups[group] = groups.get(group, 0.0) + tt
        if key[0] != "~":
            short = _short_path(key[0])
            files[short] = files.get(short, 0.0) + tt

    def rows(sort_index: int, only_repo: bool = False) -> list[dict[str, Any]]:
        items = sorted(entries.items(), key=lambda kv: kv[1][sort_index], reverse=True)
        out = []
        for key, (_cc, nc, tt, ct, _callers) in items:
            if _group(key[0], key[2]) == "idle (epoll wait)":
                continue
            if only_repo and _group(key[0], key[2]) not in ("awaken", "storage_backends"):
                continue
            out.append({"function": _fmt_func(key), "calls": nc, "tottime_s": round(tt, 4), "cumtime_s": round(ct, 4),
                        "tottime_share": round(tt / busy, 4)})
            if len(out) >= top:
                break
        return out

    return {
        "stats_file": str(path),
        "busy_s": round(busy, 3), "idle_s": round(idle, 3),
        "by_package": [{"package": g, "tottime_s": round(t, 4), "share": round(t / busy, 4)}
                       for g, t in sorted(groups.items(), key=lambda kv: kv[1], reverse=True)],
        "by_file": [{"file": f, "tottime_s": round(t, 4), "share": round(t / busy, 4)}
                    for f, t in sorted(files.items(), key=lambda kv: kv[1], reverse=True)[:top]],
        "top_tottime": rows(2),
        "top_cumtime": rows(3),
        "top_cumtime_awaken": rows(3, only_repo=True),
    }


# ------------------------------------------------------------------------------------------------
# output


def _fmt(value: Any, digits: int = 2) -> str:
    if value is None:
        return "–"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.{digits}f}"
    if isinstance(value, int) and abs(value) >= 10000:
        return f"{value:,}"
    return str(value)


def _x(value: float | None) -> str:
    return "–" if value is None else f"{value:.2f}x"


def _table(header: list[str], body: list[list[Any]]) -> list[str]:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    lines += ["| " + " | ".join(_fmt(c) if not isinstance(c, str) else c for c in row) + " |" for row in body]
    return lines


def _pct(s: dict[str, Any]) -> str:
    return f"{_fmt(s['p50'])} / {_fmt(s['p90'])} / {_fmt(s['p99'])}"


def markdown(results: dict[str, Any], plots: list[str]) -> str:
    meta = results["meta"]
    plan = meta["plan"]
    md: list[str] = []
    md.append("# Awaken streaming benchmark")
    md.append("")
    md.append(f"{meta['started']} · {meta['mode']} run · {meta['rounds']} interleaved round(s) · "
              f"{meta['duration_s']} s · {meta['machine']['cpus']} CPUs · Python {meta['machine']['python']} · "
              f"trio {meta['versions']['trio']} · hypercorn {meta['versions']['hypercorn']} · git "
              f"{meta['git']['rev']}{' (awaken/ modified)' if meta['git']['awaken_tree_dirty'] else ''}")
    md.append("")
    load = meta.get("load_average") or {}
    cont = results.get("contention") or {}
    md.append(f"Load average at start / end: {load.get('start')} / {load.get('end')}. During the sweep the servers "
              f"waited {_fmt(cont.get('sweep_server_wait_per_cpu_s'))} s for a CPU per CPU-second they ran (the load "
              f"generator {_fmt(cont.get('sweep_client_wait_per_cpu_s'))} s): well above 0 means other work shared "
              "the pinned CPUs and inflated the times.")
    md.append("")
    md.append(f"Pinning: {meta['pinning']}. The **floor** is a raw ASGI app on hypercorn's trio worker writing the "
              "same pre-encoded frames (one send per event, same content and pacing): `bench/floor.py`. Ratios are "
              "Awaken ÷ floor in the same run (for latency and wall time lower is better; for rates higher is "
              "better). The **peer** is pydantic-ai's AG-UI app on uvicorn streaming the same scripted content "
              "(`bench/peer.py`); *×peer* columns divide by its figure of the same run. Read ratios, not absolute "
              "times: the machine is shared and noisy.")
    md.append("")
    if meta["mode"] == "quick":
        md.append(f"**{QUICK_NOTE[0].upper() + QUICK_NOTE[1:]}.**")
        md.append("")
    md += _comparison_md(results)
    md.append("## Targets")
    md.append("")
    targets = results["targets"]
    if targets:
        body = [[("met" if t["met"] else "**MISSED**") if t["met"] is not None else "n/a", t["target"], t["subject"],
                 t["channel"], (_x(t["value"]) if t["kind"] in ("time", "scale") else f"{_fmt(t['value'])} KB"), t["detail"]]
                for t in targets]
        md += _table(["", "target", "server", "channel", "value", "detail"], body)
        missed = [t for t in targets if t["met"] is False]
        md.append("")
        md.append(f"**{len(targets) - len(missed)} of {len(targets)} met.**" if targets else "")
    else:
        md.append("No Awaken server was measured.")
    md.append("")

    md.append("## Time to first byte and to first text delta (ms)")
    md.append("")
    md.append(f"Short runs (`/words 3`), one after another; keep-alive reuses one connection, fresh opens one per run "
              f"(the clock starts before the connect). About {plan['latency_runs']} runs per row.")
    md.append("")
    body = []
    for row in results["latency"]:
        r = row.get("ratio", {})
        body.append([row["subject"], row["channel"], row["conn"], row["ttfb_ms"]["n"], _pct(row["ttfb_ms"]),
                     _pct(row["first_delta_ms"]), _x(r.get("first_delta_p50")), _x(r.get("first_delta_p99")),
                     _x(r.get("ttfb_p50")), _x(row.get("ratio_peer", {}).get("first_delta_p50")), row["errors"]])
    md += _table(["server", "channel", "conn", "n", "TTFB p50/p90/p99", "first delta p50/p90/p99",
                  "first delta p50 ×floor", "p99 ×floor", "TTFB p50 ×floor", "first delta p50 ×peer", "errors"], body)
    md.append("")

    md.append("## Inter-delta lateness, one paced stream (ms)")
    md.append("")
    md.append(f"`/words {plan['lateness_words']}` paced `/delay {plan['lateness_delay_ms']:g}`: each gap between "
              "two text deltas minus the delay.")
    md.append("")
    body = [[row["subject"], row["channel"], row["lateness_ms"]["n"], _pct(row["lateness_ms"]),
             _fmt(row.get("vs_floor_ms", {}).get("p50"), 3), _fmt(row.get("vs_floor_ms", {}).get("p99"), 3),
             _x(row.get("ratio", {}).get("p99")), row["errors"]] for row in results["lateness"]]
    md += _table(["server", "channel", "gaps", "lateness p50/p90/p99", "p50 − floor", "p99 − floor", "p99 ×floor",
                  "errors"], body)
    md.append("")

    md.append("## One-stream throughput")
    md.append("")
    md.append(f"`/words {plan['throughput_words']}`, median of the rounds; server CPU per event from /proc (all threads).")
    md.append("")
    body = [[row["subject"], row["channel"], row["events_per_s"], ", ".join(_fmt(v) for v in row["per_round"]),
             _x(row.get("ratio", {}).get("events_per_s")), row["cpu_us_per_event"],
             _x(row.get("ratio", {}).get("cpu_us_per_event")), _x(row.get("ratio_peer", {}).get("events_per_s")),
             row["server_wait_share"], row["client_cpu_share"], row["errors"]] for row in results["throughput"]]
    md += _table(["server", "channel", "events/s", "per round", "×floor", "server CPU µs/event", "CPU ×floor",
                  "×peer", "server wait share", "client CPU share", "errors"], body)
    md.append("")
    md.append("A client CPU share near 1.0 means the load generator, not the server, set the pace; the server wait "
              "share is the time it was runnable but waiting for a CPU, per second of stream.")
    md.append("")

    md.append("## Concurrency sweep")
    md.append("")
    md.append(f"C streams of `/words {plan['sweep_words']}` paced `/delay {plan['sweep_delay_ms']:g}` "
              f"(ideal {plan['sweep_words'] * plan['sweep_delay_ms'] / 1000:g} s), released at once on open "
              "connections; wall time = until the last stream ends (median of the rounds).")
    md.append("")
    body = [[row["subject"], row["channel"], row["concurrency"], row["wall_s"], _x(row.get("ratio", {}).get("wall_s")),
             f"{_fmt(row['lateness_ms']['p50'])} / {_fmt(row['lateness_ms']['p99'])}",
             _x(row.get("ratio", {}).get("lateness_p99")),
             f"{_fmt(row['first_delta_ms']['p50'])} / {_fmt(row['first_delta_ms']['p99'])}",
             row["cpu_us_per_event"], _x(row.get("ratio", {}).get("cpu_us_per_event")),
             _x(row.get("ratio_peer", {}).get("wall_s")), _x(row.get("ratio_peer", {}).get("cpu_us_per_event")),
             f"{_fmt(row['server_cpu_s'])} / {_fmt(row['server_wait_s'])}",
             f"{_fmt(row['client_cpu_s'])} / {_fmt(row['client_wait_s'])}", row["errors"]]
            for row in results["sweep"]]
    md += _table(["server", "channel", "C", "wall s", "×floor", "lateness p50 / p99 ms", "p99 ×floor",
                  "first delta p50 / p99 ms", "server CPU µs/event", "×floor", "wall ×peer", "CPU ×peer",
                  "server CPU / wait s", "client CPU / wait s", "errors"], body)
    md.append("")
    md.append("*CPU / wait*: seconds on a CPU, and seconds runnable but waiting for one (other work on the machine).")
    md.append("")

    md.append("## Short runs per second")
    md.append("")
    md.append("`/words 1` runs over keep-alive connections in parallel (Awaken commits twice per run).")
    md.append("")
    body = [[row["subject"], row["channel"], row["concurrency"], row["runs_per_s"],
             ", ".join(_fmt(v) for v in row["per_round"]), _x(row.get("ratio", {}).get("runs_per_s")),
             _x(row.get("ratio_peer", {}).get("runs_per_s")), row["errors"]] for row in results["short_runs"]]
    md += _table(["server", "channel", "connections", "runs/s", "per round", "×floor", "×peer", "errors"], body)
    md.append("")

    md.append("## Memory")
    md.append("")
    md.append("VmRSS of a fresh server process: before, with N/2 and with N streams open and paced "
              "(`/words 50`, `/delay 200`), or after N runs that end waiting (agent `guarded`, "
              "`/call calculator`). KB per stream = (RSS with N − RSS before) / N; marginal = between N/2 and N.")
    md.append("")
    body = [[row["subject"], row["streams"], row["rss_base_kb"], row["rss_full_kb"], row["kb_per_stream"],
             row["kb_per_stream_marginal"], _x(row.get("ratio", {}).get("kb_per_stream")),
             _x(row.get("ratio_peer", {}).get("kb_per_stream")), row["errors"]]
            for row in results["memory"]["active"]]
    md += _table(["server", "active streams", "RSS before KB", "RSS with N KB", "KB/stream", "marginal KB/stream",
                  "×floor", "×peer", "errors"], body)
    md.append("")
    body = [[row["subject"], row["runs"], row["rss_base_kb"], row["rss_full_kb"], row["kb_per_run"],
             row["kb_per_run_marginal"], (row.get("control_completed") or {}).get("kb_per_run"), row["errors"]]
            for row in results["memory"]["waiting"]]
    if body:
        md += _table(["server", "waiting runs", "RSS before KB", "RSS after KB", "KB/run", "marginal KB/run",
                      "control: KB per completed run", "errors"], body)
        md.append("")
        md.append("Control: the same number of short runs that complete, each on a new thread, on another fresh "
                  "server. What both cost is per thread (ledger caches and indexes), not per waiting run.")
        md.append("")
    where = [(kind, row) for kind in ("active", "waiting") for row in results["memory"][kind] if row.get("where")]
    if where:
        md.append("Where the KB of one open stream (one waiting run) go, from the server's own accounting "
                  "(`bench.measure.breakdown`: the interpreter's small objects and the free space of the arenas "
                  "they took, glibc's heap in use and free, the rest of RSS; gc objects per item, and how many "
                  "of them were cyclic garbage a full collection then found). What each object is, by the line "
                  "that allocated it: `python -m bench.memtrace`.")
        md.append("")
        body = [[row["subject"], "per open stream" if kind == "active" else "per waiting run", w["rss"],
                 w["python_objects"], w["python_arena_free"], w["c_heap_in_use"], w["c_heap_free"], w["rest"],
                 w["gc_objects"], w["garbage_objects"],
                 ", ".join(f"{k.rsplit('.', 1)[-1]} {v}" for k, v in list(w.get("garbage_types", {}).items())[:4])]
                for kind, row in where for w in [row["where"]]]
        md += _table(["server", "item", "RSS KB", "Python objects KB", "their arenas' free KB", "C heap in use KB",
                      "C heap free KB", "rest KB", "gc objects", "cyclic garbage", "garbage by type"], body)
        md.append("")

    body = [[row["subject"], row["runs"], row["still_active"], row["rss_base_kb"], row["rss_full_kb"],
             row["kb_per_run"], row["kb_per_run_marginal"], row["errors"]]
            for row in results["memory"].get("detached", [])]
    if body:
        md.append("Detached runs: N runs on an `on_disconnect = \"continue\"` agent, paced (`/words 100`, "
                  "`/delay 200`), each connection closed after its first text delta; RSS while they stream on "
                  "with nobody watching (each holding its replay buffer). \"still active\": runs the rejoin route "
                  "still streams after the last sample.")
        md.append("")
        md += _table(["server", "detached runs", "still active", "RSS before KB", "RSS with N KB", "KB/run",
                      "marginal KB/run", "errors"], body)
        md.append("")

    if results.get("bursts"):
        md += bursts_mod.markdown(results["bursts"], quick=meta["mode"] == "quick")

    md.append("## Ledger commits")
    md.append("")
    md.append("In-process `Ledger` API: per run one `start_run` (with the user message) and one `commit` "
              "(the assistant step, completed). Floor: the same number of bare transactions through the same "
              "worker-thread hop (SQLite WAL `synchronous=FULL`, the ledger's default, one INSERT; files: append + "
              "fsync).")
    md.append("")
    body = [[row["backend"], row["concurrency"], row["commits"], row["commits_per_s"],
             f"{_fmt(row['commit_ms']['p50'])} / {_fmt(row['commit_ms']['p99'])}", row["floor_commits_per_s"],
             _x(row["ratio"]["commits_per_s"])] for row in results["ledger"]]
    md += _table(["backend", "concurrent tasks", "commits", "commits/s", "commit ms p50 / p99", "floor commits/s",
                  "×floor"], body)
    md.append("")

    md += _branched_md(results)
    md += _profile_md(results)
    md += _scaleout_md(results)
    if results.get("relay"):
        md += relay_mod.markdown(results["relay"], quick=meta["mode"] == "quick")
    if results["skipped"]:
        md.append("## Skipped")
        md.append("")
        md += [f"- {s['subject']} {s['channel']}: {s['reason']}" for s in results["skipped"]]
        md.append("")
    if meta["notes"]:
        md.append("## Notes")
        md.append("")
        md += [f"- {n}" for n in meta["notes"]]
        md.append("")
    if plots:
        md.append("## Plots")
        md.append("")
        md += [f"![{Path(p).stem}]({Path(p).name})" for p in plots]
        md.append("")
    return "\n".join(md)


def _branched_md(results: dict[str, Any]) -> list[str]:
    cases = results.get("branched") or []
    if not cases:
        return []
    md = ["## A thread that branched", "",
          "bench/threads.py's `branched_case`: the active path holds 5,000 messages (500 in a quick run) and the "
          "thread gained 20 branches on the way (regenerated answers and edited messages, alternating); a `/words 3` AG-UI turn "
          "on it (only the new message, or the whole active path replayed) against a turn on a new thread, "
          "interleaved on the same server, beside a thread of 5,000 messages that never branched; and the first turn "
          "after a page reload (`reload`: the client's array read back from the AG-UI history route, then sent whole "
          "with the new message). Targets: ≤ 1.5×, and ≤ 3× after a reload.", ""]
    body = []
    for case in cases:
        for key, row in case["rows"].items():
            body.append([case["backend"], key, f"{row['body_bytes'] / 1024:.0f} KB", _fmt(row["p50_ms"]),
                         _x(row["ratio"]), row["n"], _x(row.get("cpu_ratio"))])
    md += _table(["backend", "case", "body", "first delta p50 ms", "÷ new thread", "n", "server CPU ÷ new"], body)
    md.append("")
    return md


def _comparison_md(results: dict[str, Any]) -> list[str]:
    comp = results.get("comparison") or {}
    if not comp.get("rows"):
        return []
    subjects = comp["subjects"]
    others = [s for s in subjects if s != "floor"]
    md = ["## Awaken, the floor and the peer", "",
          "The issue's headline figures from this run (AG-UI over SSE). Lower is better everywhere. Each server's "
          "ratio to the floor, and Awaken's ratio to the peer; `–` where a server was not measured.", ""]
    header = ["measure"] + subjects + [f"{s} ×floor" for s in others] + [f"{s} ×peer" for s in others if s != PEER]
    body = []
    for row in comp["rows"]:
        body.append([row["measure"]] + [_fmt(row["values"].get(s)) for s in subjects]
                    + [_x(row["vs_floor"].get(s)) for s in others]
                    + [_x(row["vs_peer"].get(s)) for s in others if s != PEER])
    return md + _table(header, body) + [""]


def _scaleout_md(results: dict[str, Any]) -> list[str]:
    md: list[str] = []
    rows = results.get("scaleout") or []
    if rows:
        md += ["## Scale-out: one Postgres-backed process against two (`[server] workers = 2`)", "",
               f"The sweep's paced streams (`/words {rows[0]['words']}` paced `/delay {rows[0]['delay_ms']:g}`, ideal "
               f"{rows[0]['ideal_s']} s) on AG-UI/SSE, against a server of 1 process and one of 2 processes on the "
               "same Postgres cluster, interleaved round by round. These servers are not pinned: they may use both "
               "CPUs (the load generator stays pinned to CPU 1, so the second process shares a CPU with it). "
               "Aggregate events/s = data frames of every stream ÷ wall time; ratios are 2 processes ÷ 1 in the same "
               "run. Server CPU sums the supervisor and its workers.", ""]
        body = [[r["subject"], r["concurrency"], r["wall_s"], ", ".join(_fmt(v) for v in r["per_round"]),
                 r["events_per_s"], _pct(r["lateness_ms"]), _pct(r["first_delta_ms"]),
                 _x(r.get("ratio", {}).get("events_per_s")), _x(r.get("ratio", {}).get("wall_s")),
                 _x(r.get("ratio", {}).get("lateness_p99")), r["server_cpu_s"], r["server_wait_s"], r["client_cpu_s"],
                 r["errors"]] for r in rows]
        md += _table(["server", "C", "wall s", "per round", "events/s", "lateness p50/p90/p99 ms",
                      "first delta p50/p90/p99 ms", "events/s ×1 proc", "wall ×1 proc", "lateness p99 ×1 proc",
                      "server CPU s", "server CPU wait s", "client CPU s", "errors"], body)
        md.append("")
        samples = sorted({e for r in rows for e in r["error_samples"]})
        if samples:
            md += ["Error samples: " + "; ".join(samples[:5]), ""]
    pg = results.get("postgres_vs_sqlite") or []
    if pg:
        md += ["## Postgres against SQLite (same run)", "",
               "Each measure of `awaken[postgres]` ÷ the same measure of `awaken[sqlite]`, both measured interleaved "
               "with the floor in this run (one server process each, pinned to CPU 0; Postgres runs on the same "
               "machine, unpinned, with fsync on).", ""]
        md += _table(["measure", "channel", "postgres", "sqlite", "postgres ÷ sqlite", "better"],
                     [[r["measure"], r["channel"], r["postgres"], r["sqlite"], _x(r["ratio"]), r["better"]]
                      for r in pg])
        md.append("")
    return md


def _profile_md(results: dict[str, Any]) -> list[str]:
    prof = results.get("profile") or {}
    md = ["## Where the time goes (profile)", ""]
    if "skipped" in prof:
        return md + [f"Profile {prof['skipped']}.", ""]
    if "error" in prof:
        return md + [f"The profile failed: {prof['error']}", ""]
    thr = [r for r in results["throughput"] if "ratio" in r]
    if thr:
        md.append("Server CPU per event in the one-stream test (all threads, from /proc): "
                  + "; ".join(f"{r['subject']} {r['channel']} {_fmt(r['cpu_us_per_event'])} µs "
                              f"({_x(r['ratio']['cpu_us_per_event'])} the floor)" for r in thr) + ".")
        md.append("")
    md.append(f"{prof.get('note', '')}.")
    md.append("")
    for key, title in (("first_delta", "First-delta path"), ("one_stream", "Per-delta path, unpaced (one-stream test)"),
                       ("paced", "Per-delta path, paced fan-out (one send per delta)")):
        window = prof.get(key)
        if not window:
            continue
        md.append(f"### {title}")
        md.append("")
        md.append(f"Workload: {window['workload']}. Busy time on the event-loop thread {window['busy_s']} s "
                  f"(idle in epoll {window['idle_s']} s, excluded). Stats: `profile/{Path(window['stats_file']).name}` "
                  "(`python -m pstats`).")
        md.append("")
        md.append("Self time by package:")
        md.append("")
        md += _table(["package", "self s", "share"], [[g["package"], f"{g['tottime_s']:.4f}", f"{g['share'] * 100:.1f}%"]
                                                      for g in window["by_package"][:10]])
        md.append("")
        md.append("Self time by file (top 12):")
        md.append("")
        md += _table(["file", "self s", "share"], [[f"`{f['file']}`", f"{f['tottime_s']:.4f}", f"{f['share'] * 100:.1f}%"]
                                                  for f in window["by_file"][:12]])
        md.append("")
        for sub, label, count in (("top_cumtime_awaken", "Awaken functions by cumulative time", 15),
                                  ("top_tottime", "Top functions by self time", 15),
                                  ("top_cumtime", "Top functions by cumulative time", 15)):
            md.append(f"{label}:")
            md.append("")
            md += _table(["function", "calls", "self s", "cumulative s", "self share"],
                         [[f"`{r['function']}`", r["calls"], f"{r['tottime_s']:.4f}", f"{r['cumtime_s']:.4f}",
                           f"{r['tottime_share'] * 100:.1f}%"] for r in window[sub][:count]])
            md.append("")
    return md


def plot(results: dict[str, Any], bench: Collected, out: Path) -> list[str]:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.ticker import NullFormatter, ScalarFormatter
    except ImportError:
        return []

    def log_x(ax: Any) -> None:
        ax.set_xscale("log")
        ax.xaxis.set_major_formatter(ScalarFormatter())
        ax.xaxis.set_minor_formatter(NullFormatter())

    written: list[str] = []
    # 1. first-delta latency distributions (empirical CDFs), per channel and connection mode
    channels = sorted({k[2] for k in bench.raw if k[0] == "latency"})
    if channels:
        fig, axes = plt.subplots(2, len(channels), figsize=(5 * len(channels), 7), squeeze=False)
        for col, channel in enumerate(channels):
            for row, mode in enumerate(("keepalive", "fresh")):
                ax = axes[row][col]
                for key, res in sorted(bench.raw.items()):
                    if key[0] != "latency" or key[2] != channel or key[3] != mode:
                        continue
                    vals = sorted(r.first_delta_ms for r in res if r.ok)
                    if vals:
                        ax.plot(vals, [(i + 1) / len(vals) for i in range(len(vals))], label=key[1])
                log_x(ax)
                ax.set_title(f"{channel} {mode}: first text delta")
                ax.set_xlabel("ms (log)")
                ax.set_ylabel("fraction of runs")
                ax.grid(True, alpha=0.3)
                ax.legend(fontsize=8)
        fig.tight_layout()
        path = out / "latency_first_delta.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    # 2. the concurrency sweep
    rows = results["sweep"]
    if rows:
        fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
        series: dict[tuple[str, str], list[dict[str, Any]]] = {}
        for row in rows:
            series.setdefault((row["subject"], row["channel"]), []).append(row)
        for (subject, channel), pts in sorted(series.items()):
            pts.sort(key=lambda r: r["concurrency"])
            xs = [p["concurrency"] for p in pts]
            style = "--" if subject == "floor" else "-"
            label = f"{subject} {channel}"
            axes[0].plot(xs, [p["wall_s"] for p in pts], style, marker="o", label=label)
            axes[1].plot(xs, [p["lateness_ms"]["p99"] for p in pts], style, marker="o", label=label)
            if subject != "floor":
                axes[2].plot(xs, [p.get("ratio", {}).get("wall_s") for p in pts], marker="o", label=label)
        ideal = rows[0]["ideal_s"]
        axes[0].axhline(ideal, color="grey", lw=0.8, ls=":", label=f"ideal {ideal:g} s")
        axes[2].axhline(1.3, color="red", lw=0.8, ls=":", label="target 1.3x")
        levels = sorted({row["concurrency"] for row in rows})
        for ax, title, ylabel in ((axes[0], "wall time", "s"), (axes[1], "inter-delta lateness p99", "ms"),
                                  (axes[2], "wall time ÷ floor", "ratio")):
            log_x(ax)
            ax.set_xticks(levels, [str(v) for v in levels])
            ax.set_xlabel("concurrent streams")
            ax.set_ylabel(ylabel)
            ax.set_title(title)
            ax.grid(True, alpha=0.3)
            ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "sweep.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    # 3. one-stream throughput
    thr = [r for r in results["throughput"] if r["events_per_s"]]
    if thr:
        fig, ax = plt.subplots(figsize=(max(6, len(thr) * 0.9), 4.5))
        labels = [f"{r['subject']}\n{r['channel']}" for r in thr]
        ax.bar(range(len(thr)), [r["events_per_s"] for r in thr],
               color=["grey" if r["subject"] == "floor" else "tab:blue" for r in thr])
        ax.set_xticks(range(len(thr)), labels, fontsize=7)
        ax.set_ylabel("events/s")
        ax.set_title("one-stream events/s")
        ax.grid(True, axis="y", alpha=0.3)
        fig.tight_layout()
        path = out / "throughput.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    # 4. the headline figures as ratios to the floor (Awaken and the peer side by side)
    comp = results.get("comparison") or {}
    rows = [r for r in comp.get("rows", []) if any(v for v in r["vs_floor"].values())]
    if rows:
        others = [s for s in comp["subjects"] if s != "floor"]
        fig, ax = plt.subplots(figsize=(12, max(4.0, 0.45 * len(rows) * max(1, len(others)) / 2 + 1.5)))
        height = 0.8 / max(1, len(others))
        for i, subject in enumerate(others):
            ys = [j + i * height for j in range(len(rows))]
            ax.barh(ys, [r["vs_floor"].get(subject) or 0 for r in rows], height, label=subject)
        ax.axvline(1.0, color="grey", lw=0.8, ls=":")
        ax.set_xscale("log")
        ax.set_yticks([j + 0.4 - height / 2 for j in range(len(rows))], [r["measure"] for r in rows], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("÷ floor (log; lower is better)")
        ax.set_title("Awaken and the peer, as ratios to the floor (same run)")
        ax.grid(True, axis="x", alpha=0.3)
        ax.legend(fontsize=7)
        fig.tight_layout()
        path = out / "comparison.png"
        fig.savefig(path, dpi=110)
        plt.close(fig)
        written.append(str(path))
    if results.get("bursts"):
        png = bursts_mod.plot(results["bursts"], out)
        if png:
            written.append(png)
    return written


def write(results: dict[str, Any], bench: Collected, *, plots: bool = True) -> list[Path]:
    out = bench.out
    out.mkdir(parents=True, exist_ok=True)
    plot_files = plot(results, bench, out) if plots else []
    if plots and not plot_files:
        results["meta"]["notes"].append("plots skipped: matplotlib is not installed (pip install -e '.[bench]')")
    results["plots"] = [Path(p).name for p in plot_files]
    ordered = {k: results.get(k) for k in SECTIONS} | {k: v for k, v in results.items() if k not in SECTIONS}
    json_path = out / "results.json"
    json_path.write_bytes(orjson.dumps(ordered, option=orjson.OPT_INDENT_2 | orjson.OPT_NON_STR_KEYS))
    md_path = out / "report.md"
    md_path.write_text(markdown(results, plot_files) + "\n")
    return [json_path, md_path] + [Path(p) for p in plot_files]


def console_summary(results: dict[str, Any]) -> str:
    lines = ["", "targets:"]
    for t in results["targets"]:
        mark = "ok    " if t["met"] else ("MISSED" if t["met"] is False else "n/a   ")
        value = _x(t["value"]) if t["kind"] in ("time", "scale") else f"{_fmt(t['value'])} KB"
        lines.append(f"  {mark} {t['subject']:<16} {t['channel']:<20} {value:>10}  {t['target']}")
    if not results["targets"]:
        lines.append("  (no Awaken server measured)")
    return "\n".join(lines)
