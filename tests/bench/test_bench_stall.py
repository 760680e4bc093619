"""Smoke test for ``python -m bench.stall --quick``: it runs end to end against a real server and its
report's numbers and verdicts agree with each other. No timing is asserted: whether p99 is under the
target is what the bench reports, not what this test checks.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from bench.stall import EXPECTED, KINDS, TARGET_P99_MS
from tests.builders import ROOT


@pytest.mark.slow  # a real server subprocess and a probe process
@pytest.mark.timeout(240)
def test_bench_stall_quick_reports_every_kind_with_verdicts_that_match_its_numbers(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.stall", "--quick", "--backends", "sqlite", "--no-profile", "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=220, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    report = json.loads((out / "stall.json").read_text())
    assert report["meta"]["mode"] == "quick"
    result = report["results"]["sqlite"]
    idle = result["idle"]
    assert idle["n"] > 0 and idle["p50_ms"] <= idle["p99_ms"] <= idle["max_ms"]
    assert sorted(result["kinds"]) == sorted(KINDS)
    markdown = (out / "stall.md").read_text()
    for name, kind in result["kinds"].items():
        assert kind["reps"] >= 1 and kind["n"] > 0, name
        assert kind["p50_ms"] <= kind["p99_ms"] <= kind["max_ms"], name
        assert kind["ratio_p99"] == pytest.approx(kind["p99_ms"] / idle["p99_ms"]), name
        assert kind["met"] is (kind["p99_ms"] < TARGET_P99_MS and kind["probe_errors"] == 0), name
        assert kind["unexpected"] == {}, (name, kind["outcomes"])
        if name in EXPECTED:
            assert set(kind["outcomes"]) <= EXPECTED[name], (name, kind["outcomes"])
        verdict = "met" if kind["met"] else "MISSED"
        assert f"- sqlite {name}: p99 {kind['p99_ms']:.2f} ms — {verdict}" in markdown
