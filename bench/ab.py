"""``python -m bench.ab``: the first text delta of two or more source trees, side by side with the floor.

Each ``NAME=TREE:BACKEND`` is an Awaken server running the tree at ``TREE`` (a checkout or a
``git worktree`` of another commit) on ``BACKEND``. Every server is pinned as in ``python -m bench``,
and the turns are interleaved run by run in shuffled orders (``measure.turn_orders``), so what the
machine does meanwhile hits every server alike. Each round prints every server's first-delta p50 and
its ratio to the floor's; the end, each server's median ratio over the rounds::

    git worktree add ../awaken-old HEAD~1
    python -m bench.ab --channel agui/ws --runs 200 --rounds 6 new=.:sqlite old=../awaken-old:sqlite

A server runs its tree because it starts in it: ``python -m`` puts the working directory first on the
import path, ahead of PYTHONPATH (``ServerProcess.cwd``). Naming the same tree twice measures what the
places alone make.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
from pathlib import Path

import trio

from .cli import local_endpoints
from .client import probe
from .measure import latency_interleaved
from .servers import ServerProcess, awaken_server, floor_server, pin_self


def parse_server(spec: str) -> tuple[str, Path, str]:
    """``NAME=TREE:BACKEND`` as (name, tree, backend)."""
    name, sep, rest = spec.partition("=")
    tree, colon, backend = rest.rpartition(":")
    if not (sep and colon and name and tree and backend):
        raise argparse.ArgumentTypeError(f"{spec!r} is not NAME=TREE:BACKEND")
    path = Path(tree).resolve()
    if not (path / "awaken" / "__init__.py").is_file():
        raise argparse.ArgumentTypeError(f"{path} holds no awaken package")
    return name, path, backend


async def compare(servers: list[tuple[str, Path, str]], channel: str, runs: int, rounds: int, *,
                  fresh: bool) -> dict[str, list[float]]:
    """Each server's first-delta p50 ÷ the floor's, one value per round."""
    pin_self()
    tmp = Path(tempfile.mkdtemp(prefix="bench-ab-"))
    procs: list[ServerProcess] = [floor_server(tmp / "logs")]
    procs += [awaken_server(name, backend, tmp / name, tmp / "logs", tree=tree) for name, tree, backend in servers]
    ratios: dict[str, list[float]] = {name: [] for name, _, _ in servers}
    try:
        for proc in procs:
            await proc.start()
        endpoints = []
        for proc in procs:
            ok, why, endpoint = await probe(local_endpoints(proc.name, proc.base_url)[channel])
            if not ok:
                raise RuntimeError(f"{proc.name} does not stream over {channel}: {why}")
            endpoints.append(endpoint)
        for rnd in range(rounds):
            results = await latency_interleaved(endpoints, runs, fresh=fresh)
            p50 = [statistics.median(r.first_delta_ms for r in rs if r.ok) for rs in results]
            line = [f"floor {p50[0]:.3f} ms"]
            for (name, _, _), value in zip(servers, p50[1:], strict=True):
                ratios[name].append(value / p50[0])
                line.append(f"{name} {value:.3f} ms ({value / p50[0]:.3f})")
            print(f"round {rnd + 1}: " + "  ".join(line), flush=True)
    finally:
        for proc in procs:
            await proc.stop()
    return ratios


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.ab", description=__doc__.split("\n\n")[0])
    parser.add_argument("servers", nargs="+", type=parse_server, metavar="NAME=TREE:BACKEND")
    parser.add_argument("--channel", default="agui/sse", help="agui/sse, agui/ws, aisdk/sse or aisdk/ws")
    parser.add_argument("--runs", type=int, default=200, help="turns per server and round")
    parser.add_argument("--rounds", type=int, default=4)
    parser.add_argument("--fresh", action="store_true", help="a new connection per turn")
    args = parser.parse_args(argv)
    ratios = trio.run(lambda: compare(args.servers, args.channel, args.runs, args.rounds, fresh=args.fresh))
    for name, values in ratios.items():
        print(f"{name}: median ratio {statistics.median(values):.3f}  ({', '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
