"""What the bench CLI and the report both need: the channels, the plan of a run, the measured subjects
and ``Collected``, the view of a finished run's raw measurements that ``report`` reads (``cli.Bench`` is one).

``cli`` runs the plan and fills a ``Collected``; ``report`` turns it into results. Neither imports the other's
module for these, so ``report`` does not depend on ``cli``.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from .client import Endpoint
from .servers import ServerProcess

CHANNELS = ("agui/sse", "aisdk/sse", "agui/ws", "aisdk/ws")
PATHS = {"agui/sse": "/v1/ag-ui", "aisdk/sse": "/v1/ai-sdk/chat", "agui/ws": "/v1/ag-ui/ws",
         "aisdk/ws": "/v1/ai-sdk/ws"}


@dataclass(frozen=True)
class Plan:
    rounds: int
    latency_runs: int            # per subject, channel and connection mode (split over the rounds)
    lateness_words: int
    lateness_delay_ms: float
    throughput_words: int
    sweep_levels: tuple[int, ...]
    sweep_words: int
    sweep_delay_ms: float
    sweep_all_channels_backends: tuple[str, ...]  # other backends sweep only agui/sse
    sweep_rounds_primary: int    # rounds of the sweep on agui/sse
    sweep_rounds_other: int      # rounds of the sweep on the other channels
    memory_streams: int
    memory_waiting: int
    http_runs: int
    http_concurrency: int
    ledger_runs: int
    profile_words: int
    profile_rounds: int
    scale_levels: tuple[int, ...] = ()  # the scale-out sweep (Postgres, 1 process vs 2), paced like the sweep
    scale_rounds: int = 1
    burst_levels: tuple[int, ...] = ()  # bench/bursts.py: N clients connecting at once, each a paced run
    burst_rounds: int = 1
    burst_words: int = 100              # each burst stream: /words N paced /delay 10
    relay_samples: int = 0              # bench/relay.py: watcher samples per side (0: not run)
    relay_words: int = 2000             # each watched run: /words N unpaced
    relay_streams: int = 200            # paced streams over two processes behind HAProxy


FULL = Plan(rounds=3, latency_runs=210, lateness_words=40, lateness_delay_ms=10, throughput_words=20000,
            sweep_levels=(1, 50, 200, 500), sweep_words=100, sweep_delay_ms=10,
            sweep_all_channels_backends=("sqlite",), sweep_rounds_primary=2, sweep_rounds_other=1, memory_streams=200, memory_waiting=400, http_runs=400,
            http_concurrency=8, ledger_runs=1000, profile_words=20000, profile_rounds=3,
            scale_levels=(1000, 2000), scale_rounds=2, burst_levels=(200, 2000), burst_rounds=2,
            relay_samples=40)
QUICK = Plan(rounds=1, latency_runs=12, lateness_words=10, lateness_delay_ms=5, throughput_words=1000,
             sweep_levels=(1, 10), sweep_words=10, sweep_delay_ms=10, sweep_all_channels_backends=("sqlite",),
             sweep_rounds_primary=1, sweep_rounds_other=1,
             memory_streams=10, memory_waiting=10, http_runs=24, http_concurrency=4, ledger_runs=40,
             profile_words=2000, profile_rounds=1, scale_levels=(20,), scale_rounds=1, burst_levels=(50,), burst_rounds=1,
             burst_words=20, relay_samples=4, relay_words=300, relay_streams=20)


@dataclass
class Subject:
    name: str
    kind: str                      # floor | peer | awaken | target
    backend: str | None = None
    server: ServerProcess | None = None
    endpoints: dict[str, Endpoint] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


class Collected(Protocol):
    """A finished run as ``report`` reads it."""

    plan: Plan
    out: Path
    subjects: list[Subject]
    floor: Subject | None
    raw: dict[Any, Any]
