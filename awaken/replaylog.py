"""What a run's broadcast keeps for late watchers, kept in a few large blocks: ``FrameRing`` (a
channel's newest frames) and ``EventLog`` (the run's newest ``AgentEvent``s).

A streaming run produces tens of thousands of small frames and events. Kept as one Python object
each (a ``(seq, payload)`` tuple, a ``TextDelta``, its delta string), a run's 1 MiB replay and event
log were ~50,000 small objects scattered through the interpreter's small-object arenas; freed when
the run ended, those arenas still held a few objects allocated meanwhile by something that lives on
(a cache entry, a connection awaiting the cycle collector), so the process kept them: a burst of 40
silent clients left ~100 MB behind. Here frames are bytes appended to a block (a ``bytearray`` of
up to ``BLOCK_BYTES``) with an ``array`` of where each ends, and a run of deltas of one message or
tool call is its text appended the same way: a run holds a few dozen blocks, freed as blocks
(``awaken/memory.py`` returns those pages to the system).

Both are FIFOs with the same semantics as the ``deque`` they replace: append at the end, drop the
oldest one at a time (the caller keeps its byte bound), iterate oldest first. Pure: no I/O.
"""

from __future__ import annotations

from array import array
from collections import deque
from collections.abc import Iterator
from typing import Any

from . import events as ev

#: a block is closed and the next one begun once it holds this many bytes (a larger frame is a block
#: of its own): small enough that a short run wastes little, large enough to leave the small-object
#: allocator (over 512 bytes) after a few frames
BLOCK_BYTES = 64 * 1024


class _Block:
    """Consecutive byte strings: ``data[ends[i-1]:ends[i]]`` is the ``i``-th; ``start`` the first still held."""

    __slots__ = ("data", "ends", "start")

    def __init__(self) -> None:
        self.data = bytearray()
        self.ends = array("Q")
        self.start = 0

    def item(self, i: int) -> bytes:
        return bytes(self.data[self.ends[i - 1] if i else 0:self.ends[i]])

    def length(self, i: int) -> int:
        return self.ends[i] - (self.ends[i - 1] if i else 0)


class FrameRing:
    """A channel's replay: frames with consecutive sequence numbers, oldest first.

    ``append(seq, payload)`` (``seq`` one more than the last one's), ``popleft()`` drops the oldest
    and returns its length; iterating yields ``(seq, payload)``."""

    __slots__ = ("_blocks", "_count", "_first")

    def __init__(self) -> None:
        self._blocks: deque[_Block] = deque()
        self._count = 0
        #: the sequence number of the oldest frame held (meaningless when empty)
        self._first = 0

    def __len__(self) -> int:
        return self._count

    @property
    def first_seq(self) -> int | None:
        return self._first if self._count else None

    def append(self, seq: int, payload: bytes) -> None:
        if not self._count:
            self._blocks.clear()
            self._first = seq
        blocks = self._blocks
        if not blocks or len(blocks[-1].data) >= BLOCK_BYTES:
            blocks.append(_Block())
        block = blocks[-1]
        block.data += payload
        block.ends.append(len(block.data))
        self._count += 1

    def popleft(self) -> int:
        """Drop the oldest frame; its payload's length."""
        block = self._blocks[0]
        length = block.length(block.start)
        block.start += 1
        if block.start == len(block.ends):
            self._blocks.popleft()
        self._first += 1
        self._count -= 1
        return length

    def clear(self) -> None:
        self._blocks.clear()
        self._count = 0

    def __iter__(self) -> Iterator[tuple[int, bytes]]:
        return self.after(0)

    def after(self, seq: int) -> Iterator[tuple[int, bytes]]:
        """``(seq, payload)`` of every frame held after ``seq``, oldest first (a snapshot: frames
        appended while it is read are not in it)."""
        at = self._first
        items: list[tuple[int, bytes]] = []
        for block in list(self._blocks):
            count = len(block.ends) - block.start
            if at + count - 1 > seq:
                for i in range(block.start, len(block.ends)):
                    if at + i - block.start > seq:
                        items.append((at + i - block.start, block.item(i)))
            at += count
        return iter(items)


#: delta events whose runs are kept as text: the type -> the name of the field that names their message or call
_DELTAS: dict[type, str] = {ev.TextDelta: "message_id", ev.ReasoningDelta: "message_id",
                            ev.ToolCallArgs: "tool_call_id"}


class _Deltas(_Block):
    """Consecutive delta events of one type and one message (or call): their deltas as UTF-8 text."""

    __slots__ = ("kind", "owner", "sizes")

    def __init__(self, kind: type, owner: str) -> None:
        super().__init__()
        self.kind = kind
        self.owner = owner
        self.sizes = array("Q")

    def event(self, i: int) -> Any:
        return self.kind(self.owner, self.item(i).decode("utf-8", "surrogatepass"))


class EventLog:
    """A run's ``AgentEvent``s, each with the size the caller counts it for, oldest first.

    Consecutive deltas of one message (or tool call) are kept as one block of text; any other event
    as itself. Iterating yields the same events (equal, rebuilt for deltas) in the same order."""

    __slots__ = ("_count", "_entries")

    def __init__(self) -> None:
        #: ``(event, size)`` tuples and ``_Deltas`` blocks
        self._entries: deque[Any] = deque()
        self._count = 0

    def __len__(self) -> int:
        return self._count

    def __bool__(self) -> bool:
        return self._count > 0

    def append(self, event: Any, size: int) -> None:
        entries = self._entries
        self._count += 1
        field = _DELTAS.get(type(event))
        if field is None:
            entries.append((event, size))
            return
        owner = getattr(event, field)
        last = entries[-1] if entries else None
        if (type(last) is not _Deltas or last.kind is not type(event) or last.owner != owner
                or len(last.data) >= BLOCK_BYTES):
            last = _Deltas(type(event), owner)
            entries.append(last)
        last.data += event.delta.encode("utf-8", "surrogatepass")
        last.ends.append(len(last.data))
        last.sizes.append(size)

    def popleft(self) -> int:
        """Drop the oldest event; the size it was counted for."""
        entry = self._entries[0]
        self._count -= 1
        if type(entry) is not _Deltas:
            self._entries.popleft()
            return entry[1]
        size = entry.sizes[entry.start]
        entry.start += 1
        if entry.start == len(entry.ends):
            self._entries.popleft()
        return size

    def clear(self) -> None:
        self._entries.clear()
        self._count = 0

    def __iter__(self) -> Iterator[Any]:
        """The events held, oldest first (a snapshot: events appended while it is read are not in it)."""
        events: list[Any] = []
        for entry in list(self._entries):
            if type(entry) is _Deltas:
                events.extend(entry.event(i) for i in range(entry.start, len(entry.ends)))
            else:
                events.append(entry[0])
        return iter(events)
