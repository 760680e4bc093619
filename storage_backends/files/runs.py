"""Which thread holds each run, for every run of the file ledger (``get_run``, and the check that a
run id is new): the run ids' hashes and their threads in flat per-bucket arrays, not a dict of run id
strings.

A dict from run id to thread cost about 35 B per run plus the id string of every run but a thread's
latest (the latest one's is shared with the thread's entry): some 95 B per run of an idle thread,
whose detail (its runs) is not in memory. Here a run costs its hash (8 B, in an ``array``) and a
reference to its thread (8 B, in a list), in one of ``BUCKETS`` buckets chosen by the hash; a lookup
finds the hash in its bucket with ``array.index`` (a C scan of about runs / ``BUCKETS`` entries) and
answers the threads whose runs may have that id: ``candidates``. A hash says "maybe": the caller
confirms against the candidate's runs (the thread's detail), so two ids with one hash are two
entries, never a wrong answer. Buckets never rehash, so no insertion pauses the event loop for a
rebuild. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator
from typing import Generic, TypeVar

T = TypeVar("T")

#: buckets of the table (a bucket is made at its first run: an empty table costs this many list slots)
BUCKETS = 1024


class RunThreads(Generic[T]):
    """run id (by its hash) -> the thread holding it; several entries may share a hash."""

    __slots__ = ("_buckets", "_count")

    def __init__(self) -> None:
        #: per bucket: (the runs' hashes, their threads, in the same order), or None before its first run
        self._buckets: list[tuple[array, list[T]] | None] = [None] * BUCKETS
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def add(self, run_id: str, thread: T) -> None:
        """Record that ``thread`` holds run ``run_id`` (the caller checked the id is new)."""
        h = hash(run_id)
        bucket = self._buckets[h % BUCKETS]
        if bucket is None:
            bucket = self._buckets[h % BUCKETS] = (array("q"), [])
        bucket[0].append(h)
        bucket[1].append(thread)
        self._count += 1

    def candidates(self, run_id: str) -> Iterator[T]:
        """The threads that may hold run ``run_id`` (its hash matches): usually none or the one."""
        for _hashes, threads, i in self._matches(run_id):
            yield threads[i]

    def _matches(self, run_id: str) -> Iterator[tuple[array[int], list[T], int]]:
        """``(the bucket's hashes, its threads, index)`` of each entry whose hash is ``run_id``'s."""
        h = hash(run_id)
        bucket = self._buckets[h % BUCKETS]
        if bucket is None:
            return
        hashes, threads = bucket
        i = 0
        while True:
            try:
                i = hashes.index(h, i)
            except ValueError:
                return
            yield hashes, threads, i
            i += 1

    def discard(self, run_id: str, thread: T) -> None:
        """Forget that ``thread`` holds run ``run_id`` (nothing when it is not recorded)."""
        for hashes, threads, i in self._matches(run_id):
            if threads[i] is thread:
                del hashes[i]  # and stop: the generator's positions are stale now
                del threads[i]
                self._count -= 1
                return

    def discard_thread(self, thread: T) -> None:
        """Forget every run of ``thread`` (a thread whose runs cannot be listed: a scan of every bucket)."""
        for bucket in self._buckets:
            if bucket is None:
                continue
            hashes, threads = bucket
            for i in range(len(threads) - 1, -1, -1):
                if threads[i] is thread:
                    del hashes[i]
                    del threads[i]
                    self._count -= 1
