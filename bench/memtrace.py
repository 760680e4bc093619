"""Where a server's bytes go per active stream and per waiting run: ``python -m bench.memtrace``.

Runs ``awaken serve`` under tracemalloc (``--child``: ``SIGUSR1`` takes a snapshot, ``SIGUSR2`` writes
the difference from the first one as lines ``bytes count file:line``; with ``BENCH_TRACE_FRAMES=N`` in
the environment, N frames per site, ``file:line <- file:line ...`` innermost first; with
``BENCH_TRACE_SETTLE=S``, the open streams' snapshot S seconds after the last one's first delta, not 0.5;
``python -m bench.slowclients --trace`` uses it between bursts), then drives it as
``bench/measure.py`` does: 200 paced AG-UI/SSE streams held open, then 400 runs left waiting (agent
``guarded``). For each it prints the bytes per stream (per run) that Python allocated, grouped by the
line that allocated them, largest first. RSS also holds what tracemalloc cannot see (C buffers of
sockets and SQLite, allocator slack); compare with ``python -m bench``'s memory rows.

    python -m bench.memtrace [--backend sqlite] [--streams 200] [--runs 400] [--top 25] [--garbage]
"""

from __future__ import annotations

import argparse
import ctypes
import ctypes.util
import json
import os
import signal
import sys
import tempfile
import tracemalloc
import types
from pathlib import Path
from typing import Any

import trio

from .client import Endpoint, Session, request_body, script
from .measure import WAITING_TEXT, Stats, _make_runs, _sessions, guarded_endpoint
from .servers import ServerProcess, awaken_server


def child(out: Path, argv: list[str]) -> int:
    from awaken.cli import main

    frames = int(os.environ.get("BENCH_TRACE_FRAMES", "1"))  # 0: no tracemalloc, the stats only
    if frames:
        tracemalloc.start(frames)
    first: list[tracemalloc.Snapshot] = []

    def take(_signum: int, _frame: object) -> None:
        first[:] = [tracemalloc.take_snapshot()]

    def write(_signum: int, _frame: object) -> None:
        # with several frames, sites are grouped by their whole traceback, innermost frame first
        stats = tracemalloc.take_snapshot().compare_to(first[0], "lineno" if frames == 1 else "traceback")
        lines = [f"{s.size_diff} {s.count_diff} "
                 + " <- ".join(f"{f.filename}:{f.lineno}" for f in reversed(s.traceback) if frames > 1)
                 + (f"{s.traceback[0].filename}:{s.traceback[0].lineno}" if frames == 1 else "")
                 for s in stats]
        (out.with_suffix(".tmp")).write_text("\n".join(lines))
        os.replace(out.with_suffix(".tmp"), out)

    def stats(signum: int, _frame: object) -> None:
        # SIGRTMIN+1: a full collection and a trim first (what is left is held, not garbage or free pages)
        garbage: dict[str, int] = {}
        frames_in_garbage: dict[str, int] = {}
        if signum == signal.SIGRTMIN + 1:
            import gc

            # the garbage found, by type (what sat in reference cycles waiting for a full collection)
            gc.set_debug(gc.DEBUG_SAVEALL)
            try:
                gc.collect()
                for obj in gc.garbage:
                    name = f"{type(obj).__module__}.{type(obj).__qualname__}"
                    garbage[name] = garbage.get(name, 0) + 1
                    if isinstance(obj, types.FrameType):  # where the cycle was made: the frames it holds
                        code = obj.f_code
                        where = f"{code.co_name} @ {Path(code.co_filename).name}:{obj.f_lineno}"
                        frames_in_garbage[where] = frames_in_garbage.get(where, 0) + 1
                    elif isinstance(obj, BaseException):
                        what = f"exception {type(obj).__qualname__}"
                        frames_in_garbage[what] = frames_in_garbage.get(what, 0) + 1
            finally:
                gc.set_debug(0)
                gc.garbage.clear()
            gc.collect()
            if _libc() is not None:
                _libc().malloc_trim(0)
        target = out.with_suffix(".stats")
        stats = process_stats()
        if signum == signal.SIGRTMIN + 1:  # what is still held of the server's own types, by type
            import gc

            held: dict[str, int] = {}
            for obj in gc.get_objects():
                name = type(obj).__module__
                if name.startswith(("awaken", "storage_backends")):
                    key = f"{name}.{type(obj).__qualname__}"
                    held[key] = held.get(key, 0) + 1
            stats["held_types"] = dict(sorted(held.items(), key=lambda kv: -kv[1])[:30])
        stats["tasks"] = trio_tasks()
        if garbage:
            stats["garbage_objects"] = sum(garbage.values())
            stats["garbage_types"] = dict(sorted(garbage.items(), key=lambda kv: -kv[1])[:40])
            # every type of the server's own (a connection's, a run's) found in cycles, none left out
            stats["garbage_server_types"] = {name: count for name, count in garbage.items()
                                             if name.startswith(SERVER_MODULES)}
            stats["garbage_frames"] = dict(sorted(frames_in_garbage.items(), key=lambda kv: -kv[1])[:40])
        target.with_suffix(".tmp").write_text(json.dumps(stats))
        os.replace(target.with_suffix(".tmp"), target)

    if frames:
        signal.signal(signal.SIGUSR1, take)
        signal.signal(signal.SIGUSR2, write)
    signal.signal(signal.SIGRTMIN, stats)
    signal.signal(signal.SIGRTMIN + 1, stats)
    return main(argv)


#: the modules whose objects make up a connection and a run (hypercorn's, h11's, wsproto's, the server's)
SERVER_MODULES = ("awaken", "storage_backends", "hypercorn", "h11", "wsproto")


def trio_tasks() -> dict[str, int]:
    """The trio tasks alive (walked from the root task), by the task and the server's coroutines it is
    suspended in (innermost last)."""
    tasks: dict[str, int] = {}
    try:
        pending = [trio.lowlevel.current_root_task()]
    except RuntimeError:  # not in the trio thread
        return tasks
    while pending:
        task = pending.pop()
        if task is None:
            continue
        for nursery in task.child_nurseries:
            pending.extend(nursery.child_tasks)
        coro, chain = task.coro, []
        while coro is not None and hasattr(coro, "cr_code"):
            code = coro.cr_code
            if "/awaken/" in code.co_filename or "storage_backends" in code.co_filename:
                chain.append(code.co_qualname)
            coro = coro.cr_await
        key = f"{task.name.rsplit('.', 1)[-1]} @ {' > '.join(chain[-3:]) or '-'}"
        tasks[key] = tasks.get(key, 0) + 1
    return dict(sorted(tasks.items(), key=lambda kv: -kv[1])[:20])


def _libc() -> ctypes.CDLL | None:
    name = ctypes.util.find_library("c")
    libc = ctypes.CDLL(name) if name else None
    return libc if libc is not None and hasattr(libc, "mallinfo2") else None


class _Mallinfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]


def process_stats() -> dict[str, int]:
    """Where the process's memory is, as the interpreter and glibc see it (called in the server): the
    small-object arenas of CPython's allocator (1 MiB each, ``sys._debugmallocstats``), glibc's heaps
    (``mallinfo2``: in use, free inside them, mmapped blocks), the live objects the cycle collector
    tracks, the threads, and what tracemalloc traces (when it runs)."""
    import gc
    import threading

    out: dict[str, int] = {"gc_objects": len(gc.get_objects()), "threads": threading.active_count()}
    with tempfile.TemporaryFile("w+") as err:  # it writes to the C stderr (fd 2)
        sys.stderr.flush()
        saved = os.dup(2)
        os.dup2(err.fileno(), 2)
        try:
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        err.seek(0)
        text = err.read()
    for line in text.splitlines():
        if line.startswith("# arenas allocated current"):
            out["pymalloc_arenas"] = int(line.split("=")[1].replace(",", ""))
        elif line.startswith("# bytes in allocated blocks"):
            out["pymalloc_bytes_in_use"] = int(line.split("=")[1].replace(",", ""))
    libc = _libc()
    if libc is not None:
        libc.mallinfo2.restype = _Mallinfo2
        info = libc.mallinfo2()
        out |= {"glibc_heap": info.arena, "glibc_in_use": info.uordblks, "glibc_free": info.fordblks,
                "glibc_mmapped": info.hblkhd}
    if tracemalloc.is_tracing():
        out["traced"] = tracemalloc.get_traced_memory()[0]
    return out


async def read_stats(pid: int, out: Path, *, collect: bool = False) -> dict[str, Any]:
    """``process_stats`` of a ``--child`` server; with ``collect``, after a full collection (and the
    garbage it found, by type: ``garbage_types``; the server's own objects still held, by type:
    ``held_types``) and a trim."""
    target = trio.Path(out.with_suffix(".stats"))
    await target.unlink(missing_ok=True)
    os.kill(pid, signal.SIGRTMIN + 1 if collect else signal.SIGRTMIN)
    while not await target.exists():
        await trio.sleep(0.05)
    return json.loads(await target.read_text())


def stats_child(server: ServerProcess, out: Path) -> Stats:
    """Make ``server`` (an ``awaken_server``, not started yet) start as this module's child without
    tracemalloc, and return what reads its ``process_stats`` (``collect=True``: after a full collection)."""
    server.argv = [sys.executable, "-m", "bench.memtrace", "--child", str(out), *server.argv[3:]]
    server.extra_env["BENCH_TRACE_FRAMES"] = "0"

    async def stats(*, collect: bool = False) -> dict[str, Any]:
        return await read_stats(server.pid, out, collect=collect)

    return stats


async def snapshot_diff(pid: int, out: Path) -> list[tuple[int, int, str]]:
    target = trio.Path(out)
    await target.unlink(missing_ok=True)
    os.kill(pid, signal.SIGUSR2)
    while not await target.exists():
        await trio.sleep(0.1)
    rows = []
    for line in (await target.read_text()).splitlines():
        size, count, where = line.split(" ", 2)
        rows.append((int(size), int(count), where))
    return rows


#: who owns an allocation, by where it was made (the first match wins)
OWNERS = (
    ("the scripted model (the model under test)", ("awaken/models/",)),
    ("Awaken", ("awaken/", "storage_backends/")),
    ("hypercorn + h11 (the HTTP server)", ("hypercorn/", "h11/", "wsproto/")),
    ("trio (tasks, cancel scopes, sockets)", ("trio/", "<attrs generated methods trio.")),
    ("tracemalloc itself", ("tracemalloc.py",)),
)


def owner_of(where: str) -> str:
    for name, marks in OWNERS:
        if any(mark in where for mark in marks):
            return name
    return "other (stdlib, quart, attrs, cattrs)"


def show_owners(rows: list[tuple[int, int, str]], n: int) -> None:
    by_owner: dict[str, list[int]] = {}
    for size, count, where in rows:
        acc = by_owner.setdefault(owner_of(where), [0, 0])
        acc[0] += size
        acc[1] += count
    print("\n| KB per item | objects per item | owner |\n|---|---|---|")
    for name, (size, count) in sorted(by_owner.items(), key=lambda kv: -kv[1][0]):
        print(f"| {size / n / 1024:.2f} | {count / n:.1f} | {name} |")


def show(title: str, rows: list[tuple[int, int, str]], n: int, top: int) -> None:
    total = sum(r[0] for r in rows)
    print(f"\n## {title}: {total / n / 1024:.2f} KB per item traced by Python ({n} items)")
    show_owners(rows, n)
    print()
    print("| bytes per item | objects per item | allocated at |\n|---|---|---|")
    root = str(Path(__file__).resolve().parent.parent) + "/"
    for size, count, where in sorted(rows, key=lambda r: -r[0])[:top]:
        print(f"| {size / n:.0f} | {count / n:.2f} | {where.replace(root, '').split('site-packages/')[-1]} |")
    by_file: dict[str, list[int]] = {}
    for size, count, where in rows:
        name = where.rsplit(":", 1)[0].replace(root, "").split("site-packages/")[-1]
        acc = by_file.setdefault(name, [0, 0])
        acc[0] += size
        acc[1] += count
    print("\n| bytes per item | objects per item | file |\n|---|---|---|")
    for name, (size, count) in sorted(by_file.items(), key=lambda kv: -kv[1][0])[:top]:
        print(f"| {size / n:.0f} | {count / n:.2f} | {name} |")


def show_garbage(stats: dict[str, Any], n: int) -> None:
    """What a full collection found (objects in reference cycles the latency thresholds had left for
    later: part of the figures above), and the server's own objects still held, by type."""
    print(f"\n{stats.get('garbage_objects', 0) / n:.1f} objects of cyclic garbage per item; by type:")
    for name, count in stats.get("garbage_types", {}).items():
        print(f"  {count / n:8.2f}  {name}")
    print("trio tasks alive, by the task and the coroutine it waits in (per item):")
    for name, count in stats.get("tasks", {}).items():
        print(f"  {count / n:8.2f}  {name}")
    print("the server's own objects still held, by type (per item):")
    for name, count in stats.get("held_types", {}).items():
        print(f"  {count / n:8.2f}  {name}")


async def main(args: argparse.Namespace) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        data, out = Path(tmp), Path(tmp) / "diff.txt"
        server = awaken_server("memtrace", args.backend, data / "server", data / "logs")
        server.argv = [sys.executable, "-m", "bench.memtrace", "--child", str(out), *server.argv[3:]]
        await server.start()
        try:
            endpoint = Endpoint("awaken", "agui", "sse", f"{server.base_url}/v1/ag-ui")
            async with trio.open_nursery() as nursery:
                warm = Session(endpoint, nursery=nursery)
                for _ in range(5):
                    await warm.run(request_body("agui", script(3)), limit_s=30)
                await warm.aclose()
                os.kill(server.pid, signal.SIGUSR1)
                await trio.sleep(0.3)
                sessions, _ = await _sessions(endpoint, args.streams, nursery)
                started = 0

                def first() -> None:
                    nonlocal started
                    started += 1

                async def one(session: Session) -> None:
                    await session.run(request_body("agui", script(50, 200)), limit_s=60, on_first_delta=first)

                for session in sessions:
                    nursery.start_soon(one, session)
                while started < len(sessions):
                    await trio.sleep(0.05)
                await trio.sleep(float(os.environ.get("BENCH_TRACE_SETTLE", "0.5")))
                show("active stream (its connection included)", await snapshot_diff(server.pid, out),
                     len(sessions), args.top)
                if args.garbage:
                    show_garbage(await read_stats(server.pid, out, collect=True), len(sessions))
                nursery.cancel_scope.cancel()
            for session in sessions:
                await session.aclose()
            await trio.sleep(1)
            errors: list[str] = []
            guarded = guarded_endpoint(endpoint)
            await _make_runs(guarded, 5, lambda: request_body("agui", WAITING_TEXT, agent="guarded"), errors,
                             concurrency=8)
            await trio.sleep(0.5)
            os.kill(server.pid, signal.SIGUSR1)
            await trio.sleep(0.3)
            await _make_runs(guarded, args.runs, lambda: request_body("agui", WAITING_TEXT, agent="guarded"),
                             errors, concurrency=8)
            await trio.sleep(0.5)
            show("waiting run", await snapshot_diff(server.pid, out), args.runs, args.top)
            if args.garbage:
                show_garbage(await read_stats(server.pid, out, collect=True), args.runs)
        finally:
            await server.stop()


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        sys.exit(child(Path(sys.argv[2]), sys.argv[3:]))
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backend", default="sqlite")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--garbage", action="store_true",
                        help="after each reading, a full collection: the cyclic garbage found and the objects held, by type")
    trio.run(main, parser.parse_args())
