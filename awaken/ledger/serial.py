"""A ledger's one worker thread, its calls combined: the calls that queue while one thread hop runs
share the next hop.

The SQLite and file ledgers run every call in one worker thread (a ``trio.CapacityLimiter`` of one).
Each ``trio.to_thread.run_sync`` is a hop: the loop hands the call to the thread and is woken by its
result, and the next queued call only starts once the loop has run its wake-up and given the limiter
on. Under a burst (200 runs starting together, each with its first write) the calls then go one hop
each, and the hops cost more than the calls: in process, 200 first writes landed after 640 ms, of
which the thread's own work was a third (``bench/REPORT.md``).

``SerialCalls.run(fn)`` is ``trio.to_thread.run_sync(fn, limiter=limiter)``, except that a call made
while a hop is running waits, and the calls waiting when that hop returns go together in the next
one (at most ``LEDGER_CALLS_PER_HOP``), each in the order it arrived, each with its own result or
exception and its own ``contextvars`` context. Nothing else changes: each call still does its own
transaction and its own commit (a backend's group commit still shares the fsyncs), and a call never
runs beside another. The task that started a hop wakes the others with their outcomes; the first
call still waiting then starts the next hop in its own task.

Cancellation is ``run_sync``'s: a call not yet handed to the thread is withdrawn (it never runs), one
in a hop finishes and its caller sees the cancellation at its next checkpoint.

``LEDGER_CALLS_PER_HOP = 1`` (``awaken.runtime.tuning``) gives every call its own hop, as before:
deleting this module means calling ``trio.to_thread.run_sync`` where the backends call ``run``.
"""

from __future__ import annotations

import contextvars
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

import outcome
import trio

from awaken.runtime.tuning import LEDGER_CALLS_PER_HOP

T = TypeVar("T")


class _Lead:
    """What a waiting call is woken with when it is to start the next hop itself."""


LEAD = _Lead()


class _Call(Generic[T]):
    __slots__ = ("context", "fn", "queued", "task")

    def __init__(self, fn: Callable[[], T]) -> None:
        self.fn = fn
        self.context = contextvars.copy_context()
        self.task = trio.lowlevel.current_task()
        self.queued = False

    def __call__(self) -> outcome.Outcome:
        return outcome.capture(self.context.run, self.fn)


def _run_all(calls: list[_Call[Any]]) -> list[outcome.Outcome]:
    """In the worker thread: every call in order, each with its own outcome."""
    return [call() for call in calls]


class SerialCalls:
    """The calls of one worker thread behind ``limiter``, combined into hops (see the module docstring)."""

    def __init__(self, limiter: trio.CapacityLimiter, per_hop: int = LEDGER_CALLS_PER_HOP) -> None:
        self.limiter = limiter
        self.per_hop = per_hop
        self._waiting: deque[_Call[Any]] = deque()
        #: a hop is running, or a woken call is about to start the next
        self._busy = False
        #: hops made, and calls they carried (what a test or the bench looks at)
        self.hops = 0
        self.calls = 0

    async def run(self, fn: Callable[[], T]) -> T:
        """``fn()`` in the worker thread; its result, or its exception raised here."""
        if self.per_hop <= 1:
            return await trio.to_thread.run_sync(fn, limiter=self.limiter)
        await trio.lowlevel.checkpoint_if_cancelled()  # as ``run_sync``: a cancelled caller does not start
        call = _Call(fn)
        if self._busy:
            call.queued = True
            self._waiting.append(call)

            def abort(_: Any) -> trio.lowlevel.Abort:
                if not call.queued:  # in a hop already: it finishes first
                    return trio.lowlevel.Abort.FAILED
                call.queued = False
                self._waiting.remove(call)
                return trio.lowlevel.Abort.SUCCEEDED

            woken = await trio.lowlevel.wait_task_rescheduled(abort)
            if woken is not LEAD:
                return woken  # type: ignore[no-any-return]
        else:
            self._busy = True
        return await self._hop(call)

    async def _hop(self, call: _Call[T]) -> T:
        batch: list[_Call[Any]] = [call]
        while self._waiting and len(batch) < self.per_hop:
            other = self._waiting.popleft()
            other.queued = False
            batch.append(other)
        try:
            with trio.CancelScope(shield=True):  # the other calls ride on this task: it must not drop them
                outcomes = await trio.to_thread.run_sync(_run_all, batch, limiter=self.limiter)
        except BaseException as exc:  # trio itself failed the hop: every call in it fails the same way
            outcomes = [outcome.Error(exc)] * len(batch)
        finally:
            self.hops += 1
            self.calls += len(batch)
            if self._waiting:
                nxt = self._waiting.popleft()
                nxt.queued = False
                trio.lowlevel.reschedule(nxt.task, outcome.Value(LEAD))
            else:
                self._busy = False
        for other, result in zip(batch[1:], outcomes[1:], strict=True):
            trio.lowlevel.reschedule(other.task, result)
        return outcomes[0].unwrap()  # type: ignore[no-any-return]
