"""The file ledger's in-memory index: per thread a compact entry (what a listing shows, where its log
ends), and for hot threads a detail (message ids and locations, runs, pending calls, state, and for a
thread that branched its tree of branches), built by replaying every log at open (details are then
dropped) or one thread's log on access, and updated by applying every written record."""

from __future__ import annotations

import copy
import errno
import struct
from array import array
from bisect import bisect_left, bisect_right, insort
from collections import OrderedDict
from collections.abc import Callable, Collection, Sequence
from operator import attrgetter
from typing import Any

import attrs

from awaken.core.messages import Message, Usage, message_from_json
from awaken.engine.state import RunStatus
from awaken.ledger.interface import (
    MAX_SEQ,
    Branch,
    PendingCall,
    RunRecord,
    RunSummary,
    ThreadRecord,
    ThreadSummary,
    branch_path,
    last_run_of,
    thread_title,
)

from .frames import decode_frames, thread_file_name
from .records import NO_USAGE, CorruptRecord, branch_from_json, pending_from_json, run_from_json
from .runs import RunThreads

# -- the in-memory index ------------------------------------------------------------------------


_SMALL_IDS = 8  # up to this many message ids per thread are kept in a tuple, more in a set


#: an entry's packed part: created_at, updated_at, size (the log's applied bytes), which of the title and
#: the latest run id are set (bit 0, bit 1), the run id's length in bytes (an id is at most ``MAX_ID_LENGTH``
#: characters, so 2 bytes hold it); then the run id, then the title
_PACKED = struct.Struct("<qqqBH")
_HAS_TITLE, _HAS_RUN = 1, 2


def _utf8(text: str) -> bytes:
    return text.encode("utf-8", "surrogatepass")  # any str round-trips, a lone surrogate too


class _Part:
    """One part of a ``ThreadEntry``'s packed bytes (``_parts`` order), read and set as an attribute: a number is
    read straight from the header, a string decoded; setting one re-packs the whole."""

    __slots__ = ("index", "writable")

    def __init__(self, index: int, *, writable: bool = True) -> None:
        self.index = index
        self.writable = writable

    def __get__(self, entry: ThreadEntry | None, owner: type | None = None) -> Any:
        if entry is None:
            return self
        if self.index < 3:
            return _PACKED.unpack_from(entry._packed)[self.index]
        return entry._parts()[self.index]

    def __set__(self, entry: ThreadEntry, value: Any) -> None:
        if not self.writable:
            raise AttributeError("a thread's created_at does not change")
        entry._set(self.index, value)


class ThreadEntry:
    """What the index keeps of every thread, hot or idle: what a listing shows, where its log ends.

    Its ``detail`` (message ids and locations, runs, pending calls, agent state) is held only while
    the thread is hot (``HeldDetails``, an LRU capped in bytes); an idle thread's detail is rebuilt
    from its log on access (one read of the log, no message parsed). So what an idle thread costs does
    not grow with its messages or runs.

    The times, the log's size, the title and the latest run's id live in one ``bytes`` (``_PACKED``):
    as separate objects (three big ints, two strings) they cost about 130 bytes more per idle thread.
    Each is read as an attribute (``_Part``) and a change re-packs the whole (a write to the log costs far more).
    """

    __slots__ = ("thread_id", "last_seq", "message_count", "owner", "agent_id", "last_status", "last_fault",
                 "waiting", "detail", "_packed")

    def __init__(self, thread_id: str, created_at: int, last_seq: int = 0, owner: str | None = None) -> None:
        self.thread_id = thread_id
        self.last_seq = last_seq
        self.message_count = 0  # on the active path
        self.owner = owner
        self.agent_id: str | None = None  # of the latest run
        # the latest run's summary, kept as its parts (its id packed; a ``RunSummary`` per idle thread cost 72 B)
        self.last_status: RunStatus | None = None
        self.last_fault: tuple[str | None, str | None] | None = None  # (cause, error_code), None when both are
        self.waiting = False  # pending calls exist
        self.detail: ThreadDetail | None = None
        self._packed = _PACKED.pack(created_at, 0, 0, 0, 0)

    def __repr__(self) -> str:
        return (f"ThreadEntry({self.thread_id!r}, created_at={self.created_at}, updated_at={self.updated_at}, "
                f"last_seq={self.last_seq}, size={self.size}, title={self.title!r}, "
                f"last_run_id={self.last_run_id!r}, hot={self.detail is not None})")

    def _pack(self, created_at: int, updated_at: int, size: int, title: str | None, run_id: str | None) -> None:
        run = b"" if run_id is None else _utf8(run_id)
        flags = (_HAS_TITLE if title is not None else 0) | (_HAS_RUN if run_id is not None else 0)
        head = _PACKED.pack(created_at, updated_at, size, flags, len(run))
        self._packed = head + run + _utf8(title) if title is not None else head + run

    def _parts(self) -> tuple[int, int, int, str | None, str | None]:
        packed = self._packed
        created_at, updated_at, size, flags, run_len = _PACKED.unpack_from(packed)
        run_end = _PACKED.size + run_len
        run_id = packed[_PACKED.size:run_end].decode("utf-8", "surrogatepass") if flags & _HAS_RUN else None
        title = packed[run_end:].decode("utf-8", "surrogatepass") if flags & _HAS_TITLE else None
        return created_at, updated_at, size, title, run_id

    def _set(self, index: int, value: int | str | None) -> None:
        """Re-pack with part ``index`` of ``_parts`` replaced by ``value``."""
        parts: list[Any] = list(self._parts())
        parts[index] = value
        self._pack(*parts)

    created_at = _Part(0, writable=False)
    updated_at = _Part(1)
    size = _Part(2)  # bytes of the log that hold applied records
    title = _Part(3)
    last_run_id = _Part(4)

    @property
    def last_run(self) -> RunSummary | None:
        run_id = self.last_run_id
        if run_id is None:
            return None
        cause, error_code = self.last_fault or (None, None)
        return RunSummary(run_id, self.last_status, cause, error_code)  # type: ignore[arg-type]

    def set_last_run(self, run: RunRecord | None) -> None:
        if run is None:
            self.last_run_id = self.last_status = self.last_fault = None
            return
        self.last_run_id, self.last_status = run.run_id, run.status
        self.last_fault = None if run.cause is None and run.error_code is None else (run.cause, run.error_code)

    @property
    def file_name(self) -> str:
        return thread_file_name(self.thread_id)

    def record(self, detail: ThreadDetail) -> ThreadRecord:
        return ThreadRecord(
            self.thread_id, self.created_at, copy.deepcopy(detail.state or {}), self.last_seq, self.owner,
            detail.tree.active if detail.tree is not None else 0,
        )

    def summary(self) -> ThreadSummary:
        created_at, updated_at, _, title, run_id = self._parts()
        cause, error_code = self.last_fault or (None, None)
        return ThreadSummary(
            thread_id=self.thread_id,
            title=title,
            agent_id=self.agent_id,
            created_at=created_at,
            updated_at=updated_at,
            message_count=self.message_count,
            last_run=None if run_id is None else RunSummary(
                run_id, self.last_status, cause, error_code),  # type: ignore[arg-type]
            waiting=self.waiting,
            owner=self.owner,
        )

    def take_title(self, raw: list[dict[str, Any]]) -> None:
        """Set the title from the first user text of ``raw`` messages, if the thread has none yet."""
        if not _PACKED.unpack_from(self._packed)[3] & _HAS_TITLE and any(d.get("role") == "user" for d in raw):
            self.title = thread_title(message_from_json(d) for d in raw if d.get("role") == "user")


@attrs.define(weakref_slot=False)
class BranchTree:
    """The branches of a thread that branched (``ThreadDetail.tree``): the branches (branch 0 first, in
    creation order), the active one, and every message's seq, branch and id in seq order, from which
    any branch's path is computed without reading a message body.

    A thread that never branched has no tree (its every message is on branch 0, which is its path):
    it costs nothing more than before branches existed. A thread gets a tree at its first fork (its
    detail is then rebuilt from its log in this ordered form) and keeps it (a log holding a fork
    always replays into a tree).
    """

    branches: list[Branch]
    active: int = 0
    seqs: array = attrs.field(factory=lambda: array("q"))
    branch_of: array = attrs.field(factory=lambda: array("q"))
    ids: list[str] = attrs.field(factory=list)

    @classmethod
    def root(cls, created_at: int) -> BranchTree:
        return cls([Branch(0, None, 0, created_at)])

    def cost(self) -> int:
        return 300 + 200 * len(self.branches) + 24 * len(self.ids)

    def knows(self, branch: int) -> bool:
        return any(b.branch == branch for b in self.branches)

    def limits(self, branch: int | None = None) -> dict[int, int]:
        """The path of ``branch`` (None: the active one) as ``{branch: max seq}``; an unknown branch is a
        ``ValueError``."""
        branch = self.active if branch is None else branch
        if type(branch) is not int or not self.knows(branch):
            raise ValueError(f"no branch {branch!r} on the thread")
        return dict(branch_path(self.branches, branch))

    def add(self, seq: int, branch: int, message_id: str) -> None:
        self.seqs.append(seq)
        self.branch_of.append(branch)
        self.ids.append(message_id)

    def branch_at(self, seq: int) -> int | None:
        """The branch holding the message ``seq``, None if there is none."""
        i = bisect_left(self.seqs, seq)
        return self.branch_of[i] if i < len(self.seqs) and self.seqs[i] == seq else None

    def on_path(self, seq: int, limits: dict[int, int]) -> bool:
        branch = self.branch_at(seq)
        return branch is not None and seq <= limits.get(branch, -1)

    def indexes(self, limits: dict[int, int], after_seq: int = 0, limit: int = -1, upto: int = MAX_SEQ) -> list[int]:
        """Where the path's messages with ``after_seq < seq <= upto`` are (at most ``limit``, all if
        negative), oldest first."""
        seqs, branch_of = self.seqs, self.branch_of
        out: list[int] = []
        i = bisect_right(seqs, after_seq)
        end = bisect_right(seqs, upto) if upto < MAX_SEQ else len(seqs)
        while i < end and len(out) != limit:
            if seqs[i] <= limits.get(branch_of[i], -1):
                out.append(i)
            i += 1
        return out

    def tail_after(self, limits: dict[int, int], keep: int) -> int:
        """The ``after_seq`` whose path messages after it are the path's latest ``keep``."""
        seqs, branch_of = self.seqs, self.branch_of
        found = 0
        i = len(seqs)
        while i > 0 and found < keep:
            i -= 1
            if seqs[i] <= limits.get(branch_of[i], -1):
                found += 1
        return seqs[i] - 1 if found == keep and found else 0

    def path_ids(self, limits: dict[int, int], upto: int = MAX_SEQ) -> set[str]:
        ids = self.ids
        return {ids[i] for i in self.indexes(limits, upto=upto)}


@attrs.define(weakref_slot=False)
class ThreadDetail:
    """A hot thread's full index: message ids and locations, runs, pending calls, agent state.

    ``ids`` are the ids on the thread's active path (all of them for a thread that never branched);
    ``tree`` (None for a thread that never branched) keeps the branches (``BranchTree``).

    ``segments`` is a flat ``array('q')`` of triples ``(frame offset, first seq, count)``: each
    triple says that the messages with seqs ``first .. first + count - 1`` are in the frame starting
    at that offset. Triples are ordered by seq, and so by offset (an import is a thread's first
    record; every later record appends seqs above ``last_seq``).
    """

    state: dict[str, Any] | None = None  # None: the empty state (no dict kept per thread)
    # The message ids: a tuple while there are few (a set costs 216 bytes even when small).
    ids: tuple[str, ...] | set[str] = ()
    segments: array = attrs.field(factory=lambda: array("q"))
    runs: dict[str, RunRecord] = attrs.field(factory=dict)  # insertion order
    pending: tuple[PendingCall, ...] = ()  # commit order
    tree: BranchTree | None = None

    def cost(self) -> int:
        """Roughly the bytes this detail holds (for the hot-thread budget): constant per id, segment
        triple, run and pending call, plus the state's size when there is one and the tree's."""
        state = 0 if self.state is None else 200 + 2 * len(repr(self.state))
        tree = 0 if self.tree is None else self.tree.cost()
        return (400 + 100 * len(self.ids) + 8 * len(self.segments) + 350 * len(self.runs)
                + 350 * len(self.pending) + state + tree)

    @property
    def active(self) -> int:
        return 0 if self.tree is None else self.tree.active

    def path_ids(self, branch: int) -> tuple[str, ...] | set[str]:
        """The ids on the path of ``branch`` (a commit's duplicate check)."""
        if branch == self.active:
            return self.ids
        if self.tree is None:
            raise ValueError(f"no branch {branch!r} on the thread")
        return self.tree.path_ids(self.tree.limits(branch))

    def add_ids(self, ids: Sequence[str]) -> None:
        if isinstance(self.ids, set):
            self.ids.update(ids)
        elif len(self.ids) + len(ids) <= _SMALL_IDS:
            self.ids += tuple(ids)
        else:
            self.ids = {*self.ids, *ids}

    def add_segment(self, offset: int, first: int, count: int) -> None:
        segments = self.segments
        if segments and segments[-3] == offset and segments[-2] + segments[-1] == first:
            segments[-1] += count
        elif len(segments) < 96:  # small: an exact-size copy (extend over-allocates by up to 7 items)
            self.segments = segments + array("q", (offset, first, count))
        else:
            segments.extend((offset, first, count))


class HeldDetails:
    """Which threads keep their detail in memory: an LRU of at most ``budget`` bytes by
    ``ThreadDetail.cost``; evicting a thread drops its detail (its log rebuilds it on the next access).
    No single detail above half the budget stays (with the default 8 MiB, a thread of about 10,000
    messages).

    This bounds the index itself (where a thread's messages sit in its log, its runs), not a cache of
    answers: what admission and history reads are answered from is the hot-thread cache
    (``awaken.ledger.hotcache``)."""

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


@attrs.frozen
class Span:
    """Where a read's messages are: the byte range ``[start, end)`` of the log, the seqs wanted."""

    start: int
    end: int
    first_seq: int
    last_seq: int
    count: int
    whole: bool  # the span is the thread's whole history
    #: the seqs wanted of the range (a path's): None for every one
    wanted: frozenset[int] | None = None


def locate(detail: ThreadDetail, size: int, after_seq: int, limit: int) -> Span | None:
    """The span of up to ``limit`` (all if negative) messages with ``seq > after_seq``, or None
    (``size``: the applied length of the log ``detail`` reflects)."""
    segs = detail.segments
    n = len(segs) // 3
    lo, hi = 0, n
    while lo < hi:  # the first segment whose last seq is > after_seq
        mid = (lo + hi) // 2
        if segs[3 * mid + 1] + segs[3 * mid + 2] - 1 > after_seq:
            hi = mid
        else:
            lo = mid + 1
    if lo == n or limit == 0:
        return None
    first_seq = max(segs[3 * lo + 1], after_seq + 1)
    remaining = limit if limit > 0 else -1
    count = 0
    last_seq = first_seq - 1
    k = lo
    while k < n and remaining != 0:
        from_seq = first_seq if k == lo else segs[3 * k + 1]
        available = segs[3 * k + 1] + segs[3 * k + 2] - from_seq
        take = available if remaining < 0 else min(remaining, available)
        last_seq = from_seq + take - 1
        count += take
        if remaining > 0:
            remaining -= take
        k += 1
    last_offset = segs[3 * (k - 1)]
    m = k
    while m < n and segs[3 * m] == last_offset:
        m += 1
    end = segs[3 * m] if m < n else size
    whole = lo == 0 and first_seq == segs[1] and k == n and last_seq == segs[-2] + segs[-1] - 1
    return Span(segs[3 * lo], end, first_seq, last_seq, count, whole)


def locate_path(detail: ThreadDetail, tree: BranchTree, size: int, indexes: list[int]) -> Span:
    """The span of the messages of a path at ``indexes`` (``BranchTree.indexes``, not empty): the byte
    range from the first to the last of them, the messages of other branches between filtered out."""
    first, last = tree.seqs[indexes[0]], tree.seqs[indexes[-1]]
    span = locate(detail, size, first - 1, indexes[-1] - indexes[0] + 1)
    if span is None or (span.first_seq, span.last_seq) != (first, last):
        raise OSError(errno.EIO, "a ledger file's index does not locate a path's messages")
    wanted = frozenset(tree.seqs[i] for i in indexes)
    return attrs.evolve(span, count=len(indexes), whole=False, wanted=wanted)


def extract(data: bytes, span: Span) -> list[Message]:
    """The messages of ``span`` from ``data`` (the span's bytes of the log), checked against the index."""
    records, valid = decode_frames(data)
    if valid != len(data):
        raise OSError(
            errno.EIO, f"a ledger record at or after offset {span.start + valid} fails its checksum"
        )
    out: list[Message] = []
    wanted = span.wanted
    for _, _, record in records:
        for d in record.get("messages") or ():
            if span.first_seq <= d["seq"] <= span.last_seq and (wanted is None or d["seq"] in wanted):
                out.append(message_from_json(d))
    out.sort(key=lambda m: m.seq)
    if len(out) != span.count or (out and (out[0].seq, out[-1].seq) != (span.first_seq, span.last_seq)):
        raise OSError(errno.EIO, "a ledger file does not hold the messages its index locates there")
    return out


#: where a thread sits in the listing order: ``(updated_at, thread_id)``
listing_key = attrgetter("updated_at", "thread_id")


@attrs.define
class Index:
    threads: dict[str, ThreadEntry] = attrs.field(factory=dict)
    #: run id -> its thread, by the id's hash (the run itself is in the thread's detail): ``holds_run``
    run_threads: RunThreads[ThreadEntry] = attrs.field(factory=RunThreads)
    #: reads an idle thread's detail from its log (the ledger sets it while it opens, in its I/O thread),
    #: so that ``holds_run`` is exact when a run id's hash names an idle thread; None: the run is taken
    #: to be new (live writes: the ledger checked the id before writing, ``FileLedger._run_thread``)
    load: Callable[[ThreadEntry], ThreadDetail] | None = None
    #: every thread, ascending by ``(updated_at, thread_id)`` (``listing_key``; a listing walks it from
    #: the end), and the same per owner: a page costs a bisection and ``limit`` steps, whatever the
    #: thread count (the threads themselves, not key tuples: 56 bytes less per thread)
    order: list[ThreadEntry] = attrs.field(factory=list)
    by_owner: dict[str | None, list[ThreadEntry]] = attrs.field(factory=dict)
    #: the newest ``updated_at`` seen (the write clock continues from it)
    latest: int = 0

    def _unlist(self, thread: ThreadEntry) -> None:
        key = (thread.updated_at, thread.thread_id)
        for keys in (self.order, self.by_owner.get(thread.owner)):
            if keys is not None:
                i = bisect_left(keys, key, key=listing_key)
                if i < len(keys) and keys[i] is thread:
                    del keys[i]
        if thread.owner in self.by_owner and not self.by_owner[thread.owner]:
            del self.by_owner[thread.owner]

    def _list(self, thread: ThreadEntry) -> None:
        insort(self.order, thread, key=listing_key)
        insort(self.by_owner.setdefault(thread.owner, []), thread, key=listing_key)
        self.latest = max(self.latest, thread.updated_at)

    def touch(self, thread: ThreadEntry, updated_at: int, listed: bool = True) -> None:
        """Move the thread to ``updated_at`` in the listing order."""
        if listed:
            self._unlist(thread)
        thread.updated_at = updated_at
        self._list(thread)

    def remove(self, thread_id: str, detail: ThreadDetail | None) -> None:
        """Forget a deleted thread and its runs (``detail``: the thread's, current; None when it
        cannot be had, a lost log: its runs are then found by a scan of every run)."""
        thread = self.threads.pop(thread_id)
        thread.detail = None
        self._unlist(thread)
        if detail is None:
            self.run_threads.discard_thread(thread)
            return
        for run_id in detail.runs:
            self.run_threads.discard(run_id, thread)

    def holds_run(self, run_id: str) -> bool:
        """Whether a thread holds run ``run_id``: a candidate the id's hash names, confirmed by its
        detail (an idle thread's read with ``load``, when set)."""
        for thread in list(self.run_threads.candidates(run_id)):
            detail = thread.detail
            if detail is None and self.load is not None:
                detail = self.load(thread)
            if detail is not None and run_id in detail.runs:
                return True
        return False

    def apply(
        self,
        record: dict[str, Any],
        file_name: str,
        start: int,
        end: int,
        parse: bool = True,
        detail: ThreadDetail | None = None,
        ordered: bool = False,
    ) -> ThreadEntry:
        """Apply one decoded record (live or replayed) found in ``file_name`` at ``[start, end)``.

        ``detail`` is the thread's current detail (default: the one its entry holds); it is updated
        and left on the entry. Live writes validate before they write, so a failure here means a
        corrupt log. Replay parses every message to check it (``parse``); a live write has parsed
        them already. ``ordered``: a detail this record creates keeps a ``BranchTree`` (the log
        holds a fork, or one is about to be written).
        """
        kind = record["type"]
        thread_id = record["thread"]
        if not isinstance(thread_id, str) or thread_file_name(thread_id) != file_name:
            raise CorruptRecord(f"record for thread {thread_id!r} found in {file_name}")
        thread = self.threads.get(thread_id)
        d = detail if detail is not None or thread is None else thread.detail
        if thread is not None and d is None:
            raise RuntimeError(f"thread {thread_id!r} has no detail to apply a record to")
        if kind == "start_run":
            run = run_from_json(record["run"], thread_id if thread is None else thread.thread_id)
            if self.holds_run(run.run_id):
                raise CorruptRecord(f"start_run of run {run.run_id!r} cannot be applied")
            messages = record["messages"]
            new = thread is None
            if thread is None or d is None:
                thread = ThreadEntry(thread_id, run.created_at, owner=record.get("owner"))
                d = ThreadDetail(tree=BranchTree.root(run.created_at) if ordered else None)
            fork = record.get("fork")
            if fork is not None:
                taken, count = self._fork(thread, d, branch_from_json(fork), run)
            else:
                if run.branch != d.active:
                    raise CorruptRecord(f"run {run.run_id!r} starts on branch {run.branch}, not the active one")
                taken, count = d.ids, thread.message_count
            # checks everything before changing the index
            self._append(thread, d, messages, start, parse, run.branch, taken, count)
            self.threads[thread_id] = thread
            last = d.runs.get(thread.last_run_id) if thread.last_run_id is not None else None
            d.runs[run.run_id] = run
            self.run_threads.add(run.run_id, thread)
            if last is None or run.created_at >= last.created_at:
                thread.set_last_run(run)
            thread.agent_id = run.agent_id
            thread.take_title(messages)
            self.touch(thread, record.get("at", run.updated_at), listed=not new)
        elif kind == "commit":
            run_id = record["run"]
            run = d.runs.get(run_id) if d is not None else None
            if thread is None or d is None or run is None or run.thread_id != thread_id:
                raise CorruptRecord(f"commit for unknown run {run_id!r}")
            status = RunStatus(record["status"])
            usage = run.usage + Usage(*record["usage"])
            resolved = set(record["resolved"])
            pending = [p for p in d.pending if p.tool_call_id not in resolved]
            open_calls = {p.tool_call_id for p in pending}
            # a pending call names a message of its own step: share that message's id string
            own = {m["id"]: m["id"] for m in record["messages"]}
            for p in record["pending"]:
                call = pending_from_json(p, thread.thread_id, run.run_id, own)
                if call.tool_call_id in open_calls:
                    raise CorruptRecord(f"tool call {call.tool_call_id!r} is already pending")
                open_calls.add(call.tool_call_id)
                pending.append(call)
            self._append(thread, d, record["messages"], start, parse, run.branch, d.path_ids(run.branch),
                         thread.message_count)
            thread.take_title(record["messages"])
            self.touch(thread, record["updated_at"])
            d.pending = tuple(pending)
            thread.waiting = bool(pending)
            if record.get("state") is not None:
                d.state = record["state"] or None
            self._set_run(thread, d, attrs.evolve(
                run,
                status=status,
                updated_at=record["updated_at"],
                error_code=record["error_code"],
                error_message=record["error_message"],
                cause=record.get("cause"),
                usage=NO_USAGE if usage == NO_USAGE else usage,
                steps=run.steps + record["steps"],
            ))
        elif kind == "import":
            if thread is not None:
                raise CorruptRecord(f"import of existing thread {thread_id!r}")
            t = record["thread_record"]
            thread = ThreadEntry(thread_id, t["created_at"], t["last_seq"])
            d = ThreadDetail(t["state"] or None)
            branches = [branch_from_json(b) for b in record.get("branches") or ()]
            active = t.get("active_branch", 0)
            tree = d.tree = BranchTree.root(thread.created_at) if ordered or branches or active else None
            if tree is not None:
                tree.branches += sorted((b for b in branches if b.branch != 0), key=lambda b: b.branch)
                if not tree.knows(active) or len({b.branch for b in tree.branches}) != len(tree.branches):
                    raise CorruptRecord(f"import of thread {thread_id!r} has an inconsistent tree")
                tree.active = active
            runs = [run_from_json(r, thread_id) for r in record["runs"]]
            if any(self.holds_run(r.run_id) for r in runs) or len({r.run_id for r in runs}) != len(runs):
                raise CorruptRecord(f"import of thread {thread_id!r} repeats a run id")
            if any(r.branch and (tree is None or not tree.knows(r.branch)) for r in runs):
                raise CorruptRecord(f"import of thread {thread_id!r} has a run on a branch it does not have")
            raw = sorted(record["messages"], key=lambda m: m["seq"])
            seen: set[tuple[int, str]] = set()
            for m in raw:
                if parse:  # a malformed message refuses the record here, not at a later read
                    message_from_json(m)
                seq, message_id, branch = m["seq"], m["id"], m.get("branch", 0)
                if (
                    type(seq) is not int
                    or type(message_id) is not str
                    or not 0 < seq <= thread.last_seq
                    or (branch, message_id) in seen
                    or (branch and (tree is None or not tree.knows(branch)))
                ):
                    raise CorruptRecord(f"imported message {message_id!r} (seq {seq}) cannot be applied")
                if d.segments and d.segments[-2] + d.segments[-1] > seq:
                    raise CorruptRecord(f"imported message {message_id!r} repeats seq {seq}")
                seen.add((branch, message_id))
                if tree is None:
                    d.add_ids((message_id,))
                else:
                    tree.add(seq, branch, message_id)
                d.add_segment(start, seq, 1)
            if tree is None:
                thread.message_count = len(raw)
            else:
                on_path = tree.indexes(tree.limits())
                d.ids = {tree.ids[i] for i in on_path}
                if len(d.ids) != len(on_path):
                    raise CorruptRecord(f"import of thread {thread_id!r} repeats an id on its active path")
                thread.message_count = len(on_path)
            d.pending = tuple(pending_from_json(p, thread_id) for p in record["pending"])
            thread.waiting = bool(d.pending)
            self.threads[thread_id] = thread
            for r in runs:
                d.runs[r.run_id] = r
                self.run_threads.add(r.run_id, thread)
            thread.owner = t.get("owner")
            thread.take_title(raw)
            latest = last_run_of(runs)
            thread.agent_id = latest.agent_id if latest else None
            thread.set_last_run(latest)
            self.touch(thread, t.get("updated_at", 0), listed=False)
        elif kind == "recover":
            if thread is None or d is None:
                raise CorruptRecord(f"recovery for unknown thread {thread_id!r}")
            for run_id in record["runs"]:  # the change ``state.recovery`` gave (older records: status, words implied)
                run = d.runs[run_id]
                self._set_run(thread, d, attrs.evolve(
                    run,
                    status=RunStatus(record.get("status", RunStatus.INTERRUPTED.value)),
                    error_code=None,
                    error_message=record.get("error_message", run.error_message),
                    cause=record.get("cause"),
                    updated_at=record["updated_at"],
                ))
        else:
            raise CorruptRecord(f"unknown record type {kind!r}")
        thread.size = end
        thread.detail = d
        return thread

    @staticmethod
    def _set_run(thread: ThreadEntry, detail: ThreadDetail, run: RunRecord) -> None:
        """Replace a run of the thread (same id, same created_at); the listing's last run follows."""
        detail.runs[run.run_id] = run
        if thread.last_run_id == run.run_id:
            thread.set_last_run(run)

    @staticmethod
    def _fork(thread: ThreadEntry, detail: ThreadDetail, branch: Branch,
              run: RunRecord) -> tuple[set[str], int]:
        """Check a fork (``start_run``'s ``fork``) and make its branch the active one; return the ids and
        the count of the new path's messages (what the fork keeps). Changes nothing if it fails."""
        tree = detail.tree
        if tree is None:
            raise CorruptRecord(f"a fork on thread {thread.thread_id!r} replayed without its tree")
        limits = tree.limits()
        fork_seq = branch.fork_seq
        parent = tree.branch_at(fork_seq) if fork_seq else 0
        if (branch.branch != max(b.branch for b in tree.branches) + 1 or run.branch != branch.branch
                or branch.parent != parent or (fork_seq and not tree.on_path(fork_seq, limits))):
            raise CorruptRecord(f"fork of branch {branch.branch} at seq {fork_seq} cannot be applied")
        kept = tree.indexes(limits, upto=fork_seq)
        tree.branches.append(branch)
        tree.active = branch.branch
        return {tree.ids[i] for i in kept}, len(kept)

    @staticmethod
    def _append(thread: ThreadEntry, detail: ThreadDetail, raw: list[dict[str, Any]], offset: int,
                parse: bool, branch: int, taken: Collection[str], count: int) -> None:
        """Record the messages of the frame at ``offset`` on ``branch``: they must continue the thread's
        seqs and not repeat an id of the path they extend (``taken``, holding ``count`` messages of the
        active path when ``branch`` is the active branch).

        Every message is checked (and, when ``parse``, parsed) before the thread changes, so a bad
        one changes nothing.
        """
        batch: set[str] = set()
        seq = thread.last_seq
        for m in raw:
            if parse:
                message_from_json(m)
            seq += 1
            if (type(m["id"]) is not str or m["seq"] != seq or m.get("branch", 0) != branch or m["id"] in taken
                    or m["id"] in batch):
                raise CorruptRecord(f"message {m['id']!r} (seq {m['seq']}) does not follow seq {seq - 1}")
            batch.add(m["id"])
        active = branch == detail.active
        if active and taken is not detail.ids:  # a fork: the active path is now the one it keeps
            detail.ids = taken if isinstance(taken, set) else set(taken)
            thread.message_count = count
        if raw:
            tree = detail.tree
            if tree is not None:
                for m in raw:
                    tree.add(m["seq"], branch, m["id"])
            if active:
                detail.add_ids([m["id"] for m in raw])
                thread.message_count += len(raw)
            detail.add_segment(offset, thread.last_seq + 1, len(raw))
            thread.last_seq = seq


def branched(records: Sequence[tuple[int, int, dict[str, Any]]]) -> bool:
    """Whether a log's records hold a fork or a branched import (its thread's detail keeps a tree)."""
    for _, _, record in records:
        kind = record.get("type")
        if kind == "start_run" and "fork" in record:
            return True
        if kind == "import" and (record.get("branches") or record.get("thread_record", {}).get("active_branch")):
            return True
    return False


def load_detail(data: bytes, file_name: str, thread_id: str, ordered: bool = False) -> ThreadDetail:
    """Rebuild a thread's detail from ``data``, its log's applied bytes (no message is parsed);
    ``ordered``: with a ``BranchTree`` even if the log holds no fork yet (one is about to be written)."""
    records, valid = decode_frames(data)
    if valid != len(data):
        raise OSError(errno.EIO, f"a ledger record at or after offset {valid} fails its checksum")
    scratch = Index()
    ordered = ordered or branched(records)
    try:
        for start, end, record in records:
            scratch.apply(record, file_name, start, end, parse=False, ordered=ordered)
    except (CorruptRecord, KeyError, TypeError, ValueError) as exc:
        raise OSError(errno.EIO, f"a ledger file no longer replays: {exc}") from None
    thread = scratch.threads.get(thread_id)
    if thread is None or thread.size != len(data) or thread.detail is None:
        raise OSError(errno.EIO, "a ledger file does not hold the thread its index says")
    return thread.detail
