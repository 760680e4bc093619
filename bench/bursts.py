"""Bursts: N clients connect at once to each server and each streams a paced run.

    python -m bench.bursts [--quick] [--levels 200,2000] [--rounds 2] [--out bench/results]

Servers: the floor with a backlog of 2,048 and, as a control, with hypercorn's default of 100; Awaken (SQLite, the repo's config, ``[auth] mode = "none"``), Awaken secured (``[auth] mode = "tokens"``,
every client sending an admin token, and an ``Origin`` listed in ``cors_origins``), the floor (``bench/floor.py``)
and the peer (``bench/peer.py``, skipped with a note when its packages are not installed). Channels: AG-UI over
SSE, and over WebSocket where the server has one (the peer has none: skipped, not faked).

One burst: ``n`` tasks each open a TCP connection at the same instant (``t0``), send one paced run
(``/words 100``, ``/delay 10``) and read it to the end. Per burst:

- *accept*: the time from ``t0`` until ``connect()`` had returned for every client: the kernel completed the
  handshake, which it does only while the listen socket's accept queue has room. A SYN dropped from a full
  queue is retried by the client's kernel after 1 s, then 3 s, 7 s, …, so a backlog too small for the burst
  shows as whole seconds here.
- *first byte*: from ``t0`` until each client's first response byte (SSE) or its handshake's answer (WebSocket):
  the server's ``accept()`` and its work per new connection.
- *wall*: from ``t0`` until the last stream ended (ideal: the pacing alone, 1 s).
- *failed*: connection refused/reset, timeouts (a stream still open 60 s after ``t0``), a stream ending short of its deltas or its terminal event;
  *completed*: every delta and the terminal event arrived.
- the kernel's ``TcpExt: ListenOverflows / ListenDrops`` counters over the burst (machine-wide, from
  ``/proc/net/netstat``: SYNs or handshakes dropped because an accept queue was full), and each server's
  listen backlog (``ss -ltn``: Send-Q of a listening socket is its backlog) and open-file limit.

The bench raises its own ``RLIMIT_NOFILE`` soft limit to the hard limit before it starts any server; the servers
inherit it (their limit is read back from ``/proc/<pid>/limits`` into the report).
"""

from __future__ import annotations

import argparse
import math
import os
import re
import resource
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import orjson
import trio

from .client import DELTA_MARK, request_body, script
from .servers import REPO, ServerProcess, awaken_server, floor_server, peer_server, pin_self, process_sched
from .stats import summary

clock = time.perf_counter

WORDS, DELAY_MS = 100, 10.0
#: the secured Awaken: its admin token (a bench-only key, passed through the environment) and a CORS origin
TOKEN_ENV = "AWAKEN_BENCH_ADMIN_TOKEN"
TOKEN = "bench-admin-token-0123456789abcdef"
ORIGIN = "http://localhost:3000"
TOKENS_TABLE = (f'\n[[auth.tokens]]\nname = "bench"\nenv = "{TOKEN_ENV}"\nrole = "admin"\nsubject = "bench"\n')
TERMINAL = b'"RUN_FINISHED"'
PATHS = {"sse": "/v1/ag-ui", "ws": "/v1/ag-ui/ws"}


def raise_nofile() -> tuple[int, int]:
    """The soft ``RLIMIT_NOFILE`` raised to the hard limit (children inherit it); returns (soft, hard)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = hard if hard != resource.RLIM_INFINITY else max(soft, 1 << 20)
    if soft < want:
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (want, hard))
        except (ValueError, OSError):
            pass
    return resource.getrlimit(resource.RLIMIT_NOFILE)


def listen_backlog(port: int) -> dict[str, Any]:
    """The listening socket's backlog and current accept queue from ``ss -ltn`` (Send-Q, Recv-Q)."""
    try:
        out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True,
                             timeout=5).stdout
    except (OSError, subprocess.SubprocessError) as exc:
        return {"backlog": None, "source": f"ss failed: {exc}"}
    for line in out.splitlines():
        fields = line.split()
        if len(fields) >= 4 and fields[0] == "LISTEN":
            return {"backlog": int(fields[2]), "accept_queue": int(fields[1]), "source": "ss -ltn (Send-Q)"}
    return {"backlog": None, "source": "ss -ltn: no listening socket on the port"}


def somaxconn() -> int | None:
    try:
        return int(Path("/proc/sys/net/core/somaxconn").read_text())
    except (OSError, ValueError):
        return None


def listen_counters() -> dict[str, int]:
    """``TcpExt: ListenOverflows, ListenDrops`` (machine-wide) from /proc/net/netstat."""
    try:
        lines = Path("/proc/net/netstat").read_text().splitlines()
    except OSError:
        return {}
    for names, values in zip(lines[::2], lines[1::2], strict=False):
        if names.startswith("TcpExt:"):
            table = dict(zip(names.split()[1:], (int(v) for v in values.split()[1:]), strict=False))
            return {k: table.get(k, 0) for k in ("ListenOverflows", "ListenDrops")}
    return {}


def nofile_limit(pid: int) -> int | None:
    try:
        for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
            if line.startswith("Max open files"):
                return int(line.split()[3])
    except (OSError, ValueError, IndexError):
        pass
    return None


@dataclass
class Client:
    t_connect: float = math.nan
    t_first_byte: float = math.nan
    t_end: float = math.nan
    deltas: int = 0
    error: str | None = None


def _kind(exc: BaseException) -> str:
    if isinstance(exc, ConnectionResetError | BrokenPipeError):
        return "connection reset"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, trio.TooSlowError):
        return "timed out"
    return f"{type(exc).__name__}: {exc}"[:120]


async def _sse(sock: trio.socket.SocketType, host: str, port: int, body: bytes, headers: dict[str, str],
               c: Client) -> None:
    head = [f"POST {PATHS['sse']} HTTP/1.1", f"Host: {host}:{port}", "Content-Type: application/json",
            "Accept: text/event-stream", f"Content-Length: {len(body)}", "Connection: close"]
    head += [f"{k}: {v}" for k, v in headers.items()]
    await sock.send(("\r\n".join(head) + "\r\n\r\n").encode() + body)
    chunks: list[bytes] = []
    while True:
        data = await sock.recv(65536)
        if not data:
            break
        if not chunks:
            c.t_first_byte = clock()
        chunks.append(data)
    c.t_end = clock()
    whole = b"".join(chunks)
    c.deltas = whole.count(DELTA_MARK["agui"])
    if not whole.startswith(b"HTTP/1.1 200"):
        c.error = f"status {whole[:12].decode(errors='replace')!r}"
    elif TERMINAL not in whole:
        c.error = "stream ended without RUN_FINISHED"


async def _ws(sock: trio.socket.SocketType, host: str, port: int, body: bytes, headers: dict[str, str],
              c: Client) -> None:
    from wsproto import ConnectionType, WSConnection
    from wsproto.events import AcceptConnection, CloseConnection, RejectConnection, Request, TextMessage

    ws = WSConnection(ConnectionType.CLIENT)
    extra = [(k.lower().encode(), v.encode()) for k, v in headers.items()]
    await sock.send(ws.send(Request(host=f"{host}:{port}", target=PATHS["ws"], extra_headers=extra)))
    text = ""
    while True:
        data = await sock.recv(65536)
        if not data:
            c.error = c.error or "the server closed the connection"
            return
        ws.receive_data(data)
        for event in ws.events():
            if isinstance(event, AcceptConnection):
                c.t_first_byte = clock()
                await sock.send(ws.send(TextMessage(data=body.decode())))
            elif isinstance(event, RejectConnection):
                c.error = f"upgrade refused: {event.status_code}"
                return
            elif isinstance(event, TextMessage):
                text += event.data
                if not event.message_finished:
                    continue
                message, text = text, ""
                if '"TEXT_MESSAGE_CONTENT"' in message:
                    c.deltas += 1
                elif '"RUN_FINISHED"' in message or '"RUN_ERROR"' in message:
                    c.t_end = clock()
                    if '"RUN_ERROR"' in message:
                        c.error = "in-band error: " + message[:120]
                    try:
                        await sock.send(ws.send(CloseConnection(code=1000)))
                    except OSError:
                        pass
                    return
            elif isinstance(event, CloseConnection):
                c.error = c.error or f"closed by the server ({event.code})"
                return


async def burst(port: int, transport: str, n: int, *, headers: dict[str, str] | None = None,
                words: int = WORDS, delay_ms: float = DELAY_MS, limit_s: float = 120.0,
                server: ServerProcess | None = None) -> dict[str, Any]:
    """``n`` clients connect at the same instant and each streams one paced AG-UI run; see the module doc."""
    host = "127.0.0.1"
    headers = headers or {}
    bodies = [request_body("agui", script(words, delay_ms)) for _ in range(n)]
    clients = [Client() for _ in range(n)]
    socks = [trio.socket.socket() for _ in range(n)]
    go = trio.Event()
    run = _sse if transport == "sse" else _ws

    async def one(i: int) -> None:
        c, sock = clients[i], socks[i]
        await go.wait()
        try:
            with trio.fail_after(limit_s), sock:
                await sock.connect((host, port))
                c.t_connect = clock()
                await run(sock, host, port, bodies[i], headers, c)
        except BaseException as exc:  # noqa: BLE001 - every failure is counted, none ends the burst
            if not isinstance(exc, Exception | trio.TooSlowError):
                raise
            c.error = _kind(exc)

    counters0 = listen_counters()
    cpu0 = server.sched() if server else None
    me0 = process_sched()
    async with trio.open_nursery() as nursery:
        for i in range(n):
            nursery.start_soon(one, i)
        await trio.sleep(0.1)  # every task waits at the start line
        t0 = clock()
        go.set()
    cpu1 = server.sched() if server else None
    me1 = process_sched()
    counters1 = listen_counters()
    connected = [c.t_connect - t0 for c in clients if not math.isnan(c.t_connect)]
    first = [c.t_first_byte - t0 for c in clients if not math.isnan(c.t_first_byte)]
    ends = [c.t_end - t0 for c in clients if not math.isnan(c.t_end)]
    failures: dict[str, int] = {}
    completed = 0
    for c in clients:
        error = c.error or (None if c.deltas == words else f"{c.deltas} of {words} deltas")
        if error is None:
            completed += 1
        else:
            kind = error if not error.endswith("deltas") else "short stream"
            failures[kind] = failures.get(kind, 0) + 1
    return {
        "clients": n, "connected": len(connected), "completed": completed, "failed": n - completed,
        "failures": failures,
        "accept_s": round(max(connected), 4) if len(connected) == n else None,
        "accept_all_or_last_s": round(max(connected), 4) if connected else None,
        "connect_s": summary(connected, 4),
        "first_byte_s": summary(first, 4),
        "first_byte_all_s": round(max(first), 4) if len(first) == n else None,
        "wall_s": round(max(ends), 3) if ends else None,
        "ideal_s": round(words * delay_ms / 1000, 3),
        "listen_overflows": {k: counters1.get(k, 0) - counters0.get(k, 0) for k in counters1},
        "server_cpu_s": round(cpu1[0] - cpu0[0], 3) if cpu0 and cpu1 else None,
        "server_wait_s": round(cpu1[1] - cpu0[1], 3) if cpu0 and cpu1 else None,
        "client_cpu_s": round(me1[0] - me0[0], 3),
    }


# ------------------------------------------------------------------------------------------------
# the subjects and the plan


@dataclass
class BurstSubject:
    name: str
    server: ServerProcess
    channels: tuple[str, ...]
    headers: dict[str, str] = field(default_factory=dict)
    skipped: dict[str, str] = field(default_factory=dict)


def secured_awaken(name: str, data_dir: Path, log_dir: Path) -> ServerProcess:
    """Awaken with ``[auth] mode = "tokens"`` (the admin token in the environment) on the repo's config, whose
    ``cors_origins`` lists ``ORIGIN``."""
    server = awaken_server(name, "sqlite", data_dir, log_dir)
    config = data_dir / "config.toml"
    text = config.read_text()
    if re.search(r"(?m)^\[auth\]\s*$", text):
        text, n = re.subn(r'(?ms)(^\[auth\]\s*$.*?^mode\s*=\s*)"[a-z]+"', r'\1"tokens"', text, count=1)
        if not n:
            raise RuntimeError("the bench config's [auth] table has no mode to set")
    else:
        text += '\n[auth]\nmode = "tokens"\n'
    if ORIGIN not in text:
        text = text.replace("[server]\n", f'[server]\ncors_origins = ["{ORIGIN}"]\n', 1)
    config.write_text(text + TOKENS_TABLE)
    server.extra_env[TOKEN_ENV] = TOKEN
    return server


def subjects(tmp: Path, log_dir: Path, notes: list[str], *, with_peer: bool = True) -> list[BurstSubject]:
    from . import peer

    out = [BurstSubject("floor", floor_server(log_dir), ("sse", "ws")),
           # the control: the floor with hypercorn's default backlog, as Awaken listens today
           BurstSubject("floor backlog 100", floor_server(log_dir, backlog=100, name="floor backlog 100"), ("sse",)),
           BurstSubject("awaken[sqlite]", awaken_server("awaken[sqlite]-bursts", "sqlite", tmp / "bursts-plain",
                                                        log_dir), ("sse", "ws")),
           BurstSubject("awaken[sqlite] tokens+cors",
                        secured_awaken("awaken[sqlite]-bursts-secured", tmp / "bursts-secured", log_dir),
                        ("sse", "ws"), {"Authorization": f"Bearer {TOKEN}", "Origin": ORIGIN})]
    ok, why = peer.available() if with_peer else (False, "--no-peer")
    if ok:
        out.append(BurstSubject("peer", peer_server(log_dir), ("sse",), skipped={"ws": peer.NO_WEBSOCKET}))
    else:
        notes.append(f"bursts: the peer skipped: {why}")
    return out


async def run_bursts(levels: tuple[int, ...], rounds: int, tmp: Path, log_dir: Path, *,
                     notes: list[str], progress: Any = None, with_peer: bool = True,
                     words: int = WORDS, limit_s: float = 60.0) -> dict[str, Any]:
    """Every subject and channel at every level, ``rounds`` times, server by server (order reversed on every other
    round); returns the ``bursts`` section of the report."""
    limits = raise_nofile()
    pool = subjects(tmp, log_dir, notes, with_peer=with_peer)
    raw: dict[tuple[str, str, int], list[dict[str, Any]]] = {}
    servers: list[dict[str, Any]] = []
    try:
        for s in pool:
            await s.server.start()
            servers.append({"subject": s.name, "port": s.server.port, **listen_backlog(s.server.port),
                            "nofile": nofile_limit(s.server.pid), "skipped": s.skipped})
        for n in levels:
            for rnd in range(rounds):
                for s in (pool if rnd % 2 == 0 else pool[::-1]):
                    for channel in s.channels:
                        if progress:
                            progress(f"burst of {n} {s.name} {channel} (round {rnd + 1})")
                        result = await burst(s.server.port, channel, n, headers=s.headers, server=s.server,
                                             words=words, limit_s=limit_s)
                        if progress:
                            progress(f"  accepted in {result['accept_all_or_last_s']} s, wall {result['wall_s']} s, "
                                     f"{result['completed']} of {n} completed, failures {result['failures'] or 0}")
                        raw.setdefault((s.name, channel, n), []).append(result)
                        await trio.sleep(1.0)  # the last connections close before the next burst
    finally:
        with trio.CancelScope(shield=True):
            for s in pool:
                await s.server.stop()
    return summarise(raw, servers, levels, rounds, limits, words)


def _median(values: list[float | None]) -> float | None:
    vals = sorted(v for v in values if v is not None)
    if not vals:
        return None
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def summarise(raw: dict[tuple[str, str, int], list[dict[str, Any]]], servers: list[dict[str, Any]],
              levels: tuple[int, ...], rounds: int, limits: tuple[int, int], words: int = WORDS) -> dict[str, Any]:
    rows = []
    for (subject, channel, n), runs in raw.items():
        failures: dict[str, int] = {}
        for r in runs:
            for k, v in r["failures"].items():
                failures[k] = failures.get(k, 0) + v
        rows.append({
            "subject": subject, "channel": f"agui/{channel}", "clients": n, "rounds": len(runs),
            "accept_s": _median([r["accept_all_or_last_s"] for r in runs]),
            "accept_per_round": [r["accept_all_or_last_s"] for r in runs],
            "first_byte_p50_s": _median([r["first_byte_s"]["p50"] for r in runs]),
            "first_byte_max_s": _median([r["first_byte_s"]["max"] for r in runs]),
            "wall_s": _median([r["wall_s"] for r in runs]),
            "wall_per_round": [r["wall_s"] for r in runs],
            "failed": sum(r["failed"] for r in runs), "failed_per_round": [r["failed"] for r in runs],
            "completed": sum(r["completed"] for r in runs), "streams": sum(r["clients"] for r in runs),
            "failures": failures,
            "listen_overflows": sum(r["listen_overflows"].get("ListenOverflows", 0) for r in runs),
            "server_cpu_s": _median([r["server_cpu_s"] for r in runs]),
            "server_wait_s": _median([r["server_wait_s"] for r in runs]),
            "runs": runs,
        })
    base = {(r["channel"], r["clients"]): r for r in rows if r["subject"] == "floor"}
    peer = {(r["channel"], r["clients"]): r for r in rows if r["subject"] == "peer"}
    for row in rows:
        for name, ref in (("vs_floor", base), ("vs_peer", peer)):
            other = ref.get((row["channel"], row["clients"]))
            if other is not None and other is not row:
                row[name] = {k: (round(row[k] / other[k], 2) if row[k] and other[k] else None)
                             for k in ("accept_s", "first_byte_max_s", "wall_s")}
    rows.sort(key=lambda r: (r["clients"], r["channel"], r["subject"] != "floor", r["subject"]))
    return {"levels": list(levels), "rounds": rounds, "words": words, "delay_ms": DELAY_MS, "rows": rows,
            "servers": servers, "client_nofile": list(limits), "somaxconn": somaxconn()}


# ------------------------------------------------------------------------------------------------
# the report


def _f(v: Any, digits: int = 3) -> str:
    if v is None:
        return "–"
    if isinstance(v, float):
        return f"{v:.{digits}f}"
    return str(v)


def _x(v: float | None) -> str:
    return "–" if v is None else f"{v:.2f}x"


def markdown(section: dict[str, Any], *, quick: bool = False) -> list[str]:
    md = ["## Bursts: N clients connecting at once", ""]
    if quick:
        md += ["**Quick mode: these figures are noisy (tiny N, one round); do not judge by them.**", ""]
    md += [f"N clients open a TCP connection at the same instant and each streams one AG-UI run of "
           f"`/words {section['words']}` paced `/delay {section['delay_ms']:g}` (ideal "
           f"{section['words'] * section['delay_ms'] / 1000:g} s). *Accept*: until `connect()` had returned for "
           "every client (the kernel completes a handshake only while the accept queue has room; a dropped SYN is "
           "retried after 1 s, 3 s, …). *First byte*: until a client's first response byte (SSE) or its "
           "handshake's answer (WebSocket). *Wall*: until the last stream ended. Median of "
           f"{section['rounds']} round(s), servers interleaved; ratios are to the floor and to the peer of the same "
           "run. *Overflows*: the kernel's ListenOverflows over the burst (machine-wide).", ""]
    body = []
    for r in section["rows"]:
        vf, vp = r.get("vs_floor", {}), r.get("vs_peer", {})
        fails = ", ".join(f"{k}: {v}" for k, v in sorted(r["failures"].items())) or "0"
        body.append([r["subject"], r["channel"], str(r["clients"]), _f(r["accept_s"]), _x(vf.get("accept_s")),
                     _x(vp.get("accept_s")), f"{_f(r['first_byte_p50_s'])} / {_f(r['first_byte_max_s'])}",
                     _f(r["wall_s"], 2), _x(vf.get("wall_s")), _x(vp.get("wall_s")),
                     f"{r['completed']} / {r['streams']}", fails, str(r["listen_overflows"]),
                     f"{_f(r['server_cpu_s'], 2)} / {_f(r['server_wait_s'], 2)}"])
    md += ["| server | channel | N | accept s | ×floor | ×peer | first byte p50 / max s | wall s | ×floor | ×peer | "
           "completed | failed | overflows | server CPU / wait s |",
           "|" + "---|" * 14]
    md += ["| " + " | ".join(row) + " |" for row in body]
    md.append("")
    md += ["Listen sockets (`ss -ltn`: Send-Q of a listening socket is its backlog; the kernel caps it at "
           f"`net.core.somaxconn` = {section['somaxconn']}); open-file limits (the bench's soft/hard: "
           f"{section['client_nofile'][0]}/{section['client_nofile'][1]}):", ""]
    md += ["| server | listen backlog | open-file limit | skipped |", "|---|---|---|---|"]
    for s in section["servers"]:
        skipped = "; ".join(f"{k}: {v}" for k, v in s["skipped"].items()) or "–"
        md.append(f"| {s['subject']} | {_f(s.get('backlog'))} | {_f(s.get('nofile'))} | {skipped} |")
    md.append("")
    return md


def plot(section: dict[str, Any], out: Path) -> str | None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return None
    rows = section["rows"]
    if not rows:
        return None
    levels = section["levels"]
    fig, axes = plt.subplots(1, 3, figsize=(16, 4.8))
    labels = sorted({(r["subject"], r["channel"]) for r in rows})
    width = 0.8 / max(1, len(labels))
    for i, (subject, channel) in enumerate(labels):
        pts = {r["clients"]: r for r in rows if r["subject"] == subject and r["channel"] == channel}
        xs = [j + i * width for j in range(len(levels))]
        for ax, key in ((axes[0], "accept_s"), (axes[1], "wall_s")):
            ax.bar(xs, [pts[n][key] or 0 if n in pts else 0 for n in levels], width, label=f"{subject} {channel}")
        axes[2].bar(xs, [pts[n]["failed"] / pts[n]["streams"] if n in pts else 0 for n in levels], width,
                    label=f"{subject} {channel}")
    for ax, title in ((axes[0], "time until every connect() returned (s)"), (axes[1], "wall time (s)"),
                      (axes[2], "failed streams (fraction)")):
        ax.set_xticks([j + 0.4 - width / 2 for j in range(len(levels))], [f"N = {n}" for n in levels])
        ax.set_title(title)
        ax.grid(True, axis="y", alpha=0.3)
    axes[0].legend(fontsize=7)
    fig.tight_layout()
    path = out / "bursts.png"
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return str(path)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.bursts", description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true",
                        help="N = 50, /words 20, one round: a smoke run, noisy figures")
    parser.add_argument("--levels", help="comma-separated client counts (default 200,2000; quick: 50)")
    parser.add_argument("--rounds", type=int, help="rounds per level (default 2; quick: 1)")
    parser.add_argument("--out", default=str(REPO / "bench" / "results"))
    args = parser.parse_args(argv)
    levels = tuple(int(x) for x in args.levels.split(",")) if args.levels else ((50,) if args.quick else (200, 2000))
    rounds = args.rounds or (1 if args.quick else 2)
    words = 20 if args.quick else WORDS
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    print(f"bench.bursts: {pin_self()}; levels {levels}, {rounds} round(s)", file=sys.stderr)
    if args.quick:
        print("bench.bursts: quick mode: the figures are noisy (tiny N, one round); do not judge by them",
              file=sys.stderr)
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="awaken-bursts-") as tmp:
        section = trio.run(lambda: run_bursts(levels, rounds, Path(tmp), out / "logs", notes=notes, words=words,
                                              progress=lambda s: print("bench.bursts: " + s, file=sys.stderr)))
    section["notes"] = notes
    section["mode"] = "quick" if args.quick else "full"
    section["load_average"] = [round(x, 2) for x in os.getloadavg()]
    (out / "bursts.json").write_bytes(orjson.dumps(section, option=orjson.OPT_INDENT_2))
    md = markdown(section, quick=args.quick) + [f"- {n}" for n in notes]
    png = plot(section, out)
    if png:
        md += ["", f"![bursts]({Path(png).name})"]
    (out / "bursts.md").write_text("\n".join(["# Awaken bursts", ""] + md) + "\n")
    print("\n".join(md), file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
