"""Group commit: the fsyncs a ledger's commits wait for, shared by every commit that arrives while one
is in flight.

A backend writes a commit without syncing it (its bytes reach the operating system), counts it
(``wrote``, in the writer thread right after the write), and before it acknowledges anything waits
(``durable_to``) until a sync that began after the write has returned. One sync runs at a time, in a
worker thread of its own; the commits written while it runs wait for the next one, which covers
them all. So N commits arriving together cost two syncs, not N, and a lone commit costs one, as
before. A read waits the same way for the commits it saw, so nothing read reports a commit before it
is on disk.

A sync that fails is final: the data it was to make durable may be gone from the page cache, and a
later sync that succeeds would not bring it back, so every wait for a commit that is not durable yet
raises ``StoreUnavailable`` until the ledger is opened again (``reset``).
"""

from __future__ import annotations

from collections.abc import Callable

import trio

from awaken.core.errors import StoreUnavailable


class GroupSync:
    """The commits a backend wrote (``written``), those a sync covered (``durable``), and the one sync
    in flight."""

    def __init__(self, sync: Callable[[], None], what: str) -> None:
        #: makes everything written so far durable (an fsync); runs in a worker thread
        self._sync = sync
        #: names the store in errors
        self.what = what
        #: commits written, in order; ``durable`` of them are covered by a sync that returned
        self.written = 0
        self.durable = 0
        #: syncs done, and calls waiting for one now (what a test or the bench looks at)
        self.syncs = 0
        self.waiting = 0
        self._running: trio.Event | None = None
        self._limiter = trio.CapacityLimiter(1)
        #: why a sync failed (None: none did)
        self.failed: str | None = None

    def reset(self) -> None:
        """The store was opened again: what was written before is durable (its open synced it)."""
        self.durable = self.written
        self.failed = None

    def wrote(self) -> int:
        """Count one commit just written (in the writer thread, after the write returned); its mark."""
        self.written += 1
        return self.written

    async def durable_to(self, mark: int) -> None:
        """Return once the first ``mark`` commits are durable: join the sync in flight, or start the
        next one (covering every commit written when it starts). ``StoreUnavailable`` when a sync failed."""
        self.waiting += 1
        try:
            await self._wait(mark)
        finally:
            self.waiting -= 1

    async def _wait(self, mark: int) -> None:
        while self.durable < mark:
            if self.failed is not None:
                raise StoreUnavailable(f"{self.what} could not make its commits durable: {self.failed}")
            running = self._running
            if running is not None:
                await running.wait()
                continue
            running = self._running = trio.Event()
            target = self.written
            synced = False

            def sync() -> None:
                nonlocal synced
                self._sync()
                synced = True

            try:
                await trio.to_thread.run_sync(sync, limiter=self._limiter)
            except (OSError, StoreUnavailable) as exc:
                self.failed = exc.message if isinstance(exc, StoreUnavailable) else str(exc)
                raise StoreUnavailable(f"{self.what} could not make its commits durable: {self.failed}") from None
            finally:
                if synced:
                    self.syncs += 1
                    self.durable = max(self.durable, target)
                self._running = None
                running.set()
