"""A bounded LRU of hot threads' admission state, so a turn on a thread the server just served reads
nothing from the store at admission (issue 18).

What one entry holds is exactly what ``Ledger.admission_facts`` answers from: the thread record, its
latest messages (at least the ``tail`` admission asks for), its pending calls and the set of every
committed message id (the dedup of a replayed history is then a set intersection, no SQL). A thread
that branched is cached for its **active path** (``ThreadRecord.active_branch``): the tail and the ids
are that path's, and a write to another branch (a superseded run closing on the path a fork left)
moves only ``last_seq``; a fork changes the path, so a ledger drops the thread's entry when it forks. It is
the one hot-thread cache of the single-writer ledgers: a ledger that owns its store alone (SQLite:
one process holds the file; the file ledger: one process holds the directory's lock) keeps entries
exact by applying every write to them right after it committed (SQLite: in the same worker-thread
call; the file ledger: on the event loop, right after the write is applied to its index, under its
write lock), and drops an entry whenever a write's outcome is unknown or the thread is deleted. The
file ledger also answers history reads of a thread from its entry when the entry holds every message
asked for. Postgres uses the same LRU with its own validation (``storage_backends/postgres_ledger.py``:
other processes write the same threads, so an entry is matched against the database's snapshot and
extended by what others appended before it is used). With a budget of 0 nothing is cached and every
answer comes from the store; ``HOT_BUDGET`` (``awaken.runtime.tuning``) is the default of every
ledger's ``cache_bytes``, so setting it to 0 switches the cache off everywhere. Entries are evicted least recently used first so that their estimated size
(``entry_cost``) stays under ``budget`` bytes (``[ledger] options = { cache_bytes = N }``); a thread
whose entry would take more than a quarter of the budget is not cached (its admissions read the
store, bounded as before).

Reads happen on the event loop, writes in the ledger's worker thread; every operation on the LRU is
one call on an ``OrderedDict`` (atomic under the GIL), and an entry is only read at a thread's
admission, which holds the thread's claim, so no write of that thread can run meanwhile.
"""

from __future__ import annotations

import sys
from array import array
from collections import OrderedDict
from collections.abc import Collection, Iterable, Sequence, Set
from typing import Any

import attrs

from awaken.core.ids import AllBut, IdSet, interned
from awaken.core.messages import Message
from awaken.ledger.interface import AdmissionFacts, PendingCall, ThreadRecord
from awaken.runtime.tuning import HOT_BUDGET as DEFAULT_BUDGET
from awaken.runtime.tuning import HOT_ID_OVERHEAD as _ID_OVERHEAD
from awaken.runtime.tuning import HOT_MIN_KEEP as MIN_KEEP


def message_cost(m: Message) -> int:
    """Roughly the heap bytes one decoded message holds."""
    size = 240 + sys.getsizeof(m.id) + (sys.getsizeof(m.run_id) if m.run_id else 0)
    for part in m.parts:
        size += 140
        for value in attrs.astuple(part, recurse=False):
            if isinstance(value, str):
                size += sys.getsizeof(value)
    return size


def id_cost(message_id: str) -> int:
    return sys.getsizeof(message_id) + _ID_OVERHEAD


@attrs.define(eq=False)
class HotThread:
    thread: ThreadRecord
    #: the thread's latest messages, oldest first, at most ``keep`` (all of them if fewer)
    tail: list[Message]
    keep: int
    pending: tuple[PendingCall, ...]
    ids: set[str]
    #: each tail message's ``message_cost``, as machine integers (a list of int objects took 28 B more each)
    tail_costs: array
    ids_cost: int
    #: the number of messages on the active path (None: ``thread.last_seq``, a thread that never branched)
    length: int | None = None
    #: the replayed history's id set (an ``IdSet``'s base) last found all in ``ids``: ``ids`` only grows while
    #: the entry lives (a fork or a delete drops it), so it holds it still
    covered: frozenset[str] | None = None

    @property
    def cost(self) -> int:
        return 200 + self.ids_cost + sum(self.tail_costs)

    @property
    def path_length(self) -> int:
        return self.thread.last_seq if self.length is None else self.length


def entry_for(thread: ThreadRecord, tail: Sequence[Message], keep: int, pending: Iterable[PendingCall],
              ids: Iterable[str], length: int | None = None) -> HotThread:
    """An entry for ``thread``: ``tail``, ``ids`` and ``length`` are its active path's (``length`` None: a
    thread that never branched, every message is on it)."""
    held = set(interned(ids))  # shared with the replay memo's copies: the dedup compares pointers
    return HotThread(thread, list(tail), keep, tuple(pending), held, array("q", [message_cost(m) for m in tail]),
                     sum(id_cost(i) for i in held), length)


class HotThreads:
    """The LRU: thread id -> ``HotThread``, at most ``budget`` estimated bytes."""

    def __init__(self, budget: int = DEFAULT_BUDGET) -> None:
        self.budget = max(0, int(budget))
        self.total = 0
        self._entries: OrderedDict[str, HotThread] = OrderedDict()
        self._costs: dict[str, int] = {}

    def __len__(self) -> int:
        return len(self._entries)

    def fits(self, messages: int) -> bool:
        """Whether a thread of ``messages`` messages may be cached (a cheap bound before loading it)."""
        return self.budget > 0 and (messages * (_ID_OVERHEAD + 60) + 4096) * 4 <= self.budget

    def most_messages(self) -> int:
        """The longest thread ``fits`` takes."""
        return max(0, (self.budget // 4 - 4096) // (_ID_OVERHEAD + 60))

    def get(self, thread_id: str) -> HotThread | None:
        entry = self._entries.get(thread_id)
        if entry is not None:
            try:
                self._entries.move_to_end(thread_id)
            except KeyError:  # evicted meanwhile
                return None
        return entry

    def put(self, thread_id: str, entry: HotThread) -> None:
        self.drop(thread_id)
        cost = entry.cost
        if cost * 4 > self.budget:
            return
        self._entries[thread_id] = entry
        self._costs[thread_id] = cost
        self.total += cost
        self._evict()

    def drop(self, thread_id: str) -> None:
        entry = self._entries.pop(thread_id, None)
        if entry is not None:
            self.total -= self._costs.pop(thread_id)

    def clear(self) -> None:
        self._entries.clear()
        self._costs.clear()
        self.total = 0

    def started(self, thread: ThreadRecord, appended: Sequence[Message], new: bool) -> None:
        """``start_run`` committed ``appended`` to ``thread`` (``new``: it created the thread)."""
        if new:
            self.put(thread.thread_id, entry_for(thread, appended, MIN_KEEP, (), (m.id for m in appended)))
        else:
            self.committed(thread.thread_id, appended, (), (), None)

    def committed(self, thread_id: str, appended: Sequence[Message], pending: Sequence[PendingCall],
                  resolved: Collection[str], state: dict[str, Any] | None) -> None:
        """A write committed to the thread: apply it to its entry, if cached."""
        entry = self._entries.get(thread_id)
        if entry is None:
            return
        if appended:
            # only a message on the active branch is on the active path (another branch's is past its fork)
            active = entry.thread.active_branch
            on_path = [m for m in appended if m.branch == active]
            entry.tail.extend(on_path)
            entry.tail_costs.extend(message_cost(m) for m in on_path)
            over = len(entry.tail) - entry.keep
            if over > 0:
                del entry.tail[:over]
                del entry.tail_costs[:over]
            for m in on_path:
                entry.ids.add(sys.intern(m.id))
                entry.ids_cost += id_cost(m.id)
            if entry.length is not None:
                entry.length += len(on_path)
            elif len(on_path) < len(appended):  # the path is no longer every message
                entry.length = entry.thread.last_seq + len(on_path)
            entry.thread = attrs.evolve(entry.thread, last_seq=appended[-1].seq)
        if state is not None:
            entry.thread = attrs.evolve(entry.thread, state=dict(state))
        if pending or resolved:
            gone = frozenset(resolved)
            entry.pending = tuple(p for p in entry.pending if p.tool_call_id not in gone) + tuple(
                p if p.thread_id == thread_id else attrs.evolve(p, thread_id=thread_id) for p in pending)
        cost = entry.cost
        self.total += cost - self._costs[thread_id]
        self._costs[thread_id] = cost
        if cost * 4 > self.budget:
            self.drop(thread_id)
        else:
            self._evict()

    def _evict(self) -> None:
        while self.total > self.budget and self._entries:
            thread_id, _ = self._entries.popitem(last=False)
            self.total -= self._costs.pop(thread_id)


def cached_facts(entry: HotThread, ids: Collection[str], tail: int) -> AdmissionFacts | None:
    """``Ledger.admission_facts`` answered from ``entry``, or None when the entry keeps fewer of the
    latest messages than ``tail`` asks for."""
    if tail > len(entry.tail) and len(entry.tail) < entry.path_length:
        return None
    messages = tuple(entry.tail[max(0, len(entry.tail) - tail):]) if tail > 0 else ()
    held = entry.ids
    if type(ids) is IdSet:  # a replayed history's ids and its few new ones
        asked: Set[str] = ids
        if entry.covered is not ids.base:
            if ids.base.difference(held):
                return AdmissionFacts(entry.thread, messages, entry.pending, ids.intersection(held))
            entry.covered = ids.base  # the thread holds all of it now, and will while the entry lives
        missing = ids.extra.difference(held)
    else:
        asked = ids if isinstance(ids, frozenset) else frozenset(ids)
        missing = asked.difference(held)  # a replayed history's few new ids: no id object is touched
    return AdmissionFacts(entry.thread, messages, entry.pending, AllBut(asked, missing) if missing else asked)
