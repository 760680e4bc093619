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

    python -m bench.slowclients [--bodies 8] [--body-mb 30] [--silent 40] [--configs default,no-trim,...]

The table is printed and written to ``bench/results/slowclients.md`` (and ``slowclients.json``).
"""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import socket
import sys
import tempfile
from pathlib import Path

import orjson
import trio

from .servers import REPO, awaken_server, pin_self

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
    return (f"POST {path} HTTP/1.1\r\nhost: bench\r\ncontent-type: application/json\r\n"
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


async def silent(port: int, n: int, released: trio.Event) -> None:
    """Start a long run and read nothing until the server let go of every connection."""
    stream = await connect(port, receive_buffer=4096)
    try:
        body = orjson.dumps({"threadId": f"silent-{n}", "runId": f"silent-{n}", "state": {}, "tools": [],
                             "messages": [{"id": f"silent-{n}", "role": "user", "content": "/words 50000"}],
                             "context": [], "forwardedProps": {}})
        await stream.send_all(post("/v1/ag-ui", body))
        await released.wait()
    finally:
        await stream.aclose()


async def measure(name: str, args: argparse.Namespace, root: Path) -> dict[str, float]:
    server = awaken_server(f"slowclients-{name}", "sqlite", root / name, root / "logs")
    config = root / name / "config.toml"
    text = config.read_text()
    cap = args.bodies if name == "no-cap" else 4
    text = re.sub(r"(?m)^write_timeout_seconds\s*=.*$", f"write_timeout_seconds = {args.write_timeout:g}", text)
    text = re.sub(r"(?m)^max_large_bodies\s*=.*$", f"max_large_bodies = {cap}", text)
    config.write_text(text)
    if name == "no-trim":
        server.extra_env["AWAKEN_NO_MALLOC_TRIM"] = "1"
    count = 0 if name == "silent-only" else args.bodies
    silent_count = 0 if name == "bodies-only" else args.silent
    bodies = [upload_body(args.body_mb, f"{name}-{i}") for i in range(count)]
    burst_mb = sum(map(len, bodies)) / 2**20
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
        for burst in range(args.bursts):
            if burst:  # the same burst again: the bodies are made anew, the clients are new connections
                bodies = [upload_body(args.body_mb, f"{name}-{burst}-{i}") for i in range(count)]
            released = trio.Event()
            started = trio.current_time()
            release_s = math.nan
            done = trio.Event()
            async with trio.open_nursery() as watch:
                watch.start_soon(sample)
                async with trio.open_nursery() as nursery:
                    for body in bodies:
                        nursery.start_soon(upload, server.port, body, statuses)
                    for n in range(silent_count):
                        nursery.start_soon(silent, server.port, n + burst * silent_count, released)
                    await trio.sleep(1)  # every client connected and sent its request
                    with trio.move_on_after(args.limit):
                        while held_connections(server.pid, server.port):
                            await trio.sleep(0.1)
                        release_s = trio.current_time() - started
                    still_held = held_connections(server.pid, server.port)
                    released.set()
                done.set()
            del bodies
            await trio.sleep(args.settle)
            afters.append(server.rss_kb() / 1024)
        after = afters[-1]
    finally:
        await server.stop()
    return {"silent": silent_count, "burst_mb": burst_mb, "before": before, "peak": peak, "after": after,
            "parsed": sum(s == 200 for s in statuses), "refused_503": sum(s == 503 for s in statuses),
            "other": sum(s not in (200, 503) for s in statuses), "release_s": release_s, "still_held": still_held,
            "after_each_burst": afters}


def table(rows: dict[str, dict[str, float]], args: argparse.Namespace) -> str:
    lines = [
        f"{args.bodies} uploads of {args.body_mb} MB (9,000 messages each, decoded) at once, with {args.silent} SSE "
        "clients that "
        f"never read (`/words 50000` each, write deadline {args.write_timeout:g} s); VmRSS of the server process, MB.",
        "",
        "| config | burst uploaded (MB) | uploads parsed / 503 | silent clients | every connection let go by the "
        "server after | RSS before | peak | after | after - before | growth ÷ burst |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for name, r in rows.items():
        growth = r["after"] - r["before"]
        lines.append(f"| {name} | {r['burst_mb']:.0f} | {r['parsed']:.0f} / {r['refused_503']:.0f}"
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
    parser.add_argument("--out", default=str(OUT), help="directory of slowclients.md and slowclients.json")
    args = parser.parse_args()
    print(f"bench.slowclients: {pin_self()}", file=sys.stderr)
    rows: dict[str, dict[str, float]] = {}
    with tempfile.TemporaryDirectory(prefix="awaken-slowclients-") as tmp:
        for name in args.configs.split(","):
            rows[name] = trio.run(measure, name, args, Path(tmp))
            rows[name] = {k: (None if isinstance(v, float) and math.isnan(v) else v) for k, v in rows[name].items()}
            print(f"  {name}: {rows[name]}", file=sys.stderr)
    text = table(rows, args)
    print(text)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "slowclients.md").write_text("# Slow clients and large bodies (`python -m bench.slowclients`)\n\n" + text)
    (out / "slowclients.json").write_text(json.dumps({"args": vars(args), "configs": rows}, indent=1))
    print(f"bench.slowclients: wrote {out / 'slowclients.md'} and slowclients.json", file=sys.stderr)


if __name__ == "__main__":
    main()
