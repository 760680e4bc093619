"""CI smoke test for the benchmark: ``python -m bench --quick`` runs end to end and reports every section.

It starts real server subprocesses (the floor and Awaken per storage backend), so it is slow for a
unit test (about a minute) but it is the only check that ``bench/`` still works against the server.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys

import pytest

from tests.builders import ROOT

#: each target's figure in the report's sections: (section rows, the key its ``value`` comes from)
FIGURES = {
    "time to first text delta": ("latency", ("ratio", "first_delta_p50")),
    "one-stream events/s": ("throughput", ("ratio", "events_per_s")),
    "widest sweep": ("sweep", ("ratio", "wall_s")),
    "per active stream": ("memory.active", ("kb_per_stream",)),
    "per waiting run": ("memory.waiting", ("kb_per_run",)),
}

SECTIONS = ("meta", "latency", "lateness", "throughput", "sweep", "short_runs", "memory", "ledger", "targets",
            "profile", "skipped", "contention", "branched")


@pytest.mark.slow  # real server subprocesses, about a minute
def test_bench_quick_reports_every_section(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench", "--quick", "--profile", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=240, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((out / "results.json").read_text())
    for section in SECTIONS:
        assert section in report, f"results.json has no {section!r} section"
    assert (out / "report.md").read_text().startswith("# Awaken streaming benchmark")
    assert report["meta"]["mode"] == "quick"

    def rows(section: str, subject: str, channel: str) -> list[dict]:
        return [r for r in report[section] if r["subject"] == subject and r["channel"] == channel]

    # The default channel (AG-UI over SSE) is measured on the floor and on Awaken, without errors.
    for subject in ("floor", "awaken[sqlite]"):
        latency = rows("latency", subject, "agui/sse")
        assert {r["conn"] for r in latency} == {"keepalive", "fresh"}
        assert all(r["errors"] == 0 and r["first_delta_ms"]["n"] > 0 for r in latency), latency
        throughput = rows("throughput", subject, "agui/sse")
        assert throughput and throughput[0]["errors"] == 0 and throughput[0]["events_per_s"] > 0
        assert rows("sweep", subject, "agui/sse"), "no sweep rows"
    awaken_latency = rows("latency", "awaken[sqlite]", "agui/sse")
    assert all(r["ratio"]["first_delta_p50"] is not None for r in awaken_latency)
    assert {r["subject"] for r in report["memory"]["active"]} >= {"floor", "awaken[sqlite]"}
    assert any(r["subject"] == "awaken[sqlite]" and r["errors"] == 0 for r in report["memory"]["waiting"])
    # Memory per detached run: every run went on after its connection closed, and was still going when sampled.
    [detached] = [r for r in report["memory"]["detached"] if r["subject"] == "awaken[sqlite]"]
    assert detached["errors"] == 0 and detached["still_active"] == detached["runs"] > 0, detached
    assert isinstance(detached["kb_per_run"], int | float), detached
    assert "Detached runs" in (out / "report.md").read_text()
    assert any(r["backend"] == "sqlite" and r["commits_per_s"] > 0 for r in report["ledger"])
    # the thread that branched (bench/threads.py): measured on SQLite, both bodies with their target
    [branched] = [c for c in report["branched"] if c["backend"] == "sqlite"]
    assert (branched["active_path"], branched["branches"]) == (500, 21)  # a quick run's: 5,000 in a full one
    assert {("awaken[sqlite]", f"agui/sse {mode}") for mode in ("new-only", "replay", "reload")} <= {
        (t["subject"], t["channel"]) for t in report["targets"] if "20 branches" in t["target"]}
    assert "## A thread that branched" in (out / "report.md").read_text()
    targets = {t["target"].split(" ")[0] for t in report["targets"]}
    assert {"time", "one-stream", "widest", "<="} <= targets
    check_targets(report)
    assert {"one_stream", "first_delta", "paced"} <= set(report["profile"]), report["profile"]
    assert report["profile"]["one_stream"]["top_cumtime"], "the profile lists no functions"
    # Bursts: every server's streams complete; the peer is measured, or said to be skipped (no bench extra).
    bursts = report["bursts"]["rows"]
    assert {r["subject"] for r in bursts} >= {"floor", "awaken[sqlite]", "awaken[sqlite] tokens+cors"}, bursts
    assert all(r["completed"] == r["streams"] > 0 for r in bursts if r["subject"] != "peer"), bursts
    subjects = {s["name"] for s in report["meta"]["subjects"]}
    assert "peer" in subjects or any("peer skipped" in n for n in report["meta"]["notes"]), report["meta"]["notes"]
    assert "noisy" in (out / "report.md").read_text()


def check_targets(report: dict) -> None:
    """Every target of an Awaken measurement has a number and a verdict, and both agree with the report:
    the value is the figure in its section (a ratio: Awaken's measure over the floor's, as measured), the
    verdict is that value against the limit with no errors, and no measured Awaken row lacks its target."""
    floor = {(r["channel"], r.get("conn"), r.get("concurrency")): r for r in report["latency"] + report["throughput"]
             + report["sweep"] if r["subject"] == "floor"}
    seen = set()
    for target in report["targets"]:
        if "20 branches" in target["target"]:  # the thread that branched: a ratio to a new thread, not the floor
            backend = target["subject"].removeprefix("awaken[").removesuffix("]")
            [case] = [c for c in report["branched"] if c["backend"] == backend]
            mode = target["channel"].split(" ")[1]
            row = case["rows"][f"branched/{mode}"]
            limit = 3.0 if mode == "reload" else 1.5  # the first turn after a page reload: <= 3x
            assert target["value"] == round(row["ratio"], 3) and target["met"] == (target["value"] <= limit), target
            continue
        name = next(key for key in FIGURES if key in target["target"])
        section, key = FIGURES[name]
        rows = report
        for part in section.split("."):
            rows = rows[part]
        channel, _, conn = target["channel"].partition(" ")
        [row] = [r for r in rows if r["subject"] == target["subject"] and r["channel"] == channel
                 and r.get("conn", "") == conn and ("concurrency" not in r or f"(C={r['concurrency']})" in target["target"])]
        value, met = target["value"], target["met"]
        assert isinstance(value, int | float) and value == value and value >= 0, target
        assert isinstance(met, bool), target
        figure = row
        for part in key:
            figure = figure[part]
        assert value == figure, (target, row)
        if key[0] == "ratio":  # the ratio is the two measures' quotient, as the report shows them
            measure = {"first_delta_p50": ("first_delta_ms", "p50"), "events_per_s": ("events_per_s",),
                       "wall_s": ("wall_s",)}[key[1]]
            ours, theirs = row, floor[(channel, row.get("conn"), row.get("concurrency"))]
            for part in measure:
                ours, theirs = ours[part], theirs[part]
            assert abs(value - ours / theirs) <= 0.006 + 0.001 * value, (target, ours, theirs)
        op, bound = target["limit"].split(" ")[:2]
        bound = float(bound.rstrip("x,"))
        within = value <= bound if op == "<=" else value >= bound
        assert met == (within and row["errors"] == 0), target
        seen.add((section, target["subject"], target["channel"]))
    awaken_latency = {("latency", r["subject"], f"{r['channel']} {r['conn']}") for r in report["latency"]
                      if r["subject"].startswith("awaken[")}
    widest = max(r["concurrency"] for r in report["sweep"])
    awaken_rest = {(section, r["subject"], r["channel"]) for section, rows in (
        ("throughput", report["throughput"]), ("sweep", [r for r in report["sweep"] if r["concurrency"] == widest]),
        ("memory.active", report["memory"]["active"]), ("memory.waiting", report["memory"]["waiting"]))
        for r in rows if r["subject"].startswith("awaken[")}
    assert awaken_latency | awaken_rest <= seen, (awaken_latency | awaken_rest) - seen


def test_bench_modules_import_one_another_without_a_cycle():
    """``bench/``'s modules form a layered graph: following relative imports never leads back."""
    graph = {}
    for path in (ROOT / "bench").glob("*.py"):
        deps = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and node.level == 1:
                deps |= {node.module} if node.module else {a.name for a in node.names}
        graph[path.stem] = deps
    assert {"cli", "report", "plan"} <= set(graph)

    def reaches(start: str, goal: str, seen: set[str]) -> bool:
        return any(dep == goal or (dep not in seen and reaches(dep, goal, seen | {dep})) for dep in graph.get(start, ()))

    assert [name for name in graph if reaches(name, name, set())] == []


def test_bench_postgres_server_config_names_the_dsn_workers_and_password_variable(tmp_path):
    """A bench server on Postgres reads the DSN from ``[ledger] path``, the password from the variable named by
    ``options.password_env`` (never from the file), and runs ``[server] workers`` processes."""
    import tomllib

    from awaken.config import load_config
    from bench.pgcluster import PASSWORD, PASSWORD_ENV
    from bench.servers import awaken_config

    dsn = "postgresql://awaken@127.0.0.1:5999/bench_1"
    for workers in (1, 2):
        text = awaken_config("postgres", tmp_path, dsn=dsn, workers=workers)
        assert PASSWORD not in text
        parsed = tomllib.loads(text)
        assert parsed["server"]["workers"] == workers
        assert parsed["ledger"] == {"backend": "postgres", "path": dsn,
                                    "options": {"password_env": PASSWORD_ENV, "pool_size": 8}}
        path = tmp_path / f"config-{workers}.toml"
        path.write_text(text)
        config = load_config(path)
        assert (config.server.workers, config.ledger.backend, config.ledger.path) == (workers, "postgres", dsn)
