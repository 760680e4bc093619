"""The built-in backends (``sqlite``, ``files``) against the importable conformance suite, plus what is
particular to each: the file ledger's torn-tail, lock, disk-full and path-safety promises and its
compact index (differentially against SQLite), SQLite's locks, full database and schema migration.

The whole of ``awaken.ledger.testkit.conformance`` runs here through the ``ledger_factory`` fixture,
parametrised over ``ledger_harness.BACKENDS``.
"""

from __future__ import annotations

import errno
import fcntl
import os
import random
import sqlite3
import subprocess
import sys
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, Usage
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Ledger, ThreadRecord, ledger_class
from awaken.ledger.testkit.conformance import *  # noqa: F403 - the suite: every test and its fixtures
from awaken.ledger.testkit.conformance import ODD_THREAD_IDS, _normalize, started
from awaken.ledger.testkit.harness import (
    LedgerFactory,
    assistant,
    pending,
    read_all,
    run_record,
    snapshot,
    step_messages,
    tick,
    user,
)
from storage_backends.files import FileLedger, encode_frame, thread_file_name
from tests.ledger_harness import BACKENDS, make_ledger, opened

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def ledger_factory(backend: str) -> LedgerFactory:
    return BACKENDS[backend]


# -- lifecycle ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", list(BACKENDS))
def test_backend_is_reachable_by_its_config_name(name: str, tmp_path: Path) -> None:
    """``ledger_class`` resolves the backend's config name to the class the suite tests."""
    assert ledger_class(name) is type(make_ledger(name, tmp_path))


async def test_files_without_fsync_keep_the_same_semantics(tmp_path: Path) -> None:
    """``fsync = false`` changes durability against power loss only: commits and reopen behave the same."""
    async with opened("files", tmp_path, fsync=False) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        before = await snapshot(ledger)
    async with opened("files", tmp_path, fsync=False) as ledger:
        assert await snapshot(ledger) == before


async def test_files_write_only_hex_named_logs_inside_their_directory(tmp_path: Path) -> None:
    """Whatever a thread id says (path-like, empty, very long), the file ledger writes only a log named
    by the id's digest, inside its own directory."""
    root = tmp_path / "store"
    async with opened("files", root) as ledger:
        for n, thread_id in enumerate(ODD_THREAD_IDS):
            await started(ledger, f"r{n}", thread_id, user("u1", thread_id))
    _check_containment(tmp_path, root)


def _check_containment(tmp_path: Path, root: Path) -> None:
    assert sorted(p.name for p in tmp_path.iterdir()) == ["store"]
    logs = sorted(p.name for p in (root / "ledger" / "threads").iterdir())
    assert logs == sorted(thread_file_name(t) for t in ODD_THREAD_IDS)
    for path in root.rglob("*"):
        assert path.resolve().is_relative_to((root / "ledger").resolve())


# -- an unavailable store -----------------------------------------------------------------------


async def test_files_lock_held_by_another_process(tmp_path: Path) -> None:
    """A file ledger directory open in another process cannot be opened (StoreUnavailable naming the
    lock); once that process is gone it opens normally. A second instance in this process fails too."""
    path = tmp_path / "ledger"
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            await FileLedger(str(path)).open()
    script = (
        "import sys, trio\n"
        "from storage_backends.files import FileLedger\n"
        "async def main():\n"
        "    ledger = FileLedger(sys.argv[1])\n"
        "    await ledger.open()\n"
        "    print('READY', flush=True)\n"
        "    sys.stdin.readline()\n"
        "trio.run(main)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    child = await trio.lowlevel.open_process(
        [sys.executable, "-c", script, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env
    )
    try:
        assert child.stdout is not None
        line = b""
        with trio.fail_after(30):
            while not line.endswith(b"\n"):
                chunk = await child.stdout.receive_some(100)
                assert chunk, "the child exited before opening the ledger"
                line += chunk
        assert line.strip() == b"READY"
        with pytest.raises(StoreUnavailable, match=rf"locked by another process \(pid {child.pid}\)"):
            await FileLedger(str(path)).open()
    finally:
        child.kill()
        await child.wait()
        for stream in (child.stdin, child.stdout):
            if stream is not None:
                await stream.aclose()
    fd = os.open(path / "LOCK", os.O_RDWR)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(StoreUnavailable, match="locked by another process"):
            await FileLedger(str(path)).open()
    finally:
        os.close(fd)
    async with opened("files", tmp_path) as ledger:
        assert [m.id for m in await ledger.read_messages("t", 0, 10)] == ["u1"]


def _half_then_fail(real: Any, err: int) -> Any:
    """An ``os.pwrite`` that writes half of its first buffer, then raises ``OSError(err)``."""
    calls = [0]

    def fake(fd: int, data: Any, offset: int) -> int:
        calls[0] += 1
        if calls[0] == 1:
            return real(fd, bytes(data[: len(data) // 2]), offset)
        raise OSError(err, os.strerror(err))

    return fake


async def test_files_disk_full_mid_write_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A write that fails halfway (ENOSPC) raises StoreUnavailable; the half-written record is cut off,
    nothing of the commit is visible (now or after reopen) and the next commit gets the right seq."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        size = log.stat().st_size
        before = await snapshot(ledger)
        monkeypatch.setattr(os, "pwrite", _half_then_fail(os.pwrite, errno.ENOSPC))
        with pytest.raises(StoreUnavailable, match="disk is full"):
            await ledger.commit(
                "t",
                "r1",
                Commit(status=RunStatus.WAITING, messages=step_messages("r1", 1, 3), state={"x": 1}, steps=1),
            )
        with pytest.raises(StoreUnavailable):
            await started(ledger, "r2", "new-thread", user("u1"))
        monkeypatch.undo()
        assert log.stat().st_size == size
        assert await snapshot(ledger) == before
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after
        assert await ledger.get_thread("new-thread") is None


async def test_files_failed_fsync_or_failed_cut_leaves_nothing(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An fsync error (EIO) raises StoreUnavailable and the record is cut off; the failure is final
    (the group commit's: what the fsync was to make durable may be gone), so nothing is read or
    written until the ledger is opened again, and then it holds what it held before. A write that
    fails is cut off too; if even the cut fails, it is redone before the next write, so the log never
    holds an unacknowledged record."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)

        def bad_fsync(fd: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(os, "fsync", bad_fsync)
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("lost-1"),)))
        monkeypatch.undo()
        with pytest.raises(StoreUnavailable):
            await ledger.read_messages("t", 0, 10)
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("lost-0"),)))
    async with opened("files", tmp_path) as ledger:  # (reopened: the run was recovered as interrupted)
        assert await ledger.read_messages("t", 0, 10) == before["t"]["messages"]
        before = await snapshot(ledger)

        def bad_ftruncate(fd: int, length: int) -> None:
            raise OSError(errno.EIO, "I/O error")

        monkeypatch.setattr(os, "pwrite", _half_then_fail(os.pwrite, errno.ENOSPC))
        monkeypatch.setattr(os, "ftruncate", bad_ftruncate)
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("lost-2"),)))
        monkeypatch.undo()
        assert await snapshot(ledger) == before
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after


def _corruptions() -> dict[str, bytes]:
    good = encode_frame({"type": "commit", "thread": "t", "run": "r1", "v": 1})
    bad_json = b"{not json"
    not_object = b"[1, 2]"
    import struct
    import zlib

    return {
        "short-header": good[:5],
        "short-payload": good[:-3],
        "bad-checksum": good[:8] + bytes([good[8] ^ 0xFF]) + good[9:],
        "bad-json": struct.pack(">II", len(bad_json), zlib.crc32(bad_json)) + bad_json,
        "not-an-object": struct.pack(">II", len(not_object), zlib.crc32(not_object)) + not_object,
        "zeros": bytes(64),
        "huge-length": b"\xff\xff\xff\xff\x00\x00\x00\x00" + b"x" * 10,
    }


@pytest.mark.parametrize("kind", list(_corruptions()))
async def test_files_torn_tail_is_cut_off_at_open(tmp_path: Path, kind: str) -> None:
    """A torn or corrupt tail record (short frame, bad checksum, bad JSON, zeros) is detected at open and
    truncated off (its bytes kept under ``torn/``); the committed data before it is intact and the log
    accepts new commits."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        before = await snapshot(ledger)
    log = tmp_path / "ledger" / "threads" / thread_file_name("t")
    size = log.stat().st_size
    tail = _corruptions()[kind]
    with log.open("ab") as f:
        f.write(tail)
    async with opened("files", tmp_path) as ledger:
        assert log.stat().st_size == size
        assert await snapshot(ledger) == before
        kept = list((tmp_path / "ledger" / "torn").iterdir())
        assert [p.read_bytes() for p in kept] == [tail]
        await started(ledger, "r2", "t", user("u2"))
        await ledger.commit("t", "r2", Commit(status=RunStatus.COMPLETED))
        after = await snapshot(ledger)
    async with opened("files", tmp_path) as ledger:
        assert await snapshot(ledger) == after


async def test_files_whole_but_unappliable_record_refuses_to_open(tmp_path: Path) -> None:
    """A whole, checksummed record that cannot be applied (not a torn write: a bug or a hand edit) is
    never silently dropped: open raises StoreUnavailable naming the file, and the file is untouched."""
    async with opened("files", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
    log = tmp_path / "ledger" / "threads" / thread_file_name("t")
    with log.open("ab") as f:
        f.write(encode_frame({"type": "commit", "thread": "t", "run": "no-such-run", "v": 1}))
    size = log.stat().st_size
    with pytest.raises(StoreUnavailable, match="cannot be applied"):
        await FileLedger(str(tmp_path / "ledger")).open()
    assert log.stat().st_size == size
    log.rename(tmp_path / "aside.log")
    async with opened("files", tmp_path) as ledger:  # the failed open released the lock
        assert await ledger.list_threads() == []


async def test_sqlite_exclusive_lock_makes_the_ledger_unavailable(tmp_path: Path) -> None:
    """While another connection holds the database with locking_mode=EXCLUSIVE + BEGIN EXCLUSIVE, opening
    the SQLite ledger raises StoreUnavailable (within the busy timeout); afterwards the data is intact."""
    async with opened("sqlite", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED))
        before = await snapshot(ledger)
    other = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
    try:
        other.execute("PRAGMA locking_mode = EXCLUSIVE")
        other.execute("BEGIN EXCLUSIVE")
        with trio.fail_after(5):
            with pytest.raises(StoreUnavailable):
                await make_ledger("sqlite", tmp_path, busy_timeout_ms=100).open()
        other.execute("ROLLBACK")
    finally:
        other.close()
    async with opened("sqlite", tmp_path) as ledger:
        assert await snapshot(ledger) == before


async def test_sqlite_held_write_lock_fails_commits_cleanly(tmp_path: Path) -> None:
    """While another connection holds the write lock, start_run and commit raise StoreUnavailable after
    the busy timeout and leave nothing; reads still answer (WAL); later commits succeed."""
    async with opened("sqlite", tmp_path, busy_timeout_ms=100) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)
        other = sqlite3.connect(str(tmp_path / "ledger.db"), isolation_level=None)
        try:
            other.execute("BEGIN IMMEDIATE")
            with trio.fail_after(5):
                with pytest.raises(StoreUnavailable):
                    await ledger.commit(
                        "t", "r1", Commit(status=RunStatus.RUNNING, messages=(assistant("a1"),))
                    )
                with pytest.raises(StoreUnavailable):
                    await started(ledger, "r2", "t2", user("u1"))
            assert await snapshot(ledger) == before
            other.execute("ROLLBACK")
        finally:
            other.close()
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2


async def test_sqlite_full_database_fails_commits_cleanly(tmp_path: Path) -> None:
    """When the database cannot grow (max_page_count reached, as on a full disk), a commit raises
    StoreUnavailable and nothing of it is visible, now or after reopen."""
    async with opened("sqlite", tmp_path) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        before = await snapshot(ledger)
        conn = ledger._db.conn  # type: ignore[attr-defined]
        pages = conn.execute("PRAGMA page_count").fetchone()[0]
        conn.execute(f"PRAGMA max_page_count = {pages}")
        big = tuple(assistant(f"big{i}", "x" * 20_000) for i in range(5))
        with pytest.raises(StoreUnavailable):
            await ledger.commit("t", "r1", Commit(status=RunStatus.RUNNING, messages=big, state={"s": 1}))
        assert await snapshot(ledger) == before
        conn.execute("PRAGMA max_page_count = 1073741823")
        out = await ledger.commit("t", "r1", Commit(status=RunStatus.COMPLETED, messages=(assistant("a1"),)))
        assert out[0].seq == 2
        after = await snapshot(ledger)
    async with opened("sqlite", tmp_path) as ledger:
        assert await snapshot(ledger) == after


# -- the file ledger's compact index: message bodies are read back from the log -----------------


def _timed(m: Message) -> Message:
    """The message with a fixed created_at, so two backends store the same value."""
    return attrs.evolve(m, created_at=tick())


@pytest.mark.parametrize("cache_bytes", [0, 3000, 256 * 1024])
async def test_files_reads_from_the_log_agree_with_sqlite(tmp_path: Path, cache_bytes: int) -> None:
    """The file ledger keeps no message bodies in its index: with its history cache off, tiny (always
    evicting) or at the default, every read_messages window, thread_view and message_ids answer equals
    SQLite's, over an imported thread with seq gaps, steps of 0-3 messages, pending calls and reopens."""
    rng = random.Random(cache_bytes + 11)
    options: dict[str, dict[str, Any]] = {"sqlite": {}, "files": {"cache_bytes": cache_bytes}}
    ledgers = {name: make_ledger(name, tmp_path / name, **options[name]) for name in options}
    for ledger in ledgers.values():
        await ledger.open()
    try:
        imported = [
            attrs.evolve(_timed(user(f"g{seq}", f"imported {seq}", "imp-run")), seq=seq)
            for seq in (9, 2, 3, 4, 7)
        ]
        for ledger in ledgers.values():
            await ledger.import_thread(
                ThreadRecord("imp", 1, {"k": 1}, 10),
                [run_record("imp-run", "imp", status=RunStatus.COMPLETED, created_at=1)],
                imported,
                [],
            )
        runs: dict[str, str] = {}
        for step in range(80):
            thread_id = rng.choice(["a", "b/../c", "imp"])
            roll = rng.random()
            if roll < 0.1:
                for name in options:
                    await ledgers[name].aclose()
                    ledgers[name] = make_ledger(name, tmp_path / name, **options[name])
                    await ledgers[name].open()
            elif thread_id not in runs or roll < 0.25:
                run_id = f"r{step}"
                record = run_record(run_id, thread_id)
                inputs = [
                    _timed(user(f"{run_id}-in{i}", "x" * rng.randint(0, 300), run_id))
                    for i in range(rng.randint(0, 2))
                ]
                for ledger in ledgers.values():
                    await ledger.start_run(record, inputs)
                runs[thread_id] = run_id
            else:
                run_id = runs[thread_id]
                messages = tuple(
                    _timed(assistant(f"{run_id}-{step}-{i}", "y" * rng.randint(0, 500), run_id, [f"c{step}"]))
                    for i in range(rng.randint(0, 3))
                )
                open_calls = [p.tool_call_id for p in await ledgers["sqlite"].pending_calls(thread_id)]
                calls = ()
                if messages and rng.random() < 0.4:
                    calls = (pending(f"c{step}", run_id, thread_id, messages[0].id),)
                commit = Commit(
                    RunStatus.WAITING if calls else RunStatus.RUNNING,
                    messages=messages,
                    pending=calls,
                    resolved=tuple(open_calls),
                    state={"step": step} if rng.random() < 0.3 else None,
                    steps=1,
                )
                for ledger in ledgers.values():
                    await ledger.commit(thread_id, run_id, commit)
            await _compare_reads(ledgers["sqlite"], ledgers["files"], rng, windows=6)
        await _compare_reads(ledgers["sqlite"], ledgers["files"], rng, windows=-1)
        assert _normalize(await snapshot(ledgers["files"])) == _normalize(await snapshot(ledgers["sqlite"]))
    finally:
        for ledger in ledgers.values():
            await ledger.aclose()


async def _compare_reads(reference: Ledger, files: Ledger, rng: random.Random, windows: int) -> None:
    """thread_view, its message ids and ``windows`` random read_messages windows (all if -1) per thread."""
    for thread in await reference.list_threads():
        thread_id = thread.thread_id
        view = await reference.thread_view(thread_id)
        assert await files.thread_view(thread_id) == view
        ids = [m.id for m in view.messages]
        asked = rng.sample(ids, min(3, len(ids))) + ["never-committed"]
        assert (await files.thread_view(thread_id)).message_ids() & set(asked) == set(asked) - {"never-committed"}
        grid = [(after, limit) for after in range(-1, thread.last_seq + 2) for limit in (-1, 0, 1, 2, 3, 7)]
        for after, limit in grid if windows < 0 else rng.sample(grid, min(windows, len(grid))):
            expected = await reference.read_messages(thread_id, after, limit)
            assert await files.read_messages(thread_id, after, limit) == expected, (thread_id, after, limit)


async def test_files_index_holds_no_message_bodies(tmp_path: Path) -> None:
    """Committed bodies live in the log, not in memory: after 200 threads with 20 KB of messages each,
    the ledger's Python heap grew by far less than the 4 MB of bodies (a compact index plus a bounded
    history cache), thread_view on every thread keeps it there, and every body reads back intact."""
    import gc
    import tracemalloc

    bodies = 200 * 4 * 5_000
    tracemalloc.start()
    try:
        async with opened("files", tmp_path, fsync=False, cache_bytes=64 * 1024) as ledger:

            async def write_and_view(threads: range) -> None:
                for n in threads:
                    body = f"{n:04d}" + "z" * 4_996
                    run_id, thread_id = f"r{n}", f"t{n}"
                    await started(ledger, run_id, thread_id, user(f"u{n}", body, run_id))
                    answer = tuple(assistant(f"a{n}-{i}", body, run_id, [f"c{n}"]) for i in range(3))
                    call = pending(f"c{n}", run_id, thread_id, answer[0].id)
                    await ledger.commit(thread_id, run_id, Commit(RunStatus.WAITING, answer, pending=(call,)))
                for n in threads:
                    view = await ledger.thread_view(f"t{n}")
                    assert [m.text[:4] for m in view.messages] == [f"{n:04d}"] * 4
                    assert [len(m.text) for m in view.messages] == [5_000] * 4 and len(view.pending) == 1

            await write_and_view(range(1000, 1050))  # warm up (one-time allocations of the process)
            gc.collect()
            before = tracemalloc.get_traced_memory()[0]
            await write_and_view(range(200))
            gc.collect()
            grown = tracemalloc.get_traced_memory()[0] - before
            assert grown < bodies / 4, f"the heap grew by {grown} bytes for {bodies} bytes of bodies"
    finally:
        tracemalloc.stop()


async def test_files_a_log_damaged_under_an_open_ledger_fails_reads_cleanly(tmp_path: Path) -> None:
    """Reads check what they read: if a committed record's bytes change under an open ledger (disk
    corruption, a hand edit) or the log is cut short, reading them raises StoreUnavailable, never wrong
    messages; intact records before the damage still read."""
    async with opened("files", tmp_path, cache_bytes=0) as ledger:
        await started(ledger, "r1", "t", user("u1", "first"))
        await ledger.commit("t", "r1", Commit(RunStatus.COMPLETED, messages=(assistant("a1", "second"),)))
        log = tmp_path / "ledger" / "threads" / thread_file_name("t")
        data = log.read_bytes()
        with log.open("r+b") as f:
            f.seek(data.index(b"second"))
            f.write(b"S")
        with pytest.raises(StoreUnavailable):
            await ledger.read_messages("t", 0, 10)
        with pytest.raises(StoreUnavailable):
            await ledger.thread_view("t")
        assert [m.text for m in await ledger.read_messages("t", 0, 1)] == ["first"]
        os.truncate(log, data.index(b"second"))
        with pytest.raises(StoreUnavailable):
            await ledger.read_messages("t", 1, 10)
        assert await ledger.get_thread("t") is not None  # the index answers


@pytest.mark.parametrize("cache_bytes", [0, 256 * 1024])
async def test_files_thread_view_is_consistent_under_concurrent_commits(
    tmp_path: Path, cache_bytes: int
) -> None:
    """While a writer commits steps (each adds a message and moves the pending call to it), concurrent
    thread_view calls (served from the cache or from the log) always see one instant: gapless seqs up
    to the thread's last_seq, and the pending call of its last message; a later read_messages page
    returns the same messages for those seqs."""
    async with opened("files", tmp_path, cache_bytes=cache_bytes) as ledger:
        await started(ledger, "r1", "t", user("u1"))
        done = trio.Event()
        views = [0]

        async def writer() -> None:
            for step in range(40):
                answer = assistant(f"a{step}", calls=[f"c{step}"])
                await ledger.commit(
                    "t",
                    "r1",
                    Commit(
                        RunStatus.WAITING,
                        messages=(answer,),
                        pending=(pending(f"c{step}", "r1", "t", answer.id),),
                        resolved=(f"c{step - 1}",) if step else (),
                    ),
                )
            done.set()

        async def reader() -> None:
            while not done.is_set():
                view = await ledger.thread_view("t")
                assert view.thread is not None
                last = view.thread.last_seq
                assert [m.seq for m in view.messages] == list(range(1, last + 1))
                if last > 1:
                    assert [p.message_id for p in view.pending] == [view.messages[-1].id]
                after = max(last - 2, 0)  # a later call: more may be committed by now, never less
                page = await ledger.read_messages("t", after, 2)
                assert [m.seq for m in page] == list(range(after + 1, after + 1 + len(page)))
                assert page[: last - after] == list(view.messages[after:])
                views[0] += 1

        async with trio.open_nursery() as nursery:
            for _ in range(3):
                nursery.start_soon(reader)
            nursery.start_soon(writer)
        assert views[0] > 40
        assert len(await read_all(ledger, "t")) == 41



# -- SQLite schema migration --------------------------------------------------------------------

_FIRST_SCHEMA = """
CREATE TABLE threads (id TEXT PRIMARY KEY, created_at INTEGER NOT NULL, state TEXT NOT NULL,
    last_seq INTEGER NOT NULL);
CREATE TABLE runs (id TEXT PRIMARY KEY, thread_id TEXT NOT NULL, agent_id TEXT NOT NULL, status TEXT NOT NULL,
    created_at INTEGER NOT NULL, updated_at INTEGER NOT NULL, error_code TEXT, error_message TEXT,
    input_tokens INTEGER NOT NULL DEFAULT 0, output_tokens INTEGER NOT NULL DEFAULT 0,
    steps INTEGER NOT NULL DEFAULT 0);
CREATE INDEX runs_thread ON runs (thread_id, status);
CREATE TABLE messages (thread_id TEXT NOT NULL, seq INTEGER NOT NULL, id TEXT NOT NULL, role TEXT NOT NULL,
    run_id TEXT, parts TEXT NOT NULL, created_at INTEGER NOT NULL,
    PRIMARY KEY (thread_id, seq), UNIQUE (thread_id, id));
CREATE TABLE pending (thread_id TEXT NOT NULL, tool_call_id TEXT NOT NULL, run_id TEXT NOT NULL,
    name TEXT NOT NULL, arguments TEXT NOT NULL, kind TEXT NOT NULL, message_id TEXT NOT NULL,
    ord INTEGER NOT NULL, PRIMARY KEY (thread_id, tool_call_id));
INSERT INTO threads VALUES ('t', 100, '{"k":1}', 3);
INSERT INTO runs VALUES ('r1', 't', 'assistant', 'completed', 100, 150, NULL, NULL, 3, 4, 1);
INSERT INTO runs VALUES ('r2', 't', 'assistant', 'running', 200, 200, NULL, NULL, 0, 0, 0);
INSERT INTO messages VALUES ('t', 1, 'u1', 'user', 'r1', '[{"kind":"text","text":"  Hello\\n there  "}]', 100);
INSERT INTO messages VALUES ('t', 2, 'a1', 'assistant', 'r1', '[{"kind":"text","text":"hi"}]', 150);
INSERT INTO messages VALUES ('t', 3, 'u2', 'user', 'r2', '[{"kind":"text","text":"again"}]', 200);
"""


def _first_release_database(path: Path) -> None:
    conn = sqlite3.connect(str(path))
    conn.executescript(_FIRST_SCHEMA)
    conn.close()


async def test_sqlite_database_of_the_first_release_migrates_at_open(tmp_path: Path) -> None:
    """A database file written before runs had a cause and threads an owner opens: its runs keep
    everything and read cause None, its thread has no owner and a summary built from its history, the run it left running is recovered with cause ``server_restart``, new causes are stored,
    and the migration runs once (a reopen changes nothing)."""
    _first_release_database(tmp_path / "ledger.db")
    async with opened("sqlite", tmp_path) as ledger:
        runs = await ledger.list_runs("t")
        assert [(r.run_id, r.status, r.cause, r.usage, r.steps) for r in runs] == [
            ("r1", RunStatus.COMPLETED, None, Usage(3, 4), 1),
            ("r2", RunStatus.INTERRUPTED, "server_restart", Usage(0, 0), 0),
        ]
        assert [m.id for m in await read_all(ledger, "t")] == ["u1", "a1", "u2"]
        thread = await ledger.get_thread("t")
        assert thread == ThreadRecord("t", 100, {"k": 1}, 3, None)
        summary = await ledger.thread_summary("t")
        assert summary is not None
        assert (summary.title, summary.agent_id, summary.created_at, summary.updated_at, summary.message_count,
                summary.owner, summary.waiting) == ("Hello there", "assistant", 100, 200, 3, None, False)
        assert [s.thread_id for s in (await ledger.list_thread_summaries(None)).items] == ["t"]
        await ledger.start_run(run_record("r3", "t"), [user("u3")])
        await ledger.commit("t", "r3", Commit(RunStatus.INTERRUPTED, cause="stopped"))
        before = await snapshot(ledger)
    async with opened("sqlite", tmp_path) as ledger:
        assert await snapshot(ledger) == before
        assert (await ledger.get_run("r3")).cause == "stopped"  # type: ignore[union-attr]
