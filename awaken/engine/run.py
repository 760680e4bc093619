"""``AdmittedRun``: one admitted run (fresh or resumed) as it executes, and the scope that stops it.
Its data (the frozen spec, the progress, the ``RunState``) is ``rundata.RunBase``'s.

``execute`` opens the run's own cancel scope. A fresh run's first write (shielded) runs beside it as a
task of the nursery that hosts the run (the server's, or one ``execute`` opens when given none),
concurrent with the first model step: begun once the run's first output was written out, so the write
is off the path to the first delta, and finished before anything the run commits after it (every commit
waits for it: ``RunBase.started``). ``cancel(cause)`` cancels that scope and records why;
a cancellation from outside (the connection's nursery) with no cause recorded is ``client_gone``.
Either way the run is committed ``interrupted`` with its cause before ``execute`` ends, or, when
the store cannot take that commit in time, the outcome stays pending in its ``RunState`` and the
run keeps its thread until the reconciler has committed it (``settle``).
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING

import trio

from awaken.core.errors import AwakenError, InputRejected
from awaken.core.events import (
    ReasoningDelta,
    RunFailed,
    RunFinished,
    RunStarted,
    RunStopped,
    TextDelta,
    ToolCallStart,
)
from awaken.engine.commit import apply, write_start
from awaken.engine.outcome import fail, finish_waiting, interrupt
from awaken.engine.policy import decided
from awaken.engine.rundata import RunBase
from awaken.engine.state import Cause, RunStatus, describe
from awaken.engine.steps import step_loop
from awaken.wires.protocol import Sink

if TYPE_CHECKING:
    from awaken.engine.agents import Agent
    from awaken.ledger.interface import Ledger
    from awaken.tools import ToolRegistry

log = logging.getLogger("awaken.engine")
#: how long a fresh run's first write waits for the run's first model output before it starts anyway
#: (s): a model still waiting for its provider then has the write done meanwhile
FIRST_WRITE_WAIT = 0.005
#: scheduler passes a fresh run's first write gives, after the first output, to the tasks that write it out
WRITER_PASSES = 2
#: the events that are a model's first output
_OUTPUT = (TextDelta, ReasoningDelta, ToolCallStart)


#: the causes of a stop someone asked for while the client still listens: its stream ends with the
#: protocol's terminal event for a stop (``RunStopped``), not with the connection
ASKED_TO_STOP = frozenset({Cause.STOPPED, Cause.SUPERSEDED})


class AdmittedRun(RunBase):
    """One admitted run. Built by ``RunApplication.admit``; streamed by ``execute``."""

    __slots__ = ("_draining", "_executing", "_first_output", "_reconcile", "_reconciling", "_release", "_released",
                 "_scope", "_streamed")

    def __init__(self, ledger: Ledger, tools: ToolRegistry, agent: Agent, thread_id: str, *,
                 release: Callable[[AdmittedRun], Awaitable[None]],
                 reconcile: Callable[[AdmittedRun], None]) -> None:
        super().__init__(ledger, tools, agent, thread_id)
        #: the registry's side: free the thread; hand a run whose outcome waits for the store over
        self._release = release
        self._reconcile = reconcile
        self._scope = trio.CancelScope()
        self._executing = False
        self._reconciling = False
        self._released = False
        self._streamed = False
        self._draining = False
        #: set at the run's first model output (a fresh run's first write waits for it); None after
        self._first_output: trio.Event | None = None

    # -- stopping ------------------------------------------------------------------------------

    def cancel(self, cause: Cause) -> None:
        """Stop the run now; it is committed ``interrupted`` for ``cause`` (the first cause recorded
        wins). Safe to call at any time, also before ``execute`` starts or after it ended."""
        self.blame(cause)
        self._scope.cancel()
        if self._first_output is not None:  # the run's first write waits no longer
            self._first_output.set()

    def blame(self, cause: Cause) -> None:
        """Record ``cause`` for a cancellation that will come from outside, without stopping the run."""
        self.runstate.blame(cause)

    def drain(self) -> None:
        """The server is draining: the run stops at its next step boundary, committed ``interrupted``
        for ``shutdown``; one that completes or starts waiting first keeps that outcome."""
        self.blame(Cause.SHUTDOWN)
        self._draining = True

    async def step_boundary(self) -> None:
        """A step was committed and another would follow: a draining run stops here."""
        if self._draining:
            self.cancel(Cause.SHUTDOWN)
            await trio.lowlevel.checkpoint()  # the cancellation lands here, between two steps

    @property
    def reconciling(self) -> bool:
        """Its outcome's own commit gave up (the store was slow or failing): the reconciler commits it."""
        return self._reconciling

    async def settled(self) -> RunStatus:
        """Wait until the run's outcome is committed (or could not be) and it left the registry."""
        await self._settled.wait()
        return self.status

    # -- execution -----------------------------------------------------------------------------

    async def execute(self, sink: Sink, nursery: trio.Nursery | None = None) -> RunStatus:
        """Stream the run into ``sink`` and commit its outcome; return the committed status. A fresh
        run's first write is a task of ``nursery`` (the one hosting the run; by default one of its own).

        Never raises except a cancellation from outside (after committing ``interrupted``). A run
        stopped by ``cancel`` returns ``INTERRUPTED``; one stopped for ``Cause.STOPPED`` (someone asked,
        the client still listens) ends its stream with ``RunStopped`` once that is committed (or with
        ``STORE_UNAVAILABLE`` when it could not be), and so does one stopped for ``Cause.SUPERSEDED`` (new
        input took the thread: the agent's ``on_new_input = "interrupt"``). Other causes come with the
        connection's end.
        """
        self._executing = True
        self.runstate.begin()
        if self.start is not None and nursery is None:
            async with trio.open_nursery() as own:
                return await self.execute(sink, own)
        driven = sink
        if self.start is not None:
            assert nursery is not None
            self._first_output = trio.Event()
            nursery.start_soon(self._first_write, self._first_output)
            driven = _Signalling(sink, self._first_output)
        # the run itself, inline (not a helper coroutine: every frame on a run's stack stays alive with it)
        with self._scope:
            try:
                await trio.lowlevel.checkpoint_if_cancelled()  # stopped before it started: nothing is streamed
                driven(RunStarted(self.thread_id, self.run_id, self.answer_message_id, self.resumed, self.state))
                self._streamed = True
                if self.replay:
                    driven(RunFinished(self.thread_id, self.run_id, "completed"))
                else:
                    if self.resumed:
                        await apply(self, driven, await decided(self, driven))
                    if self.status is RunStatus.WAITING:
                        finish_waiting(self, driven, self.spec.remaining)
                    else:
                        await step_loop(self, driven)
            except trio.Cancelled:
                await interrupt(self)
                raise
            except AwakenError as exc:
                code = exc.code if not isinstance(exc, InputRejected) else "INTERNAL_ERROR"
                await fail(self, driven, code, exc.message)
            except Exception:
                log.exception("run %s failed", self.run_id)
                await fail(self, driven, "INTERNAL_ERROR", "the server failed while running the agent")
            finally:
                self.slot.release()  # ended or waiting: the caller's place is free before its stream ends
                if self.unsettled is None:  # else the thread stays claimed until the outcome is committed
                    await self.release()
                    if self.status is not RunStatus.RUNNING:
                        self.runstate.settle()
        cause = self.runstate.cause
        if self._scope.cancelled_caught and cause in ASKED_TO_STOP and self._streamed:
            if self.status is RunStatus.INTERRUPTED:
                sink(RunStopped(cause.value, describe(cause)))
            elif self.status is RunStatus.RUNNING:
                sink(RunFailed("STORE_UNAVAILABLE", "the run was stopped but that could not be committed"))
        return self.status

    async def _first_write(self, first_output: trio.Event) -> None:
        """A fresh run's first write (``commit.write_start``), begun once the run's first model output
        went to its sink and the tasks that woke for it (the transports writing it out) had
        ``WRITER_PASSES`` scheduler passes, or after ``FIRST_WRITE_WAIT`` at the latest (its model waits
        for its provider). Its work in the ledger's thread then never comes between a run and its first
        delta on the server's CPU. A live delta acknowledges nothing, so the
        write need not precede it; it precedes whatever the run commits next (``run.started``), and so
        every terminal event. A run cancelled meanwhile is still written (its outcome is committed
        after it)."""
        try:
            with trio.move_on_after(FIRST_WRITE_WAIT):
                await first_output.wait()
                for _ in range(WRITER_PASSES):
                    await trio.lowlevel.cancel_shielded_checkpoint()
        finally:
            self._first_output = None
            await write_start(self)  # shielded

    async def release(self) -> None:
        """Free the thread (a no-op after the first call); shielded, so a cancellation cannot skip it."""
        if not self._released:
            self._released = True
            await self._release(self)

    def abandon(self) -> None:
        """The run was admitted but never executed: its first write will never happen."""
        if self.start is not None and not self._executing and not self.start.is_set():
            self.start_error = InputRejected("the run never started")
            self.start.set()

    async def settle(self) -> None:
        """Free the thread and settle the run (``settled`` wakes) — unless the outcome still waits for
        the store: then the reconciler does both once it has committed it."""
        if self.unsettled is not None:
            if not self._reconciling:
                self._reconciling = True
                self._reconcile(self)
            return
        await self.release()
        self.runstate.settle()


class _Signalling:
    """``sink``, setting ``first_output`` at the run's first model output (text, reasoning or a tool
    call) and keeping it no longer. It refers to no run: the run's parts hold the sink, and a sink
    holding the run back would make each run a reference cycle."""

    __slots__ = ("first_output", "sink")

    def __init__(self, sink: Sink, first_output: trio.Event) -> None:
        self.sink = sink
        self.first_output: trio.Event | None = first_output

    def __call__(self, event: object) -> None:
        self.sink(event)
        if self.first_output is not None and isinstance(event, _OUTPUT):
            self.first_output.set()
            self.first_output = None
