"""The one rule for client-chosen ids (thread, run, message and tool call ids), checked at the door.

An id is 1 to ``MAX_ID_LENGTH`` characters, all printable (no control characters or line breaks),
without leading or trailing whitespace, not starting with ``/``, and not ``.`` or ``..`` (``/``
inside an id is allowed: the history routes take the rest of the path and never merge slashes). Every id that passes can be put in a
URL path segment (percent-encoded) and read back on every route; a
request carrying one that does not is refused ``INVALID_ID`` before anything is written.

Also here: ``uncommitted``, which of a request's message ids a dedup answer leaves new, in request order;
``interned``, the one copy of each id that the hot-thread cache and the replay memo share; and
``AllBut``, a dedup answer kept as the ids asked minus the few not committed (no copy of the thousands
that are).
"""

from __future__ import annotations

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
        new = missing.intersection(id_set) if asked is id_set else \
            id_set.difference(asked).union(missing.intersection(id_set))
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

    def __init__(self, asked: frozenset[str], missing: frozenset[str]) -> None:
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
