"""The file ledger's compact thread entry (``storage_backends/files/index.py``, ``ThreadEntry``): its times,
its log's size, its title and its latest run id, packed into one ``bytes``, read back as they were set,
each change leaving the others as they were; and an idle entry with all of them costs one object for them."""

from __future__ import annotations

import sys

from hypothesis import given
from hypothesis import strategies as st

from awaken.engine.state import RunStatus
from awaken.ledger.interface import RunSummary
from storage_backends.files.index import ThreadEntry

times = st.integers(min_value=-(2**63), max_value=2**63 - 1)
texts = st.none() | st.text(max_size=200)  # any str, lone surrogates too
run_ids = st.none() | st.text(max_size=300)


@given(created_at=times, updated_at=times, size=times, title=texts, run_id=run_ids,
       changes=st.lists(st.sampled_from(["updated_at", "size", "title", "last_run_id"]), max_size=6))
def test_each_packed_part_reads_back_as_set_and_a_change_keeps_the_others(
        created_at, updated_at, size, title, run_id, changes):
    entry = ThreadEntry("t", created_at)
    assert (entry.created_at, entry.updated_at, entry.size, entry.title, entry.last_run_id) == (
        created_at, 0, 0, None, None)
    expected = {"updated_at": updated_at, "size": size, "title": title, "last_run_id": run_id}
    for name, value in expected.items():
        setattr(entry, name, value)
    for i, name in enumerate(changes):  # set again, to another value: the rest stay
        value = (i + 7) if name in ("updated_at", "size") else (None if i % 2 else f"v{i}\u00e9")
        setattr(entry, name, value)
        expected[name] = value
    assert entry.created_at == created_at
    assert {name: getattr(entry, name) for name in expected} == expected


def test_the_listing_summary_reads_the_packed_parts():
    entry = ThreadEntry("t-1", 1_700_000_000_000, owner="alice")
    entry.updated_at, entry.size, entry.title, entry.message_count = 1_700_000_000_500, 4096, "Hello \ud800 wörld", 4
    entry.last_run_id, entry.last_status, entry.agent_id = "run-1", RunStatus.COMPLETED, "echo"
    summary = entry.summary()
    assert (summary.thread_id, summary.title, summary.agent_id, summary.created_at, summary.updated_at,
            summary.message_count, summary.owner) == (
        "t-1", "Hello \ud800 wörld", "echo", 1_700_000_000_000, 1_700_000_000_500, 4, "alice")
    assert summary.last_run == entry.last_run == RunSummary("run-1", RunStatus.COMPLETED, None, None)
    entry.set_last_run(None)
    assert (entry.summary().last_run, entry.last_run_id, entry.title) == (None, None, "Hello \ud800 wörld")


def test_an_idle_entry_holds_its_times_title_and_run_id_in_one_object():
    entry = ThreadEntry("t-2", 1_700_000_000_000)
    entry.updated_at, entry.size = 1_700_000_000_500, 100_000
    entry.title, entry.last_run_id = "x" * 100, "r" * 36
    # the packed bytes hold the 100-character title and the 36-character run id, and nothing else per thread
    # does: as separate objects (three ints over 2**30, two strings) they took 326 bytes
    assert sys.getsizeof(entry._packed) <= 33 + 27 + 36 + 100
    assert sys.getsizeof(entry) <= 16 + 8 * 10 + 16
