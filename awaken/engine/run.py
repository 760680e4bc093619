"""``AdmittedRun``: one admitted run (fresh or resumed), the state it needs while it executes, and
the scope that stops it.

``execute`` opens the run's own cancel scope and nursery: the nursery hosts the work the run starts
beside itself (a fresh run's first write, shielded, concurrent with the first model step, so the
write is off the path to the first delta). ``cancel(cause)`` cancels that scope and records why;
a cancellation from outside (the connection's nursery) with no cause recorded is ``client_gone``.
Either way the run is committed ``interrupted`` with its cause before ``execute`` ends, or, when
the store cannot take that commit in time, the outcome waits in ``unsettled`` and the run keeps its
thread until the reconciler has committed it (``settle``).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

import trio

from awaken.core.errors import AwakenError, InputRejected
from awaken.core.events import RunFailed, RunFinished, RunStarted, RunStopped
from awaken.core.messages import Message, Usage
from awaken.engine import commit, outcome, policy, steps
from awaken.engine.limits import UNLIMITED, Slot
from awaken.engine.state import Cause, RunStatus, describe
from awaken.models import ToolSpec
from awaken.wires.protocol import RunRequest, Sink, ToolDecision, new_id

if TYPE_CHECKING:
    from awaken.engine.admission import RunApplication
    from awaken.engine.agents import Agent
    from awaken.ledger.interface import PendingCall
    from awaken.streams.broadcast import RunBroadcast

log = logging.getLogger("awaken.engine")


class AdmittedRun:
    """One admitted run. Built by ``RunApplication.admit``; streamed by ``execute``."""

    __slots__ = ("_cause", "_executing", "_reconciling", "_released", "_scope", "_settled", "_streamed", "agent", "answer_message_id", "app",
                 "broadcast", "claim_token", "claimed", "client_state", "client_tools", "decided", "owner",
                 "owner_known", "history", "ledger", "outcome_refused", "remaining", "replay", "request", "resumed", "run_id", "slot", "start",
                 "start_error", "state", "status", "steps_done", "thread_id", "unsettled", "usage")

    def __init__(self, app: RunApplication, agent: Agent, thread_id: str) -> None:
        self.app = app
        self.ledger = app.ledger
        self.agent = agent
        self.request = RunRequest(thread_id, agent.id)
        self.thread_id = thread_id
        self.run_id = ""
        #: this run's claim on the thread (``ThreadClaims``): its token, and whether it is held
        self.claim_token = new_id("claim")
        self.claimed = False
        #: the run's committed status, as far as this process wrote it
        self.status = RunStatus.RUNNING
        self.resumed = False
        #: the request only repeated committed decisions: the stream starts and finishes, nothing runs
        self.replay = False
        self.history: list[Message] = []
        self.state: dict[str, Any] = {}
        #: the state came from the client and differs from the committed one: it is committed first
        self.client_state = False
        #: tools the client declared for this run (stored with its record; a call to one waits)
        self.client_tools: tuple[ToolSpec, ...] = ()
        self.usage = Usage()
        self.steps_done = 0
        self.answer_message_id = ""
        #: set once a fresh run's record and input are written (None: nothing to write, e.g. a resume)
        self.start: trio.Event | None = None
        self.start_error: AwakenError | None = None
        #: the decided calls of a resume, in pending order, applied when the stream starts
        self.decided: list[tuple[PendingCall, ToolDecision]] = []
        self.remaining: list[PendingCall] = []
        #: a terminal outcome decided but not yet committed (the store was too slow or failed)
        self.unsettled: outcome.Final | None = None
        #: the store refused the last attempt to commit ``unsettled`` (a full disk, a failing ledger), as
        #: opposed to being slow with it: the thread answers ``STORE_UNAVAILABLE`` until it is committed
        self.outcome_refused = False
        #: the run's output for every watcher (set by ``RunApplication.launch``; None when executed bare)
        self.broadcast: RunBroadcast | None = None
        self._scope = trio.CancelScope()
        self._executing = False
        self._reconciling = False
        self._cause: Cause | None = None
        self._released = False
        self._settled = trio.Event()
        self._streamed = False
        #: the thread's owner (None: unowned), known once admission read the thread: its stored owner,
        #: or for a new thread the subject starting it (written with the run's first write)
        self.owner: str | None = None
        self.owner_known = False
        #: the run's place among its caller's executing runs (``[limits]``), given back when it ends or waits
        self.slot: Slot = UNLIMITED

    # -- stopping ------------------------------------------------------------------------------

    def cancel(self, cause: Cause) -> None:
        """Stop the run now; it is committed ``interrupted`` for ``cause`` (the first cause recorded
        wins). Safe to call at any time, also before ``execute`` starts or after it ended."""
        self.blame(cause)
        self._scope.cancel()

    def blame(self, cause: Cause) -> None:
        """Record ``cause`` for a cancellation that will come from outside, without stopping the run."""
        if self._cause is None:
            self._cause = cause

    @property
    def cause(self) -> Cause:
        """Why the run would be interrupted now: the recorded cause, else the client went away."""
        return self._cause or Cause.CLIENT_GONE

    async def settled(self) -> RunStatus:
        """Wait until the run's outcome is committed (or could not be) and it left the registry."""
        await self._settled.wait()
        return self.status

    # -- execution -----------------------------------------------------------------------------

    async def execute(self, sink: Sink) -> RunStatus:
        """Stream the run into ``sink`` and commit its outcome; return the committed status.

        Never raises except a cancellation from outside (after committing ``interrupted``). A run
        stopped by ``cancel`` returns ``INTERRUPTED``; one stopped for ``Cause.STOPPED`` (someone asked,
        the client still listens) ends its stream with ``RunStopped`` once that is committed (or with
        ``STORE_UNAVAILABLE`` when it could not be). Other causes come with the connection's end.
        """
        self._executing = True
        with self._scope:
            async with trio.open_nursery() as nursery:
                if self.start is not None:
                    nursery.start_soon(commit.write_start, self)
                await self._drive(sink)
        if self._scope.cancelled_caught and self._cause is Cause.STOPPED and self._streamed:
            if self.status is RunStatus.INTERRUPTED:
                sink(RunStopped(Cause.STOPPED.value, describe(Cause.STOPPED)))
            elif self.status is RunStatus.RUNNING:
                sink(RunFailed("STORE_UNAVAILABLE", "the run was stopped but that could not be committed"))
        return self.status

    async def _drive(self, sink: Sink) -> None:
        try:
            await trio.lowlevel.checkpoint_if_cancelled()  # stopped before it started: nothing is streamed
            sink(RunStarted(self.thread_id, self.run_id, self.answer_message_id, self.resumed, self.state))
            self._streamed = True
            if self.replay:
                sink(RunFinished(self.thread_id, self.run_id, "completed"))
                return
            if self.resumed:
                await policy.apply_decisions(self, sink)
            if self.remaining:
                outcome.finish_waiting(self, sink, self.remaining)
            else:
                await steps.step_loop(self, sink)
        except trio.Cancelled:
            await outcome.interrupt(self)
            raise
        except AwakenError as exc:
            code = exc.code if not isinstance(exc, InputRejected) else "INTERNAL_ERROR"
            await outcome.fail(self, sink, code, exc.message)
        except Exception:
            log.exception("run %s failed", self.run_id)
            await outcome.fail(self, sink, "INTERNAL_ERROR", "the server failed while running the agent")
        finally:
            self.slot.release()  # ended or waiting: the caller's place is free before its stream ends
            if self.unsettled is None:  # else the thread stays claimed until the outcome is committed
                await self.release()
                if self.status is not RunStatus.RUNNING:
                    self._settled.set()

    async def started(self) -> bool:
        """Wait until the run record is written; False if it could not be."""
        if self.start is not None:
            await self.start.wait()
        return self.start_error is None

    async def release(self) -> None:
        """Free the thread (a no-op after the first call); shielded, so a cancellation cannot skip it."""
        if not self._released:
            self._released = True
            await self.app._release(self)

    def abandon(self) -> None:
        """The run was admitted but never executed: its first write will never happen."""
        if self.start is not None and not self._executing and not self.start.is_set():
            self.start_error = InputRejected("the run never started")
            self.start.set()

    async def settle(self) -> None:
        """Free the thread and wake ``settled`` — unless the outcome still waits for the store: then
        the reconciler does both once it has committed it."""
        if self.unsettled is not None:
            if not self._reconciling:
                self._reconciling = True
                self.app.reconcile(self)
            return
        await self.release()
        self._settled.set()
