"""Memory held for hot threads is bounded by configuration (issue 18, point 3).

The file ledger keeps recent threads in the hot-thread cache (``awaken.ledger.hotcache``) capped by
``cache_bytes``, and hot threads' index details in an LRU capped by ``index_cache_bytes`` (``[ledger] options``); reading many
threads one after the other keeps each at its cap, never one entry per thread. SQLite keeps the ids of
its threads in a fixed-size Bloom filter. ``python -m bench.idle`` measures the process itself with 10,000 idle threads.
"""

from __future__ import annotations

from pathlib import Path

import trio

from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.ledger.interface import TITLE_LIMIT, Commit, RunRecord
from storage_backends.known_threads import KnownThreads
from tests.ledger_harness import opened

CAP = 16 * 1024


async def test_reading_many_threads_keeps_the_hot_thread_cache_within_its_configured_cap(tmp_path: Path):
    async with opened("files", tmp_path, fsync=False, cache_bytes=CAP) as ledger:
        held = []
        for n in range(300):
            thread_id = f"t{n}"
            await ledger.start_run(RunRecord(f"r{n}", thread_id, "a", RunStatus.RUNNING, n, n),
                                   [Message(f"u{n}", "user", (TextPart("question " * 20),))])
            await ledger.commit(thread_id, f"r{n}", Commit(RunStatus.COMPLETED, (
                Message(f"a{n}", "assistant", (TextPart("answer " * 20),), f"r{n}"),)))
            view = await ledger.thread_view(thread_id)  # a whole-history read: it fills the cache
            assert [m.id for m in view.messages] == [f"u{n}", f"a{n}"]
            cache = ledger._hot  # type: ignore[attr-defined]
            assert cache.total <= CAP
            held.append(len(cache._entries))
        # the cache holds a bounded handful of recent threads, not one entry per thread read
        assert max(held) < 60 and held[-1] == held[100]
        # and what it evicted is still read back whole from the log
        assert [m.id for m in (await ledger.thread_view("t0")).messages] == ["u0", "a0"]


INDEX_CAP = 32 * 1024


async def test_idle_threads_keep_only_their_compact_entry_and_hot_details_stay_within_the_cap(tmp_path: Path):
    """The file ledger keeps a thread's index detail (message ids, segments, runs, pending calls) only
    while it is among the hot threads, at most ``index_cache_bytes``; an idle thread answers every
    read from its log, exactly as a hot one does."""
    async with opened("files", tmp_path, fsync=False, index_cache_bytes=INDEX_CAP) as ledger:
        for n in range(300):
            thread_id = f"t{n}"
            for turn in range(3):
                run_id = f"r{n}-{turn}"
                await ledger.start_run(RunRecord(run_id, thread_id, "a", RunStatus.RUNNING, n, n),
                                       [Message(f"u{n}-{turn}", "user", (TextPart("question " * 20),))])
                await ledger.commit(thread_id, run_id, Commit(RunStatus.COMPLETED, (
                    Message(f"a{n}-{turn}", "assistant", (TextPart("answer " * 20),), run_id),)))
            hot = ledger._details  # type: ignore[attr-defined]
            index = ledger._index  # type: ignore[attr-defined]
            assert hot.total <= INDEX_CAP
            assert sum(t.detail is not None for t in index.threads.values()) == len(hot)
        assert 0 < len(hot) < 100
        assert index.threads["t0"].detail is None  # idle: evicted long ago
        summary = await ledger.thread_summary("t0")  # a listing row needs no detail
        assert (summary.message_count, summary.last_run.run_id, summary.last_run.status) == (
            6, "r0-2", RunStatus.COMPLETED)
        assert (summary.title, summary.waiting) == (("question " * 20).strip()[:TITLE_LIMIT], False)
        assert index.threads["t0"].detail is None
        assert [r.run_id for r in await ledger.list_runs("t0")] == ["r0-0", "r0-1", "r0-2"]
        assert (await ledger.get_run("r0-1")).status is RunStatus.COMPLETED
        assert await ledger.committed_ids("t0", ["u0-1", "a0-2", "nope"]) == frozenset({"u0-1", "a0-2"})
        assert [m.id for m in (await ledger.thread_view("t0")).messages] == [
            f"{k}0-{turn}" for turn in range(3) for k in "ua"]
        assert hot.total <= INDEX_CAP


def test_the_sqlite_known_thread_filter_has_a_fixed_size_and_never_forgets_an_id():
    """No false negative (a thread it holds always needs its read); few false positives at 10,000
    threads; the same bytes whatever the count."""
    known = KnownThreads()
    size = known.size_bytes
    for n in range(10_000):
        known.add(f"thread-{n}")
    assert all(f"thread-{n}" in known for n in range(10_000))
    assert sum(f"other-{n}" in known for n in range(20_000)) < 20  # expected about 0.5
    assert known.size_bytes == size == 128 * 1024
    assert 1 not in known


async def test_sqlite_admits_a_deleted_then_recreated_thread_through_the_filter(tmp_path: Path):
    async with opened("sqlite", tmp_path) as ledger:
        await ledger.start_run(RunRecord("r1", "t", "a", RunStatus.RUNNING, 1, 1), [Message("u1", "user", (TextPart("hi"),))])
        assert await ledger.delete_thread("t")
        assert (await ledger.thread_view("t")).thread is None  # the filter says maybe; the read says no
        await ledger.start_run(RunRecord("r2", "t", "a", RunStatus.RUNNING, 2, 2), [Message("u2", "user", (TextPart("hi"),))])
        assert [m.id for m in (await ledger.thread_view("t")).messages] == ["u2"]


async def test_reads_racing_writes_on_idle_threads_see_whole_commits_in_order(tmp_path: Path):
    """With no hot thread kept (every access rebuilds the detail from the log, in the I/O thread),
    readers racing a writer on the same threads always see a prefix of what was committed, whole
    steps only, and the final state is everything."""
    async with opened("files", tmp_path, fsync=False, index_cache_bytes=0, cache_bytes=0) as ledger:
        threads = [f"race-{k}" for k in range(3)]
        done = trio.Event()
        seen: list[int] = []

        async def writer() -> None:
            for turn in range(12):
                for t in threads:
                    run_id = f"{t}-r{turn}"
                    await ledger.start_run(RunRecord(run_id, t, "a", RunStatus.RUNNING, turn, turn),
                                           [Message(f"{t}-u{turn}", "user", (TextPart("q"),))])
                    await ledger.commit(t, run_id, Commit(RunStatus.COMPLETED, (
                        Message(f"{t}-a{turn}", "assistant", (TextPart("a"),), run_id),)))
            done.set()

        async def reader(t: str) -> None:
            while not done.is_set():
                view = await ledger.thread_view(t)
                ids = [m.id for m in view.messages]
                turns = len(ids) // 2 + len(ids) % 2
                expected = [i for n in range(turns) for i in (f"{t}-u{n}", f"{t}-a{n}")][: len(ids)]
                assert ids == expected
                if view.thread is not None:
                    assert view.thread.last_seq == len(ids)
                    runs = await ledger.list_runs(t)
                    assert len(runs) >= turns
                seen.append(len(ids))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(writer)
            for t in threads:
                nursery.start_soon(reader, t)
                nursery.start_soon(reader, t)
        for t in threads:
            assert [m.id for m in (await ledger.thread_view(t)).messages] == [
                i for n in range(12) for i in (f"{t}-u{n}", f"{t}-a{n}")]
            assert [r.status for r in await ledger.list_runs(t)] == [RunStatus.COMPLETED] * 12
        assert len(seen) > 10 and max(seen) > 0


async def test_reopening_keeps_the_most_recently_updated_threads_hot_within_the_cap(tmp_path: Path):
    """Replay at open builds every thread's detail; it keeps those of the newest threads, within
    ``index_cache_bytes`` (never more held at once), and the rest go idle."""
    async with opened("files", tmp_path, fsync=False) as ledger:
        for n in range(120):
            await ledger.start_run(RunRecord(f"r{n}", f"t{n}", "a", RunStatus.RUNNING, n, n),
                                   [Message(f"u{n}", "user", (TextPart("question " * 20),))])
            await ledger.commit(f"t{n}", f"r{n}", Commit(RunStatus.COMPLETED, ()))
    async with opened("files", tmp_path, fsync=False, index_cache_bytes=INDEX_CAP) as ledger:
        hot, index = ledger._details, ledger._index  # type: ignore[attr-defined]
        kept = [t for t in index.threads.values() if t.detail is not None]
        assert 0 < len(kept) == len(hot) < 120 and hot.total <= INDEX_CAP
        newest = sorted(index.threads.values(), key=lambda t: t.updated_at)[-len(kept):]
        assert {t.thread_id for t in kept} == {t.thread_id for t in newest}
        assert [m.id for m in (await ledger.thread_view("t0")).messages] == ["u0"]  # idle: read back
