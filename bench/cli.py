"""``python -m bench``: start the servers, measure them interleaved with the floor, write the report.

    python -m bench                       # full run (several minutes), report under bench/results/
    python -m bench --quick               # CI smoke run (< 60 s, tiny counts)
    python -m bench --target agui=http://host:8000/agui --target aisdk=http://host:8000/api/chat

See bench/README.md for what is measured and how to read the report.
"""

from __future__ import annotations

import argparse
import math
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections import defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import trio

from . import bursts, managed, measure, memtrace, peer, pgcluster, relay, report, threads
from .client import Endpoint, probe
from .plan import CHANNELS, FULL, PATHS, QUICK, Subject
from .servers import (
    REPO,
    ServerProcess,
    awaken_server,
    file_backend_available,
    floor_server,
    peer_server,
    pin_self,
)
from .stats import Progress

#: how long a scale-out stream may take: one process serving 2,000 paced streams on two shared cores runs
#: far behind its pace, and a slow stream there is a measurement, not an error
SCALE_LIMIT_S = 300.0


@dataclass
class Step:
    label: str
    weight: float
    run: Callable[[], Awaitable[None]]


def parse_targets(values: list[str]) -> list[Subject]:
    subjects: dict[str, Subject] = {}
    for value in values:
        proto, sep, url = value.partition("=")
        proto = proto.strip().lower().replace("-", "")
        if not sep or proto not in ("agui", "aisdk"):
            raise SystemExit(f"bench: --target {value!r}: expected agui=URL or aisdk=URL")
        parts = urlsplit(url)
        if parts.scheme not in ("http", "https", "ws", "wss") or not parts.hostname:
            raise SystemExit(f"bench: --target {value!r}: the URL must be http(s):// (SSE) or ws(s):// (WebSocket)")
        transport = "ws" if parts.scheme in ("ws", "wss") else "sse"
        name = f"target {parts.netloc}"
        subject = subjects.setdefault(name, Subject(name, "target"))
        subject.endpoints[f"{proto}/{transport}"] = Endpoint(name, proto, transport, url)
    return list(subjects.values())


def local_endpoints(subject: str, base_url: str) -> dict[str, Endpoint]:
    ws_base = base_url.replace("http://", "ws://", 1)
    out = {}
    for channel in CHANNELS:
        proto, transport = channel.split("/")
        out[channel] = Endpoint(subject, proto, transport, (ws_base if transport == "ws" else base_url) + PATHS[channel])
    return out


class Bench:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.plan = QUICK if args.quick else FULL
        if args.rounds:
            import dataclasses

            self.plan = dataclasses.replace(self.plan, rounds=args.rounds)
        self.out = Path(args.out).resolve()
        self.tmp = Path(tempfile.mkdtemp(prefix="awaken-bench-", dir=args.data_dir))
        self.logs = self.out / "logs"
        self.subjects: list[Subject] = []
        self.floor: Subject | None = None
        self.notes: list[str] = []
        self.raw: dict[str, Any] = defaultdict(list)
        self.progress: Progress | None = None
        self.backends: list[str] = []
        self.pg: pgcluster.PgCluster | None = None
        self.scale: list[Subject] = []
        self.peer: Subject | None = None
        self._dbs = 0
        #: the memory rows' Awaken servers run as ``bench.memtrace``'s child: where their KB go
        self.stats: dict[str, measure.Stats] = {}

    # -- helpers -----------------------------------------------------------------------------------

    def note(self, text: str) -> None:
        self.notes.append(text)
        if self.progress:
            self.progress.note("bench: " + text)
        else:
            print("bench: " + text, file=sys.stderr, flush=True)

    def measured(self) -> list[Subject]:
        return [s for s in self.subjects if s.endpoints]

    def channels(self) -> list[str]:
        """Channels some non-floor subject serves, in CHANNELS order."""
        have = {c for s in self.subjects if s.kind != "floor" for c in s.endpoints}
        return [c for c in CHANNELS if c in have]

    def interleaved(self, channel: str, kinds: tuple[str, ...] = ("floor", "peer", "awaken", "target"),
                    subjects: list[Subject] | None = None) -> list[Subject]:
        """Floor first, then every other subject serving ``channel``."""
        pool = subjects if subjects is not None else self.subjects
        return [s for s in pool if s.kind in kinds and channel in s.endpoints]

    # -- set-up ------------------------------------------------------------------------------------

    async def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        self.logs.mkdir(parents=True, exist_ok=True)
        floor = Subject("floor", "floor", server=floor_server(self.logs))
        self.subjects.append(floor)
        self.floor = floor
        if self.args.no_peer:
            self.note("the peer skipped (--no-peer)")
        else:
            ok, why = peer.available()
            if ok:
                self.peer = Subject("peer", "peer", server=peer_server(self.logs))
                self.subjects.append(self.peer)
            else:
                self.note(f"the peer skipped: {why}")
        if not self.args.no_awaken:
            self.backends = ["sqlite"]
            ok, why = file_backend_available()
            if ok:
                self.backends.append("files")
            else:
                self.note(f"storage backend 'files' skipped: {why}")
            wanted = (["postgres"] if self.args.scaleout_only
                      else [b.strip() for b in (self.args.backends or "").split(",") if b.strip()])
            # Postgres (and its scale-out sweep) is in every full run; --quick measures it only when asked
            if "postgres" in wanted or (not wanted and not self.args.quick):
                ok, why = pgcluster.available()
                if ok:
                    self.backends.append("postgres")
                else:
                    self.note(f"storage backend 'postgres' skipped: {why}")
            if wanted:
                self.backends = [b for b in wanted if b in self.backends or b not in ("sqlite", "files", "postgres")]
            if "postgres" in self.backends:
                self.pg = pgcluster.PgCluster()
                await trio.to_thread.run_sync(self.pg.start)
            for backend in self.backends:
                name = f"awaken[{backend}]"
                self.subjects.append(Subject(name, "awaken", backend=backend,
                                             server=await self._awaken(name, backend, self.tmp / backend)))
            if "postgres" in self.backends and self.plan.scale_levels:
                for workers in (1, 2):
                    name = f"awaken[postgres] {workers} process{'es' if workers > 1 else ''}"
                    self.scale.append(Subject(name, "scale", backend="postgres", server=await self._awaken(
                        name, "postgres", self.tmp / f"scale-{workers}", workers=workers, pinned=False)))
        self.subjects.extend(parse_targets(self.args.target or []))
        for subject in self.subjects:
            if subject.server is not None:
                await subject.server.start()
                subject.endpoints = local_endpoints(subject.name, subject.server.base_url)
            if subject.kind == "peer":  # pydantic-ai's adapters answer HTTP requests only
                for channel in [c for c in subject.endpoints if c.endswith("/ws")]:
                    del subject.endpoints[channel]
                    subject.skipped[channel] = peer.NO_WEBSOCKET
        # Probe every channel (the floor serves all four: keep only those someone else serves).
        for subject in self.subjects:
            if subject.kind == "floor":
                continue
            for channel, endpoint in list(subject.endpoints.items()):
                ok, why, endpoint = await probe(endpoint)
                if ok:
                    subject.endpoints[channel] = endpoint
                else:
                    del subject.endpoints[channel]
                    subject.skipped[channel] = why.splitlines()[0][:160]
                    self.note(f"{subject.name} {channel} skipped: {subject.skipped[channel]}")
        wanted = set(self.channels())
        for channel in list(floor.endpoints):
            if channel not in wanted:
                del floor.endpoints[channel]
        for channel, endpoint in list(floor.endpoints.items()):
            ok, why, endpoint = await probe(endpoint)
            floor.endpoints[channel] = endpoint
            if not ok:
                raise RuntimeError(f"the floor does not answer {channel}: {why}")

    async def _awaken(self, name: str, backend: str, data_dir: Path, *, workers: int = 1, pinned: bool = True,
                      profile_dir: Path | None = None) -> ServerProcess:
        """An Awaken server on ``backend`` (for Postgres: on a new database of the bench's cluster)."""
        dsn = None
        if backend == "postgres":
            assert self.pg is not None
            self._dbs += 1
            dsn = await trio.to_thread.run_sync(self.pg.database, f"bench_{self._dbs}")
        return awaken_server(name, backend, data_dir, self.logs, dsn=dsn, workers=workers, pinned=pinned,
                             profile_dir=profile_dir, lease_seconds=self.args.pg_lease_seconds)

    async def stop_all(self) -> None:
        for subject in self.subjects + self.scale:
            if subject.server is not None:
                await subject.server.stop()

    # -- the plan ------------------------------------------------------------------------------------

    def steps(self) -> list[Step]:
        p = self.plan
        steps: list[Step] = []
        channels = self.channels()
        awaken = [s for s in self.subjects if s.kind == "awaken"]
        per_round = max(1, math.ceil(p.latency_runs / p.rounds))

        for rnd in range(p.rounds):
            for channel in channels:
                pool = self.interleaved(channel)
                for fresh in (False, True):
                    mode = "fresh" if fresh else "keepalive"
                    est = per_round * len(pool) * (0.012 if fresh else 0.005) + 0.2
                    steps.append(Step(f"latency {channel} {mode}, {len(pool)} servers run by run (round {rnd + 1})",
                                      est, self._latency(pool, channel, fresh)))
        for rnd in range(p.rounds):
            for channel in channels:
                for subject in self.ordered(channel, rnd):
                    steps.append(Step(f"lateness {subject.name} {channel} (round {rnd + 1})",
                                      p.lateness_words * p.lateness_delay_ms / 1000 + 0.3,
                                      self._lateness(subject, channel)))
        for rnd in range(p.rounds):
            for channel in channels:
                for subject in self.ordered(channel, rnd):
                    steps.append(Step(f"events/s {subject.name} {channel} (round {rnd + 1})",
                                      p.throughput_words / 15000 + 0.3, self._throughput(subject, channel)))
        for level in p.sweep_levels:
            for channel in channels:
                primary = channel == "agui/sse"
                pool = [s for s in self.interleaved(channel)
                        if s.kind != "awaken" or primary or s.backend in p.sweep_all_channels_backends]
                if len(pool) < 2:
                    continue
                for rnd in range(p.sweep_rounds_primary if primary else p.sweep_rounds_other):
                    for subject in (pool if rnd % 2 == 0 else pool[::-1]):
                        est = p.sweep_words * p.sweep_delay_ms / 1000 * max(1.0, level / 25) + 0.3
                        steps.append(Step(f"sweep C={level} {subject.name} {channel} (round {rnd + 1})", est,
                                          self._sweep(subject, channel, level)))
        for rnd in range(p.rounds):
            for subject in self.ordered("agui/sse", rnd, ("floor", "peer", "awaken")):
                steps.append(Step(f"short runs/s {subject.name} (round {rnd + 1})", p.http_runs * 0.004 + 0.3,
                                  self._http_runs(subject)))
        for subject in awaken:  # the Managed Agents wire against AG-UI on the same server, turns alternating
            steps.append(Step(f"Managed Agents vs AG-UI first events {subject.name}", p.latency_runs * 0.02 + 0.5,
                              self._managed(subject)))
        if self.args.scaleout_only:
            steps = []
        steps.append(Step("stopping servers", 1.0, self.stop_all))
        if self.scale:
            steps.append(Step("starting the scale-out servers (Postgres, 1 and 2 processes)", 2.0, self._scale_start))
            for level in p.scale_levels:
                for rnd in range(p.scale_rounds):
                    for subject in (self.scale if rnd % 2 == 0 else self.scale[::-1]):
                        est = p.sweep_words * p.sweep_delay_ms / 1000 * max(1.0, level / 50) + 1.0
                        steps.append(Step(f"scale-out C={level} {subject.name} (round {rnd + 1})", est,
                                          self._scaleout(subject, level)))
            steps.append(Step("stopping the scale-out servers", 1.0, self.stop_all))
        if self.pg is not None and p.relay_samples and not self.args.scaleout_only:
            steps.append(Step(f"run relay: watchers on another process; {p.relay_streams} paced streams over two "
                              "processes behind HAProxy", 4.0 + p.relay_samples * 0.5 + p.relay_streams * 0.01,
                              self._relay))
        if not self.args.no_awaken and not self.args.scaleout_only:
            for subject in [self.floor, *([self.peer] if self.peer and self.peer.endpoints else []), *awaken]:
                assert subject is not None
                steps.append(Step(f"memory per active stream {subject.name}", 4.0 + p.memory_streams * 0.01,
                                  self._memory_active(subject)))
            for subject in awaken:
                steps.append(Step(f"memory per waiting run {subject.name}", 2.0 + p.memory_waiting * 0.006,
                                  self._memory_waiting(subject)))
                steps.append(Step(f"memory per completed run (control) {subject.name}",
                                  2.0 + p.memory_waiting * 0.006, self._memory_completed(subject)))
                steps.append(Step(f"memory per detached run {subject.name}", 3.0 + p.memory_streams * 0.01,
                                  self._memory_detached(subject)))
            turns = threads.BRANCHED_TURNS["quick" if self.args.quick else "full"]
            for subject in awaken:
                steps.append(Step(f"a thread with {threads.BRANCHES} branches {subject.backend}", 25.0 + turns * 0.2,
                                  self._branched(subject.backend, turns)))
            for subject in awaken:
                for concurrency in (1, 16):
                    steps.append(Step(f"ledger commits/s {subject.backend} (concurrency {concurrency})",
                                      p.ledger_runs * 0.002 + 0.3, self._ledger(subject.backend, concurrency)))
        if p.burst_levels and not self.args.no_bursts and not self.args.no_awaken and not self.args.scaleout_only:
            steps.append(Step(f"bursts of {', '.join(map(str, p.burst_levels))} clients (floor, peer, Awaken)",
                              sum(7 * p.burst_rounds * (2 + n / 150) for n in p.burst_levels), self._bursts))
        return steps

    # -- step bodies -----------------------------------------------------------------------------------

    def ordered(self, channel: str, rnd: int, kinds: tuple[str, ...] = ("floor", "peer", "awaken", "target")
                ) -> list[Subject]:
        """``interleaved``, reversed on odd rounds (floor A B, B A floor, …) so drifts cancel."""
        pool = self.interleaved(channel, kinds)
        return pool if rnd % 2 == 0 else pool[::-1]

    def _latency(self, pool: list[Subject], channel: str, fresh: bool) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            per_round = max(1, math.ceil(self.plan.latency_runs / self.plan.rounds))
            results = await measure.latency_interleaved([s.endpoints[channel] for s in pool], per_round, fresh=fresh)
            mode = "fresh" if fresh else "keepalive"
            for subject, res in zip(pool, results, strict=True):
                self.raw[("latency", subject.name, channel, mode)].extend(res)
        return run

    def _lateness(self, subject: Subject, channel: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            p = self.plan
            self.raw[("lateness", subject.name, channel)].append(
                await measure.lateness_run(subject.endpoints[channel], p.lateness_words, p.lateness_delay_ms))
        return run

    def _throughput(self, subject: Subject, channel: str) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            self.raw[("throughput", subject.name, channel)].append(
                await measure.throughput_run(subject.endpoints[channel], self.plan.throughput_words, subject.server))
        return run

    def _sweep(self, subject: Subject, channel: str, level: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            p = self.plan
            self.raw[("sweep", subject.name, channel, level)].append(
                await measure.sweep_level(subject.endpoints[channel], level, p.sweep_words, p.sweep_delay_ms,
                                          subject.server))
        return run

    async def _scale_start(self) -> None:
        for subject in self.scale:
            assert subject.server is not None
            await subject.server.start()
            subject.endpoints = local_endpoints(subject.name, subject.server.base_url)
            ok, why, endpoint = await probe(subject.endpoints["agui/sse"])
            if not ok:
                raise RuntimeError(f"{subject.name} does not answer agui/sse: {why}")
            subject.endpoints = {"agui/sse": endpoint}

    def _scaleout(self, subject: Subject, level: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            p = self.plan
            self.raw[("scaleout", subject.name, level)].append(
                await measure.sweep_level(subject.endpoints["agui/sse"], level, p.sweep_words, p.sweep_delay_ms,
                                          subject.server, limit_s=SCALE_LIMIT_S))
        return run

    async def _relay(self) -> None:
        assert self.pg is not None
        p = self.plan
        try:
            self.relay = await relay.run_relay(self.pg, self.tmp, self.logs, samples=p.relay_samples,
                                               words=p.relay_words, streams=p.relay_streams)
        except Exception as exc:  # noqa: BLE001 - HAProxy missing or a server refusing must not lose the run
            self.note(f"the run relay case failed: {type(exc).__name__}: {exc}")

    def _managed(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            base = subject.endpoints["agui/sse"].url.rsplit("/v1/", 1)[0]
            result = await managed.first_events(base, max(6, self.plan.latency_runs // 4))
            self.raw[("managed", subject.name)].append(result)
            self.note(f"{subject.name}: {managed.describe(result)}")
        return run

    def _http_runs(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            self.raw[("http_runs", subject.name)].append(
                await measure.http_runs(subject.endpoints["agui/sse"], self.plan.http_runs, self.plan.http_concurrency))
        return run

    async def _fresh_server(self, subject: Subject, tag: str, *, traced: bool = False) -> tuple[ServerProcess, Endpoint]:
        if subject.kind == "floor":
            server = floor_server(self.logs)
        elif subject.kind == "peer":
            server = peer_server(self.logs)
        else:
            assert subject.backend is not None
            server = await self._awaken(f"{subject.name}-{tag}", subject.backend, self.tmp / f"{subject.backend}-{tag}")
            if traced:  # its process stats (no tracemalloc): where the memory goes, ``measure.breakdown``
                self.stats[server.name] = memtrace.stats_child(server, self.tmp / f"{subject.backend}-{tag}.stats")
        await server.start()
        return server, local_endpoints(subject.name, server.base_url)["agui/sse"]

    async def _bursts(self) -> None:
        def progress(label: str) -> None:
            if self.progress:
                self.progress.show(label)

        p = self.plan
        self.bursts = await bursts.run_bursts(p.burst_levels, p.burst_rounds, self.tmp, self.logs, notes=self.notes,
                                              progress=progress, with_peer=not self.args.no_peer,
                                              words=p.burst_words)

    def _memory_active(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            server, endpoint = await self._fresh_server(subject, "memory", traced=True)
            try:
                self.raw[("memory_active", subject.name)].append(
                    await measure.memory_active(endpoint, server, self.plan.memory_streams,
                                                stats=self.stats.get(server.name)))
            finally:
                await server.stop()
        return run

    def _memory_waiting(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            server, endpoint = await self._fresh_server(subject, "waiting", traced=True)
            try:
                self.raw[("memory_waiting", subject.name)].append(
                    await measure.memory_waiting(measure.guarded_endpoint(endpoint), server, self.plan.memory_waiting,
                                                 stats=self.stats.get(server.name)))
            finally:
                await server.stop()
        return run

    def _memory_completed(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            server, endpoint = await self._fresh_server(subject, "completed")
            try:
                self.raw[("memory_completed", subject.name)].append(
                    await measure.memory_completed(endpoint, server, self.plan.memory_waiting))
            finally:
                await server.stop()
        return run

    def _memory_detached(self, subject: Subject) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            server, endpoint = await self._fresh_server(subject, "detached")
            try:
                self.raw[("memory_detached", subject.name)].append(
                    await measure.memory_detached(endpoint, server, self.plan.memory_streams))
            finally:
                await server.stop()
        return run

    def _ledger(self, backend: str | None, concurrency: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            assert backend is not None
            runs = self.plan.ledger_runs
            tag = f"ledger-{backend}-{concurrency}"
            dsn = None
            if backend == "postgres":
                assert self.pg is not None
                self._dbs += 1
                dsn = await trio.to_thread.run_sync(self.pg.database, f"bench_{self._dbs}")
            result = await measure.ledger_commits(backend, self.tmp / tag, runs, concurrency, dsn=dsn)
            floor = await measure.raw_commits(backend, self.tmp / (tag + "-raw"), runs, concurrency, dsn=dsn)
            self.raw[("ledger", backend, concurrency)].append({"ledger": result, "floor": floor})
        return run

    def _branched(self, backend: str | None, turns: int) -> Callable[[], Awaitable[None]]:
        async def run() -> None:
            assert backend is not None
            dsn = None
            if backend == "postgres":
                assert self.pg is not None
                self._dbs += 1
                dsn = await trio.to_thread.run_sync(self.pg.database, f"bench_{self._dbs}")
            self.raw[("branched", backend)].append(
                await threads.branched_case(backend, self.tmp / f"branched-{backend}", self.logs, turns, dsn,
                                            linear=not self.args.quick, messages=threads.BRANCHED_QUICK
                                            if self.args.quick else threads.BRANCHED_MESSAGES))
        return run

    # -- profile -----------------------------------------------------------------------------------------

    async def profile(self) -> dict[str, Any]:
        """Profile a fresh Awaken (SQLite, AG-UI over SSE) under two workloads, each in its own window:
        the one-stream test (the per-delta path) and short keep-alive runs (the first-delta path)."""
        p = self.plan
        prof_dir = self.out / "profile"
        shutil.rmtree(prof_dir, ignore_errors=True)
        server = awaken_server("awaken-profiled", "sqlite", self.tmp / "profile", self.logs, profile_dir=prof_dir)
        await server.start()
        endpoint = local_endpoints("awaken[sqlite] (profiled)", server.base_url)["agui/sse"]
        short_runs = 30 if self.args.quick else 300
        paced_streams = 10 if self.args.quick else 200
        out: dict[str, Any] = {}
        try:
            await measure.throughput_run(endpoint, 2000, server)  # warm-up, unprofiled
            await measure.latency_series(endpoint, 20, fresh=False)

            async def window(n: int, work: Callable[[], Awaitable[Any]]) -> Path:
                server.signal(signal.SIGUSR1)
                await trio.sleep(0.2)
                await work()
                server.signal(signal.SIGUSR2)
                path = prof_dir / f"profile-{n}.prof"
                with trio.fail_after(30):
                    while not path.exists():
                        await trio.sleep(0.05)
                return path

            async def one_stream() -> None:
                for _ in range(p.profile_rounds):
                    await measure.throughput_run(endpoint, p.profile_words, server)

            async def first_delta() -> None:
                await measure.latency_series(endpoint, short_runs, fresh=False, warmup=0)

            async def paced() -> None:
                await measure.sweep_level(endpoint, paced_streams, p.sweep_words, p.sweep_delay_ms, server)

            out["one_stream"] = report.profile_summary(await window(1, one_stream))
            out["one_stream"]["workload"] = (f"{p.profile_rounds} x '/words {p.profile_words}' one-stream runs, "
                                             "AG-UI over SSE, SQLite ledger")
            out["first_delta"] = report.profile_summary(await window(2, first_delta))
            out["first_delta"]["workload"] = (f"{short_runs} short runs ('/words 3') one after another on a "
                                              "keep-alive connection, AG-UI over SSE, SQLite ledger")
            out["paced"] = report.profile_summary(await window(3, paced))
            out["paced"]["workload"] = (f"{paced_streams} concurrent streams of '/words {p.sweep_words}' paced "
                                        f"'/delay {p.sweep_delay_ms:g}' (the sweep's load: one send per delta), "
                                        "AG-UI over SSE, SQLite ledger")
        finally:
            await server.stop(limit_s=30)
        out["note"] = ("cProfile on the server's event-loop thread only (the ledger's worker thread is not in it); "
                       "the profiler inflates the cost of Python calls, so read shares, not absolute times")
        return out

    # -- run ---------------------------------------------------------------------------------------------

    async def run(self) -> dict[str, Any]:
        t0 = time.time()
        self.load_start = _loadavg()
        steps: list[Step] = []
        try:
            await self.start()
            steps = self.steps()
            self.progress = Progress(sum(s.weight for s in steps) + (8 if not self.args.no_profile else 0))
            for step in steps:
                self.progress.show(step.label)
                await step.run()
                self.progress.advance(step.weight)
        finally:
            with trio.CancelScope(shield=True):
                await self.stop_all()
                if self.pg is not None:
                    await trio.to_thread.run_sync(self.pg.stop)
        results = report.summarise(self)
        if self.bursts is not None:
            results["bursts"] = self.bursts
        if self.relay is not None:
            results["relay"] = self.relay
        results["comparison"] = report.comparison(results)
        missed = [t for t in results["targets"] if t["met"] is False and t["kind"] == "time"]
        profile_reason = None
        if self.args.no_profile:
            profile_reason = "skipped (--no-profile)"
        elif self.args.no_awaken:
            profile_reason = "skipped (no Awaken server in this run)"
        elif self.args.profile or missed:
            if self.progress:
                self.progress.show("profiling the delta path (cProfile)")
            try:
                results["profile"] = await self.profile()
            except Exception as exc:  # noqa: BLE001 - a failed profile must not lose the measurements
                results["profile"] = {"error": f"{type(exc).__name__}: {exc}"}
        else:
            profile_reason = "skipped (every time target met; --profile forces one)"
        if profile_reason:
            results["profile"] = {"skipped": profile_reason}
        if self.progress:
            self.progress.finish()
        results["meta"] = self.meta(t0)
        return results

    def meta(self, t0: float) -> dict[str, Any]:
        import hypercorn
        import orjson

        try:
            rev = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=REPO, capture_output=True, text=True,
                                 timeout=5).stdout.strip() or None
            dirty = bool(subprocess.run(["git", "status", "--porcelain", "--", "awaken", "storage_backends"],
                                        cwd=REPO, capture_output=True, text=True, timeout=5).stdout.strip())
        except (OSError, subprocess.SubprocessError):
            rev, dirty = None, None
        p = self.plan
        return {
            "started": time.strftime("%Y-%m-%d %H:%M:%S", time.localtime(t0)),
            "duration_s": round(time.time() - t0, 1),
            "mode": "quick" if self.args.quick else "full",
            "rounds": p.rounds,
            "plan": p.__dict__,
            "pinning": self.pinning,
            "load_average": {"start": self.load_start, "end": _loadavg()},
            "machine": {"cpus": __import__("os").cpu_count(), "platform": platform.platform(),
                        "python": platform.python_version()},
            "versions": {"trio": trio.__version__, "hypercorn": getattr(hypercorn, "__version__", None) or _dist("hypercorn"),
                         "orjson": orjson.__version__, "quart-trio": _dist("quart-trio")},
            "git": {"rev": rev, "awaken_tree_dirty": dirty},
            "subjects": [{"name": s.name, "kind": s.kind, "backend": s.backend,
                          "channels": sorted(s.endpoints), "skipped": s.skipped} for s in self.subjects],
            "notes": self.notes,
            "data_dir": str(self.tmp),
        }

    pinning = ""
    load_start: list[float] | None = None
    bursts: dict[str, Any] | None = None
    relay: dict[str, Any] | None = None


def _loadavg() -> list[float] | None:
    try:
        return [round(x, 2) for x in __import__("os").getloadavg()]
    except OSError:
        return None


def _dist(name: str) -> str | None:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(name)
    except PackageNotFoundError:
        return None


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m bench",
        description="Streaming latency, throughput, fan-out, memory and ledger commits of Awaken, each as a "
                    "ratio to a raw-ASGI floor measured in the same run.",
    )
    parser.add_argument("--quick", action="store_true", help="CI smoke run: tiny counts, < 60 s, plots if possible")
    parser.add_argument("--target", action="append", metavar="PROTO=URL",
                        help="also measure another server: agui=URL or aisdk=URL; http(s):// = SSE, ws(s):// = "
                             "WebSocket (repeatable)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"),
                        help="output directory (default: bench/results)")
    parser.add_argument("--backends", help="comma-separated storage backends to measure (default: sqlite,files)")
    parser.add_argument("--no-peer", action="store_true", help="leave out the peer (pydantic-ai's AG-UI app on uvicorn)")
    parser.add_argument("--no-bursts", action="store_true", help="leave out the bursts (bench/bursts.py)")
    parser.add_argument("--no-awaken", action="store_true", help="measure only the floor and the --target servers")
    parser.add_argument("--rounds", type=int, help="interleaved rounds (default: 3 full, 1 quick)")
    parser.add_argument("--profile", action="store_true", help="profile the delta path even if every target is met")
    parser.add_argument("--no-profile", action="store_true", help="never profile")
    parser.add_argument("--no-plots", action="store_true", help="skip the PNG plots")
    parser.add_argument("--scaleout-only", action="store_true",
                        help="run only the scale-out sweep (Postgres, 1 process against 2)")
    parser.add_argument("--pg-lease-seconds", type=float,
                        help="the Postgres servers' options.lease_seconds (default: the ledger's own, 10 s)")
    parser.add_argument("--data-dir", help="where the temporary ledgers go (default: the system temp dir)")
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    if args.no_awaken and not args.target:
        print("bench: --no-awaken needs at least one --target", file=sys.stderr)
        return 2
    pinning = pin_self()
    bursts.raise_nofile()  # 2,000 clients at once: the bench's and (inherited) the servers' open-file limit
    bench = Bench(args)
    bench.pinning = pinning
    print(f"bench: {'quick' if args.quick else 'full'} run; {pinning}; writing to {bench.out}", file=sys.stderr)
    if args.quick:
        print(f"bench: {report.QUICK_NOTE}", file=sys.stderr)
    try:
        results = trio.run(bench.run)
    except KeyboardInterrupt:
        print("\nbench: interrupted", file=sys.stderr)
        return 130
    finally:
        shutil.rmtree(bench.tmp, ignore_errors=True)
    written = report.write(results, bench, plots=not args.no_plots)
    print(report.console_summary(results), file=sys.stderr)
    if args.quick:
        print(f"bench: {report.QUICK_NOTE}", file=sys.stderr)
    print("bench: wrote " + ", ".join(str(p) for p in written), file=sys.stderr)
    return 0

