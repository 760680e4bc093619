"""What a run's broadcast keeps for late watchers, kept in a few large blocks: ``FrameRing`` (a
channel's newest frames) and ``EventLog`` (the run's newest ``AgentEvent``s).

A streaming run produces tens of thousands of small frames and events. Kept as one Python object
each (a ``(seq, payload)`` tuple, a ``TextDelta`` and its delta string), a run's 1 MiB replay and
event log were ~45,000 small objects spread over the interpreter's small-object arenas (1 MiB each,
returned to the system only when wholly empty). When the run ended they were freed, but each arena
still held a few objects allocated meanwhile by something that lives on (a hot-thread cache entry, a
connection awaiting the cycle collector): a burst of 40 silent clients left ~100 MB behind. Here the
newest ``BATCH`` frames (events) are kept as they came, then packed: frames joined into one ``bytes``
block with an ``array`` of where each ends, a stretch of deltas of one message (or tool call) into
one string of their text. A run holds a few dozen blocks, freed as blocks (``awaken/memory.py``
returns their pages to the system).

Both keep the byte bound of the ``deque`` they replace exactly: the positions a rejoin finds are the
same. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from bisect import bisect_left
from collections import deque
from collections.abc import Iterable, Iterator
from itertools import accumulate, count
from operator import add, attrgetter
from typing import Any

from . import events as ev

#: frames (events) appended are packed into one block every this many: until then they are kept as
#: they came, so an append is a list append, and the packing and the byte bound's bookkeeping run in C
#: (``b"".join``, ``itertools.accumulate``, ``bisect``) once per batch
BATCH = 64
#: a frame (an event counted) at least this large is packed at once, with those before it: what waits
#: to be packed stays under ``BATCH`` times this, and the byte bound drops older frames for a large one
#: (a 5 MB delta) as soon as it comes
LARGE = 4096


def _counted(lengths: Iterable[int], overhead: int, last: int) -> Iterator[int]:
    """Running totals after ``last`` of each length plus ``overhead`` (without ``last`` itself)."""
    totals = accumulate(lengths, initial=last)
    next(totals)
    return map(add, totals, count(overhead, overhead)) if overhead else totals


class FrameRing:
    """A channel's replay: its newest frames, with consecutive sequence numbers, bounded in bytes.

    ``append(payload)`` adds the frame after the last one (the first one has sequence number
    ``first``). The bound is ``deque``-exact: after every append, the oldest frames are dropped while
    the frames held count more than ``limit`` bytes (each its length plus ``overhead``), the newest
    one always kept; here that is computed once per batch, and whenever the ring is read (``size``,
    ``first_seq``, ``after``), with the same result as frame by frame. Iterating yields ``(seq, payload)``."""

    __slots__ = ("_base", "_blocks", "_cum", "_first", "_start", "limit", "overhead", "pending")

    def __init__(self, limit: int, overhead: int, first: int = 1) -> None:
        self.limit = limit
        self.overhead = overhead
        self._first = first
        #: frames appended since the last pack, the newest ones (a hot caller may append here itself,
        #: then ``pack`` as ``append`` does)
        self.pending: list[bytes] = []
        #: ``(index of the block's first frame, its frames joined, where each frame ends in it)``;
        #: frames are indexed from 0 in the order appended
        self._blocks: deque[tuple[int, bytes, array]] = deque()
        #: ``_cum[k] - _cum[j]``: the bytes counted for packed frames ``_base + j`` to ``_base + k - 1``
        self._cum = array("Q", (0,))
        self._base = 0
        #: the index of the oldest frame held
        self._start = 0

    def append(self, payload: bytes) -> None:
        self.pending.append(payload)
        if len(self.pending) >= BATCH or len(payload) >= LARGE:
            self.pack()

    def pack(self) -> None:
        """Pack the pending frames into a block, then drop what the bound drops."""
        pending = self.pending
        if pending:
            first = self._base + len(self._cum) - 1
            ends = array("Q", accumulate(map(len, pending), initial=0))
            self._blocks.append((first, pending[0] if len(pending) == 1 else b"".join(pending), ends))
            self._cum.extend(_counted(map(len, pending), self.overhead, self._cum[-1]))
            pending.clear()
        cum = self._cum
        held = len(cum) - 1 + self._base - self._start
        if held <= 1 or cum[-1] - cum[self._start - self._base] <= self.limit:
            return
        start = self._base + bisect_left(cum, cum[-1] - self.limit, self._start - self._base)
        self._start = start = min(start, len(cum) - 2 + self._base)  # the newest frame is always kept
        blocks = self._blocks
        while blocks[0][0] + len(blocks[0][2]) - 1 <= start:
            blocks.popleft()
        drop = start - self._base
        if drop >= 4 * BATCH and drop * 2 >= len(cum):
            del cum[:drop]
            self._base = start

    def __len__(self) -> int:
        self.pack()
        return len(self._cum) - 1 + self._base - self._start

    @property
    def size(self) -> int:
        """The bytes counted for the frames held."""
        self.pack()
        return self._cum[-1] - self._cum[self._start - self._base]

    @property
    def first_seq(self) -> int | None:
        """The sequence number of the oldest frame held (None when none is)."""
        return self._first + self._start if len(self) else None

    @property
    def next_seq(self) -> int:
        return self._first + self._base + len(self._cum) - 1 + len(self.pending)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self.after(0)

    def after(self, seq: int) -> Iterator[tuple[int, bytes]]:
        """``(seq, payload)`` of every frame held after ``seq``, oldest first (a snapshot: frames
        appended while it is read are not in it)."""
        self.pack()
        items: list[tuple[int, bytes]] = []
        for first, data, ends in list(self._blocks):
            for i in range(len(ends) - 1):
                index = first + i
                if index >= self._start and self._first + index > seq:
                    items.append((self._first + index, data[ends[i]:ends[i + 1]]))
        return iter(items)


#: delta events whose runs are kept as text, each with what names the message (or call) it belongs to
_DELTAS: dict[type, Any] = {ev.TextDelta: attrgetter("message_id"), ev.ReasoningDelta: attrgetter("message_id"),
                            ev.ToolCallArgs: attrgetter("tool_call_id")}
_DELTA = attrgetter("delta")


class EventLog:
    """A run's newest ``AgentEvent``s, bounded in bytes: after every append, the oldest events are
    dropped while those held count more than ``limit`` (each the size it was appended with).

    Every ``BATCH`` events are packed: a stretch of deltas of one message (or tool call) becomes one
    string of their text, any other event is kept as itself. Iterating yields the same events (equal;
    deltas rebuilt) in the same order. ``complete`` is whether it still holds every event appended."""

    __slots__ = ("_base", "_cum", "_entries", "_lost", "_start", "events", "limit", "sizes")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        #: events appended since the last pack and their sizes (a hot caller may append here itself,
        #: then ``pack`` as ``append`` does)
        self.events: list[Any] = []
        self.sizes = array("Q")
        #: ``(index, event)`` or ``(index, kind, owner, text, ends)``: packed events from ``index`` on
        self._entries: deque[tuple[Any, ...]] = deque()
        self._cum = array("Q", (0,))
        self._base = 0
        self._start = 0
        self._lost = False

    def append(self, event: Any, size: int) -> None:
        self.events.append(event)
        self.sizes.append(size)
        if len(self.events) >= BATCH or size >= LARGE:
            self.pack()

    def pack(self) -> None:
        events = self.events
        if events:
            index = self._base + len(self._cum) - 1
            kind = type(events[0])
            owner_of = _DELTAS.get(kind)
            if (owner_of is not None and len(set(map(type, events))) == 1
                    and len(set(map(owner_of, events))) == 1):  # the usual batch: one message's deltas
                self._add_deltas(index, kind, owner_of(events[0]), events)
            else:
                self._add_mixed(index, events)
            self._cum.extend(_counted(self.sizes, 0, self._cum[-1]))
            events.clear()
            del self.sizes[:]
        cum = self._cum
        if cum[-1] - cum[self._start - self._base] <= self.limit:
            return
        # unlike a replay, the log may drop its newest event too (one larger than the whole bound)
        self._start = start = self._base + bisect_left(cum, cum[-1] - self.limit, self._start - self._base)
        self._lost = True
        entries = self._entries
        while entries and entries[0][0] + (1 if len(entries[0]) == 2 else len(entries[0][4]) - 1) <= start:
            entries.popleft()
        drop = start - self._base
        if drop >= 4 * BATCH and drop * 2 >= len(cum):
            del cum[:drop]
            self._base = start

    def _add_deltas(self, index: int, kind: type, owner: str, events: list[Any]) -> None:
        texts = list(map(_DELTA, events))
        self._entries.append((index, kind, owner, "".join(texts), array("Q", accumulate(map(len, texts), initial=0))))

    def _add_mixed(self, index: int, events: list[Any]) -> None:
        run: list[Any] = []
        for i, event in enumerate(events):
            owner_of = _DELTAS.get(type(event))
            if run and (owner_of is None or type(event) is not type(run[0]) or owner_of(event) != owner_of(run[0])):
                self._add_deltas(index + i - len(run), type(run[0]), _DELTAS[type(run[0])](run[0]), run)
                run = []
            if owner_of is None:
                self._entries.append((index + i, event))
            else:
                run.append(event)
        if run:
            self._add_deltas(index + len(events) - len(run), type(run[0]), _DELTAS[type(run[0])](run[0]), run)

    def __len__(self) -> int:
        self.pack()
        return len(self._cum) - 1 + self._base - self._start

    @property
    def complete(self) -> bool:
        self.pack()
        return not self._lost

    def clear(self) -> None:
        """Drop every event: the log is no longer complete."""
        self.events.clear()
        del self.sizes[:]
        self._entries.clear()
        self._start = self._base = self._base + len(self._cum) - 1
        self._cum = array("Q", (0,))
        self._lost = True

    def __iter__(self) -> Iterator[Any]:
        """The events held, oldest first (a snapshot: events appended while it is read are not in it)."""
        self.pack()
        out: list[Any] = []
        for entry in list(self._entries):
            if len(entry) == 2:
                if entry[0] >= self._start:
                    out.append(entry[1])
                continue
            index, kind, owner, text, ends = entry
            for i in range(len(ends) - 1):
                if index + i >= self._start:
                    out.append(kind(owner, text[ends[i]:ends[i + 1]]))
        return iter(out)
