"""Thread-length and replay-size sweeps: the first text delta of a turn on a long thread against a turn
on a new thread, per storage backend, measured in the same run (issue 18).

For each backend, threads of 10, 100, 1,000 and 5,000 messages (and, for the replay-size sweep, 1,000
messages of growing size) are written straight into a fresh ledger; then the server starts (so every
thread is cold: the sweep also measures the cost after a restart). Each turn is a ``/words 3`` AG-UI
run over SSE on a kept-alive connection, either with **only the new message** or **replaying the
whole history** (what ``HttpAgent`` sends), and the turns are interleaved with runs on new threads, so
the ratio ``long ÷ new`` is read in one run. Targets: ratio ≤ 1.5 for both bodies at 5,000 messages.

**A thread that branched** (issue 33, ``branched_case``, also a step of ``python -m bench``): a thread whose
active path holds 5,000 messages and which has 20 further branches on the way (regenerated answers and
edited messages, alternating, evenly spread: the path runs through 21 ranges of branches), measured the
same way against new threads, beside a thread of 5,000 messages that never branched. Target: ≤ 1.5×.

The floor of a full replay is measured in the same run, beside every replayed turn: the transfer of a
body of the same size (``transfer``: the time to the first byte of the refusal of a body of that size
sent as ``text/plain``, which the server reads whole and refuses without decoding it, minus the same
for a 1-byte body). ``floor ÷ new`` = (new-thread p50 + transfer) ÷ new-thread p50: no server that
reads the body can answer below it. ``loads`` (``orjson.loads`` of the very body, in this process) is
what parsing the whole body would add: the server's replay memo (``awaken.wires.memo``) parses only
what the thread's previous request did not carry.

    python -m bench.threads [--backends sqlite,files,postgres] [--turns 25] [--out bench/results]
    python -m bench.threads --branched-only …   (only the thread that branched)
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import trio

from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Fork, Ledger, RunRecord, ledger_class
from awaken.ledger.paging import MAX_LIMIT

from .client import Endpoint, HttpConnection, Session, StreamResult, new_id, script
from .servers import awaken_server

LENGTHS = (10, 100, 1000, 5000)
#: (messages, characters of text per message) of the replay-size sweep
REPLAY_SIZES = ((1000, 50), (1000, 250), (1000, 500), (1000, 1000))
TARGET_RATIO = 1.5
#: the first replay after a page reload (the whole history read back from the server and sent again)
RELOAD_RATIO = 3.0
#: the history route's page (its most)
HISTORY_PAGE = MAX_LIMIT
#: the pause before each turn: a turn starts on a settled server (the previous request's cleanup,
#: e.g. freeing a 684 KB replay's objects, is not billed to the next case), as a person's next turn would
SETTLE_S = 0.02


def history(n: int, chars: int) -> list[Message]:
    """``n`` alternating user and assistant messages of ``chars`` characters each."""
    filler = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    return [Message(f"h{i}", "user" if i % 2 == 0 else "assistant", (TextPart(f"{i} {filler}"),),
                    None if i % 2 == 0 else f"seed-r{i // 2}") for i in range(n)]


def open_ledger(backend: str, path: Path | str, **options: Any) -> Ledger:
    """The ``backend`` ledger at ``path`` (a DSN for Postgres), not opened yet."""
    if backend == "postgres":
        from .pgcluster import PASSWORD_ENV

        options.setdefault("password_env", PASSWORD_ENV)
    return ledger_class(backend)(path=str(path), **options)


async def seed(backend: str, path: Path | str, threads: dict[str, list[Message]], **options: Any) -> None:
    """Write each thread, turn by turn as the engine would (one run per user message), then close
    (``options``: the backend's, e.g. no fsync when only the served load is measured)."""
    ledger = open_ledger(backend, path, **options)
    await ledger.open()
    try:
        for thread_id, messages in threads.items():
            for i in range(0, len(messages), 2):
                run_id = f"{thread_id}-seed-r{i // 2}"
                await ledger.start_run(RunRecord(run_id, thread_id, "assistant", RunStatus.RUNNING, 0, 0),
                                       [messages[i]])
                reply = tuple(Message(m.id, m.role, m.parts, run_id) for m in messages[i + 1:i + 2])
                await ledger.commit(thread_id, run_id, Commit(RunStatus.COMPLETED, reply))
    finally:
        await ledger.aclose()


#: the thread that branched: its active path's length, and how many branches it gained on the way
BRANCHED_MESSAGES = 5000
BRANCHES = 20
#: its turns per case in ``python -m bench`` (full run, ``--quick``), and its length in a quick run (a smoke run:
#: its figures show that the case runs, not what it costs)
BRANCHED_TURNS = {"full": 12, "quick": 2}
BRANCHED_QUICK = 500


async def seed_branched(backend: str, path: Path | str, thread_id: str, n: int = BRANCHED_MESSAGES,
                        branches: int = BRANCHES, chars: int = 90, **options: Any) -> list[Message]:
    """Write a thread whose active path holds ``n`` messages and which gained ``branches`` branches on the
    way, evenly spread, as the engine writes them: plain turns (a run per user message), and every so many
    turns a fork, a regenerate of the last answer (a run on a new branch keeping the path up to the last
    user message, no input) or an edit of the last user message (the same id, new words, on a new branch
    keeping the path up to the answer before it), alternating. Returns the active path (with seqs)."""
    filler = ("lorem ipsum dolor sit amet " * (chars // 27 + 1))[:chars]
    every = max(1, (n // 2) // (branches + 1))  # turns between two forks
    ledger = open_ledger(backend, path, **options)
    await ledger.open()
    active: list[Message] = []
    try:
        turn = forks = 0
        while len(active) < n:
            run = RunRecord(f"{thread_id}-r{turn}", thread_id, "assistant", RunStatus.RUNNING, 0, 0)
            fork = None
            inputs: list[Message] = [Message(f"h{len(active)}", "user", (TextPart(f"{turn} {filler}"),))]
            if turn and turn % every == 0 and forks < branches:
                forks += 1
                if forks % 2:  # regenerate the last answer
                    fork, inputs = Fork(active[-2].seq, "regenerate"), []
                    active = active[:-1]
                else:  # edit the last user message
                    last = active[-2]
                    fork = Fork(active[-3].seq, "edit")
                    inputs = [Message(last.id, "user", (TextPart(f"{turn} edited {filler}"),))]
                    active = active[:-2]
            active += await ledger.start_run(run, inputs, fork=fork)
            reply = Message(f"{thread_id}-a{turn}", "assistant", (TextPart(f"{turn} {filler}"),), run.run_id)
            active += await ledger.commit(thread_id, run.run_id, Commit(RunStatus.COMPLETED, (reply,)))
            turn += 1
        if len(await ledger.list_branches(thread_id)) != branches + 1:
            raise RuntimeError(f"{thread_id}: the ledger lists another number of branches than {branches + 1}")
    finally:
        await ledger.aclose()
    return active


#: seeding writes without waiting for the disk: only the served turns are measured
NO_FSYNC = {"sqlite": {"synchronous": "normal"}, "files": {"fsync": False}}


async def branched_case(backend: str, data: Path, logs: Path, turns: int, dsn: str | None = None, *,
                        linear: bool = True, messages: int = BRANCHED_MESSAGES) -> dict[str, Any]:
    """The thread that branched against new threads, each turn new-only and replayed (``measure``), on a
    fresh server of ``backend`` (``dsn``: its Postgres database); with ``linear``, beside a thread of as
    many messages that never branched. Rows keyed ``branched/…`` (and ``linear/…``), plus the thread's shape."""
    server = awaken_server(f"branches-{backend}", backend, data / "server", logs, dsn=dsn)
    store = dsn or data / "server" / ("awaken.db" if backend == "sqlite" else "ledger")
    (data / "server").mkdir(parents=True, exist_ok=True)
    cases = {"branched": Turns("branched", await seed_branched(backend, store, "branched", messages,
                                                               **NO_FSYNC.get(backend, {})))}
    if linear:
        plain = history(messages, 90)
        await seed(backend, store, {"linear": plain}, **NO_FSYNC.get(backend, {}))
        cases["linear"] = Turns("linear", plain)
    active = len(cases["branched"].held)
    await server.start()
    try:
        endpoint = Endpoint("awaken", "agui", "sse", f"{server.base_url}/v1/ag-ui")
        rows = await measure(endpoint, cases, turns, server.cpu_seconds, reload=True)
    finally:
        await server.stop()
    return {"rows": rows, "active_path": active, "branches": BRANCHES + 1, "target": TARGET_RATIO,
            "reload_target": RELOAD_RATIO}


def branched_verdicts(backend: str, result: dict[str, Any]) -> list[str]:
    """One line per body: the branched thread's first delta ÷ a new thread's, and whether it meets the target."""
    out = []
    for mode in ("new-only", "replay", "reload"):
        if f"branched/{mode}" not in result["rows"]:
            continue
        row, plain = result["rows"][f"branched/{mode}"], result["rows"].get(f"linear/{mode}")
        target = RELOAD_RATIO if mode == "reload" else TARGET_RATIO
        ok = row["ratio"] <= target and (plain is None or plain["ratio"] <= target)
        out.append(f"- {backend}, {result['active_path']:,} messages, {result['branches'] - 1} branches, {mode}: "
                   f"{row['ratio']:.2f}× a new thread — {'met' if ok else 'MISSED'}"
                   + (f" (never branched: {plain['ratio']:.2f}×)" if plain else ""))
    return out


def wire(m: Message) -> dict[str, Any]:
    return {"id": m.id, "role": m.role, "content": m.text}


class Turns:
    """The client side of one long thread: its history as the client holds it, and the next body."""

    def __init__(self, thread_id: str, messages: list[Message]) -> None:
        self.thread_id = thread_id
        self.held = [wire(m) for m in messages]

    def body(self, replay: bool) -> bytes:
        new = {"id": new_id("bench-u"), "role": "user", "content": script(3)}
        self.held.append(new)
        messages = self.held if replay else [new]
        body = {"threadId": self.thread_id, "runId": new_id("bench-r"), "messages": messages,
                "tools": [], "context": [], "forwardedProps": {}, "state": {}}
        return orjson.dumps(body)

    def answered(self, result: StreamResult) -> None:
        self.held.append({"id": new_id("bench-a"), "role": "assistant", "content": "one two three"})


def new_thread_body() -> bytes:
    return Turns(new_id("bench-t"), []).body(False)


def loads_ms(body: bytes, repeat: int = 5) -> float:
    """``orjson.loads`` of ``body`` in this process, ms (best of ``repeat``: the parse alone)."""
    best = float("inf")
    for _ in range(repeat):
        t = time.perf_counter()
        orjson.loads(body)
        best = min(best, time.perf_counter() - t)
    return best * 1000


async def refusal_ms(probe: HttpConnection, path: str, size: int) -> float:
    """The time to the first byte of the refusal of a ``size``-byte body sent as ``text/plain`` (read
    whole, refused before any decoding)."""
    result = StreamResult()
    result.t_send = time.perf_counter()
    await probe.post_sse(path, b"x" * size, "agui", result, content_type=b"text/plain")
    return (result.t_first_byte - result.t_send) * 1000


async def read_history(probe: HttpConnection, path: str, thread_id: str) -> list[dict[str, Any]]:
    """The thread's whole history as the AG-UI history route pages it (what a page reloading reads back)."""
    items: list[dict[str, Any]] = []
    cursor = ""
    while True:
        status, body = await probe.get_status(f"{path}/threads/{thread_id}/messages?limit={HISTORY_PAGE}"
                                              + (f"&cursor={cursor}" if cursor else ""))
        if status != 200:
            raise RuntimeError(f"history of {thread_id}: HTTP {status}")
        page = orjson.loads(body)
        items += page["items"]
        if not page["items"] or not page.get("cursor"):
            return items
        cursor = page["cursor"]


async def measure(endpoint: Endpoint, cases: dict[str, Turns], turns: int,
                  cpu: Callable[[], float] | None = None, *, reload: bool = False) -> dict[str, dict[str, Any]]:
    """``turns`` rounds; each round runs one new-thread turn and one turn per case (both bodies); each
    replayed turn is followed by its floor probes (``refusal_ms`` of its size and of 1 byte, ``loads_ms``).
    With ``reload``, each case also has a turn after a page reload (``…/reload``): the client's array is
    read back from the history route first (not timed), then the whole of it is sent with the new message,
    so the server has never seen those bytes. ``cpu`` (the server's CPU seconds, all threads) gives each
    turn's server CPU time too: unlike wall time it does not grow when other work shares the machine's cores."""
    samples: dict[str, list[float]] = {"new": []}
    cpu_ms: dict[str, list[float]] = {}
    sizes: dict[str, int] = {}
    floors: dict[str, dict[str, list[float]]] = {}
    probe = HttpConnection.for_url(endpoint.url)
    await probe.connect()
    # The client holds every long thread's history (5,000 dicts) and parses replay bodies for the floor:
    # its own garbage collections would land inside timed turns, longer the longer the thread. They run
    # between turns instead (``settle``), never inside one.
    gc.disable()

    async def settle() -> None:
        gc.collect()
        await trio.sleep(SETTLE_S)

    path = "/" + endpoint.url.split("/", 3)[3]
    async with trio.open_nursery() as nursery:
        session = Session(endpoint, nursery=nursery)
        try:
            for rnd in range(turns + 1):
                modes = ("new-only", "replay", "reload") if reload else ("new-only", "replay")
                order = [("new", None, False)] + [(f"{k}/{mode}", t, mode != "new-only")
                                                   for k, t in cases.items() for mode in modes]
                for key, turn, replay in (order if rnd % 2 == 0 else order[::-1]):
                    if turn is not None and key.endswith("/reload"):
                        turn.held = await read_history(probe, path, turn.thread_id)  # the AG-UI route's
                    body = new_thread_body() if turn is None else turn.body(replay)
                    await settle()
                    cpu_before = cpu() if cpu is not None else 0.0
                    result = await session.run(body, limit_s=60)
                    if cpu is not None and rnd:
                        cpu_ms.setdefault(key, []).append((cpu() - cpu_before) * 1000)
                    if not result.ok:
                        raise RuntimeError(f"{key}: {result.error}")
                    if turn is not None:
                        turn.answered(result)
                    if rnd:  # the first round warms each thread up (the cold read is its own row)
                        samples.setdefault(key, []).append(result.first_delta_ms)
                    else:
                        samples.setdefault(f"{key} (cold)", []).append(result.first_delta_ms)
                    sizes[key] = max(sizes.get(key, 0), len(body))
                    if replay and rnd:
                        floor = floors.setdefault(key, {"large": [], "small": [], "loads": []})
                        await settle()
                        floor["large"].append(await refusal_ms(probe, path, len(body)))
                        await settle()
                        floor["small"].append(await refusal_ms(probe, path, 1))
                        floor["loads"].append(loads_ms(body))
        finally:
            gc.enable()
            await session.aclose()
            await probe.aclose()
            nursery.cancel_scope.cancel()
    base = statistics.median(samples["new"])
    rows = {k: {"p50_ms": statistics.median(v), "ratio": statistics.median(v) / base, "n": len(v),
                "body_bytes": sizes.get(k.removesuffix(" (cold)"), 0)} for k, v in samples.items()}
    if cpu_ms:
        cpu_base = statistics.median(cpu_ms["new"])
        for key, v in cpu_ms.items():
            rows[key] |= {"cpu_ms": statistics.median(v), "cpu_ratio": statistics.median(v) / cpu_base}
    for key, floor in floors.items():
        transfer = max(0.0, statistics.median(floor["large"]) - statistics.median(floor["small"]))
        loads = statistics.median(floor["loads"])
        rows[key] |= {"transfer_ms": transfer, "loads_ms": loads, "floor_ratio": (base + transfer) / base}
    return rows


async def backend_sweep(backend: str, turns: int, out: Path, cluster: Any = None) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        data = Path(tmp)
        threads = {f"len-{n}": history(n, 90) for n in LENGTHS}
        threads |= {f"size-{n}x{c}": history(n, c) for n, c in REPLAY_SIZES}
        dsn = cluster.database(f"threads_{new_id('b').replace('-', '_')}") if backend == "postgres" else None
        server = awaken_server(f"threads-{backend}", backend, data / "server", out / "logs", dsn=dsn)
        await seed(backend, dsn or data / "server" / ("awaken.db" if backend == "sqlite" else "ledger"), threads)
        await server.start()
        try:
            endpoint = Endpoint("awaken", "agui", "sse", f"{server.base_url}/v1/ag-ui")
            lengths = await measure(endpoint, {f"{n}": Turns(f"len-{n}", threads[f"len-{n}"]) for n in LENGTHS},
                                    turns, server.cpu_seconds)
            sizes = await measure(endpoint, {f"{n}x{c}": Turns(f"size-{n}x{c}", threads[f"size-{n}x{c}"])
                                             for n, c in REPLAY_SIZES}, max(3, turns // 2), server.cpu_seconds)
            rss = server.rss_kb()
        finally:
            await server.stop()
    return {"lengths": lengths, "replay_sizes": sizes, "rss_kb_after": rss}


def report(results: dict[str, Any]) -> str:
    lines = ["# Thread-length and replay-size sweeps (AG-UI/SSE, `/words 3`, first text delta p50)", "",
             f"Target: at 5,000 messages, long ÷ new ≤ {TARGET_RATIO} for both bodies, on every backend.",
             "A replayed body's floor (measured beside each replayed turn): transfer (the refusal of a `text/plain`",
             "body of the same size, read whole and refused undecoded, minus a 1-byte one); floor ÷ new = (new +",
             "transfer) ÷ new. `loads`: what `orjson.loads` of the whole body would add (the replay memo parses",
             "only what the previous request did not carry). Server CPU: the server process's CPU time per turn",
             "(all threads), which other work on the machine does not inflate.", ""]
    verdicts = []
    for backend, r in results.items():
        lines += [f"## {backend}", "", "| case | body | p50 ms | ÷ new thread | n | transfer ms | loads ms | floor ÷ new "
                  "| server CPU ms | CPU ÷ new |", "|---|---|---|---|---|---|---|---|---|---|"]
        for section in ("lengths", "replay_sizes"):
            for key, row in r[section].items():
                floor = (f"{row['transfer_ms']:.2f} | {row['loads_ms']:.2f} | {row['floor_ratio']:.2f}"
                         if "floor_ratio" in row else " | | ")
                cpu = f"{row['cpu_ms']:.2f} | {row['cpu_ratio']:.2f}" if "cpu_ms" in row else " | "
                lines.append(f"| {key} | {row['body_bytes'] / 1024:.0f} KB | {row['p50_ms']:.2f} | "
                             f"{row['ratio']:.2f} | {row['n']} | {floor} | {cpu} |")
        for mode in ("new-only", "replay"):
            row = r["lengths"][f"5000/{mode}"]
            ok = row["ratio"] <= TARGET_RATIO
            floor = f"; the body's floor: {row['floor_ratio']:.2f}×" if "floor_ratio" in row else ""
            floor = f" (server CPU {row['cpu_ratio']:.2f}×{floor})" if "cpu_ratio" in row else floor
            verdicts.append(f"- {backend}, 5,000 messages, {mode}: {row['ratio']:.2f}× — "
                            f"{'met' if ok else 'MISSED'}{floor}")
        lines.append("")
    return "\n".join(lines + ["## Verdicts", "", *verdicts, ""])


def plot(results: dict[str, Any], out: Path) -> None:
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return
    fig, axes = plt.subplots(1, 2, figsize=(11, 4))
    for backend, r in results.items():
        for mode in ("new-only", "replay"):
            xs = [n for n in LENGTHS]
            ys = [r["lengths"][f"{n}/{mode}"]["ratio"] for n in LENGTHS]
            axes[0].plot(xs, ys, marker="o", label=f"{backend} {mode}")
        axes[0].plot(LENGTHS, [r["lengths"][f"{n}/replay"].get("floor_ratio", float("nan")) for n in LENGTHS],
                     linestyle=":", marker=".", label=f"{backend} replay floor")
        kb = [r["replay_sizes"][f"{n}x{c}/replay"]["body_bytes"] / 1024 for n, c in REPLAY_SIZES]
        axes[1].plot(kb, [r["replay_sizes"][f"{n}x{c}/replay"]["ratio"] for n, c in REPLAY_SIZES], marker="o",
                     label=backend)
        axes[1].plot(kb, [r["replay_sizes"][f"{n}x{c}/replay"].get("floor_ratio", float("nan"))
                          for n, c in REPLAY_SIZES], linestyle=":", marker=".", label=f"{backend} floor")
    for ax, title, xlabel in ((axes[0], "first delta ÷ new thread, by thread length", "messages"),
                              (axes[1], "full replay, by body size (1,000 messages)", "body KB")):
        ax.axhline(TARGET_RATIO, color="red", linestyle="--", linewidth=1)
        ax.set_xscale("log" if ax is axes[0] else "linear")
        ax.set_title(title)
        ax.set_xlabel(xlabel)
        ax.legend()
    fig.tight_layout()
    fig.savefig(out / "threads.png", dpi=110)


async def main(args: argparse.Namespace) -> None:
    out = Path(args.out)
    (out / "logs").mkdir(parents=True, exist_ok=True)
    backends = args.backends.split(",")
    cluster = None
    if "postgres" in backends:
        from .pgcluster import PgCluster, available

        ok, why = available()
        if not ok:
            print(f"postgres skipped: {why}")
            backends.remove("postgres")
        else:
            cluster = PgCluster()
            cluster.start()
    try:
        branched = {}
        for b in backends:
            with tempfile.TemporaryDirectory() as tmp:
                dsn = cluster.database(f"branches_{new_id('b').replace('-', '_')}") if b == "postgres" else None
                branched[b] = await branched_case(b, Path(tmp), out / "logs", args.turns, dsn)
        results = {} if args.branched_only else {b: await backend_sweep(b, args.turns, out, cluster) for b in backends}
    finally:
        if cluster is not None:
            cluster.stop()
    lines = ["## A thread that branched (first text delta p50 ÷ a new thread's)", ""]
    for b, r in branched.items():
        lines += branched_verdicts(b, r)
    if results:
        (out / "threads.json").write_text(json.dumps(results | {"branched": branched}, indent=2))
        text = report(results) + "\n" + "\n".join(lines) + "\n"
        (out / "threads.md").write_text(text)
        plot(results, out)
    else:
        (out / "branched.json").write_text(json.dumps(branched, indent=2))
        text = "\n".join(lines)
    print(text)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--backends", default="sqlite,files,postgres")
    parser.add_argument("--turns", type=int, default=25)  # 25 samples per case: steadier medians than 15
    parser.add_argument("--out", default=str(Path(__file__).resolve().parent / "results"))
    parser.add_argument("--branched-only", action="store_true", help="measure only the thread that branched")
    trio.run(main, parser.parse_args())
