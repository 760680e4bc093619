"""Which of a request's message ids a thread has committed, at a cost that follows what the client
added rather than the thread's length (issue 18).

A client that replays its thread's whole history sends, turn after turn, the ids of its previous
request and a few more. A split parse (``awaken.replaymemo``) knows that and gives the request's ids
as an ``AskedIds``: the set it builds on (``base``, the ids of the thread's previous request) and the
ids it adds to it (``added``, none of them in ``base``).

``known_ids(asked, held, holder)`` answers ``asked ∩ held`` (``held``: every id the thread has
committed) and remembers on the thread's ``holder`` (a ledger's hot entry of the thread) the largest
of those sets it found wholly committed, with the very ``held`` set it was found in. The next turn
then asks about ``base`` only through that memory: when ``base`` is the remembered set, or that set
and ids now in ``held``, only the added ids are looked up.

That is sound because a holder's ``held`` set never loses an id while the holder lives: ledgers add
committed ids to it and drop the whole holder when the thread is deleted or its state is unknown. A
remembered set is kept with its ``held`` object and used only against that same object. It is
remembered weakly: once no parse keeps it (the replay memo dropped the thread's request), no request
can be built on it, and the holder keeps nothing of it.

The answer is a ``KnownIds``: the plain frozenset ``asked ∩ held``, which also names the asked set it
holds whole (``whole``), so that a request's scan skips those ids instead of testing each again.
"""

from __future__ import annotations

import weakref
from collections.abc import Collection, Iterable
from typing import Any

import attrs


class AskedIds(frozenset[str]):
    """A scanned request's message ids. Built on the thread's previous request (``on``), it is
    ``base | added`` and remembers both, disjoint; else ``base`` is None and ``added`` empty."""

    __slots__ = ("added", "base")
    base: frozenset[str] | None
    added: frozenset[str]

    def __new__(cls, ids: Iterable[str]) -> AskedIds:
        self = super().__new__(cls, ids)
        self.base = None
        self.added = frozenset()
        return self

    @classmethod
    def on(cls, base: frozenset[str], added: Iterable[str]) -> AskedIds:
        """``base | added`` (``added`` keeps only what ``base`` lacks: a few lookups)."""
        extra = frozenset(added).difference(base)
        self = cls(base.union(extra) if extra else base)
        self.base = base
        self.added = extra
        return self


class KnownIds(frozenset[str]):
    """``asked ∩ held``, and the asked set it holds whole (``whole``: None when none is known)."""

    __slots__ = ("whole",)
    whole: frozenset[str] | None

    def __new__(cls, ids: Iterable[str], whole: frozenset[str] | None) -> KnownIds:
        self = super().__new__(cls, ids)
        self.whole = whole
        return self


@attrs.frozen(eq=False)
class Confirmed:
    """Every id of ``asked`` (weakly held) is in ``held`` (a holder's set of committed ids, which only grows)."""

    held: Collection[str]
    asked: weakref.ref[AskedIds]
    #: how many turns in a row were answered from the confirmation before it (0: it was looked up)
    carried: int = 0

    @classmethod
    def of(cls, held: Collection[str], asked: AskedIds, carried: int = 0) -> Confirmed:
        return cls(held, weakref.ref(asked), carried)


def settled_by(committed: Collection[str], asked: frozenset[str]) -> bool:
    """Whether ``committed`` (a view's known ids) is known to hold all of ``asked.base``: the scan
    that built ``asked`` may then skip the ids it took from ``base``."""
    base = getattr(asked, "base", None)
    return base is not None and getattr(committed, "whole", None) is base


def asked_with(message_ids: Collection[str], carriers: Collection[str]) -> Collection[str]:
    """The ids admission asks about: the request's message ids and the ids of the messages carrying
    its tool calls (``message_ids`` itself when they are among them, as they are for a scanned request)."""
    if not carriers or (isinstance(message_ids, frozenset) and message_ids.issuperset(carriers)):
        return message_ids
    return frozenset(message_ids).union(carriers)


def known_ids(asked: Collection[str], held: Collection[str], holder: Any) -> frozenset[str]:
    """``asked ∩ held`` (``held``: every id the thread committed, held by ``holder``, an object with a
    ``confirmed: Confirmed | None`` attribute this updates)."""
    growing = isinstance(held, (set, frozenset))
    base = asked.base if isinstance(asked, AskedIds) else None
    if isinstance(base, AskedIds) and growing:
        confirmed: Confirmed | None = holder.confirmed
        whole = confirmed.asked() if confirmed is not None and confirmed.held is held else None
        if whole is not None and (base is whole or (base.base is whole and base.added <= held)):
            extra = asked.added.intersection(held)  # type: ignore[union-attr]
            holder.confirmed = Confirmed.of(held, base, confirmed.carried + 1)  # type: ignore[union-attr]
            return KnownIds(base.union(extra) if extra else base, base)
    if isinstance(asked, frozenset):
        known = asked.intersection(held)
    elif growing:
        known = frozenset(held.intersection(asked))  # type: ignore[union-attr]
    else:
        known = frozenset(i for i in held if i in asked)
    if not growing or not isinstance(asked, AskedIds):
        return known
    if len(known) == len(asked):
        holder.confirmed = Confirmed.of(held, asked)
    elif isinstance(base, AskedIds) and len(known) - len(asked.added.intersection(known)) == len(base):
        holder.confirmed = Confirmed.of(held, base)
        return KnownIds(known, base)
    return known
