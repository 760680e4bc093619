"""Bounded LRU caches of the file ledger: whole thread histories (admissions and steps of recent threads stay
off disk) and hot threads' index details (ids, segments, runs, pending calls)."""

from __future__ import annotations

import abc
import sys
from collections import OrderedDict
from collections.abc import Sequence

import attrs

from awaken.core.messages import Message

from .index import ThreadEntry

_PART_FIELDS: dict[type, tuple[str, ...]] = {}


def history_cost(messages: Sequence[Message]) -> int:
    """Roughly the bytes of heap ``messages`` hold (objects and strings), for the cache budget.

    Computed in the I/O thread, next to the parsing, so the event loop only adds numbers.
    """
    size = 0
    for m in messages:
        size += 240 + sys.getsizeof(m.id) + (sys.getsizeof(m.run_id) if m.run_id else 0)
        for part in m.parts:
            names = _PART_FIELDS.get(type(part))
            if names is None:
                names = _PART_FIELDS[type(part)] = tuple(f.name for f in attrs.fields(type(part)))
            size += 140
            for name in names:
                value = getattr(part, name)
                if isinstance(value, str):
                    size += sys.getsizeof(value)
    return size


class _VersionedLru(abc.ABC):
    """An LRU map: thread id -> an entry whose first field is the applied log length it reflects, at
    most ``budget`` bytes (``cost`` of each entry). An entry is valid only while that length is the
    thread's: a stale one is dropped when found."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.total = 0
        self._entries: OrderedDict[str, tuple] = OrderedDict()

    @staticmethod
    @abc.abstractmethod
    def cost(entry: tuple) -> int:
        """What ``entry`` counts toward the budget."""

    def _current(self, thread_id: str, version: int) -> tuple | None:
        """The thread's entry if it reflects ``version`` (a stale one is dropped), else None."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return None
        if entry[0] != version:
            self.drop(thread_id)
            return None
        return entry

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            self.total -= self.cost(entry)

    def clear(self) -> None:
        self._entries.clear()
        self.total = 0

    def _evict(self) -> None:
        while self.total > self.budget and self._entries:
            _, entry = self._entries.popitem(last=False)
            self.total -= self.cost(entry)


class HistoryCache(_VersionedLru):
    """An LRU map: thread id -> (applied log length it reflects, its whole history, cost in bytes).

    An entry is valid only while its length equals the thread's applied length; writes to the
    thread extend it (or drop it if it is stale). At most ``budget`` bytes (by ``history_cost``)
    are held, and no single history larger than a quarter of the budget is cached.
    """

    @staticmethod
    def cost(entry: tuple) -> int:
        return entry[2]

    def get(self, thread_id: str, version: int) -> list[Message] | None:
        entry = self._current(thread_id, version)
        if entry is None:
            return None
        self._entries.move_to_end(thread_id)
        return entry[1]

    def put(self, thread_id: str, version: int, messages: list[Message], cost: int) -> None:
        self.drop(thread_id)
        cost += 100 + 8 * len(messages)
        if cost * 4 > self.budget:
            return
        self._entries[thread_id] = (version, list(messages), cost)
        self.total += cost
        self._evict()

    def extend(self, thread_id: str, before: int, after: int, messages: list[Message], added: int) -> None:
        """A write moved the thread's log from ``before`` to ``after`` bytes, appending ``messages``
        (which cost ``added`` bytes)."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return
        version, history, cost = entry
        if version != before:
            self.drop(thread_id)
            return
        added += 8 * len(messages)
        if (cost + added) * 4 > self.budget:
            self.drop(thread_id)
            return
        history.extend(messages)
        self._entries[thread_id] = (after, history, cost + added)
        self._entries.move_to_end(thread_id)
        self.total += added
        self._evict()


class HotThreads:
    """An LRU of the threads whose detail (``ThreadEntry.detail``) stays in memory, at most ``budget``
    bytes by ``ThreadDetail.cost``; evicting a thread drops its detail (the log rebuilds it on the
    next access). No single detail above half the budget stays (with the default 8 MiB, a thread of
    about 10,000 messages)."""

    def __init__(self, budget: int) -> None:
        self.budget = budget
        self.total = 0
        self._entries: OrderedDict[str, tuple[ThreadEntry, int]] = OrderedDict()

    def __len__(self) -> int:
        return len(self._entries)

    def hold(self, thread: ThreadEntry) -> None:
        """The thread was just used with its (current) detail: keep it, most recent, or drop it."""
        old = self._entries.pop(thread.thread_id, None)
        if old is not None:
            self.total -= old[1]
        if thread.detail is None:
            return
        cost = thread.detail.cost()
        if cost * 2 > self.budget:
            thread.detail = None
            return
        self._entries[thread.thread_id] = (thread, cost)
        self.total += cost
        while self.total > self.budget and self._entries:
            _, (evicted, spent) = self._entries.popitem(last=False)
            evicted.detail = None
            self.total -= spent

    def touch(self, thread: ThreadEntry) -> None:
        if thread.thread_id in self._entries:
            self._entries.move_to_end(thread.thread_id)

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            entry[0].detail = None
            self.total -= entry[1]

    def clear(self) -> None:
        for thread, _ in self._entries.values():
            thread.detail = None
        self._entries.clear()
        self.total = 0


class TailCache(_VersionedLru):
    """An LRU map: thread id -> (applied log length it reflects, the thread's latest messages, how many
    it keeps, cost in bytes): what admission reads of a thread too long for ``HistoryCache``.

    Valid only while its length equals the thread's applied length; a write extends it (keeping the
    latest ``keep``) or drops it if stale. At most ``budget`` bytes, no entry above a quarter of it.
    """

    @staticmethod
    def cost(entry: tuple) -> int:
        return sum(entry[3]) + 100

    def get(self, thread_id: str, version: int, want: int, last_seq: int) -> list[Message] | None:
        """The latest messages (at least ``want`` of them, or all the thread has), or None."""
        entry = self._current(thread_id, version)
        if entry is None or len(entry[1]) < min(want, last_seq):
            return None
        self._entries.move_to_end(thread_id)
        return entry[1]

    def put(self, thread_id: str, version: int, messages: list[Message], keep: int) -> None:
        self.drop(thread_id)
        costs = [history_cost((m,)) + 8 for m in messages[-keep:]] if keep else []
        if (sum(costs) + 100) * 4 > self.budget:
            return
        self._entries[thread_id] = (version, list(messages[-keep:]) if keep else [], keep, costs)
        self.total += sum(costs) + 100
        self._evict()

    def extend(self, thread_id: str, before: int, after: int, messages: list[Message]) -> None:
        entry = self._entries.pop(thread_id, None)
        if entry is None:
            return
        version, tail, keep, costs = entry
        self.total -= sum(costs) + 100
        if version != before:
            return
        tail = tail + messages
        costs = costs + [history_cost((m,)) + 8 for m in messages]
        if len(tail) > keep:
            tail, costs = tail[len(tail) - keep:], costs[len(costs) - keep:]
        if (sum(costs) + 100) * 4 > self.budget:
            return
        self._entries[thread_id] = (after, tail, keep, costs)
        self.total += sum(costs) + 100
        self._evict()
