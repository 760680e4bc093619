"""Group commit (``awaken/ledger/groupsync.py``): with the default durability an acknowledged commit is
on disk, yet commits that arrive while an fsync is in flight share the next one, and a read never
reports a commit before it is on disk. The fsync is a test double held by a gate."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio

from awaken.core.errors import StoreUnavailable
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit
from awaken.ledger.testkit.harness import run_record, user
from storage_backends.files import FileLedger
from storage_backends.sqlite_ledger import SqliteLedger


class HeldFsync:
    """``os.fsync`` counted; while held (``hold``), every call, or only call number ``at``, waits for
    ``release`` (in its worker thread)."""

    def __init__(self) -> None:
        self.calls = 0
        self.directories = 0
        self._open = threading.Event()
        self._open.set()
        self._at: int | None = None
        self._real = os.fsync

    def hold(self, at: int | None = None) -> None:
        self._at = at
        self._open.clear()

    def release(self) -> None:
        self._open.set()

    def __call__(self, fd: int) -> None:
        self.calls += 1
        if stat.S_ISDIR(os.fstat(fd).st_mode):
            self.directories += 1
        if self._at is None or self.calls == self._at:
            self._open.wait(30)
        self._real(fd)


def held_fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldFsync]:
    """``os.fsync`` replaced by a ``HeldFsync`` for the test (a fixture's body)."""
    held = HeldFsync()
    monkeypatch.setattr(os, "fsync", held)
    try:
        yield held
    finally:
        held.release()


@pytest.fixture
def fsync(monkeypatch: pytest.MonkeyPatch) -> Iterator[HeldFsync]:
    yield from held_fsync(monkeypatch)


async def until(condition) -> None:
    """Wait for ``condition`` (a worker thread's progress, which trio cannot see), at most 10 s."""
    with trio.fail_after(10):
        while not condition():
            await trio.sleep(0.001)


async def test_run_starts_that_arrive_during_an_fsync_share_the_next_one(tmp_path: Path, fsync: HeldFsync) -> None:
    runs = 200
    ledger = SqliteLedger(str(tmp_path / "a.db"))
    await ledger.open()
    group = ledger.group
    assert group is not None
    fsync.calls = 0
    done: list[str] = []
    try:
        fsync.hold()
        async with trio.open_nursery() as nursery:
            async def start(n: int) -> None:
                await ledger.start_run(run_record(f"r{n}", f"t{n}"), [user(f"u{n}")])
                done.append(f"t{n}")

            for n in range(runs):
                nursery.start_soon(start, n)
            # every run start is written (in the WAL) and waits: none is acknowledged before its fsync
            await until(lambda: group.written == runs and group.waiting == runs)
            assert done == [] and fsync.calls == 1
            fsync.release()
        assert sorted(done) == sorted(f"t{n}" for n in range(runs))
        # the first fsync covered what was written when it began; the next one every other start
        assert fsync.calls == 2
        assert group.syncs == 2 and group.durable == group.written == runs
        assert [m.id for m in await ledger.read_messages("t7", 0, 10)] == ["u7"]
    finally:
        await ledger.aclose()


async def test_one_commit_alone_costs_one_fsync(tmp_path: Path, fsync: HeldFsync) -> None:
    ledger = SqliteLedger(str(tmp_path / "a.db"))
    await ledger.open()
    try:
        fsync.calls = 0
        await ledger.start_run(run_record("r1", "t"), [user("u1")])
        assert fsync.calls == 1
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
        assert fsync.calls == 2
        await ledger.read_messages("t", 0, 10)  # nothing new to make durable: no fsync
        assert fsync.calls == 2
    finally:
        await ledger.aclose()


async def test_a_read_never_reports_a_commit_before_it_is_durable(tmp_path: Path, fsync: HeldFsync) -> None:
    ledger = SqliteLedger(str(tmp_path / "a.db"))
    await ledger.open()
    group = ledger.group
    assert group is not None
    order: list[str] = []
    try:
        fsync.hold()
        async with trio.open_nursery() as nursery:
            async def start() -> None:
                await ledger.start_run(run_record("r1", "t"), [user("u1")])
                order.append("start acknowledged")

            async def read() -> None:
                messages = await ledger.read_messages("t", 0, 10)
                order.append(f"read {[m.id for m in messages]}")

            nursery.start_soon(start)
            await until(lambda: group.written == 1 and group.waiting == 1)
            nursery.start_soon(read)
            # the read ran (it saw the start in the WAL) and waits for the fsync behind it
            await until(lambda: group.waiting == 2)
            assert order == []
            order.append("fsync released")
            fsync.release()
        assert order[0] == "fsync released"
        assert sorted(order[1:]) == ["read ['u1']", "start acknowledged"]
    finally:
        await ledger.aclose()


async def test_a_failed_fsync_acknowledges_nothing_after_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An fsync error is final: what it was to make durable may be lost, so no later commit is
    acknowledged either (until the ledger is opened again)."""
    ledger = SqliteLedger(str(tmp_path / "a.db"))
    await ledger.open()
    real = os.fsync
    try:
        await ledger.start_run(run_record("r1", "t"), [user("u1")])

        def broken(fd: int) -> None:
            raise OSError(5, "Input/output error")

        monkeypatch.setattr(os, "fsync", broken)
        with pytest.raises(StoreUnavailable, match="durable"):
            await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
        monkeypatch.setattr(os, "fsync", real)
        with pytest.raises(StoreUnavailable, match="durable"):
            await ledger.start_run(run_record("r2", "t2"), [user("u2")])
    finally:
        await ledger.aclose()
    reopened = SqliteLedger(str(tmp_path / "a.db"))
    await reopened.open()
    try:
        await reopened.start_run(run_record("r3", "t3"), [user("u3")])
    finally:
        await reopened.aclose()


async def test_the_file_ledger_shares_its_syncs_across_threads(tmp_path: Path, fsync: HeldFsync) -> None:
    """The file ledger keeps a log per thread, so a sync fsyncs each log written since the last one
    (once, however many records it got) and the directory once for every log created meanwhile: 200
    new threads started during one sync cost one more sync and two directory fsyncs, not 200."""
    runs = 200
    ledger = FileLedger(str(tmp_path / "ledger"))
    await ledger.open()
    group = ledger.group
    assert group is not None
    fsync.calls = fsync.directories = 0
    done: list[str] = []
    try:
        fsync.hold()
        async with trio.open_nursery() as nursery:
            async def start(n: int) -> None:
                await ledger.start_run(run_record(f"r{n}", f"t{n}"), [user(f"u{n}")])
                done.append(f"t{n}")

            for n in range(runs):
                nursery.start_soon(start, n)
            await until(lambda: group.written == runs and group.waiting == runs)
            assert done == [] and fsync.calls == 1
            # nothing is read back before it is on disk either
            nursery.start_soon(lambda: ledger.read_messages("t7", 0, 10))
            await until(lambda: group.waiting == runs + 1)
            fsync.release()
        assert len(done) == runs
        assert group.syncs == 2 and group.durable == group.written == runs
        assert fsync.directories == 2 and fsync.calls == runs + 2
    finally:
        await ledger.aclose()
    reopened = FileLedger(str(tmp_path / "ledger"))
    await reopened.open()
    try:
        assert [m.id for m in await reopened.read_messages("t7", 0, 10)] == ["u7"]
    finally:
        await reopened.aclose()
