"""The measurements. Each function drives one endpoint once and returns raw numbers; ``cli.py`` interleaves
them (floor, Awaken, floor, Awaken…) and ``report.py`` summarises them.

Definitions:

* **time to first byte** — from the request send (fresh: from before the TCP connect / WebSocket
  handshake) until the first byte of the response (the first message, on WebSocket);
* **time to first text delta** — the same start, until the read that completed the first text delta;
* **inter-delta lateness** — for paced streams (``/delay D``): each gap between two consecutive text
  deltas minus D (what the reader sees beyond the model's own pacing);
* **events/s** — data frames (messages) of one ``/words N`` stream over its duration;
* **wall time** (sweep) — from releasing all requests at once (connections already open) to the end
  of the last stream; a stream that fails, times out or delivers a different number of deltas is an error;
* **memory** — VmRSS of the server process, before and with N streams open (or N waiting runs made,
  or N detached runs going on after their connections closed).
"""

from __future__ import annotations

import math
import os
import random
import sqlite3
import time
import uuid
from collections.abc import Awaitable, Callable, Iterator
from pathlib import Path
from typing import Any

import orjson
import trio

from .client import Barrier, Endpoint, Session, StreamResult, clock, request_body, script
from .servers import DETACHED_AGENT, ServerProcess, process_sched
from .stats import summary

WAITING_TEXT = '/call calculator {"expression":"1"}'
#: the server's ``bench.memtrace.process_stats`` (``collect``: after a full collection, with the cyclic
#: garbage it found), for a server started as ``bench.memtrace``'s child; None for other servers
Stats = Callable[..., Awaitable[dict[str, Any]]]


async def _sessions(endpoint: Endpoint, count: int, nursery: trio.Nursery, *, connect_limit: int = 32
                    ) -> tuple[list[Session], list[str]]:
    """``count`` open sessions (connected a few at a time, so the accept backlog never overflows)."""
    limiter = trio.CapacityLimiter(connect_limit)
    sessions: list[Session] = []
    errors: list[str] = []

    async def one() -> None:
        async with limiter:
            session = Session(endpoint, nursery=nursery)
            try:
                with trio.fail_after(15):
                    await session.open()
                sessions.append(session)
            except Exception as exc:  # noqa: BLE001 - counted as an error of the level
                errors.append(f"connect: {type(exc).__name__}: {exc}")

    async with trio.open_nursery() as connecting:
        for _ in range(count):
            connecting.start_soon(one)
    return sessions, errors


# ------------------------------------------------------------------------------------------------
# latency


def turn_orders(count: int, rounds: int, *, seed: int = 0) -> Iterator[list[int]]:
    """The order of ``count`` endpoints in each of ``rounds`` rounds: shuffled a round (seeded, so a run
    repeats), and no endpoint runs twice in a row across a round's edge. Each one then takes every
    place and follows every other one about equally often. A fixed pattern gave places their own
    times: reversing every other round (A B C, C B A) ran the ends twice in a row, on a client and a
    server still warm from the run before (two copies of one server measured 3 % apart, the ends
    ahead); a rotation puts each endpoint always after the same one (``bench/REPORT.md``, 2026-12-03
    close)."""
    rng = random.Random(seed)
    order = list(range(count))
    last = -1
    for _ in range(rounds):
        rng.shuffle(order)
        if count > 1 and order[0] == last:
            swap = rng.randrange(1, count)
            order[0], order[swap] = order[swap], order[0]
        last = order[-1]
        yield list(order)


async def latency_series(endpoint: Endpoint, runs: int, *, fresh: bool, words: int = 3, warmup: int = 3
                         ) -> list[StreamResult]:
    """``runs`` short runs one after another, each on a new connection (``fresh``) or one kept alive."""
    return (await latency_interleaved([endpoint], runs, fresh=fresh, words=words, warmup=warmup))[0]


async def latency_interleaved(endpoints: list[Endpoint], runs: int, *, fresh: bool, words: int = 3,
                              warmup: int = 3) -> list[list[StreamResult]]:
    """The same, on several endpoints at once, run by run in ``turn_orders``, so that whatever else the
    machine does hits every endpoint alike. Returns one list of results per endpoint."""
    out: list[list[StreamResult]] = [[] for _ in endpoints]
    async with trio.open_nursery() as nursery:
        sessions = [Session(e, fresh=fresh, nursery=nursery) for e in endpoints]
        try:
            for i, order in enumerate(turn_orders(len(endpoints), runs + warmup)):
                for k in order:
                    body = request_body(endpoints[k].protocol, script(words))
                    result = await sessions[k].run(body, limit_s=10)
                    if i >= warmup:
                        out[k].append(result)
        finally:
            for session in sessions:
                await session.aclose()
            nursery.cancel_scope.cancel()
    return out


# ------------------------------------------------------------------------------------------------
# pacing


def gaps_lateness_ms(times: list[float] | None, delay_ms: float) -> list[float]:
    if not times or len(times) < 2:
        return []
    return [(b - a) * 1000.0 - delay_ms for a, b in zip(times, times[1:], strict=False)]


async def lateness_run(endpoint: Endpoint, words: int, delay_ms: float) -> dict[str, Any]:
    async with trio.open_nursery() as nursery:
        session = Session(endpoint, nursery=nursery)
        try:
            await session.open()
            result = await session.run(request_body(endpoint.protocol, script(words, delay_ms)), times=True,
                                       limit_s=30 + words * delay_ms / 1000 * 3)
        finally:
            await session.aclose()
            nursery.cancel_scope.cancel()
    return {"ok": result.ok and result.deltas == words, "error": result.error,
            "lateness_ms": gaps_lateness_ms(result.delta_times, delay_ms),
            "duration_s": result.duration if result.ok else None}


# ------------------------------------------------------------------------------------------------
# one-stream throughput


async def throughput_run(endpoint: Endpoint, words: int, server: ServerProcess | None) -> dict[str, Any]:
    """One ``/words N`` stream on an open connection; events/s and, for a local server, CPU per event."""
    async with trio.open_nursery() as nursery:
        session = Session(endpoint, nursery=nursery)
        try:
            await session.open()
            body = request_body(endpoint.protocol, script(words))
            cpu0 = server.sched() if server else None
            me0 = process_sched()
            result = await session.run(body, limit_s=120)
            me1 = process_sched()
            cpu1 = server.sched() if server else None
        finally:
            await session.aclose()
            nursery.cancel_scope.cancel()
    ok = result.ok and result.deltas == words
    eps = result.events / result.duration if ok and result.duration > 0 else None
    cpu_us = (cpu1[0] - cpu0[0]) / result.events * 1e6 if ok and cpu0 and cpu1 else None
    return {"ok": ok, "error": result.error or (None if ok else f"{result.deltas} of {words} deltas"),
            "events": result.events, "events_per_s": eps, "cpu_us_per_event": cpu_us,
            "server_wait_share": (cpu1[1] - cpu0[1]) / result.duration if ok and cpu0 and cpu1 else None,
            "client_cpu_share": (me1[0] - me0[0]) / result.duration if ok and result.duration > 0 else None,
            "duration_s": result.duration if ok else None}


# ------------------------------------------------------------------------------------------------
# concurrency sweep


async def sweep_level(endpoint: Endpoint, concurrency: int, words: int, delay_ms: float,
                      server: ServerProcess | None = None, *, limit_s: float | None = None) -> dict[str, Any]:
    """``concurrency`` paced streams released at once on already-open connections; a stream still open
    ``limit_s`` after the release (default 60 s plus 10x its ideal time) is an error."""
    timeout = limit_s if limit_s is not None else 60 + words * delay_ms / 1000 * 10
    results: list[StreamResult] = []
    async with trio.open_nursery() as nursery:
        sessions, connect_errors = await _sessions(endpoint, concurrency, nursery)
        barrier = Barrier()
        bodies = [request_body(endpoint.protocol, script(words, delay_ms)) for _ in sessions]

        async def one(session: Session, body: bytes) -> None:
            await barrier.event.wait()
            results.append(await session.run(body, times=True, limit_s=timeout, t_send=barrier.t))

        cpu0 = server.sched() if server else None
        me0 = process_sched()
        async with trio.open_nursery() as streams:
            for session, body in zip(sessions, bodies, strict=True):
                streams.start_soon(one, session, body)
            await trio.sleep(0.05)  # let every task reach the barrier
            barrier.release()
        cpu1 = server.sched() if server else None
        me1 = process_sched()
        for session in sessions:
            await session.aclose()
        nursery.cancel_scope.cancel()
    errors = list(connect_errors)
    lateness: list[float] = []
    first: list[float] = []
    ends: list[float] = []
    for r in results:
        if not r.ok or r.deltas != words:
            errors.append(r.error or f"{r.deltas} of {words} deltas")
        if not math.isnan(r.t_end):
            ends.append(r.t_end)
        first.append(r.first_delta_ms)
        lateness.extend(gaps_lateness_ms(r.delta_times, delay_ms))
    wall = (max(ends) - barrier.t) if ends else None
    return {
        "concurrency": concurrency, "wall_s": wall, "ideal_s": round(words * delay_ms / 1000, 3),
        "errors": len(errors), "error_samples": sorted(set(errors))[:3],
        "lateness_ms": lateness, "first_delta_ms": first,
        "events": sum(r.events for r in results),
        "server_cpu_s": (cpu1[0] - cpu0[0]) if cpu0 and cpu1 else None,
        "server_wait_s": (cpu1[1] - cpu0[1]) if cpu0 and cpu1 else None,
        "client_cpu_s": me1[0] - me0[0], "client_wait_s": me1[1] - me0[1],
    }


# ------------------------------------------------------------------------------------------------
# memory


async def _sample_rss(server: ServerProcess, samples: int = 3, interval: float = 0.1) -> int:
    peak = 0
    for _ in range(samples):
        peak = max(peak, server.rss_kb())
        await trio.sleep(interval)
    return peak


def breakdown(before: dict[str, Any], after: dict[str, Any], garbage: dict[str, Any], rss_kb: float,
              count: int) -> dict[str, Any]:
    """Where the RSS one item added goes, in KB per item, from the server's ``process_stats`` before and
    with the items (``garbage``: a full collection's right after the second reading): the interpreter's
    small objects (pymalloc's bytes in use) and the free space of the arenas they took; glibc's heap
    (large objects, C libraries' buffers: SQLite's, the sockets' user-space buffers) in use and free
    inside it; what a full collection found as cyclic garbage (objects already unreachable, waiting for
    the collector: counted in the figures above); the rest of RSS (thread stacks, pages of freed memory
    not yet given back)."""
    def delta(key: str) -> float:
        return (after.get(key, 0) - before.get(key, 0)) / count / 1024

    arenas = (after.get("pymalloc_arenas", 0) - before.get("pymalloc_arenas", 0)) * 1024 / count
    python, glibc_used, glibc_free = delta("pymalloc_bytes_in_use"), delta("glibc_in_use"), delta("glibc_free")
    return {"rss": round(rss_kb, 2), "python_objects": round(python, 2),
            "python_arena_free": round(arenas - python, 2), "c_heap_in_use": round(glibc_used, 2),
            "c_heap_free": round(glibc_free, 2), "mmapped": round(delta("glibc_mmapped"), 2),
            "rest": round(rss_kb - arenas - glibc_used - glibc_free - delta("glibc_mmapped"), 2),
            "gc_objects": round((after.get("gc_objects", 0) - before.get("gc_objects", 0)) / count, 1),
            "garbage_objects": round(garbage.get("garbage_objects", 0) / count, 1),
            "garbage_types": {k: round(v / count, 2) for k, v in list(garbage.get("garbage_types", {}).items())[:8]},
            "threads": after.get("threads", 0) - before.get("threads", 0)}


async def memory_active(endpoint: Endpoint, server: ServerProcess, count: int, *, words: int = 50,
                        delay_ms: float = 200, settle: float = 0.4, stats: Stats | None = None) -> dict[str, Any]:
    """RSS with ``count`` paced streams open: ``count/2`` first, then ``count`` (the slope is the marginal cost);
    with ``stats``, where the KB per stream go (``breakdown``)."""
    warm = await latency_series(endpoint, 5, fresh=False, warmup=0)
    await trio.sleep(settle)
    rss0 = await _sample_rss(server)
    stats0 = await stats() if stats is not None else None
    where: dict[str, Any] | None = None
    half = count // 2
    started = 0
    errors: list[str] = []
    stage_rss: list[int] = []

    def first_delta() -> None:
        nonlocal started
        started += 1

    async with trio.open_nursery() as nursery:
        all_sessions: list[Session] = []
        for stage_count in (half, count - half):
            sessions, connect_errors = await _sessions(endpoint, stage_count, nursery)
            errors.extend(connect_errors)
            all_sessions.extend(sessions)
            target = started + len(sessions)

            async def one(session: Session) -> None:
                body = request_body(endpoint.protocol, script(words, delay_ms))
                result = await session.run(body, limit_s=60, on_first_delta=first_delta)
                if result.error and "Cancelled" not in result.error:
                    errors.append(result.error)

            for session in sessions:
                nursery.start_soon(one, session)
            with trio.move_on_after(20):
                while started < target:
                    await trio.sleep(0.02)
            await trio.sleep(settle)
            stage_rss.append(await _sample_rss(server))
        if stats is not None and stats0 is not None:
            full = await stats()
            where = breakdown(stats0, full, await stats(collect=True), (stage_rss[-1] - rss0) / count, count)
        nursery.cancel_scope.cancel()  # every stream still open: disconnect them all
    for session in all_sessions:
        await session.aclose()
    rss_half, rss_full = stage_rss
    return {
        "streams": count, "started": started, "errors": len(errors) + sum(1 for r in warm if not r.ok),
        "error_samples": sorted(set(errors))[:3],
        "rss_base_kb": rss0, "rss_half_kb": rss_half, "rss_full_kb": rss_full,
        "kb_per_stream": round((rss_full - rss0) / count, 2) if count else None,
        "kb_per_stream_marginal": round((rss_full - rss_half) / (count - half), 2) if count - half else None,
        **({"where": where} if where is not None else {}),
    }


async def _make_runs(endpoint: Endpoint, n: int, new_body: Callable[[], bytes], errors: list[str], *,
                     concurrency: int, min_events: int = 0) -> None:
    """``n`` short runs, each on a new thread (``new_body()``), ``concurrency`` at a time, each over its
    own connection; failures are appended to ``errors``."""
    limiter = trio.CapacityLimiter(concurrency)

    async def one() -> None:
        async with limiter:
            async with trio.open_nursery() as nursery:
                session = Session(endpoint, nursery=nursery)
                result = await session.run(new_body(), limit_s=30)
                await session.aclose()
                nursery.cancel_scope.cancel()
            if not result.ok:
                errors.append(result.error or "failed")
            elif result.events < min_events:
                errors.append(f"only {result.events} events")

    async with trio.open_nursery() as nursery:
        for _ in range(n):
            nursery.start_soon(one)


async def memory_waiting(endpoint: Endpoint, server: ServerProcess, count: int, *, concurrency: int = 8,
                         settle: float = 0.5, stats: Stats | None = None) -> dict[str, Any]:
    """RSS after ``count`` runs that end waiting (agent ``guarded``, one gated calculator call); with
    ``stats``, where the KB per run go (``breakdown``)."""
    errors: list[str] = []

    async def make(n: int) -> None:
        await _make_runs(endpoint, n, lambda: request_body(endpoint.protocol, WAITING_TEXT, agent="guarded"),
                         errors, concurrency=concurrency, min_events=4)

    await make(5)
    await latency_series(endpoint.with_path(_assistant_path(endpoint)), 3, fresh=False, warmup=0)
    await trio.sleep(settle)
    rss0 = await _sample_rss(server)
    stats0 = await stats() if stats is not None else None
    half = count // 2
    await make(half)
    await trio.sleep(settle)
    rss_half = await _sample_rss(server)
    await make(count - half)
    await trio.sleep(settle)
    rss_full = await _sample_rss(server)
    where = None
    if stats is not None and stats0 is not None:
        full = await stats()
        where = breakdown(stats0, full, await stats(collect=True), (rss_full - rss0) / count, count)
    return {
        "runs": count, "errors": len(errors), "error_samples": sorted(set(errors))[:3],
        "rss_base_kb": rss0, "rss_half_kb": rss_half, "rss_full_kb": rss_full,
        "kb_per_run": round((rss_full - rss0) / count, 2) if count else None,
        "kb_per_run_marginal": round((rss_full - rss_half) / (count - half), 2) if count - half else None,
        **({"where": where} if where is not None else {}),
    }


async def _detach(endpoint: Endpoint, body: bytes, errors: list[str]) -> None:
    """Start one run and close its connection after the first text delta (the run goes on, detached)."""
    first = trio.Event()
    async with trio.open_nursery() as nursery:
        session = Session(endpoint, nursery=nursery)

        async def start() -> None:
            result = await session.run(body, limit_s=30, on_first_delta=first.set)
            if not first.is_set():
                errors.append(result.error or "ended before its first text delta")
                first.set()

        nursery.start_soon(start)
        await first.wait()
        nursery.cancel_scope.cancel()
    await session.aclose()


async def _still_active(base_url: str, thread_ids: list[str]) -> int:
    """How many of the threads have a run the AG-UI rejoin route still streams (204: none active)."""
    import httpx

    active = 0
    async with httpx.AsyncClient(base_url=base_url, timeout=10) as client:
        for thread_id in thread_ids:
            async with client.stream("GET", f"/v1/ag-ui/threads/{thread_id}/stream") as response:
                active += response.status_code == 200
    return active


async def memory_detached(endpoint: Endpoint, server: ServerProcess, count: int, *, words: int = 100,
                          delay_ms: float = 200, concurrency: int = 16, settle: float = 0.4) -> dict[str, Any]:
    """RSS with ``count`` detached runs: each started on the bench's ``on_disconnect = "continue"`` agent
    with a paced answer (``/words 100``, ``/delay 200``: 20 s), its connection closed after the first text
    delta, so the run streams on with nobody watching (its replay buffer filling as it goes). ``count/2``
    first, then ``count`` (the slope is the marginal cost); then the rejoin route counts the runs still going."""
    endpoint = agent_endpoint(endpoint, DETACHED_AGENT)
    await latency_series(endpoint.with_path(_assistant_path(endpoint)), 3, fresh=False, warmup=0)
    await trio.sleep(settle)
    rss0 = await _sample_rss(server)
    errors: list[str] = []
    thread_ids: list[str] = []
    limiter = trio.CapacityLimiter(concurrency)

    async def one() -> None:
        body = request_body(endpoint.protocol, script(words, delay_ms), agent=DETACHED_AGENT)
        thread_ids.append(orjson.loads(body)["threadId"])
        async with limiter:
            await _detach(endpoint, body, errors)

    half = count // 2
    stage_rss: list[int] = []
    for stage_count in (half, count - half):
        async with trio.open_nursery() as nursery:
            for _ in range(stage_count):
                nursery.start_soon(one)
        await trio.sleep(settle)
        stage_rss.append(await _sample_rss(server))
    active = await _still_active(server.base_url, thread_ids)
    rss_half, rss_full = stage_rss
    return {
        "runs": count, "still_active": active, "errors": len(errors),
        "error_samples": sorted(set(errors))[:3],
        "rss_base_kb": rss0, "rss_half_kb": rss_half, "rss_full_kb": rss_full,
        "kb_per_run": round((rss_full - rss0) / count, 2) if count else None,
        "kb_per_run_marginal": round((rss_full - rss_half) / (count - half), 2) if count - half else None,
    }


async def memory_completed(endpoint: Endpoint, server: ServerProcess, count: int, *, concurrency: int = 8,
                           settle: float = 0.5) -> dict[str, Any]:
    """The control for ``memory_waiting``: RSS after ``count`` short runs that complete, each on a new
    thread. What a waiting run costs beyond this is the waiting itself; what both cost is per thread."""
    errors: list[str] = []

    async def make(n: int) -> None:
        await _make_runs(endpoint, n, lambda: request_body(endpoint.protocol, script(3)), errors,
                         concurrency=concurrency)

    await make(8)
    await trio.sleep(settle)
    rss0 = await _sample_rss(server)
    await make(count)
    await trio.sleep(settle)
    rss1 = await _sample_rss(server)
    return {"runs": count, "errors": len(errors), "rss_base_kb": rss0, "rss_full_kb": rss1,
            "kb_per_run": round((rss1 - rss0) / count, 2) if count else None}


def _assistant_path(endpoint: Endpoint) -> str:
    from urllib.parse import urlsplit

    path = urlsplit(endpoint.url).path
    return path.split("/agents/")[0] if "/agents/" in path else path


def agent_endpoint(endpoint: Endpoint, agent: str) -> Endpoint:
    """The AG-UI SSE endpoint of ``agent`` (AI SDK bodies name the agent instead)."""
    if endpoint.protocol == "agui" and endpoint.transport == "sse":
        return endpoint.with_path(_assistant_path(endpoint).rstrip("/") + f"/agents/{agent}")
    return endpoint


def guarded_endpoint(endpoint: Endpoint) -> Endpoint:
    """The AG-UI SSE endpoint of agent ``guarded``."""
    return agent_endpoint(endpoint, "guarded")


# ------------------------------------------------------------------------------------------------
# ledger commits


async def http_runs(endpoint: Endpoint, runs: int, concurrency: int) -> dict[str, Any]:
    """Short runs (``/words 1``) over ``concurrency`` keep-alive connections: completed runs per second
    (two ledger commits each on Awaken: the run start with its input, and the final step)."""
    per = max(1, runs // concurrency)
    errors: list[str] = []
    async with trio.open_nursery() as nursery:
        sessions, connect_errors = await _sessions(endpoint, concurrency, nursery)
        errors.extend(connect_errors)
        done = 0

        async def worker(session: Session) -> None:
            nonlocal done
            for _ in range(per):
                result = await session.run(request_body(endpoint.protocol, script(1)), limit_s=30)
                if result.ok:
                    done += 1
                else:
                    errors.append(result.error or "failed")

        t0 = clock()
        async with trio.open_nursery() as workers:
            for session in sessions:
                workers.start_soon(worker, session)
        elapsed = clock() - t0
        for session in sessions:
            await session.aclose()
        nursery.cancel_scope.cancel()
    return {"runs": done, "errors": len(errors), "runs_per_s": done / elapsed if elapsed > 0 else None}


def _sample_messages(run_id: str) -> tuple[Any, Any]:
    from awaken.core.messages import Message, TextPart

    user = Message(f"u-{uuid.uuid4().hex}", "user", (TextPart("/words 20"),), run_id)
    answer = " ".join(["alpha", "bravo", "charlie", "delta"] * 5)
    assistant = Message(f"msg_{uuid.uuid4().hex}", "assistant", (TextPart(answer),), run_id)
    return user, assistant


async def ledger_commits(backend: str, data_dir: Path, runs: int, concurrency: int, *, dsn: str | None = None
                         ) -> dict[str, Any]:
    """The Ledger API in-process: each run is ``start_run`` (with its user message) then one ``commit``
    (the assistant step, completed). Commits/s counts both."""
    from awaken.core.messages import Usage
    from awaken.engine.state import RunStatus
    from awaken.ledger.interface import Commit, RunRecord, ledger_class

    await trio.Path(data_dir).mkdir(parents=True, exist_ok=True)
    cls = ledger_class(backend)
    if backend == "postgres":
        from .pgcluster import PASSWORD_ENV

        ledger = cls(path=dsn, password_env=PASSWORD_ENV)
    else:
        ledger = cls(path=str(data_dir / ("awaken.db" if backend == "sqlite" else "ledger")))
    await ledger.open()
    latencies: list[float] = []
    try:
        async def one_run() -> None:
            thread_id = f"t-{uuid.uuid4().hex}"
            run_id = f"r-{uuid.uuid4().hex}"
            user, assistant = _sample_messages(run_id)
            now = int(time.time() * 1000)
            t0 = clock()
            await ledger.start_run(RunRecord(run_id, thread_id, "assistant", RunStatus.RUNNING, now, now), [user])
            t1 = clock()
            await ledger.commit(thread_id, run_id, Commit(status=RunStatus.COMPLETED, messages=(assistant,),
                                                          usage=Usage(2, 20), steps=1))
            t2 = clock()
            latencies.extend(((t1 - t0) * 1000, (t2 - t1) * 1000))

        for _ in range(5):
            await one_run()
        latencies.clear()
        per = max(1, runs // concurrency)
        t0 = clock()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                async def worker() -> None:
                    for _ in range(per):
                        await one_run()

                nursery.start_soon(worker)
        elapsed = clock() - t0
    finally:
        await ledger.aclose()
    commits = per * concurrency * 2
    return {"backend": backend, "concurrency": concurrency, "commits": commits,
            "commits_per_s": commits / elapsed, "commit_ms": summary(latencies)}


async def raw_commits(backend: str, data_dir: Path, runs: int, concurrency: int, *, dsn: str | None = None
                      ) -> dict[str, Any]:
    """The floor for ``ledger_commits``: the same number of transactions, each one worker-thread hop and
    the bare write — SQLite (WAL, synchronous=FULL, the ledger's default) one INSERT per transaction; files: one append +
    fsync (the file ledger's default); Postgres: one INSERT per transaction on one connection."""
    await trio.Path(data_dir).mkdir(parents=True, exist_ok=True)
    limiter = trio.CapacityLimiter(1)
    payload = orjson.dumps({"role": "assistant", "parts": [{"kind": "text", "text": "alpha bravo " * 10}]})
    if backend == "sqlite":
        db = sqlite3.connect(data_dir / "raw.db", check_same_thread=False, isolation_level=None)
        db.execute("PRAGMA journal_mode=WAL")
        db.execute("PRAGMA synchronous=FULL")  # what the ledger runs with by default
        db.execute("CREATE TABLE IF NOT EXISTS m (id TEXT PRIMARY KEY, body BLOB)")

        def write() -> None:
            db.execute("BEGIN IMMEDIATE")
            db.execute("INSERT INTO m VALUES (?, ?)", (uuid.uuid4().hex, payload))
            db.execute("COMMIT")

        def close() -> None:
            db.close()
    elif backend == "postgres":
        import psycopg

        from .pgcluster import PASSWORD_ENV

        conn = psycopg.connect(dsn, password=os.environ[PASSWORD_ENV], autocommit=True)
        conn.execute("CREATE TABLE IF NOT EXISTS bench_raw (id TEXT PRIMARY KEY, body BYTEA)")

        def write() -> None:
            with conn.transaction():
                conn.execute("INSERT INTO bench_raw VALUES (%s, %s)", (uuid.uuid4().hex, payload))

        def close() -> None:
            conn.close()
    else:
        fd = os.open(data_dir / "raw.log", os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)

        def write() -> None:
            os.write(fd, payload + b"\n")
            os.fsync(fd)

        def close() -> None:
            os.close(fd)

    per = max(1, runs // concurrency) * 2
    try:
        t0 = clock()
        async with trio.open_nursery() as nursery:
            for _ in range(concurrency):
                async def worker() -> None:
                    for _ in range(per):
                        await trio.to_thread.run_sync(write, limiter=limiter)

                nursery.start_soon(worker)
        elapsed = clock() - t0
    finally:
        close()
    commits = per * concurrency
    return {"backend": backend, "concurrency": concurrency, "commits": commits, "commits_per_s": commits / elapsed}
