"""``python -m bench.untraced serve --config … --bind …``: Awaken with its telemetry cut out, the baseline
of ``bench.telemetry``.

The server's telemetry enters at four seams, and this launcher replaces each with nothing before the
server starts, which is what a build without telemetry would run:

* the request observer (``awaken.http.metrics.observe``: request and stream counters, the request log
  line) is not installed;
* a run gets no trace (``awaken.telemetry.tracing.run`` answers the span that records nothing, so every
  child span of the run is that span too, and no timeline is kept);
* a run gets the metrics that count nothing (``ServerMetrics.run`` answers ``NO_RUN_METRICS``);
* ledger writes are not timed and watchers not counted (``time_commits``, ``count_watchers``).

``GET /metrics`` still answers (with nothing counted); it is not on the measured path.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

from awaken.http import metrics as edge
from awaken.telemetry import metrics, tracing


def cut_telemetry() -> Callable[[], None]:
    """Replace the telemetry seams with no-ops (this process only); returns what puts them back."""

    def no_trace(*_args: Any, **_kwargs: Any) -> Any:
        return tracing.NO_SPAN

    def nothing(*_args: Any, **_kwargs: Any) -> None:
        return None

    cuts: list[tuple[Any, str, Any]] = [
        (tracing, "run", no_trace), (tracing, "identify", nothing), (tracing, "admitted", nothing),
        (tracing, "refused", nothing), (tracing, "ended", nothing),
        (metrics.ServerMetrics, "run", lambda self, run, subject: metrics.NO_RUN_METRICS),
        (metrics.ServerMetrics, "time_commits", nothing), (metrics.ServerMetrics, "count_watchers", nothing),
        (edge, "observe", lambda app, _metrics, _routes: app),
    ]
    saved = [(owner, name, owner.__dict__[name]) for owner, name, _ in cuts]
    for owner, name, replacement in cuts:
        setattr(owner, name, replacement)

    def restore() -> None:
        for owner, name, original in saved:
            setattr(owner, name, original)

    return restore


def run() -> int:
    cut_telemetry()
    from awaken.cli import main

    return main(sys.argv[1:])


if __name__ == "__main__":
    sys.exit(run())
