"""Smoke test for ``python -m bench.durability``: it runs end to end on a real directory and reports
every configuration, in both shapes, with the ratios of the same run (the figures are too small to judge)."""

from __future__ import annotations

import json
import subprocess
import sys

from bench.durability import CONFIGS, RATIOS, SHAPES
from tests.builders import ROOT


def test_the_durability_bench_reports_every_configuration_and_ratio(tmp_path):
    out = tmp_path / "results"
    proc = subprocess.run(
        [sys.executable, "-m", "bench.durability", "--rounds", "2", "--runs", "3", "--data-dir", str(tmp_path),
         "--out", str(out)],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    result = json.loads((out / "durability.json").read_text())
    assert set(result["shapes"]) == set(SHAPES)
    for block in result["shapes"].values():
        assert set(block["configs"]) == set(CONFIGS)
        assert all(row["commits"] == 2 * 2 * 3 and row["commit_ms"]["n"] == 12 for row in block["configs"].values())
        assert [r["ratio"] for r in block["ratios"]] == [f"{a} ÷ {b}" for a, b, _ in RATIOS]
        assert all(r["commit_p50"] > 0 for r in block["ratios"])
    assert result["meta"]["fs_type"] not in ("", "unknown")
    assert result["checks_micro"]["checks_us_per_commit"] > 0
    report = (out / "durability.md").read_text()
    assert all(f"| {name} |" in report for name in CONFIGS)
