"""``Flag``: a one-way signal tasks can wait for, as ``trio.Event`` is, whose event is made only for a
task that waits. ``Wakeup``: one task's wait to be woken, as a ``trio.lowlevel.ParkingLot`` with at
most one parked task is.

A run and a stream's watcher each carry several such signals (a run's first write done, a run settled, a
watcher done); most are set and never waited for. A ``trio.Event`` with its parking lot is about 216
bytes; a ``Flag`` nobody waits on is two slots.

A stream's frame buffer is waited on by its one writer, again and again: a ``ParkingLot`` keeps its
parked tasks in an ``OrderedDict`` (about 500 bytes per open stream with the lot object); a ``Wakeup``
is one slot.
"""

from __future__ import annotations

from collections.abc import Awaitable

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


class Wakeup:
    """``await wait()`` until ``wake()``, for one waiting task at a time (a second is a bug: it raises).
    True while a task waits. A cancelled wait leaves as ``ParkingLot.park`` does."""

    __slots__ = ("_task",)

    def __init__(self) -> None:
        self._task: trio.lowlevel.Task | None = None

    def __bool__(self) -> bool:
        return self._task is not None

    def wake(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    async def wait(self) -> None:
        await self.waiting()

    def waiting(self) -> Awaitable[None]:
        """``wait()`` without a frame of its own: trio's wait, registered for the calling task, which
        awaits it at once (a stream's writer waits here for as long as its stream is idle)."""
        if self._task is not None:
            raise RuntimeError("a Wakeup is waited on by one task at a time")
        self._task = trio.lowlevel.current_task()
        return trio.lowlevel.wait_task_rescheduled(self._abort)  # noqa: ASYNC105 (the caller awaits it)

    def _abort(self, _: object) -> trio.lowlevel.Abort:
        self._task = None
        return trio.lowlevel.Abort.SUCCEEDED
