"""``Flag``: a one-way signal tasks can wait for, as ``trio.Event`` is, whose event is made only for a
task that waits.

A run and a stream's watcher each carry several such signals (a run's first write done, a run settled, a
watcher done); most are set and never waited for. A ``trio.Event`` with its parking lot is about 216
bytes; a ``Flag`` nobody waits on is two slots.
"""

from __future__ import annotations

import trio


class Flag:
    """``set``, ``is_set`` and ``await wait()``, as ``trio.Event``'s."""

    __slots__ = ("_event", "_set")

    def __init__(self) -> None:
        self._set = False
        self._event: trio.Event | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if self._set:
            return
        self._set = True
        event, self._event = self._event, None  # its waiters hold it; nothing else needs it
        if event is not None:
            event.set()

    async def wait(self) -> None:
        if self._set:
            await trio.lowlevel.checkpoint()
            return
        if self._event is None:
            self._event = trio.Event()
        await self._event.wait()
