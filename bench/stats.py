"""Percentiles, summaries and a plain-stderr progress bar."""

from __future__ import annotations

import math
import statistics
import sys
import time
from collections.abc import Iterable, Sequence
from typing import Any


def percentile(sorted_values: Sequence[float], q: float) -> float:
    """Linear interpolation between closest ranks; ``q`` in [0, 100]."""
    if not sorted_values:
        return math.nan
    if len(sorted_values) == 1:
        return float(sorted_values[0])
    k = (len(sorted_values) - 1) * q / 100.0
    lo = math.floor(k)
    hi = min(lo + 1, len(sorted_values) - 1)
    return float(sorted_values[lo] + (sorted_values[hi] - sorted_values[lo]) * (k - lo))


def summary(values: Iterable[float], digits: int = 3) -> dict[str, Any]:
    """``{n, p50, p90, p99, mean, min, max}`` (NaNs dropped), rounded."""
    vals = sorted(v for v in values if not math.isnan(v))
    if not vals:
        return {"n": 0, "p50": None, "p90": None, "p99": None, "mean": None, "min": None, "max": None}
    return {
        "n": len(vals),
        "p50": round(percentile(vals, 50), digits),
        "p90": round(percentile(vals, 90), digits),
        "p99": round(percentile(vals, 99), digits),
        "mean": round(statistics.fmean(vals), digits),
        "min": round(vals[0], digits),
        "max": round(vals[-1], digits),
    }


def median(values: Iterable[float]) -> float | None:
    vals = [v for v in values if v is not None and not math.isnan(v)]
    return statistics.median(vals) if vals else None


def ratio(value: float | None, floor: float | None, digits: int = 2) -> float | None:
    if value is None or floor is None or floor == 0 or math.isnan(value) or math.isnan(floor):
        return None
    return round(value / floor, digits)


class Progress:
    """``[#####.....]  42%  2m03s  <label>`` on stderr; a line per step when stderr is not a terminal."""

    def __init__(self, total_weight: float, *, width: int = 30, stream: Any = None) -> None:
        self.total = max(total_weight, 1e-9)
        self.done = 0.0
        self.width = width
        self.stream = stream or sys.stderr
        self.tty = hasattr(self.stream, "isatty") and self.stream.isatty()
        self.t0 = time.monotonic()
        self._last_len = 0

    def show(self, label: str) -> None:
        frac = min(1.0, self.done / self.total)
        filled = int(frac * self.width)
        elapsed = time.monotonic() - self.t0
        minutes, seconds = divmod(int(elapsed), 60)
        line = f"[{'#' * filled}{'.' * (self.width - filled)}] {frac * 100:3.0f}%  {minutes}m{seconds:02d}s  {label}"
        if self.tty:
            pad = max(0, self._last_len - len(line))
            self.stream.write("\r" + line + " " * pad)
            self._last_len = len(line)
        else:
            self.stream.write(line + "\n")
        self.stream.flush()

    def advance(self, weight: float) -> None:
        self.done += weight

    def note(self, text: str) -> None:
        """A message on its own line (the bar is redrawn by the next ``show``)."""
        if self.tty:
            self.stream.write("\r" + " " * self._last_len + "\r")
            self._last_len = 0
        self.stream.write(text + "\n")
        self.stream.flush()

    def finish(self) -> None:
        self.done = self.total
        self.show("done")
        if self.tty:
            self.stream.write("\n")
            self.stream.flush()
