"""Memory after a burst of slow clients and large bodies comes back: ``python -m bench.slowclients``.

Starts ``awaken serve`` (SQLite, pinned like every bench server) and reads its VmRSS before, during and
after one burst, sent all at once:

* ``--bodies`` (8) concurrent uploads of ``--body-mb`` (30) MB each: an AG-UI ``RunAgentInput`` of
  9,000 user messages (decoded whole: under the message cap and the container bound that refuses
  finding 10's body of tiny messages before decoding it), refused ``INVALID_ID`` after the parse,
  nothing committed. Bodies beyond ``[server] max_large_bodies`` (default 4) are answered
  503 ``TOO_MANY_LARGE_BODIES`` from their headers; the rest are read and parsed.
* ``--silent`` (40) SSE clients that start a long run (``/words 50000``, ~7 MB of frames) and never
  read (receive buffer 4 KiB): each run is interrupted ``client_too_slow`` when its 4 MiB buffer
  overflows, and the connection is closed by the write deadline (``--write-timeout``, 2 s here).

The silent clients read nothing until the server holds no client connection any more (its file
descriptors, from ``/proc``: the time this takes is printed); then they close. "After" is read once
every upload was answered, every connection closed and ``--settle`` seconds passed. The growth after - before
is compared with the burst's size (the bytes uploaded). Each configuration runs in a fresh server:

* ``default``: the shipped settings (cap 4, ``malloc_trim`` after the last large body);
* ``no-trim``: the same with ``AWAKEN_NO_MALLOC_TRIM=1`` (the freed memory stays in glibc's arenas);
* ``no-cap``: ``max_large_bodies`` = the number of uploads (every body read and parsed at once);
* ``bodies-only`` and ``silent-only``: the default settings with one half of the burst, to tell
  apart what each half leaves behind.

* ``mixed`` (issue 26, finding 13): no bodies; ``--idle-ws`` (300) AG-UI WebSockets opened first, one
  after another, that send nothing; then ``--mixed-silent`` (100) silent SSE clients as above and
  ``--detached`` (100) runs of the bench's ``on_disconnect = "continue"`` agent whose connection is
  closed after the first text delta. The burst is over once the server let go of every connection but
  the idle sockets and every detached run ended (the rejoin route answers 204); then the sockets close.
  Each burst uses new threads (200 a burst).

    python -m bench.slowclients [--bodies 8] [--body-mb 30] [--silent 40] [--configs default,no-trim,...]
    python -m bench.slowclients --configs mixed --bursts 8 [--no-caches] [--stats] [--trace] [--backend files]

``--bursts N`` repeats the burst on one server (RSS after each). ``--no-caches`` sets every cache to
zero through the config: ``[server] replay_memo_bytes`` and ``replay_bytes`` (each active run's rejoin
buffer) and the ledger's ``cache_bytes`` (files: ``tail_cache_bytes`` and ``index_cache_bytes`` too).
``--stats`` runs the server as ``bench.memtrace --child`` without tracemalloc and reads, after each
burst, where its memory is: CPython's small-object arenas and the bytes in their blocks, glibc's heaps
(``mallinfo2``), the objects the cycle collector tracks; after the last burst the same after a full
collection and a trim, with the garbage that collection found counted by type, and the server's
own objects (``awaken``, ``storage_backends``) still held, by type. ``--trace`` runs it
under tracemalloc (RSS inflated): a snapshot after burst ``--trace-from`` (4), and the allocation sites
whose live bytes grew between it and the last burst, top ``--top``. bench/SLOWCLIENTS.md has the figures.

The table is printed and written to ``bench/results/slowclients.md`` (and ``slowclients.json``; with
``--no-caches`` or ``--trace``, ``slowclients-no-caches.md``, ``slowclients-traced.md``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import math
import os
import re
import signal
import socket
import sys
import tempfile
from functools import partial
from pathlib import Path

import orjson
import trio

from .memtrace import read_stats, snapshot_diff
from .servers import DETACHED_AGENT, REPO, awaken_server, pin_self

OUT = REPO / "bench" / "results"


def upload_body(mb: int, tag: str) -> bytes:
    """An AG-UI request of ~``mb`` MB: 9,000 user messages of equal text (under the message cap and the
    container bound, so the whole body is decoded), on a thread id the id rule refuses once it is parsed
    (``INVALID_ID``: nothing is committed)."""
    count = 9_000
    text = "x" * max(1, (mb * 1024 * 1024) // count - 60)
    messages = [{"id": f"m-{i:07d}", "role": "user", "content": text} for i in range(count)]
    return orjson.dumps({"threadId": f"/burst-{tag}", "runId": f"burst-{tag}", "state": {}, "messages": messages,
                         "tools": [], "context": [], "forwardedProps": {}})


def post(path: str, body: bytes) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: application/json\r\n"
            f"content-length: {len(body)}\r\nconnection: close\r\n\r\n").encode() + body


async def connect(port: int, *, receive_buffer: int | None = None) -> trio.SocketStream:
    sock = trio.socket.socket(trio.socket.AF_INET, trio.socket.SOCK_STREAM)
    if receive_buffer is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
    await sock.connect(("127.0.0.1", port))
    return trio.SocketStream(sock)


async def read_to_eof(stream: trio.SocketStream) -> bytes:
    """Everything the server sends until it closes the connection (a reset counts as a close)."""
    data = bytearray()
    while True:
        try:
            chunk = await stream.receive_some(1 << 16)
        except trio.BrokenResourceError:
            break
        if not chunk:
            break
        data += chunk
    return bytes(data)


async def upload(port: int, body: bytes, statuses: list[int]) -> None:
    stream = await connect(port)
    try:
        try:
            await stream.send_all(post("/v1/ag-ui", body))
        except trio.BrokenResourceError:
            pass  # refused from its headers and closed while the rest was still being sent
        raw = await read_to_eof(stream)
        statuses.append(int(raw.split(b" ", 2)[1]) if raw.startswith(b"HTTP/1.1 ") else 0)
    finally:
        await stream.aclose()


def held_connections(pid: int, port: int) -> int:
    """How many client connections on ``port`` the server process still holds a file descriptor for."""
    inodes = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if int(fields[1].rsplit(":", 1)[1], 16) == port and fields[3] != "0A":  # not the listener
                inodes.add(f"socket:[{fields[9]}]")
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            held += os.readlink(fd) in inodes
        except OSError:
            continue
    return held


async def silent(port: int, n: int, released: trio.Event, *, words: int = 50_000, tag: str = "silent") -> None:
    """Start a long run and read nothing until the server let go of every connection."""
    stream = await connect(port, receive_buffer=4096)
    try:
        body = orjson.dumps({"threadId": f"{tag}-{n}", "runId": f"{tag}-{n}", "state": {}, "tools": [],
                             "messages": [{"id": f"{tag}-{n}", "role": "user", "content": f"/words {words}"}],
                             "context": [], "forwardedProps": {}})
        await stream.send_all(post("/v1/ag-ui", body))
        await released.wait()
    finally:
        await stream.aclose()


async def detach(port: int, thread_id: str, text: str) -> None:
    """Start a run of the bench's ``on_disconnect = "continue"`` agent and close the connection after its
    first text delta: the run goes on, detached, to its committed outcome."""
    stream = await connect(port)
    try:
        body = orjson.dumps({"threadId": thread_id, "runId": f"{thread_id}-r", "state": {}, "tools": [],
                             "messages": [{"id": f"{thread_id}-u", "role": "user", "content": text}],
                             "context": [], "forwardedProps": {}})
        await stream.send_all(post(f"/v1/ag-ui/agents/{DETACHED_AGENT}", body))
        seen = b""
        while b"TEXT_MESSAGE_CONTENT" not in seen:
            chunk = await stream.receive_some(1 << 16)
            if not chunk:
                break
            seen = seen[-64:] + chunk
    finally:
        await stream.aclose()


async def start_detached(port: int, thread_ids: list[str], text: str, concurrency: int = 16) -> None:
    limiter = trio.CapacityLimiter(concurrency)

    async def one(thread_id: str) -> None:
        async with limiter:
            await detach(port, thread_id, text)

    async with trio.open_nursery() as nursery:
        for thread_id in thread_ids:
            nursery.start_soon(one, thread_id)


async def still_running(port: int, thread_ids: list[str]) -> int:
    """How many of the threads have a run the AG-UI rejoin route still streams (204: none)."""
    import httpx

    running = 0
    async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{port}", timeout=30) as client:
        for thread_id in thread_ids:
            async with client.stream("GET", f"/v1/ag-ui/threads/{thread_id}/stream") as response:
                running += response.status_code == 200
    return running


async def idle_socket(port: int, opened: list[int], released: trio.Event,
                      *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
    """An AG-UI WebSocket that sends nothing until the burst is over (wsproto answers the pings). Started
    (``nursery.start``) once its handshake is done or failed: the sockets open one after another, before
    the rest of the burst, so that none waits in a full listen backlog."""
    import trio_websocket

    async with contextlib.AsyncExitStack() as stack:
        try:
            await stack.enter_async_context(trio_websocket.open_websocket_url(
                f"ws://127.0.0.1:{port}/v1/ag-ui/ws", connect_timeout=30, disconnect_timeout=5))
        except (OSError, trio_websocket.HandshakeError, trio_websocket.ConnectionClosed) as exc:
            print(f"bench.slowclients: an idle WebSocket failed: {exc!r}", file=sys.stderr)
            task_status.started()
            return
        opened.append(1)
        task_status.started()
        await released.wait()


def no_caches(text: str, backend: str) -> str:
    """The config with every cache at zero: the replayed-history memo, the ledger's hot-thread caches
    (SQLite's admission state; the file ledger's histories, long threads' tails and index details) and
    each active run's rejoin buffer."""
    options = ("{ cache_bytes = 0 }" if backend == "sqlite" else
               "{ cache_bytes = 0, tail_cache_bytes = 0, index_cache_bytes = 0 }")
    text = re.sub(r"(?m)^replay_memo_bytes\s*=.*$", "replay_memo_bytes = 0", text)
    text = re.sub(r"(?m)^replay_bytes\s*=.*$", "replay_bytes = 0", text)
    new = re.sub(r"(?m)^options\s*=\s*\{\s*\}\s*$", f"options = {options}", text, count=1)
    assert new != text and "replay_memo_bytes = 0" in new and "replay_bytes = 0" in new, "config not as expected"
    return new


async def measure(name: str, args: argparse.Namespace, root: Path) -> dict[str, float]:
    label = name + ("-no-caches" if args.no_caches else "") + ("-traced" if args.trace else "")
    server = awaken_server(f"slowclients-{label}", args.backend, root / label, root / "logs")
    config = root / label / "config.toml"
    text = config.read_text()
    cap = args.bodies if name == "no-cap" else 4
    text = re.sub(r"(?m)^write_timeout_seconds\s*=.*$", f"write_timeout_seconds = {args.write_timeout:g}", text)
    text = re.sub(r"(?m)^max_large_bodies\s*=.*$", f"max_large_bodies = {cap}", text)
    if args.no_caches:
        text = no_caches(text, args.backend)
    config.write_text(text)
    if name == "no-trim":
        server.extra_env["AWAKEN_NO_MALLOC_TRIM"] = "1"
    trace_out = root / label / "trace.txt"
    if args.trace or args.stats:  # tracemalloc: SIGUSR1 takes the base snapshot, SIGUSR2 writes the difference
        server.argv = [sys.executable, "-m", "bench.memtrace", "--child", str(trace_out), *server.argv[3:]]
        server.extra_env["BENCH_TRACE_FRAMES"] = str(args.trace_frames if args.trace else 0)
    mixed = name == "mixed"
    count = 0 if name in ("silent-only", "mixed") else args.bodies
    silent_count = 0 if name == "bodies-only" else (args.mixed_silent if mixed else args.silent)
    detached_count = args.detached if mixed else 0
    sockets_count = args.idle_ws if mixed else 0
    bodies = [upload_body(args.body_mb, f"{name}-{i}") for i in range(count)]
    burst_mb = sum(map(len, bodies)) / 2**20
    trace: list[tuple[int, int, str]] = []
    await server.start()
    try:
        # warm up: a few ordinary runs, so "before" holds what any served server holds
        for n in range(5):
            stream = await connect(server.port)
            await stream.send_all(post("/v1/ag-ui", orjson.dumps(
                {"threadId": f"warm-{n}", "runId": f"warm-{n}", "state": {}, "tools": [], "context": [],
                 "forwardedProps": {}, "messages": [{"id": f"warm-{n}", "role": "user", "content": "/words 20"}]})))
            await stream.receive_some(1 << 16)
            await stream.aclose()
        await trio.sleep(args.settle)
        before = server.rss_kb() / 1024
        peak = before
        statuses: list[int] = []
        done = trio.Event()

        async def sample() -> None:
            nonlocal peak
            while not done.is_set():
                peak = max(peak, server.rss_kb() / 1024)
                await trio.sleep(0.05)

        afters: list[float] = []
        release_each: list[float | None] = []
        stats_each: list[dict[str, int]] = []
        for burst in range(args.bursts):
            if burst:  # the same burst again: the bodies are made anew, the clients are new connections
                bodies = [upload_body(args.body_mb, f"{name}-{burst}-{i}") for i in range(count)]
            released = trio.Event()
            started = trio.current_time()
            release_s = math.nan
            done = trio.Event()
            opened: list[int] = []
            detached_ids = [f"detached-{burst}-{n}" for n in range(detached_count)]
            async with trio.open_nursery() as watch:
                watch.start_soon(sample)
                async with trio.open_nursery() as nursery:
                    for _ in range(sockets_count):  # first, one after another
                        await nursery.start(idle_socket, server.port, opened, released)
                    for body in bodies:
                        nursery.start_soon(upload, server.port, body, statuses)
                    for n in range(silent_count):
                        nursery.start_soon(partial(silent, words=args.silent_words), server.port,
                                           n + burst * silent_count, released)
                    await start_detached(server.port, detached_ids, args.detached_script)
                    await trio.sleep(1)  # every client connected and sent its request
                    with trio.move_on_after(args.limit):
                        # the idle sockets stay held (by design) until the burst is over
                        while held_connections(server.pid, server.port) > len(opened):
                            await trio.sleep(0.1)
                        while detached_ids and await still_running(server.port, detached_ids):
                            await trio.sleep(0.5)
                        # the probes' own connections (``still_running``) are closed by now; the server
                        # lets go of them once it reads their end: counted only after that
                        while held_connections(server.pid, server.port) > len(opened):
                            await trio.sleep(0.1)
                        release_s = trio.current_time() - started
                    still_held = held_connections(server.pid, server.port) - len(opened)
                    if sockets_count and len(opened) != sockets_count:
                        print(f"bench.slowclients: {len(opened)} of {sockets_count} idle WebSockets opened",
                              file=sys.stderr)
                    released.set()
                done.set()
            del bodies
            await trio.sleep(args.settle)
            afters.append(server.rss_kb() / 1024)
            release_each.append(None if math.isnan(release_s) else release_s)
            if args.stats:
                stats_each.append(await read_stats(server.pid, trace_out) | {"rss": int(afters[-1] * 2**20)})
            print(f"  {label} burst {burst + 1}: RSS {afters[-1]:.1f} MB (let go after {release_s:.1f} s)",
                  file=sys.stderr)
            if args.trace and burst + 1 == args.trace_from:
                server.signal(signal.SIGUSR1)
                await trio.sleep(1)
            elif args.trace and burst + 1 == args.bursts:
                trace = await snapshot_diff(server.pid, trace_out)
        after = afters[-1]
        collected: dict[str, int] = {}
        if args.stats:  # what is left once every garbage cycle is collected and the heaps trimmed
            collected = await read_stats(server.pid, trace_out, collect=True)
            await trio.sleep(0.5)
            collected["rss"] = server.rss_kb() * 1024
    finally:
        await server.stop()
    return {"silent": silent_count, "detached": detached_count, "idle_ws": sockets_count, "burst_mb": burst_mb,
            "before": before, "peak": peak, "after": after,
            "parsed": sum(s == 200 for s in statuses), "refused_503": sum(s == 503 for s in statuses),
            "other": sum(s not in (200, 503) for s in statuses), "release_s": release_s, "still_held": still_held,
            "after_each_burst": afters, "release_each_burst": release_each, "no_caches": args.no_caches,
            "backend": args.backend, "traced": args.trace,
            "trace_top": [list(r) for r in sorted(trace, key=lambda r: -r[0])[:args.top]],
            "trace_total": sum(r[0] for r in trace), "trace_count": sum(r[1] for r in trace),
            "stats_each_burst": stats_each, "stats_collected": collected}


STATS = (("rss", "RSS"), ("pymalloc_arenas", "CPython arenas (1 MiB)"), ("pymalloc_bytes_in_use", "in their blocks"),
         ("glibc_heap", "glibc heaps"), ("glibc_in_use", "in use"), ("glibc_free", "free in them"),
         ("glibc_mmapped", "mmapped"), ("gc_objects", "objects (gc)"), ("threads", "threads"))


def stats_table(name: str, r: dict) -> str:
    """Where the memory is after each burst (MB, but objects and threads)."""
    def cell(key: str, value: int) -> str:
        return f"{value:,}" if key in ("gc_objects", "threads", "pymalloc_arenas") else f"{value / 2**20:.1f}"

    lines = [f"Config {name}: where the server's memory is after each burst (MB; `--stats`)", "",
             "| after | " + " | ".join(label for _, label in STATS) + " |", "|---" * (len(STATS) + 1) + "|"]
    rows = [(f"burst {i + 1}", st) for i, st in enumerate(r["stats_each_burst"])]
    if r.get("stats_collected"):
        rows.append((f"burst {len(rows)}, then gc.collect() and malloc_trim", r["stats_collected"]))
    for label, st in rows:
        lines.append(f"| {label} | " + " | ".join(cell(k, st[k]) if k in st else "-" for k, _ in STATS) + " |")
    collected = r.get("stats_collected") or {}
    for key, what in (("garbage_types", "garbage the full collection found"),
                      ("held_types", "the server's own objects still held after it")):
        if collected.get(key):
            lines += ["", f"{what}: " + ", ".join(f"{n:,} {t}" for t, n in list(collected[key].items())[:12])]
    return "\n".join(lines) + "\n"


def trace_table(name: str, r: dict, args: argparse.Namespace) -> str:
    """The allocation sites whose live bytes grew between burst ``--trace-from`` and the last one."""
    root = str(REPO) + "/"
    lines = [f"Config {name} under tracemalloc: live Python allocations after burst {args.bursts} minus after "
             f"burst {args.trace_from}: {r['trace_total'] / 2**20:+.2f} MB in {r['trace_count']:+,} blocks; "
             f"the top {args.top} sites by bytes:", "",
             "| bytes | blocks | allocated at |", "|---|---|---|"]
    for size, count, where in r["trace_top"]:
        short = " <- ".join(w.replace(root, "").split("site-packages/")[-1] for w in where.split(" <- "))
        lines.append(f"| {size:+,} | {count:+,} | {short} |")
    return "\n".join(lines) + "\n"


def table(rows: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    if set(rows) == {"mixed"}:
        head = (f"{args.idle_ws} idle WebSockets, then {args.mixed_silent} SSE clients that never read "
                f"(`/words {args.silent_words}` each, write deadline {args.write_timeout:g} s) and {args.detached} "
                f"detached runs, on {args.backend}, {args.bursts} burst(s); VmRSS of the server process, MB.")
    else:
        head = (f"{args.bodies} uploads of {args.body_mb} MB (9,000 messages each, decoded) at once, with "
                f"{args.silent} SSE clients that never read (`/words {args.silent_words}` each, write deadline "
                f"{args.write_timeout:g} s); VmRSS of the server process, MB.")
    lines = [
        head,
        "",
        "| config | burst uploaded (MB) | uploads parsed / 503 | silent clients | every connection let go by the "
        "server after | RSS before | peak | after | after - before | growth ÷ burst |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        growth = r["after"] - r["before"]
        caches = (" (no caches)" if r.get("no_caches") else "") + (" (traced)" if r.get("traced") else "")
        if r.get("detached") or r.get("idle_ws"):
            caches += f" ({r['detached']} detached runs, {r['idle_ws']} idle WebSockets)"
        lines.append(f"| {name}{caches} | {r['burst_mb']:.0f} | {r['parsed']:.0f} / {r['refused_503']:.0f}"
                     + (f" ({r['other']:.0f} other)" if r["other"] else "")
                     + f" | {r['silent']:.0f}"
                     + (f" | {r['release_s']:.1f} s" if r["still_held"] == 0 else f" | {r['still_held']:.0f} still held")
                     + f" | {r['before']:.0f} | {r['peak']:.0f} | "
                     f"{r['after']:.0f}"
                     + (" (after each burst: " + ", ".join(f"{a:.0f}" for a in r["after_each_burst"]) + ")"
                        if len(r.get("after_each_burst") or []) > 1 else "")
                     + f" | {growth:+.0f} | "
                     + (f"{growth / r['burst_mb']:.1%} |" if r["burst_mb"] else "- |"))
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.slowclients", description=__doc__.splitlines()[0])
    parser.add_argument("--bodies", type=int, default=8)
    parser.add_argument("--body-mb", type=int, default=30)
    parser.add_argument("--silent", type=int, default=40)
    parser.add_argument("--write-timeout", type=float, default=2.0)
    parser.add_argument("--settle", type=float, default=2.0, help="seconds before each RSS reading")
    parser.add_argument("--limit", type=float, default=120.0,
                        help="seconds to wait for the server to let go of every connection")
    parser.add_argument("--configs", default="default,no-trim,no-cap,bodies-only,silent-only")
    parser.add_argument("--bursts", type=int, default=1,
                        help="the same burst this many times in a row on one server (RSS after each is printed)")
    parser.add_argument("--backend", default="sqlite", choices=("sqlite", "files"))
    parser.add_argument("--no-caches", action="store_true",
                        help="every cache at zero: replay_memo_bytes, replay_bytes and the ledger's cache_bytes "
                             "(files: tail_cache_bytes and index_cache_bytes too)")
    parser.add_argument("--mixed-silent", type=int, default=100, help="config mixed: silent SSE clients")
    parser.add_argument("--silent-words", type=int, default=50_000, help="the silent clients' runs: /words N")
    parser.add_argument("--detached", type=int, default=100, help="config mixed: detached runs")
    parser.add_argument("--detached-script", default="/words 200\n/delay 5",
                        help="config mixed: the detached runs' script (the scripted model's commands)")
    parser.add_argument("--idle-ws", type=int, default=300, help="config mixed: idle WebSockets")
    parser.add_argument("--trace", action="store_true",
                        help="run the server under tracemalloc: a snapshot after burst --trace-from, and the "
                             "allocation sites that grew between it and the last burst printed (RSS is inflated)")
    parser.add_argument("--stats", action="store_true",
                        help="after each burst, where the server's memory is (CPython's small-object arenas, "
                             "glibc's heaps, objects, threads); after the last, the same after a full collection "
                             "and a trim")
    parser.add_argument("--trace-from", type=int, default=4)
    parser.add_argument("--trace-frames", type=int, default=1,
                        help="frames per traceback (more than 1: sites grouped by the whole traceback)")
    parser.add_argument("--top", type=int, default=25, help="allocation sites printed with --trace")
    parser.add_argument("--out", default=str(OUT), help="directory of slowclients.md and slowclients.json")
    args = parser.parse_args()
    args.detached_script = args.detached_script.replace("\\n", "\n")
    print(f"bench.slowclients: {pin_self()}", file=sys.stderr)
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="awaken-slowclients-") as tmp:
        for name in args.configs.split(","):
            rows[name] = trio.run(measure, name, args, Path(tmp))
            rows[name] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rows[name].items()}
            print(f"  {name}: {rows[name]}", file=sys.stderr)
    text = table(rows, args)
    for name, r in rows.items():
        if r.get("stats_each_burst"):
            text += "\n" + stats_table(name, r)
        if r.get("traced"):
            text += "\n" + trace_table(name, r, args)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    stem = "slowclients" + ("-no-caches" if args.no_caches else "") + ("-traced" if args.trace else "")
    (out / f"{stem}.md").write_text("# Slow clients and large bodies (`python -m bench.slowclients`)\n\n" + text)
    (out / f"{stem}.json").write_text(json.dumps({"args": vars(args), "configs": rows}, indent=1))
    print(f"bench.slowclients: wrote {out / stem}.md and {stem}.json", file=sys.stderr)


if __name__ == "__main__":
    main()
