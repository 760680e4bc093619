"""Thread claims: who may run on a thread now ("one active run per thread"), across processes.

``RunApplication`` keeps its registry of the runs *this* process streams; before it admits a run it
also asks the ledger's ``ThreadClaims`` (``Ledger.claims()``). An embedded ledger (SQLite, files) is
owned by one process, so its claims are ``LocalClaims``: the registry alone decides, nothing is
stored. A ledger shared by several server processes (Postgres) stores each claim in the database
with the claiming process, keeps a lease per process alive from a server-owned task (``serve``),
interrupts the running runs of a process whose lease lapsed (cause ``owner_died``), and carries a
stop request to the process that holds a thread.

A claim carries a token (unique per admitted run): releasing deletes only the claim with that token,
so a late release can never free a thread this process claimed again meanwhile.
"""

from __future__ import annotations

import abc
from collections.abc import Awaitable, Callable

import trio

#: what a process does when another one asks it to stop the run on a thread
StopHandler = Callable[[str], Awaitable[object]]


class ThreadClaims(abc.ABC):
    """The claim authority of one ledger, as one server process sees it."""

    #: this process's name in claims (stable for the process's life, unique among live processes)
    process_id: str

    @abc.abstractmethod
    async def claim(self, thread_id: str, token: str) -> bool:
        """Take the thread for a run of this process; False if another process holds it.

        The caller guarantees this process runs nothing else on the thread (its own registry), so a
        claim this process still holds (a release not yet done) is taken over with the new token.
        Raises ``StoreUnavailable`` when the store cannot answer."""

    @abc.abstractmethod
    async def release(self, thread_id: str, token: str) -> None:
        """Free the thread if the claim is still ``token``'s; never raises (a claim left behind is
        removed by the process's own lease upkeep)."""

    @abc.abstractmethod
    async def holder(self, thread_id: str) -> str | None:
        """The process that holds the thread now, or None."""

    @abc.abstractmethod
    async def request_stop(self, thread_id: str) -> str | None:
        """Ask the process holding the thread to stop its run; returns that process (None if none)."""

    async def serve(self, on_stop: StopHandler, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        """The claims' upkeep for as long as the server runs (started in its nursery): the lease
        heartbeat, the sweep of dead processes, listening for stop requests. None for local claims."""
        task_status.started()

    def live_tokens(self, tokens: Callable[[], frozenset[str]]) -> None:  # noqa: B027 - optional hook
        """Tell the claims where to read the tokens of this process's runs (to drop leaked claims)."""


class LocalClaims(ThreadClaims):
    """One process owns the ledger: its registry of active runs is the whole truth."""

    def __init__(self) -> None:
        self.process_id = "local"

    async def claim(self, thread_id: str, token: str) -> bool:
        return True

    async def release(self, thread_id: str, token: str) -> None:
        return None

    async def holder(self, thread_id: str) -> str | None:
        return None

    async def request_stop(self, thread_id: str) -> str | None:
        return None
