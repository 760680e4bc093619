"""Who may see a thread: the one rule, for every route and for the engine.

``may_see(principal, owner)`` is the rule (pure): an admin sees every thread, a user only the threads
it started, never an unowned one (created before auth was on). ``[auth] mode = "none"`` gives every
request the ``anonymous`` principal, a single-user server's: it sees every thread, as an admin does.

``visible_thread`` applies it to a thread id: a thread the caller may not see raises
``UnknownThread``, the same 404 as a thread that does not exist, so ids leak nothing. The owner comes
from ``RunApplication.owner_of`` (the active run's, else the ledger's), so a thread whose first run is
still being admitted is already guarded. Admission (``RunApplication.admit``) asks ``may_see`` before
anything else is said about a thread; rejoin and the CopilotKit ``connect`` and ``stop`` ask it too.

The principal is a required argument everywhere it is asked for (here, admission, the exchange,
rejoin): there is no default principal, so a caller that forgets it fails (``TypeError``) instead of
seeing everything.
"""

from __future__ import annotations

from typing import Protocol

from awaken.core.errors import UnknownThread
from awaken.core.principal import Principal


class Owners(Protocol):
    """What ``visible_thread`` asks of the engine (``RunApplication``)."""

    async def owner_of(self, thread_id: str) -> tuple[bool, str | None]: ...


def sees_every_thread(principal: Principal) -> bool:
    """Whether ``principal`` sees every thread: an admin, and ``anonymous`` (auth is off)."""
    return principal.role in ("admin", "anonymous")


def may_see(principal: Principal, owner: str | None) -> bool:
    """Whether a thread owned by ``owner`` exists for ``principal``: an admin (or anonymous) sees every
    thread, a user only the threads it started (never an unowned one)."""
    return sees_every_thread(principal) or (owner is not None and owner == principal.subject)


async def visible_thread(app: Owners, principal: Principal, thread_id: str) -> None:
    """Return if ``thread_id`` exists and ``principal`` may see it; else raise ``UnknownThread``."""
    exists, owner = await app.owner_of(thread_id)
    if not exists or not may_see(principal, owner):
        raise UnknownThread(f"no thread {thread_id!r}")
