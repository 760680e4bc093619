"""The hot-thread cache (issue 18, points 1 and 3): a turn on a thread the server just served is
admitted without reading the store, what the cache answers is what the store answers after every
kind of write, it never serves another process's thread stale (Postgres), and its memory stays under
its configured cap.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, TextPart, ToolCallPart, ToolResultPart, result_id
from awaken.engine.dedup import admission_view
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Ledger, PendingCall, RunRecord
from tests.builders import user_message
from tests.ledger_harness import BACKENDS, opened


async def turn(ledger: Ledger, thread_id: str, n: int, *, owner: str | None = None) -> None:
    run_id = f"{thread_id}-r{n}"
    await ledger.start_run(RunRecord(run_id, thread_id, "a", RunStatus.RUNNING, n, n), [user_message("hi", id=f"u{n}")], owner)
    await ledger.commit(thread_id, run_id, Commit(RunStatus.COMPLETED, (
        Message(f"a{n}", "assistant", (TextPart(f"answer {n}"),), run_id),)))


def same_view(a, b) -> None:
    assert (a.thread, a.messages, a.pending, a.message_ids(), a.answered_calls()) == \
        (b.thread, b.messages, b.pending, b.message_ids(), b.answered_calls())


@pytest.mark.parametrize("backend", ["sqlite", "files"])
async def test_a_hot_thread_is_admitted_without_a_store_round_trip(backend: str, tmp_path: Path) -> None:
    """After a turn, the next admission on the thread reads no store: not a worker thread is started."""
    import trio

    async with opened(backend, tmp_path, **({"fsync": False} if backend == "files" else {})) as ledger:
        for n in range(3):
            await turn(ledger, "t", n)
        await admission_view(ledger, "t", {"u9"}, {}, 2)  # a long thread's first admission may read once
        await turn(ledger, "t", 3)
        calls = 0
        real = trio.to_thread.run_sync

        async def counting(*args, **kwargs):
            nonlocal calls
            calls += 1
            return await real(*args, **kwargs)

        trio.to_thread.run_sync = counting
        try:
            view = await admission_view(ledger, "t", {"u0", "u3", "new"}, {}, 2)
        finally:
            trio.to_thread.run_sync = real
    assert calls == 0
    assert [m.id for m in view.messages] == ["u3", "a3"] and view.message_ids() == {"u0", "u3"}
    assert view.thread is not None and view.thread.last_seq == 8


async def test_sqlite_admission_reads_the_store_while_it_fails(tmp_path: Path) -> None:
    """Once a call to the store failed, a hot thread's admission reads the store (so a failing store
    refuses the run ``StoreUnavailable`` before its stream starts, as for a cold thread); the cache
    serves again once a call succeeded."""
    async with opened("sqlite", tmp_path) as ledger:
        await turn(ledger, "t", 0)
        with pytest.raises(StoreUnavailable):
            await ledger._call(lambda db: db.conn.execute("SELECT * FROM no_such_table"))  # type: ignore[attr-defined]
        reads = 0
        real = ledger._call  # type: ignore[attr-defined]

        async def counting(fn):
            nonlocal reads
            reads += 1
            return await real(fn)

        ledger._call = counting  # type: ignore[attr-defined]
        view = await admission_view(ledger, "t", {"u0"}, {}, 5)
        assert (reads, view.message_ids()) == (1, {"u0"})
        await admission_view(ledger, "t", {"u0"}, {}, 5)
        assert reads == 1  # the store answered: hot again


#: a write to the thread: ("turn",) | ("call",) a waiting call | ("answer",) resolve it | ("state",)
writes = st.lists(st.sampled_from(["turn", "call", "answer", "state", "view"]), min_size=1, max_size=12)


async def apply(ledger: Ledger, thread_id: str, plan: list[str], base: int) -> list[str]:
    """Apply ``plan`` to the thread; returns the ids committed (the cached ledger sees every write)."""
    ids: list[str] = []
    waiting: PendingCall | None = None
    for k, op in enumerate(plan):
        n = base + k
        run_id = f"{thread_id}-r{n}"
        if op == "view":
            await admission_view(ledger, thread_id, set(ids[-3:]), {}, 3)
            continue
        if op == "answer" and waiting is not None:
            result = Message(result_id(waiting.tool_call_id), "tool",
                             (ToolResultPart(waiting.tool_call_id, "tool", "ok"),), waiting.run_id)
            await ledger.commit(thread_id, waiting.run_id, Commit(RunStatus.COMPLETED, (result,),
                                                                  resolved=(waiting.tool_call_id,)))
            ids.append(result.id)
            waiting = None
            continue
        if waiting is not None:  # new input supersedes a waiting run
            await ledger.commit(thread_id, waiting.run_id, Commit(RunStatus.INTERRUPTED,
                                                                  resolved=(waiting.tool_call_id,)))
            waiting = None
        await ledger.start_run(RunRecord(run_id, thread_id, "a", RunStatus.RUNNING, n, n), [user_message("hi", id=f"u{n}")])
        ids.append(f"u{n}")
        if op == "call":
            call = f"c{n}"
            assistant = Message(f"a{n}", "assistant", (ToolCallPart(call, "tool", "{}"),), run_id)
            waiting = PendingCall(call, run_id, thread_id, "tool", "{}", "client", assistant.id)
            await ledger.commit(thread_id, run_id, Commit(RunStatus.WAITING, (assistant,), (waiting,)))
        else:
            await ledger.commit(thread_id, run_id, Commit(
                RunStatus.COMPLETED, (Message(f"a{n}", "assistant", (TextPart("ok"),), run_id),),
                state={"n": n, "nested": [n, {"k": "v"}]} if op == "state" else None))
        ids.append(f"a{n}")
    return ids


@pytest.mark.parametrize("backend", list(BACKENDS))
@settings(max_examples=15, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=writes, tail=st.integers(0, 5), cap=st.sampled_from([0, 6000, 8 * 1024 * 1024]))
def test_the_cache_answers_every_admission_as_the_store_does(backend, plan, tail, cap):
    """Random writes (turns, waiting calls, answers, superseded calls, state) interleaved with
    admissions that fill the cache: the cached ledger's admission view equals a fresh ledger's (no
    cache: ``cache_bytes = 0``) on the same store, for every tail and cap."""
    import tempfile

    import trio

    options = {"cache_bytes": cap} if backend != "files" else {"cache_bytes": cap, "fsync": False}
    plain = {"cache_bytes": 0} if backend != "files" else {"cache_bytes": 0, "fsync": False}

    async def main() -> None:
        with tempfile.TemporaryDirectory() as root:
            async with opened(backend, root, **options) as ledger:
                ids = await apply(ledger, "t", plan, 0)
                asked = set(ids[::2]) | {"never"}
                cached = await admission_view(ledger, "t", asked, {"c0": None, "c1": "u1"}, tail)
                cached_again = await admission_view(ledger, "t", asked, {}, tail)
            async with opened(backend, root, **plain) as fresh:
                expected = await admission_view(fresh, "t", asked, {"c0": None, "c1": "u1"}, tail)
                expected_again = await admission_view(fresh, "t", asked, {}, tail)
                whole = await fresh.thread_view("t")
            same_view(cached, expected)
            same_view(cached_again, expected_again)
            assert expected.messages == (whole.messages[max(0, len(whole.messages) - tail):] if tail else ())

    trio.run(main)


async def test_postgres_never_serves_a_thread_another_process_wrote_stale(tmp_path: Path) -> None:
    """Two ledgers on one database (two server processes): what one commits, or a delete and a new
    thread under the same id, shows in the other's next admission, though that one cached the thread."""
    async with opened("postgres", tmp_path) as a, opened("postgres", tmp_path) as b:
        await turn(a, "t", 0)
        first = await admission_view(a, "t", {"u0"}, {}, 10)  # cached by a
        assert first.message_ids() == {"u0"}
        await turn(b, "t", 1)
        await b.commit("t", "t-r1", Commit(RunStatus.COMPLETED, state={"by": "b"}))
        seen = await admission_view(a, "t", {"u0", "u1"}, {}, 10)
        assert [m.id for m in seen.messages] == ["u0", "a0", "u1", "a1"]
        assert seen.message_ids() == {"u0", "u1"} and seen.thread.state == {"by": "b"}  # type: ignore[union-attr]
        await turn(a, "t", 2)  # a's own write extends its entry
        assert [m.id for m in (await admission_view(a, "t", set(), {}, 2)).messages] == ["u2", "a2"]
        assert await b.delete_thread("t")
        await turn(b, "t", 7, owner="someone")
        again = await admission_view(a, "t", {"u0", "u7"}, {}, 10)
        assert [m.id for m in again.messages] == ["u7", "a7"]
        assert again.message_ids() == {"u7"} and again.thread.owner == "someone"  # type: ignore[union-attr]


@pytest.mark.parametrize("backend", ["sqlite", "postgres", "files"])
async def test_memory_for_hot_threads_stays_under_the_configured_cap(backend: str, tmp_path: Path) -> None:
    """Admissions on 200 threads one after another keep the cache at its cap (a handful of recent
    threads), never one entry per thread; an evicted thread is still admitted right (from the store)."""
    cap = 40 * 1024
    options = {"cache_bytes": cap} if backend != "files" else {"cache_bytes": cap, "fsync": False}
    async with opened(backend, tmp_path, **options) as ledger:
        cache = ledger._hot  # type: ignore[attr-defined]
        held = []
        for n in range(200):
            thread_id = f"t{n}"
            for k in range(3):
                await turn(ledger, thread_id, k)
            await admission_view(ledger, thread_id, {"u0"}, {}, 200)
            assert cache.total <= cap
            held.append(len(cache._entries))
        assert 0 < max(held) < 60 and held[-1] <= held[100] + 5
        view = await admission_view(ledger, "t0", {"u0", "u2"}, {}, 2)
        assert [m.id for m in view.messages] == ["u2", "a2"] and view.message_ids() == {"u0", "u2"}
