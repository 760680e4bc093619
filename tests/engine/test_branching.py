"""Where a regenerate or an edit forks, and the history its run starts from (``awaken.engine.branching``),
against SQLite: from admission's bounded view when it holds the fork point, by reading the active path
when the point is older than the view's tail, across the seqs other branches hold.
"""

from __future__ import annotations

import pytest

from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart
from awaken.engine.branching import fork_history, fork_seq
from awaken.engine.dedup import admission_view
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Fork, RunRecord
from awaken.wires.protocol import ForkAt
from storage_backends.sqlite_ledger import SqliteLedger


def said(mid: str, role: str = "user") -> Message:
    return Message(mid, role, (TextPart(mid),))


@pytest.fixture
async def ledger(tmp_path):
    ledger = SqliteLedger(str(tmp_path / "branch.db"))
    await ledger.open()
    yield ledger
    await ledger.aclose()


async def branch_turn(ledger: SqliteLedger, n: int, fork: Fork | None = None) -> None:
    """Run ``r<n>``: user message ``u<n>``, answer ``a<n>`` (on a new branch with ``fork``)."""
    run = RunRecord(f"r{n}", "t", "assistant", RunStatus.RUNNING, n, n)
    if fork is None:
        await ledger.start_run(run, [said(f"u{n}")])
    else:
        await ledger.start_run(run, [said(f"u{n}")], fork=fork)
    await ledger.commit("t", f"r{n}", Commit(RunStatus.COMPLETED, (said(f"a{n}", "assistant"),)))


async def test_a_fork_point_in_the_view_costs_no_read(ledger, monkeypatch):
    for n in range(1, 4):
        await branch_turn(ledger, n)  # u1 a1 u2 a2 u3 a3: seqs 1..6
    view = await admission_view(ledger, "t", frozenset({"u3"}), {}, 4)
    assert [m.seq for m in view.messages] == [3, 4, 5, 6]

    async def no_read(*args, **kwargs):
        raise AssertionError("read the ledger")

    monkeypatch.setattr(ledger, "read_messages", no_read)
    assert await fork_seq(ledger, view, ForkAt("u3", True, "regenerate"), 4) == 5
    assert await fork_seq(ledger, view, ForkAt("u3", False, "edit"), 4) == 4
    assert [m.id for m in await fork_history(ledger, view, 5, 2)] == ["a2", "u3"]


async def test_a_fork_point_older_than_the_tail_is_found_along_the_path(ledger):
    for n in range(1, 5):
        await branch_turn(ledger, n)  # seqs 1..8
    view = await admission_view(ledger, "t", frozenset(), {}, 2)
    assert [m.id for m in view.messages] == ["u4", "a4"]
    assert await fork_seq(ledger, view, ForkAt("u2", True, "regenerate"), 2) == 3
    assert await fork_seq(ledger, view, ForkAt("u1", False, "edit"), 2) == 0
    assert await fork_seq(ledger, view, ForkAt("u4", False, "edit"), 2) == 6  # first of the tail: the one before
    assert [m.id for m in await fork_history(ledger, view, 3, 2)] == ["a1", "u2"]
    roomy = await admission_view(ledger, "t", frozenset(), {}, 50)  # the whole path: no read
    assert [m.id for m in await fork_history(ledger, roomy, 3, 50)] == ["u1", "a1", "u2"]
    with pytest.raises(InputRejected) as refused:
        await fork_seq(ledger, view, ForkAt("u9", True, "regenerate"), 2)
    assert refused.value.code == "UNKNOWN_MESSAGE"


async def test_the_history_of_a_fork_skips_what_other_branches_hold(ledger):
    """u1 a1 u2 a2 on branch 0 (seqs 1-4); a regenerate of u1's answer puts u5 a5 on branch 1 after seq 2
    (seqs 5-6); the history up to a point of branch 1's path reads that path: u1 a1 u5, never u2 a2."""
    await branch_turn(ledger, 1)
    await branch_turn(ledger, 2)
    await branch_turn(ledger, 5, Fork(2, "regenerate"))
    view = await admission_view(ledger, "t", frozenset(), {}, 2)
    assert [m.id for m in view.messages] == ["u5", "a5"]
    assert await fork_seq(ledger, view, ForkAt("u5", False, "edit"), 2) == 2  # a1, on branch 0's part of the path
    assert [m.id for m in await fork_history(ledger, view, 5, 2)] == ["a1", "u5"]  # read: seqs 3 and 4 skipped
    assert [m.id for m in await fork_history(ledger, view, 2, 2)] == ["u1", "a1"]
