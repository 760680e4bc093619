"""``python -m bench.profiled OUT_DIR serve --config … --bind …``: ``awaken`` with a cProfile switch.

``SIGUSR1`` starts a profile, ``SIGUSR2`` stops it and writes ``OUT_DIR/profile-<n>.prof`` (n = 1, 2…),
so the bench profiles exactly the workload it drives (no start-up, no imports). Only the event-loop
thread is profiled: that is where the delta path runs (the ledger's worker thread is not in it).
"""

from __future__ import annotations

import cProfile
import os
import signal
import sys
from pathlib import Path
from typing import Any

from awaken.cli import main


def run() -> int:
    out, argv = Path(sys.argv[1]), sys.argv[2:]
    out.mkdir(parents=True, exist_ok=True)
    state: dict[str, Any] = {"profiler": None, "n": 0}

    def start(_signum: int, _frame: Any) -> None:
        if state["profiler"] is None:
            profiler = cProfile.Profile()
            state["profiler"] = profiler
            profiler.enable()

    def stop(_signum: int, _frame: Any) -> None:
        profiler = state["profiler"]
        if profiler is None:
            return
        profiler.disable()
        state["profiler"] = None
        state["n"] += 1
        path = out / f"profile-{state['n']}.prof"
        profiler.dump_stats(str(path) + ".tmp")
        os.replace(str(path) + ".tmp", path)

    signal.signal(signal.SIGUSR1, start)
    signal.signal(signal.SIGUSR2, stop)
    return main(argv)


if __name__ == "__main__":
    sys.exit(run())
