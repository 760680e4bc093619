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
from tests.builders import (
    agui_body,
    call,
    default_config_data,
    held,
    live_server,
    make_config,
    post_agui,
    read_until,
    release,
    types,
    user,
    user_message,
)


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


async def test_runs_streamed_over_a_live_connection_leave_no_cycle(tmp_path: Path) -> None:
    """The same through the whole server, on its common path (hypercorn's connection, the edge, the SSE
    transport without a watcher task, the run's broadcast and its origin feed): a completed run and a
    waiting run, streamed over one keep-alive connection, leave nothing only a full collection frees."""
    agents = default_config_data()["agents"]
    agents["guarded"] = {"model": "scripted", "tools": ["calculator"], "default_permission": "ask"}
    async with live_server(make_config(tmp_path, agents=agents)) as server, server.client() as client:
        await post_agui(client, agui_body("t-warm", "r-warm", [user("u1", "warm up")]))
        gc.collect()  # what serving the first request left (imports, caches)
        done = await post_agui(client, agui_body("t-done", "r-done", [user("u1", "hello there")]))
        waiting = await post_agui(client, agui_body("t-wait", "r-wait", [user("u1", call("calculator", expression="1"))]),
                                  "/v1/ag-ui/agents/guarded")
        await trio.testing.wait_all_tasks_blocked()
        assert types(done)[-1] == "RUN_FINISHED" and types(waiting)[-1] == "RUN_FINISHED"
        assert server.ctx.app.active_count == 0
        assert server_garbage() == []


async def test_a_request_refused_by_admission_leaves_no_cycle(tmp_path: Path) -> None:
    """A request that admission refuses (here ``THREAD_BUSY``: its thread's run is held open by a gate)
    is refused in the server's nursery and the refusal handed to the request (``Handoff``): the error it
    raises, its traceback and the frames it holds (the request's, the refused run's) are freed once the
    refusal is written, not left in a cycle with the hand-off."""
    async with live_server(make_config(tmp_path)) as server, server.client() as first, server.client() as second:
        await post_agui(second, agui_body("t-warm", "r-warm", [user("u0", "warm up")]))
        await post_agui(second, agui_body("t-warm", "r-warm-2", [user("u0b", "again")]))
        body = agui_body("t-busy", "r-a", [user("ua", held("t-busy", 2))])
        async with first.stream("POST", "/v1/ag-ui", json=body) as response:
            lines = response.aiter_lines()
            await read_until(lines, "TEXT_MESSAGE_CONTENT")
            gc.collect()  # what serving the requests so far left
            refused = await post_agui(second, agui_body("t-busy", "r-b", [user("ub", "me too")]))
            await trio.testing.wait_all_tasks_blocked()
            garbage = server_garbage()
            await release(server, "t-busy")
            await read_until(lines, "RUN_FINISHED")
        assert [(e["type"], e["code"]) for e in refused] == [("RUN_ERROR", "THREAD_BUSY")]
        assert garbage == [], garbage
