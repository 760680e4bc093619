"""Memory held for hot threads is bounded by configuration (issue 18, point 3).

The file ledger keeps recent whole histories in an LRU cache capped by ``cache_bytes`` (``[ledger]
options``); reading many threads one after the other keeps it at its cap, never one history per
thread. ``python -m bench.idle`` measures the process itself with 10,000 idle threads.
"""

from __future__ import annotations

from pathlib import Path

from awaken.ledger import Commit, RunRecord
from awaken.messages import Message, TextPart
from awaken.runstate import RunStatus
from tests.ledger_harness import opened

CAP = 16 * 1024


async def test_reading_many_threads_keeps_the_history_cache_within_its_configured_cap(tmp_path: Path):
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
            cache = ledger._cache  # type: ignore[attr-defined]
            assert cache.total <= CAP
            held.append(len(cache._entries))
        # the cache holds a bounded handful of recent threads, not one entry per thread read
        assert max(held) < 60 and held[-1] == held[100]
        # and what it evicted is still read back whole from the log
        assert [m.id for m in (await ledger.thread_view("t0")).messages] == ["u0", "a0"]
