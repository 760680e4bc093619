"""The file ledger's run id -> thread table (``storage_backends/files/runs.py``): every run recorded is
found, a run forgotten is not, ids sharing a hash are separate entries, and a run costs a few bytes."""

from __future__ import annotations

import tracemalloc

import pytest

from storage_backends.files import runs
from storage_backends.files.runs import RunThreads


class Thread:
    def __init__(self, name: str) -> None:
        self.name = name


def test_every_run_recorded_is_found_and_a_run_forgotten_is_not():
    table: RunThreads[Thread] = RunThreads()
    threads = [Thread(f"t{i}") for i in range(500)]
    for i, thread in enumerate(threads):
        table.add(f"run-{i}-a", thread)
        table.add(f"run-{i}-b", thread)
    assert len(table) == 1000
    assert all(list(table.candidates(f"run-{i}-{s}")) == [t] for i, t in enumerate(threads) for s in "ab")
    assert list(table.candidates("run-none")) == []
    table.discard("run-7-a", threads[7])
    table.discard("run-7-a", threads[7])  # twice: nothing more goes
    table.discard("run-8-a", threads[9])  # not that thread's run: kept
    assert (list(table.candidates("run-7-a")), list(table.candidates("run-8-a")), len(table)) == ([], [threads[8]], 999)
    table.discard_thread(threads[3])
    assert list(table.candidates("run-3-a")) == list(table.candidates("run-3-b")) == [] and len(table) == 997


def test_ids_with_one_hash_are_separate_entries_and_the_caller_tells_them_apart(monkeypatch):
    monkeypatch.setattr(runs, "hash", lambda run_id: 42, raising=False)  # every id collides
    table: RunThreads[Thread] = RunThreads()
    a, b = Thread("a"), Thread("b")
    table.add("run-a", a)
    table.add("run-b", b)
    assert list(table.candidates("run-a")) == list(table.candidates("anything")) == [a, b]
    table.discard("run-b", b)
    assert list(table.candidates("run-b")) == [a]


@pytest.mark.parametrize("count", [20_000])
def test_a_run_costs_a_few_bytes_not_a_dict_entry_and_an_id_string(count):
    thread = Thread("t")
    ids = [f"run_{i:032x}" for i in range(count)]  # the strings are the caller's: they are freed after add
    table: RunThreads[Thread] = RunThreads()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        for run_id in ids:
            table.add(run_id, thread)
        per_run = (tracemalloc.get_traced_memory()[0] - before) / count
    finally:
        tracemalloc.stop()
    # 16 B a run, and the buckets made (~6 B a run here); a dict entry alone was ~35 B, and an idle
    # thread's old run ids were kept as strings (~85 B each)
    assert per_run < 32
