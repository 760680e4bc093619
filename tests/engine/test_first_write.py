"""A run's writes and what it tells the client: its first write (the admitted input) may overlap its
first model step, since live deltas acknowledge nothing, but its terminal event is sent only once the
commit behind it is on disk. The ledger's fsync is a test double held by a gate."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import trio

from awaken.core import events as ev
from awaken.core.principal import ANONYMOUS
from awaken.engine.state import RunStatus
from awaken.http.context import ServerContext
from awaken.wires.protocol import RunRequest
from tests.builders import make_config, user_message
from tests.engine.test_engine_runs import kinds
from tests.ledger.test_group_commit import HeldFsync, held_fsync, until


@pytest.fixture
def fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldFsync]:
    yield from held_fsync(monkeypatch)



async def test_the_terminal_event_waits_for_the_fsync_of_its_commit(tmp_path: Path, fsync: HeldFsync) -> None:
    ctx = ServerContext.build(make_config(tmp_path))
    await ctx.open()
    group = ctx.ledger.group
    events: list[Any] = []
    status: list[RunStatus] = []
    try:
        # fsync number 1 from here is the run's first write; number 2 the commit of its answer
        fsync.calls = 0
        fsync.hold(at=2)

        async def run() -> None:
            build = lambda view: RunRequest("t1", None, (user_message("hello there"),))  # noqa: E731
            async with ctx.app.admit("t1", None, build, principal=ANONYMOUS) as admitted:
                status.append(await admitted.execute(events.append))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await until(lambda: fsync.calls == 2 and group.waiting == 1)
            # the answer streamed live and its commit is written, but not on disk: no terminal event
            assert "TextDelta" in kinds(events) and "TextEnd" in kinds(events)
            assert "RunFinished" not in kinds(events) and status == []
            fsync.release()
        assert isinstance(events[-1], ev.RunFinished) and events[-1].outcome == "completed"
        assert status == [RunStatus.COMPLETED]
        runs = await ctx.ledger.list_runs("t1")
        assert [r.status for r in runs] == [RunStatus.COMPLETED]
    finally:
        await ctx.aclose()


async def test_the_first_write_overlaps_the_first_step(tmp_path: Path, fsync: HeldFsync) -> None:
    """With the first write's fsync held, the run still streams its answer; nothing after the first
    write (its commit, the terminal event) happens before that fsync returns."""
    ctx = ServerContext.build(make_config(tmp_path))
    await ctx.open()
    group = ctx.ledger.group
    events: list[Any] = []
    try:
        fsync.calls = 0
        fsync.hold(at=1)

        async def run() -> None:
            build = lambda view: RunRequest("t1", None, (user_message("hello there"),))  # noqa: E731
            async with ctx.app.admit("t1", None, build, principal=ANONYMOUS) as admitted:
                await admitted.execute(events.append)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await until(lambda: fsync.calls == 1 and group.waiting == 1 and "TextEnd" in kinds(events))
            assert "RunFinished" not in kinds(events) and group.written == 1  # the answer is not committed
            fsync.release()
        assert kinds(events)[-1] == "RunFinished" and fsync.calls == 2
    finally:
        await ctx.aclose()
