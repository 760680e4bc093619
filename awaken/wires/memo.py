"""The ``messages`` arrays of recent requests, kept as bytes, so that a client resending a thread's
whole history (``HttpAgent`` and ``useChat`` do, every turn) has only what it added parsed (issue 18).

A ``Prefix`` is the bytes of a ``messages`` array from its ``[`` through its last element (no ``]``),
the thread it was sent for, and the protocol's scan of its elements (ids, roles, tool call ids: what
the request parser reads of a message it does not decode). A request whose top-level ``messages``
array starts with those very bytes is parsed as a *split*: the prefix is cut out of the body and
replaced by a marker, the rest (the envelope and the messages after the prefix) is decoded, and the
marker is checked to stand at the top-level ``messages`` position (a random token of this process,
so no body can forge it). Whatever is not parsed is the prefix's bytes, which decode to what its scan
says: a prefix is only ever recorded from bytes that were parsed (or from orjson's own encoding of
them, kept only when the body holds those very bytes). The parse is the same as the plain one; the
memo decides nothing about threads or dedup.

A split parse's ids, positions and roles are the prefix's joined to the tail's (``Joined``), not copied:
a copy would touch each of thousands of elements.

A prefix's messages can still be decoded (``Prefix.elements``): admission decodes every message the
thread does not hold, and a memo knows nothing of what the thread holds.

The memo wraps a protocol's parse from outside: a protocol only declares its two typed parses
(``Protocol.parses``: the plain scan, which records a body's array, and the split one), and
``with_memos`` gives each server its own ``Memoized`` protocols, each with its own memo
(``[server] replay_memo_bytes``; 0: none, the protocols parse plainly). Deleting this module and
that one call leaves every parse plain.

Sans-IO: bytes in, parses out. The LRU is bounded in bytes (``[server] replay_memo_bytes``);
operations on it are single ``OrderedDict``/``dict`` calls (atomic under the GIL: parsing runs in
worker threads for large bodies). Clients whose encoding is not the compact one orjson and
``JSON.stringify`` write never hit, and pay one encode of their first message per large body.
"""

from __future__ import annotations

import itertools
import secrets
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from typing import Any, Generic, TypeVar, overload

import attrs
import orjson

from awaken.core.messages import Message
from awaken.ledger.interface import ThreadView
from awaken.runtime.tuning import MEMO_BUDGET as DEFAULT_BUDGET
from awaken.runtime.tuning import MEMO_KEY_BYTES as KEY_BYTES
from awaken.runtime.tuning import MEMO_MAX_CANDIDATES as MAX_CANDIDATES
from awaken.runtime.tuning import MEMO_MIN_BODY as MIN_BODY
from awaken.runtime.tuning import MEMO_PER_KEY as PER_KEY
from awaken.runtime.tuning import MEMO_PER_MESSAGE as _PER_MESSAGE
from awaken.runtime.tuning import MEMO_SERVED_THREADS as SERVED_THREADS
from awaken.runtime.tuning import ON_LOOP_REST  # noqa: F401 - re-exported: the adapters split on the loop up to it
from awaken.wires.encoding import EncoderBase, WireEvent
from awaken.wires.protocol import Asks, Protocol, RunRequest
from awaken.wires.registry import Wire

_KEY = b'"messages":['
#: the token that stands for a prefix in a split body (a JSON string: no escaping needed)
MARKER = "awaken-prefix-" + secrets.token_hex(16)
_MARKER_ARRAY = b'["' + MARKER.encode() + b'"'


#: a protocol's typed scan of a prefix's elements (``agui.request.KnownScan``, ``aisdk.request.KnownUiScan``)
ScanT = TypeVar("ScanT")


@attrs.frozen(eq=False)
class Prefix(Generic[ScanT]):
    """The first ``count`` elements of a ``messages`` array as its bytes, and their scan."""

    owner: str
    #: a view of the request body the bytes were last seen in
    data: memoryview
    count: int
    #: the ``{`` and ``[`` bytes of ``data`` (the body's container bound counts them)
    containers: int
    #: the protocol's scan of the elements (what its parser keeps of a message it does not decode)
    scan: ScanT

    @property
    def cost(self) -> int:
        return self.data.obj.__len__() + self.count * _PER_MESSAGE + 200  # the whole body it views

    def elements(self) -> list[Any]:
        """The elements, decoded (for a message admission must decode after all)."""
        return orjson.loads(bytes(self.data) + b"]")


@attrs.frozen(eq=False)
class Split(Generic[ScanT]):
    """A body parsed around a prefix: ``data`` is the body's object with ``messages`` holding only the
    elements after the prefix (``tail``); ``start`` is where the array begins in the body."""

    data: dict[str, Any]
    prefix: Prefix[ScanT]
    tail: list[Any]
    start: int
    #: the ``{`` and ``[`` bytes of the whole body
    containers: int


class PrefixedList(Sequence[Any]):
    """A split body's ``messages``: the prefix's elements (decoded on first use) then the tail's."""

    __slots__ = ("_decoded", "prefix", "tail")

    def __init__(self, prefix: Prefix[Any], tail: list[Any]) -> None:
        self.prefix = prefix
        self.tail = tail
        self._decoded: list[Any] | None = None

    def __len__(self) -> int:
        return self.prefix.count + len(self.tail)

    @overload
    def __getitem__(self, i: int) -> Any: ...
    @overload
    def __getitem__(self, i: slice) -> list[Any]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return [self[k] for k in range(*i.indices(len(self)))]
        if i < 0:
            i += len(self)
        if i >= self.prefix.count:
            return self.tail[i - self.prefix.count]
        if i < 0:
            raise IndexError(i)
        if self._decoded is None:
            self._decoded = self.prefix.elements()
        return self._decoded[i]


T = TypeVar("T")

#: a ``Joined`` of more segments than this is copied into one (its indexing walks its segments)
MAX_SEGMENTS = 32


class Joined(Sequence[T]):
    """A sequence of segments read as one, never copied: a split parse's ids, positions and roles are the
    prefix's (thousands, kept by the memo) followed by the tail's few. Concatenating them as tuples would
    touch every element (its reference count), each a cache miss right after the body passed through the
    caches; joining them touches none. Equal to any sequence with the same elements, as the plain parse's
    tuples are. More than ``MAX_SEGMENTS`` segments (a thread's turns joined one by one) are copied into one."""

    __slots__ = ("_length", "segments")

    def __init__(self, segments: tuple[Sequence[T], ...]) -> None:
        if len(segments) > MAX_SEGMENTS:
            segments = (tuple(itertools.chain.from_iterable(segments)),)
        self.segments = segments
        self._length = sum(map(len, segments))

    @classmethod
    def of(cls, head: Sequence[T], tail: Sequence[T]) -> Sequence[T]:
        """``head`` followed by ``tail`` (``head`` itself when ``tail`` is empty and ``head`` a tuple or a
        ``Joined``)."""
        if not tail and type(head) in (tuple, Joined):
            return head
        return cls((*head.segments, tuple(tail)) if type(head) is Joined else (head, tuple(tail)))

    def __len__(self) -> int:
        return self._length

    @overload
    def __getitem__(self, i: int) -> T: ...
    @overload
    def __getitem__(self, i: slice) -> tuple[T, ...]: ...

    def __getitem__(self, i: int | slice) -> Any:
        if isinstance(i, slice):
            return tuple(self)[i]
        if i < 0:
            i += self._length
        if not 0 <= i < self._length:
            raise IndexError(i)
        end = self._length
        for segment in reversed(self.segments):  # the newest first: what a dedup looks for
            end -= len(segment)
            if i >= end:
                return segment[i - end]
        raise IndexError(i)  # pragma: no cover - the bounds were checked

    def __iter__(self) -> Iterator[T]:
        return itertools.chain.from_iterable(self.segments)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sequence) or isinstance(other, str | bytes):
            return NotImplemented
        return len(other) == self._length and all(a == b for a, b in zip(self, other, strict=False))

    __hash__ = None  # type: ignore[assignment]

    def __add__(self, other: Sequence[T]) -> Sequence[T]:
        return Joined.of(self, other)

    def __repr__(self) -> str:
        return f"Joined({tuple(self)!r})"


class ReplayMemo(Generic[ScanT]):
    """The LRU of prefixes, at most ``budget`` estimated bytes, each with the protocol's scan of it
    (``ScanT``). ``hits`` counts split parses."""

    def __init__(self, budget: int = DEFAULT_BUDGET, *, min_body: int = MIN_BODY) -> None:
        self.budget = max(0, int(budget))
        self.min_body = min_body
        self.total = 0
        self.hits = 0
        self._entries: OrderedDict[int, Prefix[ScanT]] = OrderedDict()
        self._by_key: dict[bytes, list[Prefix[ScanT]]] = {}
        #: thread -> (the cursor after the last page served from its start, the pages so far as a prefix)
        self._served: OrderedDict[str, tuple[str | None, Prefix[ScanT]]] = OrderedDict()
        self._lock = threading.Lock()  # parses of large bodies run in worker threads

    def __len__(self) -> int:
        return len(self._entries)

    def configure(self, budget: int) -> None:
        with self._lock:
            self.budget = max(0, int(budget))
            self._evict()

    def split(self, body: bytes, owner_of: Callable[[dict[str, Any]], str | None], *,
              most: int | None = None) -> Split[ScanT] | None:
        """The body parsed around the longest known prefix of its top-level ``messages`` array, sent
        for the same thread (``owner_of`` reads the thread from the envelope); None when there is none,
        when more than ``most`` bytes would be left to decode, or when anything is off (the plain parse
        then decides, and words any refusal)."""
        if self.budget <= 0 or len(body) < self.min_body or not self._entries:
            return None
        at = -1
        for _ in range(MAX_CANDIDATES):
            at = body.find(_KEY, at + 1)
            if at < 0:
                return None
            start = at + len(_KEY) - 1
            found = self._longest(body, start)
            if found is None:
                continue
            if most is not None and len(body) - len(found.data) > most:
                return None
            rest = body[start + len(found.data):]
            try:
                data = orjson.loads(body[:start] + _MARKER_ARRAY + rest)
            except orjson.JSONDecodeError:
                return None
            if type(data) is not dict:
                return None
            messages = data.get("messages")
            if type(messages) is not list or not messages or messages[0] != MARKER or owner_of(data) != found.owner:
                continue
            tail = messages[1:]
            data["messages"] = tail
            containers = (body.count(b"{", 0, start) + body.count(b"[", 0, start) + found.containers
                          + rest.count(b"{") + rest.count(b"["))
            self._touch(found)
            self.hits += 1
            return Split(data, found, tail, start, containers)
        return None

    def record_split(self, body: bytes, split: Split[ScanT], scan: ScanT) -> None:
        """After ``split`` was parsed: keep its whole array as the thread's prefix (``scan`` is the scan
        of all of it), if orjson's encoding of the tail is the body's very bytes."""
        old = split.prefix
        if not split.tail or type(body) is not bytes:
            return
        encoded = _encoded(split.tail)
        if encoded is None:
            return
        at = split.start + len(old.data)  # the body holds the old prefix there (``split`` compared it)
        end = at + len(encoded)
        if not (body.startswith(b",", at) and body.startswith(memoryview(encoded)[1:], at + 1)):
            return
        # the body's own bytes, not a copy: the memo keeps the last request of the thread alive instead
        with self._lock:
            self._drop(old)
            self._put(Prefix(old.owner, memoryview(body)[split.start:end - 1], old.count + len(split.tail),
                             old.containers + encoded.count(b"{") + encoded.count(b"[") - 1, scan))

    def keeps(self, body: bytes) -> bool:
        """Whether ``record`` may keep ``body`` at all (a small body never is): a parser builds the scan
        it hands to ``record`` only then."""
        return self.budget > 0 and len(body) >= self.min_body and type(body) is bytes

    def record(self, body: bytes, owner: str | None, messages: Sequence[Any], scan: ScanT) -> None:
        """After a plain parse: keep the body's ``messages`` array (decoded as ``messages``, scanned as
        ``scan``) as the thread's prefix, if orjson's encoding of it is the body's very bytes."""
        if not self.keeps(body) or owner is None or type(messages) is not list or not messages:
            return
        head = _encoded(messages[0])
        if head is None:
            return
        first = b"[" + head
        at = -1
        for _ in range(MAX_CANDIDATES):
            at = body.find(_KEY, at + 1)
            if at < 0:
                return
            start = at + len(_KEY) - 1
            if not body.startswith(first, start):
                continue
            encoded = _encoded(messages)
            if encoded is not None and body.startswith(encoded, start):
                with self._lock:
                    self._put(Prefix(owner, memoryview(body)[start:start + len(encoded) - 1], len(messages),
                                     encoded.count(b"{") + encoded.count(b"["), scan))
            return

    def served(self, owner: str, after: str | None, end: str | None, items: list[Any], encoded: bytes,
               scan_of: Callable[[list[Any]], ScanT | None], join: Callable[[ScanT, ScanT, int], ScanT | None]) -> None:
        """A page of thread ``owner``'s history went out: ``items`` after cursor ``after`` (None: from the
        thread's start) up to cursor ``end``, as the JSON array ``encoded`` (orjson's bytes of ``items``).
        Pages read from the thread's start, each after the one before, are kept as the thread's prefix: a
        page that reloads and sends the history it read back whole (``HttpAgent``, ``useChat`` apps) sends
        those very bytes, and is split instead of parsed whole. The scan is the protocol's own of the items
        (``scan_of``, ``join``: what its parse of those bytes would give)."""
        if self.budget <= 0 or not items or len(encoded) < 2:
            return
        base = None
        if after is not None:
            chained = self._served.get(owner)
            if chained is None or chained[0] != after:
                return
            base = chained[1]
        scan = scan_of(items)
        if scan is not None and base is not None:
            scan = join(base.scan, scan, base.count)
        if scan is None:
            self._served.pop(owner, None)
            return
        inner = memoryview(encoded)[1:-1]  # the items, without the array's brackets
        if base is None:
            data, containers = b"[" + inner, 1
        else:
            data, containers = bytes(base.data) + b"," + inner, base.containers
        containers += inner.obj.count(b"{", 1, len(encoded) - 1) + inner.obj.count(b"[", 1, len(encoded) - 1)
        prefix = Prefix(owner, memoryview(data), (base.count if base is not None else 0) + len(items), containers, scan)
        with self._lock:
            if base is not None and id(base) in self._entries:
                self._drop(base)  # the pages before this one: a shorter prefix of the same bytes
            self._served[owner] = (end, prefix)
            self._served.move_to_end(owner)
            while len(self._served) > SERVED_THREADS:
                self._served.popitem(last=False)
            if len(data) >= max(self.min_body, KEY_BYTES):  # (shorter: followed, not kept yet)
                self._put(prefix)
                if id(prefix) not in self._entries:  # the budget does not take it: no chain outlives its bytes
                    self._served.pop(owner, None)

    def forget(self, owner: str) -> None:
        """Drop every request kept for thread ``owner`` (it was deleted: its bytes go with it)."""
        with self._lock:
            self._served.pop(owner, None)
            for entry in [e for e in self._entries.values() if e.owner == owner]:
                self._entries.pop(id(entry), None)
                self.total -= entry.cost
                self._drop(entry)

    def owners(self) -> set[str]:
        """The threads whose requests are kept."""
        return {e.owner for e in list(self._entries.values())}

    def clear(self) -> None:
        with self._lock:
            self._served.clear()
            self._entries.clear()
            self._by_key.clear()
            self.total = 0

    def _longest(self, body: bytes, start: int) -> Prefix[ScanT] | None:
        best: Prefix[ScanT] | None = None
        for entry in self._by_key.get(body[start:start + KEY_BYTES], ()):
            if (best is None or len(entry.data) > len(best.data)) and body.startswith(entry.data, start):
                best = entry
        return best

    def _touch(self, entry: Prefix[ScanT]) -> None:
        try:
            self._entries.move_to_end(id(entry))
        except KeyError:  # evicted meanwhile
            pass

    def _put(self, entry: Prefix[ScanT]) -> None:
        if entry.cost * 4 > self.budget or len(entry.data) < KEY_BYTES:
            return
        key = bytes(entry.data[:KEY_BYTES])
        same = [e for e in self._by_key.get(key, ()) if e.owner != entry.owner]
        for e in self._by_key.get(key, ()):
            if e.owner == entry.owner:
                self._remove(e)
        while len(same) >= PER_KEY:
            self._remove(same.pop(0))
        self._by_key[key] = [*same, entry]
        self._entries[id(entry)] = entry
        self.total += entry.cost
        self._evict()

    def _drop(self, entry: Prefix[ScanT]) -> None:
        key = bytes(entry.data[:KEY_BYTES])
        kept = [e for e in self._by_key.get(key, ()) if e is not entry]
        self._remove(entry)
        if kept:
            self._by_key[key] = kept
        else:
            self._by_key.pop(key, None)

    def _remove(self, entry: Prefix[ScanT]) -> None:
        if self._entries.pop(id(entry), None) is not None:
            self.total -= entry.cost
        chained = self._served.get(entry.owner)
        if chained is not None and chained[1] is entry:  # no page chain outlives its bytes in the budget
            del self._served[entry.owner]

    def _evict(self) -> None:
        while self.total > self.budget and self._entries:
            _, entry = self._entries.popitem(last=False)
            self.total -= entry.cost
            self._drop(entry)


def _encoded(value: Any) -> bytes | None:
    """orjson's compact encoding of a decoded JSON value, or None where orjson cannot write it back
    (nesting past its 255 levels, which a history message may carry: its content is never decoded)."""
    try:
        return orjson.dumps(value)
    except orjson.JSONEncodeError:
        return None


@attrs.frozen
class Parses(Generic[ScanT]):
    """What a protocol declares for the memo (``Protocol.parses``): its plain scan of a body, which
    records the body's ``messages`` array in the memo it is given, and its split parse, which parses a
    body around a prefix the memo holds (None when it holds none, or when more than ``most`` bytes would
    be left to decode). Both give what ``Protocol.parse`` gives."""

    plain: Callable[[bytes, str | None, ReplayMemo[ScanT] | None], Any]
    split: Callable[..., Any]
    #: the scan of a history page's items as the server serves them (None: not well formed), and the
    #: scan of two pages in a row (the second's positions shifted by the first's count; None: they repeat
    #: an id): with both, a history read back from its start is kept as the thread's prefix (``served``)
    served: Callable[[list[Any]], ScanT | None] | None = None
    join: Callable[[ScanT, ScanT, int], ScanT | None] | None = None


class Memoized(Protocol):
    """``inner`` with a replay memo of its own around its parse; every other method is ``inner``'s."""

    def __init__(self, inner: Protocol, parses: Parses[Any], budget: int) -> None:
        self.inner = inner
        self.parses = parses
        self.memo: ReplayMemo[Any] = ReplayMemo(budget)
        self.sse_headers = inner.sse_headers

    def parse(self, body: bytes, content_type: str | None) -> Any:
        return self.parses.split(body, content_type, self.memo) or self.parses.plain(body, content_type, self.memo)

    def parse_known(self, body: bytes, content_type: str | None) -> Any | None:
        """``parse`` of a body whose bulk this memo holds, cheap enough for the event loop (at most
        ``ON_LOOP_REST`` bytes left to decode); None: ``parse`` it (in a worker thread)."""
        return self.parses.split(body, content_type, self.memo, most=ON_LOOP_REST)

    def served(self, owner: str, after: str | None, end: str | None, items: list[Any], encoded: bytes) -> None:
        """A history page of thread ``owner`` went out (``ReplayMemo.served``), if the protocol scans pages."""
        parses = self.parses
        if parses.served is not None and parses.join is not None:
            self.memo.served(owner, after, end, items, encoded, parses.served, parses.join)

    def target(self, parsed: Any, route_agent: str | None) -> tuple[str | None, str | None]:
        return self.inner.target(parsed, route_agent)

    def to_run_request(self, parsed: Any, thread_id: str, agent_id: str | None, view: ThreadView) -> RunRequest:
        return self.inner.to_run_request(parsed, thread_id, agent_id, view)

    def asks(self, parsed: Any) -> Asks | None:
        return self.inner.asks(parsed)

    def encoder(self, parsed: Any | None) -> EncoderBase:
        return self.inner.encoder(parsed)

    def watch_encoder(self, thread_id: str, run_id: str) -> EncoderBase:
        return self.inner.watch_encoder(thread_id, run_id)

    def snapshot(self, messages: list[Message]) -> list[WireEvent] | None:
        return self.inner.snapshot(messages)

    def closing(self) -> list[WireEvent]:
        return self.inner.closing()

    def refusal(self, code: str, message: str, encoder: EncoderBase | None = None) -> list[WireEvent]:
        return self.inner.refusal(code, message, encoder)


def with_memos(wires: dict[str, Wire], budget: int) -> dict[str, Wire]:
    """``wires`` with each protocol that declares its ``parses`` wrapped in a ``Memoized`` of its own
    (one per protocol, however many wires serve it), for one server; ``budget`` 0: ``wires`` as they are."""
    if budget <= 0:
        return wires
    made: dict[int, Memoized] = {}
    out: dict[str, Wire] = {}
    for name, wire in wires.items():
        protocol = wire.protocol
        if protocol is not None and protocol.parses is not None:
            wrapped = made.setdefault(id(protocol), Memoized(protocol, protocol.parses, budget))
            wire = attrs.evolve(wire, protocol=wrapped)
        out[name] = wire
    return out
