"""Runs hosted in the server-owned nursery (issue 16): a run outlives the task that launched it, a
stop interrupts it for ``stopped``, leaving ``hosting`` interrupts it for ``shutdown``; with no
``hosting`` open the engine holds the run in a nursery of its own (no entry point takes one); and the
broadcast it streams into (positions, bounded replay, watchers that leave alone)."""

from __future__ import annotations

import inspect

import orjson
import trio

from awaken.core import events as ev
from awaken.core.principal import ANONYMOUS
from awaken.engine.state import RunStatus
from awaken.streams.broadcast import RunBroadcast
from awaken.wires.agui import adapter as agui_adapter
from awaken.wires.aisdk import adapter as aisdk_adapter
from tests.engine.test_engine_runs import ask, engine


def broadcast_for(protocol, limit: int = 1 << 20):  # noqa: ANN001, ANN201
    def make(run):  # noqa: ANN001, ANN202
        out = RunBroadcast(run.run_id, run.thread_id, limit)
        out.open_channel(protocol)
        return out
    return make


async def launch_held(ctx, thread_id: str, run_id: str):  # noqa: ANN001, ANN201
    """A run of many slow words, launched by a task that ends at once (the server's nursery holds it)."""
    async with ctx.app.launch(thread_id, None, ask(thread_id, "/delay 20\n/words 500", run_id=run_id),
                              broadcast_for(agui_adapter.PROTOCOL), principal=ANONYMOUS) as run:
        return run


async def test_a_hosted_run_outlives_the_task_that_launched_it_and_stop_interrupts_it_for_stopped(tmp_path):
    async with engine(tmp_path) as ctx, ctx.app.hosting():
        async with trio.open_nursery() as connection:
            run = await launch_held(ctx, "t1", "r1")
            connection.cancel_scope.cancel()  # the launching connection goes
        assert ctx.app.is_active("t1") and run.status is RunStatus.RUNNING
        assert await ctx.app.stop("t1") is RunStatus.INTERRUPTED
        record = await ctx.ledger.get_run("r1")
        assert (record.status, record.error_message) == (RunStatus.INTERRUPTED, "stopped on request")
        assert run.broadcast is not None and run.broadcast.closed


async def test_leaving_hosting_interrupts_hosted_runs_for_shutdown(tmp_path):
    async with engine(tmp_path) as ctx:
        async with ctx.app.hosting(), trio.open_nursery():
            await launch_held(ctx, "t1", "r1")
        record = await ctx.ledger.get_run("r1")
        assert (record.status, record.error_message) == (RunStatus.INTERRUPTED, "the server shut down")
        assert not ctx.app.is_active("t1")


async def test_without_hosting_launch_holds_the_run_in_the_engines_own_nursery_until_it_ends(tmp_path):
    async with engine(tmp_path) as ctx:
        assert not ctx.app.hosting_runs
        async with ctx.app.launch("t1", None, ask("t1", "hello", run_id="r1"), broadcast_for(agui_adapter.PROTOCOL),
                                  principal=ANONYMOUS) as run:
            assert run.run_id == "r1" and ctx.app.is_active("t1")
        # leaving ``launch`` waited for the run: it ended, committed, its broadcast closed
        assert run.status is RunStatus.COMPLETED and not ctx.app.is_active("t1")
        assert (await ctx.ledger.get_run("r1")).status is RunStatus.COMPLETED
        assert run.broadcast is not None and run.broadcast.closed


def test_no_engine_entry_point_takes_a_nursery():
    from awaken.engine import RunApplication

    takes = sorted(name for name, fn in inspect.getmembers(RunApplication, inspect.isfunction)
                   if not name.startswith("_") and any("nursery" in p.lower() or "Nursery" in str(v.annotation)
                                                       for p, v in inspect.signature(fn).parameters.items()))
    assert takes == []


def test_positions_count_every_wire_event_and_the_replay_is_bounded_in_bytes():
    out = RunBroadcast("r1", "t1", limit=600)
    channel = out.open_channel(agui_adapter.PROTOCOL)
    out.sink(ev.RunStarted("t1", "r1", "m1"))
    out.sink(ev.StepStarted(1))
    out.sink(ev.TextStart("m1"))
    for i in range(20):
        out.sink(ev.TextDelta("m1", f"word{i} "))
    assert channel.next_seq == 24  # RUN_STARTED, STEP_STARTED, TEXT_MESSAGE_START, 20 deltas
    assert channel.size <= 600 and channel.first_seq > 1  # the oldest frames are gone
    assert [seq for seq, _ in channel.head] == [1]  # the head stays for a snapshot rejoin
    assert channel.watch(lambda p, d: None, 0) is None  # a position no longer held
    seen: list[bytes] = []
    watcher = channel.watch(lambda p, d: seen.append(p), 22)
    assert watcher is not None and seen == [b"r1:23"]


def test_a_second_protocol_joins_late_and_is_encoded_once_from_the_log():
    out = RunBroadcast("r1", "t1", limit=1 << 20)
    agui = out.open_channel(agui_adapter.PROTOCOL)
    out.sink(ev.RunStarted("t1", "r1", "m1"))
    out.sink(ev.StepStarted(1))
    out.sink(ev.TextStart("m1"))
    out.sink(ev.TextDelta("m1", "hi"))
    aisdk = out.open_channel(aisdk_adapter.PROTOCOL)
    assert out.open_channel(aisdk_adapter.PROTOCOL) is aisdk
    out.sink(ev.TextEnd("m1"))
    kinds = [orjson.loads(p)["type"] for _, p in aisdk.frames]
    assert kinds == ["start", "start-step", "text-start", "text-delta", "text-end"]
    assert agui.next_seq == 6


def test_a_watcher_that_leaves_stops_receiving_and_the_others_go_on():
    out = RunBroadcast("r1", "t1", limit=1 << 20)
    channel = out.open_channel(agui_adapter.PROTOCOL)
    a: list[bytes] = []
    b: list[bytes] = []
    first = channel.watch(lambda p, d: a.append(p), 0)
    channel.watch(lambda p, d: b.append(p), 0)
    out.sink(ev.RunStarted("t1", "r1", "m1"))
    first.leave()
    out.sink(ev.StepStarted(1))
    out.close()
    assert (a, b) == ([b"r1:1"], [b"r1:1", b"r1:2"])
