"""The one rule for client-chosen ids (thread, run, message and tool call ids), checked at the door.

An id is 1 to ``MAX_ID_LENGTH`` characters, all printable (no control characters or line breaks),
without leading or trailing whitespace, not starting with ``/``, and not ``.`` or ``..`` (``/``
inside an id is allowed: the history routes take the rest of the path and never merge slashes). Every id that passes can be put in a
URL path segment (percent-encoded) and read back on every route; a
request carrying one that does not is refused ``INVALID_ID`` before anything is written.

Also here: ``uncommitted``, which of a request's message ids a dedup answer leaves new, in request order;
``interned``, the one copy of each id that the hot-thread cache and the replay memo share; and
``AllBut``, a dedup answer kept as the ids asked minus the few not committed (no copy of the thousands
that are); ``IdSet``, a request's ids kept as the set of the history it replays plus its few new ones
(no copy of the history's).
"""

from __future__ import annotations

import itertools
import sys
from collections.abc import Collection, Iterable, Iterator, Sequence, Set
from typing import Any

from awaken.core.errors import InputRejected

MAX_ID_LENGTH = 256


def id_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable id, or None."""
    if not 1 <= len(value) <= MAX_ID_LENGTH:
        return f"must be 1 to {MAX_ID_LENGTH} characters long"
    if not value.isprintable():
        return "must be printable (no control characters or line breaks)"
    if value != value.strip():
        return "must not start or end with whitespace"
    if value.startswith("/"):
        return "must not start with /"
    if value in (".", ".."):
        return "must not be . or .."
    return None


def check_id(field: str, value: str | None) -> None:
    """Raise ``InputRejected`` (``INVALID_ID``) naming ``field`` when ``value`` breaks the rule."""
    if value is not None and (problem := id_problem(value)):
        raise InputRejected(f"{field} {value[:64]!r} is not an acceptable id: it {problem}", code="INVALID_ID")


def check_request_ids(thread_id: str, run_id: str | None, message_ids: list[str | None]) -> None:
    """The ids a run request would commit: its thread, its proposed run and its new messages."""
    check_id("threadId", thread_id)
    check_id("runId", run_id)
    for message_id in message_ids:
        check_id("message id", message_id)


#: at most this many new ids are looked for from the end of a request (else one pass over all of them)
_FEW_NEW = 8


def uncommitted(ids: Sequence[str], id_set: Set[str], committed: Collection[str]) -> list[int]:
    """The indexes ``k`` of ``ids`` (unique, ``id_set`` their set) whose id is not in ``committed``, in order.

    A replayed history is mostly committed and its new messages are its last: the new ids are found by
    a set difference (the sets' tables hold each id's hash, and the dedup's answer holds the request's
    own id objects, so no id is read) and then looked for from the end. A request of thousands of
    messages costs tens of microseconds, not a hash read of each id (cold in the caches right after its
    body went through them)."""
    if not committed:
        return list(range(len(ids)))
    if len(id_set) != len(ids):  # not unique: one pass decides
        return [k for k, i in enumerate(ids) if i not in committed]
    if type(committed) is AllBut:  # the asked ids but a few: the request's new ids are those few
        asked, missing = committed.asked, committed.missing
        new = frozenset(i for i in missing if i in id_set)
        if asked is not id_set:
            new = new.union(id_set.difference(asked))
    else:
        new = id_set.difference(committed)
    if not new:
        return []
    if len(new) > _FEW_NEW:
        return [k for k, i in enumerate(ids) if i in new]
    found: list[int] = []
    for k in range(len(ids) - 1, -1, -1):
        if ids[k] in new:
            found.append(k)
            if len(found) == len(new):
                break
    found.reverse()
    return found


def interned(ids: Iterable[str]) -> Iterator[str]:
    """``ids`` as the process's one copy of each (``sys.intern``). The hot-thread cache keeps its committed
    ids so, and the replay memo the ids of a history it keeps: the dedup of a replayed history (a set
    intersection of thousands of ids) then finds each id by its pointer and never reads the strings
    themselves (two cache misses per id when they are distinct copies). Paid once per id kept: when a
    thread turns hot, when a message is committed, when the memo first keeps a history."""
    return map(sys.intern, ids)


class AllBut(Set[str]):
    """The ids of ``asked`` but those of ``missing`` (a subset of it): which of a request's ids a thread
    holds, as the hot-thread cache answers it. A replayed history asks about thousands of ids, all
    committed but its new ones; the difference finds those few without touching an id object, where
    the intersection (a set of thousands, each id's reference counted) costs half a millisecond."""

    __slots__ = ("asked", "missing")

    def __init__(self, asked: Set[str], missing: frozenset[str]) -> None:
        self.asked = asked
        self.missing = missing

    def __contains__(self, value: Any) -> bool:
        return value in self.asked and value not in self.missing

    def __len__(self) -> int:
        return len(self.asked) - len(self.missing)

    def __iter__(self) -> Iterator[str]:
        missing = self.missing
        return iter(self.asked) if not missing else (i for i in self.asked if i not in missing)

    def __repr__(self) -> str:
        return f"AllBut({len(self.asked)} asked, missing {sorted(self.missing)!r})"

    __hash__ = Set._hash

    @classmethod
    def _from_iterable(cls, ids: Iterable[str]) -> frozenset[str]:  # what ``&``, ``|`` and ``-`` build
        return frozenset(ids)


#: an ``IdSet`` with more new ids than this is copied into one set
MAX_EXTRA = 256


class IdSet(Set[str]):
    """The ids of a request that replays a history: the set the replay memo keeps of that history
    (``base``, thousands of ids, one object from turn to turn) and the few the request adds (``extra``,
    disjoint from it). Built without copying the history's set (a union touches each id's reference
    count, cold right after the body); the hot-thread cache checks ``base`` against a thread once
    (``HotThread.covered``) and then only ``extra``. It answers what a frozenset answers, as one."""

    __slots__ = ("base", "extra")

    def __init__(self, base: frozenset[str], extra: frozenset[str]) -> None:
        self.base = base
        self.extra = extra

    @classmethod
    def of(cls, head: Set[str], added: Iterable[str]) -> Set[str]:
        """``head`` with ``added``: an ``IdSet`` on ``head``'s base (a frozenset copy once its new ids
        are more than ``MAX_EXTRA``); ``head`` itself when nothing is added."""
        base, extra = (head.base, head.extra) if type(head) is IdSet else (head, frozenset())
        more = frozenset(added)
        if not more or more <= extra:
            return head
        extra = extra.union(more.difference(base))
        if len(extra) > MAX_EXTRA:
            return frozenset(base).union(extra)
        return cls(base if type(base) is frozenset else frozenset(base), extra)

    def __contains__(self, value: Any) -> bool:
        return value in self.base or value in self.extra

    def __len__(self) -> int:
        return len(self.base) + len(self.extra)

    def __iter__(self) -> Iterator[str]:
        return itertools.chain(self.base, self.extra)

    def __repr__(self) -> str:
        return f"IdSet({len(self.base)} + {sorted(self.extra)!r})"

    __hash__ = Set._hash

    @classmethod
    def _from_iterable(cls, ids: Iterable[str]) -> frozenset[str]:
        return frozenset(ids)

    def difference(self, other: Iterable[str]) -> frozenset[str]:
        parts = _parts(other)
        return self.base.difference(*parts).union(self.extra.difference(*parts))

    def intersection(self, other: Iterable[str]) -> frozenset[str]:
        found: set[str] = set()
        for part in _parts(other):
            found.update(self.base.intersection(part), self.extra.intersection(part))
        return frozenset(found)

    def union(self, *others: Iterable[str]) -> frozenset[str]:
        return self.base.union(self.extra, *others)


def _parts(ids: Iterable[str]) -> tuple[Set[str], ...]:
    """``ids`` as built-in sets whose union it is (an ``IdSet``'s two, a set itself, else one copy)."""
    if type(ids) is IdSet:
        return ids.base, ids.extra
    return (ids,) if isinstance(ids, set | frozenset) else (frozenset(ids),)
