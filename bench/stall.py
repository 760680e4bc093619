"""``/healthz`` latency while the worst request of each kind is served (issue 12, must-be-true 2).

    python -m bench.stall [--quick] [--backends sqlite,files] [--out bench/results]

For each storage backend a fresh Awaken server is started (pinned to CPU 0, like every bench server),
with two threads written into its ledger beforehand: a 5,000-message thread (the replayed history)
and a 12 MB thread (the concurrent history reads). A **probe** in a separate process (so the load
generator's own JSON work cannot delay it) sends ``GET /healthz`` every ~5 ms over one kept-alive
connection and records each answer's latency. The probe first runs with no load (the idle row), then
each "worst request" kind is served alone, repeated until it has run ``--reps`` times and for at least
``--min-seconds``; each probe sample belongs to the kind that was being served when the probe sent it:

* ``a_messages_cap`` — an AG-UI body of the most messages accepted (``MAX_MESSAGES`` tiny messages);
* ``a_messages_over`` — the issue's finding: 300,000 tiny messages (~19 MB), refused undecoded
  (``BODY_TOO_LARGE``: more arrays and objects than ``MAX_CONTAINERS``; ``--quick``: ``MAX_MESSAGES`` + 1
  messages, refused ``TOO_MANY_MESSAGES``);
* ``b_nesting_cap`` — a body as deep as accepted (``MAX_DEPTH``), as many such values as ``MAX_CONTAINERS`` allows;
* ``b_nesting_over`` — the same body one level deeper, refused ``NESTING_TOO_DEEP``;
* ``b_containers_over`` — 4 MB of such values (millions of arrays), refused undecoded ``BODY_TOO_LARGE``;
* ``c_aisdk_largest`` — the largest AI SDK body accepted: ``MAX_MESSAGES`` messages filling ``MAX_BODY``;
* ``d_replay_5000`` — an AG-UI turn replaying the whole 5,000-message history;
* ``e_frame_over_buffer`` — a run whose model emits one delta larger than ``max_buffered_bytes`` (5 MiB);
* ``f_state_cap_snapshot`` — ``set_state`` of a value filling ``MAX_STATE_BYTES`` over the AI SDK, then
  an AG-UI run on that thread (its ``STATE_SNAPSHOT`` carries the whole state);
* ``g_history_12mb_x30`` — 30 concurrent readers, each reading the whole 12 MB thread page by page;
* ``h_dropped_sockets`` — bursts of streaming runs whose sockets are reset after their first bytes.

Each row gives the probe's p50/p99/max, p99 ÷ idle p99, and the verdict p99 < 50 ms. When a kind misses,
the server (started under ``bench.profiled``) profiles one more repetition of it: the top functions of
the event-loop thread by own time are in the report (``--no-profile`` turns this off). ``--quick``
scales every size down and runs one repetition per kind: its figures are far too small to judge by
(``tests/test_bench_stall.py`` only checks that the report's numbers and verdicts agree).
"""

from __future__ import annotations

import argparse
import io
import json
import os
import pstats
import select
import shutil
import signal
import socket
import statistics
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import orjson
import trio

from awaken.core.jsonbody import MAX_CONTAINERS, MAX_DEPTH, MAX_MESSAGES, too_deep
from awaken.streams.exchange import MAX_BODY
from awaken.tools import MAX_STATE_BYTES

from .client import new_id
from .servers import REPO, ServerProcess, awaken_server, pin_self
from .threads import history, seed

TARGET_P99_MS = 50.0
#: a kind is repeated at most this many times waiting for its first probe sample
MAX_REPS = 1000
PROBE_INTERVAL_S = 0.005
DEFAULT_BUFFER = 4 * 1024 * 1024


@dataclass(frozen=True)
class Sizes:
    """What each kind sends: the full run's sizes are the caps; ``--quick`` scales them down."""

    messages_cap: int = MAX_MESSAGES
    messages_over: int = 300_000
    nesting_bytes: int = 4 * 1024 * 1024
    aisdk_messages: int = MAX_MESSAGES
    aisdk_fill: int = MAX_BODY - 64 * 1024
    replay_messages: int = 5000
    frame_bytes: int = 5 * 1024 * 1024
    state_bytes: int = MAX_STATE_BYTES - 256
    history_messages: int = 1200
    history_message_bytes: int = 10_000
    history_readers: int = 30
    drop_bursts: int = 3
    drop_sockets: int = 100


QUICK = Sizes(messages_cap=MAX_MESSAGES, messages_over=MAX_MESSAGES + 1, nesting_bytes=1024 * 1024,
              aisdk_messages=500, aisdk_fill=512 * 1024, replay_messages=200, frame_bytes=DEFAULT_BUFFER + 1024,
              state_bytes=64 * 1024, history_messages=60, history_message_bytes=10_000, history_readers=5,
              drop_bursts=1, drop_sockets=10)

#: (thread id, messages, characters per message) written into the ledger before the server starts
REPLAY_THREAD = "stall-replay"
HISTORY_THREAD = "stall-history"


# -- the probe: a separate process ------------------------------------------------------------------


def probe_main(port: int) -> None:
    """``GET /healthz`` every ``PROBE_INTERVAL_S`` over one kept-alive connection. Commands on stdin:
    ``mark NAME`` (acknowledged with ``ok``) files the next samples under NAME (``-``: nowhere);
    ``count NAME`` answers how many probes were sent under NAME;
    ``stop`` prints ``{name: [latency ms, ...]}`` as JSON and exits."""
    import http.client

    samples: dict[str, list[float]] = {}
    errors: dict[str, int] = {}
    mark = "-"
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    stdin = sys.stdin.buffer
    pending = b""
    next_at = time.perf_counter()
    while True:
        wait = max(0.0, next_at - time.perf_counter())
        ready, _, _ = select.select([stdin], [], [], wait)
        if ready:
            chunk = os.read(stdin.fileno(), 4096)
            if not chunk:
                return
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                command, _, arg = line.decode().partition(" ")
                if command == "mark":
                    mark = arg
                    sys.stdout.write("ok\n")
                    sys.stdout.flush()
                elif command == "count":
                    sys.stdout.write(f"{len(samples.get(arg, [])) + errors.get(arg, 0)}\n")
                    sys.stdout.flush()
                elif command == "stop":
                    sys.stdout.write(json.dumps({"samples": samples, "errors": errors}) + "\n")
                    sys.stdout.flush()
                    return
            continue
        next_at += PROBE_INTERVAL_S
        sent_under = mark
        start = time.perf_counter()
        try:
            conn.request("GET", "/healthz")
            response = conn.getresponse()
            response.read()
            ok = response.status == 200
        except (OSError, http.client.HTTPException):
            ok = False
            conn.close()
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
        elapsed = (time.perf_counter() - start) * 1000
        if sent_under != "-":
            if ok:
                samples.setdefault(sent_under, []).append(elapsed)
            else:
                errors[sent_under] = errors.get(sent_under, 0) + 1
        next_at = max(next_at, time.perf_counter())  # a late answer does not trigger a burst of catch-up probes


class Probe:
    """The parent's handle on the probe process."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.proc: trio.Process | None = None
        self._buffer = b""

    async def start(self) -> None:
        self.proc = await trio.lowlevel.open_process(
            [sys.executable, "-m", "bench.stall", "--probe", str(self.port)], stdin=subprocess.PIPE,
            stdout=subprocess.PIPE, cwd=str(REPO), preexec_fn=unpin)

    async def _line(self) -> bytes:
        assert self.proc is not None and self.proc.stdout is not None
        while b"\n" not in self._buffer:
            chunk = await self.proc.stdout.receive_some(1 << 16)
            if not chunk:
                raise RuntimeError("the probe exited")
            self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        return line

    async def mark(self, name: str) -> None:
        assert self.proc is not None and self.proc.stdin is not None
        await self.proc.stdin.send_all(f"mark {name}\n".encode())
        if await self._line() != b"ok":
            raise RuntimeError("the probe did not acknowledge")

    async def count(self, name: str) -> int:
        """How many probes were sent while ``name`` was served (answered or failed)."""
        assert self.proc is not None and self.proc.stdin is not None
        await self.proc.stdin.send_all(f"count {name}\n".encode())
        return int(await self._line())

    async def stop(self) -> dict[str, Any]:
        assert self.proc is not None and self.proc.stdin is not None
        await self.proc.stdin.send_all(b"stop\n")
        result = json.loads(await self._line())
        await self.proc.wait()
        return result


def unpin() -> None:
    """The probe may run on any CPU: it must not queue behind the load generator on CPU 1."""
    if hasattr(os, "sched_setaffinity"):
        os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))


# -- bodies ---------------------------------------------------------------------------------------


def agui(thread_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"threadId": thread_id, "runId": new_id("stall-r"), "messages": messages, "tools": [],
            "context": [], "forwardedProps": {}, "state": {}}


def tiny_messages(n: int) -> list[dict[str, Any]]:
    return [{"id": f"m{i}", "role": "user", "content": "hi"} for i in range(n)]


def nested(levels: int) -> Any:
    value: Any = 1
    for _ in range(levels - 1):
        value = [value]
    return value


def deep_body(thread_id: str, total_bytes: int, extra_level: bool) -> dict[str, Any]:
    """Messages whose one text part carries a value nested to exactly ``MAX_DEPTH`` (one more level
    when ``extra_level``), enough of them to make ``total_bytes``."""
    levels = MAX_DEPTH - 4  # body, messages, message, content, part: the value's lists start at level 6
    while too_deep(agui(thread_id, [{"id": "m", "role": "user", "content": [
            {"type": "text", "text": "hi", "x": nested(levels)}]}]), MAX_DEPTH):
        levels -= 1
    value = nested(levels + (1 if extra_level else 0))
    one = len(orjson.dumps(value)) + 60
    count = max(1, min(MAX_MESSAGES, total_bytes // one))
    if total_bytes <= 0:  # as many as the container cap allows (each message adds 2 objects and a list)
        count = min(MAX_MESSAGES, (MAX_CONTAINERS - 16) // (levels + 4))
    return agui(thread_id, [{"id": f"m{i}", "role": "user", "content": [{"type": "text", "text": "hi", "x": value}]}
                            for i in range(count)])


def aisdk_body(thread_id: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": thread_id, "messages": messages}


def ui_user(mid: str, text: str) -> dict[str, Any]:
    return {"id": mid, "role": "user", "parts": [{"type": "text", "text": text}]}


def unsynced(backend: str) -> dict[str, Any]:
    """Ledger options for seeding: no fsync (only the served load is measured)."""
    return {"fsync": False} if backend == "files" else {"synchronous": "normal"}


# -- the load -------------------------------------------------------------------------------------


def outcome_of(raw: bytes) -> str:
    """What a stream ended with: ``RUN_FINISHED``, ``RUN_ERROR <code>``, ``finish``, ``error <text>``."""
    tail = raw[-4096:]
    for line in reversed(tail.split(b"\n")):
        if not line.startswith(b"data: ") or line == b"data: [DONE]":
            continue
        try:
            event = orjson.loads(line[6:])
        except orjson.JSONDecodeError:
            continue
        if not isinstance(event, dict):
            continue
        kind = event.get("type")
        if kind == "RUN_ERROR":
            return f"RUN_ERROR {event.get('code')}"
        if kind == "error":
            return f"error {str(event.get('errorText', ''))[:40]}"
        if kind in ("RUN_FINISHED", "finish") and (kind != "finish" or b'"type":"error"' not in tail):
            return str(kind)
    return f"no terminal event ({len(raw)} bytes)"


@dataclass
class Load:
    base_url: str
    port: int
    sizes: Sizes
    client: httpx.AsyncClient
    outcomes: dict[str, int] = field(default_factory=dict)
    body_bytes: int = 0

    def note(self, outcome: str) -> None:
        self.outcomes[outcome] = self.outcomes.get(outcome, 0) + 1

    async def post(self, path: str, body: bytes) -> str:
        self.body_bytes = max(self.body_bytes, len(body))
        try:
            response = await self.client.post(path, content=body, headers={"content-type": "application/json"})
        except httpx.HTTPError as exc:
            outcome = f"broken stream: {type(exc).__name__}"
        else:
            outcome = (outcome_of(response.content) if response.status_code == 200
                       else f"HTTP {response.status_code}")
        self.note(outcome)
        return outcome


#: a kind's load: ``prepare(load) -> bodies`` runs before the probe's mark (building bodies is the
#: client's work), ``serve(load, prepared)`` is what the probe measures
Prepare = Callable[["Load"], Awaitable[Any]]
Serve = Callable[["Load", Any], Awaitable[None]]


async def prep_messages_cap(load: Load) -> bytes:
    return orjson.dumps(agui(new_id("stall-a"), tiny_messages(load.sizes.messages_cap)))


async def prep_messages_over(load: Load) -> bytes:
    return orjson.dumps(agui(new_id("stall-a"), tiny_messages(load.sizes.messages_over)))


async def prep_nesting_cap(load: Load) -> bytes:
    return orjson.dumps(deep_body(new_id("stall-b"), 0, False))


async def prep_nesting_over(load: Load) -> bytes:
    return orjson.dumps(deep_body(new_id("stall-b"), 0, True))


async def prep_containers_over(load: Load) -> bytes:
    return orjson.dumps(deep_body(new_id("stall-b"), load.sizes.nesting_bytes, False))


async def prep_aisdk_largest(load: Load) -> bytes:
    n = load.sizes.aisdk_messages
    per = max(1, (load.sizes.aisdk_fill - 1024) // n - 70)
    text = "x" * per
    body = orjson.dumps(aisdk_body(new_id("stall-c"), [ui_user(f"u{i}", text) for i in range(n)]))
    assert len(body) <= MAX_BODY, len(body)
    return body


async def serve_agui(load: Load, body: bytes) -> None:
    await load.post("/v1/ag-ui", body)


async def serve_aisdk(load: Load, body: bytes) -> None:
    await load.post("/v1/ai-sdk/chat", body)


class Replay:
    """The client's copy of the 5,000-message thread: each turn replays all of it plus a new message."""

    held: list[dict[str, Any]] = []


async def prep_replay(load: Load) -> bytes:
    if not Replay.held:
        Replay.held = [{"id": m.id, "role": m.role, "content": m.text}
                       for m in history(load.sizes.replay_messages, 90)]
    Replay.held.append({"id": new_id("stall-u"), "role": "user", "content": "/words 3"})
    return orjson.dumps(agui(REPLAY_THREAD, Replay.held))


async def serve_replay(load: Load, body: bytes) -> None:
    await load.post("/v1/ag-ui", body)
    Replay.held.append({"id": new_id("stall-a"), "role": "assistant", "content": "alpha bravo charlie"})


async def prep_frame(load: Load) -> bytes:
    return orjson.dumps(agui(new_id("stall-e"), [{"id": "m1", "role": "user", "content": "x" * load.sizes.frame_bytes}]))


async def prep_state(load: Load) -> tuple[str, bytes]:
    thread_id = new_id("stall-f")
    value = "v" * load.sizes.state_bytes
    call = '/call set_state {"key": "k", "value": "' + value + '"}'
    return thread_id, orjson.dumps(aisdk_body(thread_id, [ui_user("u1", call)]))


async def serve_state(load: Load, prepared: tuple[str, bytes]) -> None:
    thread_id, body = prepared
    await load.post("/v1/ai-sdk/chat", body)
    await load.post("/v1/ag-ui", orjson.dumps(agui(thread_id, [{"id": "m2", "role": "user", "content": "/words 3"}])))


async def prep_nothing(load: Load) -> None:
    return None


async def serve_history(load: Load, _: None) -> None:
    async def reader() -> None:
        cursor, read = None, 0
        while True:
            params = {"limit": "500"} | ({"cursor": cursor} if cursor else {})
            response = await load.client.get(f"/v1/ag-ui/threads/{HISTORY_THREAD}/messages", params=params)
            if response.status_code != 200:
                load.note(f"HTTP {response.status_code}")
                return
            page = orjson.loads(response.content)
            if not page["items"]:
                break
            read += len(page["items"])
            cursor = page["cursor"]
        load.note(f"read {read} messages")

    async with trio.open_nursery() as nursery:
        for _ in range(load.sizes.history_readers):
            nursery.start_soon(reader)


async def serve_drops(load: Load, _: None) -> None:
    """Bursts of runs whose sockets are reset (SO_LINGER 0) once the stream's first bytes arrived."""

    async def one() -> None:
        body = orjson.dumps(agui(new_id("stall-h"), [{"id": "m1", "role": "user", "content": "/words 200\n/delay 5"}]))
        stream = await trio.open_tcp_stream("127.0.0.1", load.port)
        try:
            await stream.send_all(b"POST /v1/ag-ui HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
                                  b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
            with trio.move_on_after(30):
                got = b""
                while b"TEXT_MESSAGE_CONTENT" not in got:
                    chunk = await stream.receive_some(65536)
                    if not chunk:
                        break
                    got += chunk
            stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            load.note("reset after the first delta" if b"TEXT_MESSAGE_CONTENT" in got else "no delta")
        finally:
            await stream.aclose()

    for _ in range(load.sizes.drop_bursts):
        async with trio.open_nursery() as nursery:
            for _ in range(load.sizes.drop_sockets):
                nursery.start_soon(one)
    # the server's side of a reset (interrupt, final commit) happens after the close: let it be measured
    with trio.move_on_after(10):
        while (await load.client.get("/v1/threads", params={"limit": "1"})).status_code != 200:
            await trio.sleep(0.05)
    await trio.sleep(1.0)


KINDS: dict[str, tuple[Prepare, Serve]] = {
    "a_messages_cap": (prep_messages_cap, serve_agui),
    "a_messages_over": (prep_messages_over, serve_agui),
    "b_nesting_cap": (prep_nesting_cap, serve_agui),
    "b_nesting_over": (prep_nesting_over, serve_agui),
    "b_containers_over": (prep_containers_over, serve_agui),
    "c_aisdk_largest": (prep_aisdk_largest, serve_aisdk),
    "d_replay_5000": (prep_replay, serve_replay),
    "e_frame_over_buffer": (prep_frame, serve_agui),
    "f_state_cap_snapshot": (prep_state, serve_state),
    "g_history_12mb_x30": (prep_nothing, serve_history),
    "h_dropped_sockets": (prep_nothing, serve_drops),
}

#: what each kind's requests must end with (anything else is an error in the report)
EXPECTED = {
    "a_messages_cap": {"RUN_FINISHED"},
    "a_messages_over": {"RUN_ERROR TOO_MANY_MESSAGES", "RUN_ERROR BODY_TOO_LARGE"},
    "b_nesting_cap": {"RUN_FINISHED"},
    "b_nesting_over": {"RUN_ERROR NESTING_TOO_DEEP"},
    "b_containers_over": {"RUN_ERROR BODY_TOO_LARGE"},
    "c_aisdk_largest": {"finish"},
    "d_replay_5000": {"RUN_FINISHED"},
    "e_frame_over_buffer": {"RUN_FINISHED"},
    "f_state_cap_snapshot": {"finish", "RUN_FINISHED"},
    "h_dropped_sockets": {"reset after the first delta"},
}


# -- one backend ------------------------------------------------------------------------------------


def summary(samples: list[float]) -> dict[str, float]:
    ordered = sorted(samples)

    def pct(q: float) -> float:
        return ordered[min(len(ordered) - 1, max(0, round(q * (len(ordered) - 1))))]

    return {"n": len(ordered), "p50_ms": pct(0.5), "p99_ms": pct(0.99), "max_ms": ordered[-1],
            "mean_ms": statistics.fmean(ordered)}


def top_functions(path: Path, count: int = 12) -> list[str]:
    out = io.StringIO()
    stats = pstats.Stats(str(path), stream=out)
    stats.sort_stats("tottime").print_stats(count)
    lines = out.getvalue().splitlines()
    start = next((i for i, line in enumerate(lines) if line.lstrip().startswith("ncalls")), 0)
    return [line.rstrip() for line in lines[start:] if line.strip()]


async def backend_pass(backend: str, sizes: Sizes, args: argparse.Namespace, out: Path) -> dict[str, Any]:
    with tempfile.TemporaryDirectory(prefix="awaken-stall-") as tmp:
        data = Path(tmp)
        profile_dir = out / "stall-profile" / backend
        shutil.rmtree(profile_dir, ignore_errors=True)  # the server numbers its profiles from 1
        server: ServerProcess = awaken_server(f"stall-{backend}", backend, data / "server", out / "logs",
                                              profile_dir=None if args.no_profile else profile_dir,
                                              pinned=not args.unpinned)
        await seed(backend, data / "server" / ("awaken.db" if backend == "sqlite" else "ledger"),
                   {REPLAY_THREAD: history(sizes.replay_messages, 90),
                    HISTORY_THREAD: history(sizes.history_messages, sizes.history_message_bytes)},
                   **unsynced(backend))
        Replay.held = []
        await server.start()
        probe = Probe(server.port)
        await probe.start()
        rows: dict[str, Any] = {}
        profiles: dict[str, list[str]] = {}
        try:
            async with httpx.AsyncClient(base_url=server.base_url, timeout=300) as client:
                await probe.mark("idle")
                await trio.sleep(args.idle_seconds)
                await probe.mark("-")
                for name, (prepare, serve) in KINDS.items():
                    if args.kinds and name not in args.kinds:
                        continue
                    load = Load(server.base_url, server.port, sizes, client)
                    reps, started = 0, time.perf_counter()
                    busy = 0.0
                    # at least one probe must have been sent while the kind was served (a quick kind
                    # can be over between two probes)
                    while (reps < args.reps or time.perf_counter() - started < args.min_seconds
                           or (reps < MAX_REPS and not await probe.count(name))):
                        prepared = await prepare(load)
                        await probe.mark(name)
                        t0 = time.perf_counter()
                        await serve(load, prepared)
                        busy += time.perf_counter() - t0
                        await probe.mark("-")
                        reps += 1
                    rows[name] = {"reps": reps, "served_s": busy, "outcomes": load.outcomes,
                                  "body_bytes": load.body_bytes}
                    print(f"  {backend} {name}: {reps} reps, {busy:.1f} s, {load.outcomes}", file=sys.stderr)
            result = await probe.stop()
            if not args.no_profile:
                async with httpx.AsyncClient(base_url=server.base_url, timeout=300) as client:
                    for name in rows:
                        samples = result["samples"].get(name, [])
                        if samples and summary(samples)["p99_ms"] < TARGET_P99_MS:
                            continue
                        prepare, serve = KINDS[name]
                        load = Load(server.base_url, server.port, sizes, client)
                        prepared = await prepare(load)
                        before = set(profile_dir.glob("profile-*.prof")) if profile_dir.exists() else set()
                        server.signal(signal.SIGUSR1)
                        await serve(load, prepared)
                        server.signal(signal.SIGUSR2)
                        with trio.move_on_after(30):
                            while not (set(profile_dir.glob("profile-*.prof")) - before):
                                await trio.sleep(0.1)
                        new = sorted(set(profile_dir.glob("profile-*.prof")) - before)
                        if new:
                            profiles[name] = top_functions(new[-1])
        finally:
            await server.stop()
    idle = summary(result["samples"]["idle"])
    kinds = {}
    for name, row in rows.items():
        samples = result["samples"].get(name, [])
        stats = summary(samples) if samples else {"n": 0, "p50_ms": 0.0, "p99_ms": 0.0, "max_ms": 0.0, "mean_ms": 0.0}
        expected = EXPECTED.get(name)
        unexpected = {k: v for k, v in row["outcomes"].items()
                      if expected is not None and k not in expected
                      or expected is None and not k.startswith("read ")}
        kinds[name] = row | stats | {
            "ratio_p99": stats["p99_ms"] / idle["p99_ms"] if idle["p99_ms"] else 0.0,
            "probe_errors": result["errors"].get(name, 0), "unexpected": unexpected,
            "met": bool(stats["n"]) and stats["p99_ms"] < TARGET_P99_MS and not result["errors"].get(name)}
    return {"idle": idle, "kinds": kinds, "profiles": profiles}


# -- the report -------------------------------------------------------------------------------------


def report(results: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = ["# /healthz while the worst request of each kind is served (`python -m bench.stall`)", "",
             f"Mode: {meta['mode']}; probe every {PROBE_INTERVAL_S * 1000:g} ms on one kept-alive connection, "
             f"in its own process; load average {meta['load_before']} at the start, {meta['load_after']} at the "
             f"end. Target: p99 < {TARGET_P99_MS:g} ms for every kind.", ""]
    verdicts = []
    for backend, r in results.items():
        idle = r["idle"]
        lines += [f"## {backend}", "",
                  "| kind | reps | served s | probes | p50 ms | p99 ms | max ms | p99 ÷ idle | outcomes | verdict |",
                  "|---|---|---|---|---|---|---|---|---|---|",
                  f"| idle (no load) | | | {idle['n']} | {idle['p50_ms']:.2f} | {idle['p99_ms']:.2f} | "
                  f"{idle['max_ms']:.2f} | 1.00 | | |"]
        for name, k in r["kinds"].items():
            outcomes = "; ".join(f"{v}× {o}" for o, v in sorted(k["outcomes"].items()))
            if k["unexpected"]:
                outcomes += " (UNEXPECTED)"
            verdict = "met" if k["met"] else "MISSED"
            lines.append(f"| {name} | {k['reps']} | {k['served_s']:.1f} | {k['n']} | {k['p50_ms']:.2f} | "
                         f"{k['p99_ms']:.2f} | {k['max_ms']:.2f} | {k['ratio_p99']:.2f} | {outcomes} | {verdict} |")
            verdicts.append(f"- {backend} {name}: p99 {k['p99_ms']:.2f} ms — {verdict}")
        for name, top in r["profiles"].items():
            lines += ["", f"### {backend} {name}: event-loop thread, top functions by own time", "", "```", *top, "```"]
        lines.append("")
    return "\n".join(lines + ["## Verdicts", "", *verdicts, ""])


def load_average() -> str:
    try:
        return " ".join(Path("/proc/loadavg").read_text().split()[:3])
    except OSError:
        return "?"


async def main(args: argparse.Namespace) -> int:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    sizes = QUICK if args.quick else Sizes()
    pinning = pin_self()
    meta = {"mode": "quick" if args.quick else "full", "pinning": pinning, "load_before": load_average(),
            "sizes": sizes.__dict__, "target_p99_ms": TARGET_P99_MS}
    results = {}
    for backend in args.backends.split(","):
        print(f"stall: {backend}", file=sys.stderr)
        results[backend] = await backend_pass(backend, sizes, args, out)
    meta["load_after"] = load_average()
    (out / "stall.json").write_text(json.dumps({"meta": meta, "results": results}, indent=2))
    text = report(results, meta)
    (out / "stall.md").write_text(text)
    print(text)
    return 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--backends", default="sqlite,files")
    parser.add_argument("--kinds", type=lambda s: s.split(","), default=None, help="only these kinds")
    parser.add_argument("--reps", type=int, default=None)
    parser.add_argument("--min-seconds", type=float, default=None)
    parser.add_argument("--idle-seconds", type=float, default=None)
    parser.add_argument("--no-profile", action="store_true")
    parser.add_argument("--unpinned", action="store_true",
                        help="let the server use every CPU (its worker threads then need not share CPU 0 with the loop)")
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--probe", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    args.reps = args.reps if args.reps is not None else (1 if args.quick else 3)
    args.min_seconds = args.min_seconds if args.min_seconds is not None else (0.0 if args.quick else 3.0)
    args.idle_seconds = args.idle_seconds if args.idle_seconds is not None else (1.0 if args.quick else 5.0)
    return args


if __name__ == "__main__":
    parsed = parse_args()
    if parsed.probe:
        probe_main(parsed.probe)
    else:
        sys.exit(trio.run(main, parsed))
