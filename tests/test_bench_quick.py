"""CI smoke test for the benchmark: ``python -m bench --quick`` runs end to end and reports every section.

It starts real server subprocesses (the floor and Awaken per storage backend), so it is slow for a
unit test (about a minute) but it is the only check that ``bench/`` still works against the server.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from .helpers import ROOT

SECTIONS = ("meta", "latency", "lateness", "throughput", "sweep", "short_runs", "memory", "ledger", "targets",
            "profile", "skipped", "contention")


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
    assert any(r["backend"] == "sqlite" and r["commits_per_s"] > 0 for r in report["ledger"])
    targets = {t["target"].split(" ")[0] for t in report["targets"]}
    assert {"time", "one-stream", "widest", "<="} <= targets
    assert all(t["met"] in (True, False, None) for t in report["targets"])
    assert {"one_stream", "first_delta", "paced"} <= set(report["profile"]), report["profile"]
    assert report["profile"]["one_stream"]["top_cumtime"], "the profile lists no functions"
