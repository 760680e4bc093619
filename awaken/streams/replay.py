"""What a run's broadcast keeps for late watchers, kept in a few large blocks: ``FrameRing`` (a
channel's newest frames) and ``EventLog`` (the run's newest ``AgentEvent``s).

A streaming run produces tens of thousands of small frames and events. Kept as one Python object
each (a ``(seq, payload)`` tuple, a ``TextDelta`` and its delta string), a run's replay and event log
were spread over the interpreter's small-object arenas (returned to the system only when wholly
empty), and when the run ended each arena still held a few objects allocated meanwhile by something
that lives on (a hot-thread cache entry, a connection awaiting the cycle collector). What that left
behind, measured: ``bench/HISTORY.md``. Here the
newest ``BATCH`` frames (events) are kept as they came, then packed with a few C calls: frames into
one ``bytes`` block, a newline between two; a batch of deltas of one message (or tool call) into one
string of their text and a ``bytes`` of their lengths. A run holds a few dozen blocks, freed as
blocks (``awaken/runtime/memory.py`` returns their pages to the system). Appending costs a list append, and
packing less than the deque's tuple per entry did.

Both keep the byte bound of the ``deque`` they replace exactly: the positions a rejoin finds and the
events a late channel is encoded from are the same (``tests/streams/test_broadcast_memory.py`` holds them
against a deque). Whole blocks are dropped as the bound passes them; where it falls inside the oldest
block is worked out when the replay is read. Pure: no I/O.
"""

from __future__ import annotations

import abc
from array import array
from collections.abc import Iterator
from itertools import accumulate
from operator import attrgetter
from typing import Any

from awaken.core import events as ev
from awaken.runtime.tuning import REPLAY_BATCH, REPLAY_LARGE

#: frames (events) appended are packed into one block every ``BATCH``: until then they are kept as
#: they came, so an append is a list append, and packing is a few C calls per batch; a frame (an event
#: counted) at least ``LARGE`` is packed at once, with those before it: what waits to be packed stays
#: under ``BATCH`` times that, and the byte bound drops older frames for a large one (a 5 MB delta)
#: as soon as it comes (``awaken.runtime.tuning``)
BATCH, LARGE = REPLAY_BATCH, REPLAY_LARGE


class _Bound(abc.ABC):
    """A FIFO of items in blocks, bounded in bytes the way a ``deque`` was: after every append, the
    oldest items are dropped while those held count more than ``limit`` (``keep_newest``: never the
    newest one). Each block knows what all its items count (``total``) and what its last one counts
    (``last``): whole blocks are dropped as items are packed (a block goes once its last item is
    dropped); where the bound falls inside the oldest block is worked out only when someone reads
    (``start``), with the same result as item by item. Subclasses say what an item counts (``counts``)."""

    __slots__ = ("_blocks", "_held", "_lost", "_next", "_start", "keep_newest", "limit")

    def __init__(self, limit: int, keep_newest: bool) -> None:
        self.limit = limit
        self.keep_newest = keep_newest
        #: ``[first index, count, total, last, payload...]`` per block, oldest first (a list, not a ``deque``:
        #: a run holds a few dozen blocks, and an empty deque costs 600 B, two per channel of every stream)
        self._blocks: list[list[Any]] = []
        #: what the blocks' items count together (those dropped from the oldest block included)
        self._held = 0
        #: the index of the next item packed; the oldest item held is at least ``_start``
        self._next = 0
        self._start = 0
        self._lost = False

    def _add(self, block: list[Any]) -> None:
        self._blocks.append(block)
        self._next += block[1]
        self._held += block[2]
        blocks = self._blocks
        while (len(blocks) > 1 or not self.keep_newest) and blocks and \
                blocks[0][3] + self._held - blocks[0][2] > self.limit:  # its last item goes: all of it does
            first, count, total = blocks.pop(0)[:3]
            self._held -= total
            self._start = max(self._start, first + count)
            self._lost = True

    @abc.abstractmethod
    def counts(self, block: list[Any]) -> list[int]:
        """What each item of ``block`` counts."""

    def start(self) -> int:
        """The index of the oldest item held (``_next`` when none is): where the bound falls."""
        if not self._blocks:
            return self._start
        block = self._blocks[0]
        index, held = block[0], self._held
        for count in self.counts(block):
            if (index >= self._start and held <= self.limit) or (self.keep_newest and index == self._next - 1):
                break
            held -= count
            index += 1
        self._start = index
        if index > 0:
            self._lost = True
        return index

    def size(self) -> int:
        """What the items held count."""
        start = self.start()
        if not self._blocks:
            return 0
        block = self._blocks[0]
        return self._held - sum(self.counts(block)[:start - block[0]])

    @abc.abstractmethod
    def items(self, block: list[Any]) -> list[Any]:
        """The items of ``block``, oldest first."""

    def held(self) -> list[tuple[int, Any]]:
        """``(index, item)`` of every item held, oldest first."""
        start = self.start()
        out: list[tuple[int, Any]] = []
        for block in list(self._blocks):
            out.extend((block[0] + i, item) for i, item in enumerate(self.items(block)) if block[0] + i >= start)
        return out

    def clear(self) -> None:
        self._blocks.clear()
        self._held = 0
        self._start = self._next
        self._lost = True


class FrameRing(_Bound):
    """A channel's replay: its newest frames, with consecutive sequence numbers (the first one
    ``first``), bounded in bytes: each frame counts its length plus ``overhead``, the newest one is
    always kept. Iterating yields ``(seq, payload)``.

    ``append`` queues a frame in ``pending``; every ``BATCH`` of them are joined into one block with a
    newline between two: a payload never holds one (SSE sends each on one ``data:`` line), so where
    each ends is found again when it is read; a block whose frames did hold one keeps their lengths."""

    __slots__ = ("_first", "overhead", "pending")

    def __init__(self, limit: int, overhead: int, first: int = 1) -> None:
        super().__init__(limit, keep_newest=True)
        self.overhead = overhead
        self._first = first
        #: frames appended since the last pack, the newest ones (a hot caller may append here itself,
        #: then ``pack`` as ``append`` does)
        self.pending: list[bytes] = []

    def append(self, payload: bytes) -> None:
        self.pending.append(payload)
        if len(self.pending) >= BATCH or len(payload) >= LARGE:
            self.pack()

    def pack(self) -> None:
        pending = self.pending
        if not pending:
            return
        count = len(pending)
        data = pending[0] if count == 1 else b"\n".join(pending)
        lengths = None
        if data.count(b"\n") == count - 1:
            total = len(data) - (count - 1) + count * self.overhead
        else:  # a payload held a newline (none does: SSE could not send it)
            data = b"".join(pending)
            lengths = array("Q", map(len, pending))
            total = len(data) + count * self.overhead
        last = len(pending[-1]) + self.overhead
        pending.clear()
        self._add([self._next, count, total, last, data, lengths])

    def items(self, block: list[Any]) -> list[bytes]:
        data, lengths = block[4], block[5]
        if lengths is None:
            return data.split(b"\n") if block[1] > 1 else [data]
        ends = list(accumulate(lengths, initial=0))
        return [data[ends[i]:ends[i + 1]] for i in range(len(lengths))]

    def counts(self, block: list[Any]) -> list[int]:
        return [len(item) + self.overhead for item in self.items(block)]

    def __len__(self) -> int:
        self.pack()
        return self._next - self.start()

    @property
    def size(self) -> int:  # type: ignore[override]
        """The bytes counted for the frames held."""
        self.pack()
        return _Bound.size(self)

    @property
    def first_seq(self) -> int | None:
        """The sequence number of the oldest frame held (None when none is)."""
        return self._first + self.start() if len(self) else None

    def clear(self) -> None:
        """Drop every frame (the next one appended keeps its sequence number)."""
        self.pack()
        _Bound.clear(self)

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self.after(0)

    def after(self, seq: int) -> Iterator[tuple[int, bytes]]:
        """``(seq, payload)`` of every frame held after ``seq``, oldest first (a snapshot: frames
        appended while it is read are not in it)."""
        self.pack()
        return iter([(self._first + i, p) for i, p in self.held() if self._first + i > seq])


#: delta events whose runs are kept as text, each with what names the message (or call) it belongs to
_DELTAS: dict[type, Any] = {ev.TextDelta: attrgetter("message_id"), ev.ReasoningDelta: attrgetter("message_id"),
                            ev.ToolCallArgs: attrgetter("tool_call_id")}
_DELTA = attrgetter("delta")


class EventLog(_Bound):
    """A run's newest ``AgentEvent``s, bounded in bytes: after every append, the oldest events are
    dropped while those held count more than ``limit`` (each the size it was appended with; the newest
    one too, when it alone counts more).

    Every ``BATCH`` events are packed into one block: a batch of deltas of one message (or tool call),
    the usual one, as one string of their text and their lengths, any other as the events themselves.
    Iterating yields the same events (equal; deltas rebuilt) in the same order. ``complete`` is whether
    it still holds every event appended."""

    __slots__ = ("events", "sizes")

    def __init__(self, limit: int) -> None:
        super().__init__(limit, keep_newest=False)
        #: events appended since the last pack and their sizes (a hot caller may append here itself,
        #: then ``pack`` as ``append`` does)
        self.events: list[Any] = []
        self.sizes = array("Q")

    def append(self, event: Any, size: int) -> None:
        self.events.append(event)
        self.sizes.append(size)
        if len(self.events) >= BATCH or size >= LARGE:
            self.pack()

    def pack(self) -> None:
        events, sizes = self.events, self.sizes
        if not events:
            return
        kind = type(events[0])
        owner_of = _DELTAS.get(kind)
        if owner_of is not None and len(set(map(type, events))) == 1 and len(set(map(owner_of, events))) == 1:
            texts = list(map(_DELTA, events))
            lengths = list(map(len, texts))
            try:
                packed: Any = bytes(lengths)
            except ValueError:  # a delta of 256 characters or more
                packed = array("Q", lengths)
            payload: Any = (kind, owner_of(events[0]), "".join(texts), packed)
        else:
            payload = list(events)
        block = [self._next, len(events), sum(sizes), sizes[-1], payload, sizes.tobytes()]
        events.clear()
        del sizes[:]
        self._add(block)

    def items(self, block: list[Any]) -> list[Any]:
        payload = block[4]
        if type(payload) is list:
            return payload
        kind, owner, text, lengths = payload
        ends = list(accumulate(lengths, initial=0))
        return [kind(owner, text[ends[i]:ends[i + 1]]) for i in range(len(lengths))]

    def counts(self, block: list[Any]) -> list[int]:
        return array("Q", block[5]).tolist()

    def __len__(self) -> int:
        self.pack()
        return self._next - self.start()

    @property
    def complete(self) -> bool:
        self.pack()
        self.start()
        return not self._lost

    def clear(self) -> None:
        """Drop every event: the log is no longer complete."""
        self.pack()
        _Bound.clear(self)

    def __iter__(self) -> Iterator[Any]:
        """The events held, oldest first (a snapshot: events appended while it is read are not in it)."""
        self.pack()
        return iter([event for _, event in self.held()])
