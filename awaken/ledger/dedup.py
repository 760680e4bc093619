"""Which of a request's message ids a thread has committed, at a cost that follows what the client
added rather than the thread's length (issue 18).

A client that replays its thread's whole history sends, turn after turn, the ids of its previous
request and a few more. A split parse (``awaken.wires.memo``) knows that and gives the request's ids
as an ``AskedIds`` built ``on`` the previous request's: it is a plain frozenset of every id, and it
also says which set it was built on (by that set's ``serial``, a number no other set of this process
has) and which ids it added to it (``added``, none of them in that set). It also copies the same two
facts from the set it was built on (``prior_serial``, ``prior_added``), so one turn can vouch for
the next without any set keeping another alive.

``known_ids(asked, held, holder)`` answers ``asked ∩ held`` (``held``: every id the thread has
committed, kept by the thread's ``holder``, a ledger's hot entry) and remembers on the holder the
serial of the largest asked set it found wholly committed, with the very ``held`` set it was found
in. The next turn then asks about its base only through that memory: when the request was built on
the remembered set, or on a set built on it whose added ids are now in ``held``, only the added ids
are looked up.

That is sound because a holder's ``held`` set never loses an id while the holder lives: ledgers add
committed ids to it and drop the whole holder when the thread is deleted or its state is unknown. A
remembered serial is kept with its ``held`` object and used only against that same object.

With the answer comes the serial of the set the request was built on when all of it is known
committed (``ThreadView.known_whole``), so that the request's scan skips those ids instead of testing
each again (``settled``).
"""

from __future__ import annotations

import itertools
from collections.abc import Collection, Iterable
from typing import Any

import attrs

_serials = itertools.count(1)  # ``next`` on it is atomic under the GIL (parses run in worker threads too)


class AskedIds(frozenset[str]):
    """A scanned request's message ids (see the module docstring); built plainly, ``base_serial`` and
    ``prior_serial`` are None and ``added`` and ``prior_added`` empty."""

    __slots__ = ("added", "base_serial", "prior_added", "prior_serial", "serial")
    serial: int
    base_serial: int | None
    added: frozenset[str]
    prior_serial: int | None
    prior_added: frozenset[str]

    def __new__(cls, ids: Iterable[str]) -> AskedIds:
        self = super().__new__(cls, ids)
        self.serial = next(_serials)
        self.base_serial = self.prior_serial = None
        self.added = self.prior_added = frozenset()
        return self

    @classmethod
    def on(cls, base: AskedIds, added: Iterable[str]) -> AskedIds:
        """``base | added`` (``added`` keeps only what ``base`` lacks: a few lookups)."""
        extra = frozenset(added).difference(base)
        self = cls(base.union(extra) if extra else base)
        self.base_serial = base.serial
        self.added = extra
        self.prior_serial = base.base_serial
        self.prior_added = base.added
        return self


@attrs.frozen(eq=False)
class Confirmed:
    """Every id of the asked set numbered ``serial`` is in ``held`` (a holder's set of committed ids,
    which only grows while the holder lives)."""

    held: Collection[str]
    serial: int
    #: how many turns in a row were answered from a confirmation before this one (0: it was looked up)
    carried: int = 0


def settled(whole: int | None, asked: frozenset[str]) -> bool:
    """Whether the set ``asked`` was built on is the one a view found all committed (``whole``,
    ``ThreadView.known_whole``): the scan that built ``asked`` may then skip the ids it took from it."""
    return whole is not None and getattr(asked, "base_serial", None) == whole


def asked_with(message_ids: Collection[str], carriers: Collection[str]) -> Collection[str]:
    """The ids admission asks about: the request's message ids and the ids of the messages carrying
    its tool calls (``message_ids`` itself when they are among them, as they are for a scanned request)."""
    if not carriers or (isinstance(message_ids, frozenset) and message_ids.issuperset(carriers)):
        return message_ids
    return frozenset(message_ids).union(carriers)


def known_ids(asked: Collection[str], held: Collection[str], holder: Any) -> tuple[frozenset[str], int | None]:
    """``asked ∩ held`` (``held``: every id the thread committed, held by ``holder``, an object with a
    ``confirmed: Confirmed | None`` attribute this updates), and the serial of the set ``asked`` was
    built on when all of it is in ``held`` (else None)."""
    growing = isinstance(held, (set, frozenset))
    if isinstance(asked, AskedIds) and asked.base_serial is not None and growing:
        confirmed: Confirmed | None = holder.confirmed
        if confirmed is not None and confirmed.held is held and (
                asked.base_serial == confirmed.serial
                or (asked.prior_serial == confirmed.serial and asked.prior_added <= held)):  # type: ignore[operator]
            # all of the base is committed: only the added ids are looked up
            missing = asked.added.difference(held)
            holder.confirmed = Confirmed(held, asked.base_serial, confirmed.carried + 1)
            return (asked.difference(missing) if missing else asked), asked.base_serial
    if isinstance(asked, frozenset):
        known = asked.intersection(held)
    elif growing:
        known = frozenset(held.intersection(asked))  # type: ignore[union-attr]
    else:
        known = frozenset(i for i in held if i in asked)
    if not growing or not isinstance(asked, AskedIds):
        return known, None
    if len(known) == len(asked):
        holder.confirmed = Confirmed(held, asked.serial)
        return known, asked.base_serial
    if asked.base_serial is not None and \
            len(known) - len(asked.added.intersection(known)) == len(asked) - len(asked.added):
        holder.confirmed = Confirmed(held, asked.base_serial)
        return known, asked.base_serial
    return known, None
