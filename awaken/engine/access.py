"""Who may see a thread, for every route that is not a run (runs check it at admission).

One rule: ``Principal.may_see(owner)`` (an admin sees every thread, a user only the threads it
started). ``visible_thread`` applies it to a thread id: a thread the caller may not see raises
``UnknownThread``, the same 404 as a thread that does not exist, so ids leak nothing. The owner
comes from ``RunApplication.owner_of`` (the active run's, else the ledger's), so a thread whose
first run is still being admitted is already guarded.
"""

from __future__ import annotations

from awaken.core.errors import UnknownThread
from awaken.core.principal import Principal
from awaken.engine import RunApplication


async def visible_thread(app: RunApplication, principal: Principal, thread_id: str) -> None:
    """Return if ``thread_id`` exists and ``principal`` may see it; else raise ``UnknownThread``."""
    exists, owner = await app.owner_of(thread_id)
    if not exists or not principal.may_see(owner):
        raise UnknownThread(f"no thread {thread_id!r}")
