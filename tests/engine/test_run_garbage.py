"""A run leaves no reference cycle behind: once it ended (completed, or waiting for an approval) and its
request let go of it, reference counting frees all of it. A cycle would leave each run's objects (its
spec, history, broadcast, encoder) to the cycle collector, which the server runs rarely: memory per run
would grow between collections (``python -m bench.memtrace --garbage`` counts them)."""

from __future__ import annotations

import gc
from pathlib import Path
from typing import Any

import trio

from awaken.core.principal import ANONYMOUS
from awaken.engine.state import RunStatus
from awaken.http.context import ServerContext
from awaken.streams.broadcast import RunBroadcast
from awaken.wires.protocol import RunRequest
from tests.builders import default_config_data, make_config, user_message


def server_garbage() -> list[str]:
    """The server's objects a full collection finds only in reference cycles, by type."""
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        gc.collect()
        return sorted({f"{type(o).__module__}.{type(o).__qualname__}" for o in gc.garbage
                       if type(o).__module__.startswith(("awaken", "storage_backends"))})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


async def test_a_completed_run_and_a_waiting_run_leave_no_cycle(tmp_path: Path) -> None:
    agents = default_config_data()["agents"]
    agents["guarded"] = {"model": "scripted", "tools": ["calculator"], "default_permission": "ask"}
    ctx = ServerContext.build(make_config(tmp_path, agents=agents))
    await ctx.open()
    try:
        statuses: list[RunStatus] = []
        async with ctx.app.hosting():
            gc.collect()  # what opening the server left
            for thread, agent, text in (("t-done", None, "hello there"),
                                        ("t-waiting", "guarded", '/call calculator {"expression":"1"}')):
                def build(view: Any, thread: str = thread, text: str = text) -> RunRequest:
                    return RunRequest(thread, None, (user_message(text),))

                def broadcast(run: Any) -> RunBroadcast:
                    return RunBroadcast(run.run_id, run.thread_id, 1 << 16, run.owner)

                async with ctx.app.launch(thread, agent, build, broadcast, principal=ANONYMOUS) as run:
                    statuses.append(await run.settled())
                del run
                await trio.testing.wait_all_tasks_blocked()
            assert statuses == [RunStatus.COMPLETED, RunStatus.WAITING]
            assert server_garbage() == []
    finally:
        await ctx.aclose()
