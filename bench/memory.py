"""The memory rows of ``python -m bench`` alone, beside the floor: ``python -m bench.memory``.

Memory is what a loaded machine does not distort (a stream's objects are the same however long the
CPU takes to make them), so these rows can be measured while other work shares the machine. For each
round: a fresh floor server, then for each backend a fresh Awaken server per row, pinned as in
``python -m bench`` and driven by the same functions (``bench/measure.py``):

* **per open stream** — RSS with ``--streams`` paced AG-UI/SSE streams open (``memory_active``): RSS peak
  with every stream past its first delta minus RSS before, over the streams (the floor's too);
* **per waiting run** — RSS after ``--runs`` runs of agent ``guarded`` that end waiting (``memory_waiting``);
* **per completed run** — the control: as many short runs that complete, each on a new thread
  (``memory_completed``).

Awaken runs as ``bench.memtrace``'s child without tracemalloc, so each row also says where its KB go
(``measure.breakdown``: the interpreter's objects, glibc's heap, cyclic garbage not collected yet).

Where each KB goes is ``python -m bench.memtrace``'s part (tracemalloc by allocation site).

    python -m bench.memory [--backends sqlite,files] [--streams 200] [--runs 400] [--rounds 1] [--no-floor]
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path
from typing import Any

import trio

from . import measure
from .client import Endpoint
from .memtrace import stats_child
from .servers import ServerProcess, awaken_server, can_pin, floor_server, pin_self


def endpoint(server: ServerProcess) -> Endpoint:
    return Endpoint(server.name, "agui", "sse", f"{server.base_url}/v1/ag-ui")


async def one(server: ServerProcess, row: str, args: argparse.Namespace,
              stats: measure.Stats | None = None) -> dict[str, Any]:
    await server.start()
    try:
        if row == "active":
            return await measure.memory_active(endpoint(server), server, args.streams, stats=stats)
        if row == "waiting":
            return await measure.memory_waiting(measure.guarded_endpoint(endpoint(server)), server, args.runs,
                                                stats=stats)
        return await measure.memory_completed(endpoint(server), server, args.runs)
    finally:
        await server.stop()


async def main(args: argparse.Namespace) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        for round_ in range(1, args.rounds + 1):
            if not args.no_floor:
                result = await one(floor_server(data / "logs"), "active", args)
                rows.append({"round": round_, "server": "floor", "row": "active", **result})
                print(f"round {round_} floor: {result['kb_per_stream']} KB per open stream", flush=True)
            for backend in args.backends.split(","):
                for row in ("active", "waiting", "completed"):
                    name = f"awaken-{backend}-{row}-{round_}"
                    server = awaken_server(name, backend, data / name, data / "logs")
                    stats = stats_child(server, data / f"{name}.stats-out")
                    result = await one(server, row, args, stats)
                    rows.append({"round": round_, "server": f"awaken[{backend}]", "row": row, **result})
                    figure = result.get("kb_per_stream", result.get("kb_per_run"))
                    print(f"round {round_} awaken[{backend}] {row}: {figure} KB "
                          f"(errors {result['errors']})", flush=True)
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    out = ["| round | server | KB per open stream (marginal) | KB per waiting run (marginal) | KB per completed run |",
           "|---|---|---|---|---|"]
    keys = sorted({(r["round"], r["server"]) for r in rows}, key=lambda k: (k[0], k[1] != "floor", k[1]))
    for round_, server in keys:
        got = {r["row"]: r for r in rows if (r["round"], r["server"]) == (round_, server)}
        active, waiting, completed = got.get("active"), got.get("waiting"), got.get("completed")
        out.append("| {} | {} | {} | {} | {} |".format(
            round_, server,
            f"{active['kb_per_stream']} ({active['kb_per_stream_marginal']})" if active else "",
            f"{waiting['kb_per_run']} ({waiting['kb_per_run_marginal']})" if waiting else "",
            completed["kb_per_run"] if completed else ""))
    where = [r for r in rows if "where" in r]
    if where:
        out += ["", "Where the KB of one item go (``bench.measure.breakdown``; KB per stream or per run):", "",
                "| round | server | item | RSS | Python objects | their arenas' free space | C heap in use | "
                "C heap free | mmapped | rest | gc objects | of them cyclic garbage |", "|" + "---|" * 12]
        for r in where:
            w = r["where"]
            out.append(f"| {r['round']} | {r['server']} | {r['row']} | {w['rss']} | {w['python_objects']} | "
                       f"{w['python_arena_free']} | {w['c_heap_in_use']} | {w['c_heap_free']} | {w['mmapped']} | "
                       f"{w['rest']} | {w['gc_objects']} | {w['garbage_objects']} |")
    return "\n".join(out)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,files")
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--runs", type=int, default=400)
    parser.add_argument("--rounds", type=int, default=1)
    parser.add_argument("--no-floor", action="store_true")
    parser.add_argument("--json", help="also write the raw rows here")
    args = parser.parse_args()
    if can_pin():
        pin_self()
    started = time.time()
    result = trio.run(main, args)
    print(f"\n{table(result)}\n\n{time.time() - started:.0f} s; load average at the end "
          f"{', '.join(f'{x:.1f}' for x in os.getloadavg())}")
    if args.json:
        Path(args.json).write_text(json.dumps(result, indent=1))
