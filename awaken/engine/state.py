"""Rule 1: every run status, every legal change between them, why a run was interrupted, and the one
object that changes a run's status, cause and settled flag, live here.

The ledger stores a run's status; ``TRANSITIONS`` decides which changes are legal (in the manner of
h11's ``_state.py``). ``RunState`` is the only code that changes a run's status: the engine asks it
for the ``Change`` of every commit path (a step, a resume, a superseded waiting run, the final or
interrupted outcome, a failure) *before* it writes, and tells it once the ledger took it, so an
illegal change raises ``IllegalTransition`` and nothing is committed. A replay (nothing runs) and a
resume (the committed ``waiting`` run) start here too. Crash recovery in every backend writes the
``Change`` that ``recovery(cause)`` gives it, from the same table.

Theory of operation::

    RUNNING ──step committed with pending calls──▶ WAITING ──all calls decided──▶ RUNNING
    RUNNING ──final answer committed───────────▶ COMPLETED
    RUNNING ──model/tool/store failure─────────▶ FAILED
    RUNNING ──cancelled (a Cause)──────────────▶ INTERRUPTED
    WAITING ──new user input supersedes it─────▶ INTERRUPTED (Cause.SUPERSEDED)
    (process crash while RUNNING) ──ledger reopen──▶ INTERRUPTED (Cause.SERVER_RESTART)

WAITING is a committed state, not a task: nothing in memory belongs to a waiting run.

An interruption always carries its ``Cause``; no other status does. The committed run records the
cause (``Commit.cause``) and says it in words (``error_message``, from ``describe``).
"""

from __future__ import annotations

import enum
from collections.abc import Callable
from typing import Protocol

import attrs

from awaken.telemetry.metrics import NO_RUN_METRICS, RunMetrics


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


class Cause(enum.StrEnum):
    """Why a run was interrupted."""

    #: the client disconnected (also: any cancellation from outside with no cause recorded)
    CLIENT_GONE = "client_gone"
    #: the client read too slowly: the transport's outgoing buffer overflowed
    CLIENT_TOO_SLOW = "client_too_slow"
    #: a frame was larger than the transport may send
    FRAME_TOO_LARGE = "frame_too_large"
    #: the server shut down while the run streamed
    SHUTDOWN = "shutdown"
    #: new input arrived while the run waited for tool results or decisions, or while it streamed for an
    #: agent whose ``on_new_input`` is ``interrupt``
    SUPERSEDED = "superseded"
    #: someone asked to stop the run (``RunApplication.stop``)
    STOPPED = "stopped"
    #: the ledger failed under the run
    STORE_FAILURE = "store_failure"
    #: the process that owned the run died (another process noticed)
    OWNER_DIED = "owner_died"
    #: the ledger found the run still running when it was opened
    SERVER_RESTART = "server_restart"


#: a cause in words: what the committed run's ``error_message`` says
CAUSE_MESSAGES: dict[Cause, str] = {
    Cause.CLIENT_GONE: "the client disconnected",
    Cause.CLIENT_TOO_SLOW: "the client read the stream too slowly",
    Cause.FRAME_TOO_LARGE: "a frame was larger than the transport allows",
    Cause.SHUTDOWN: "the server shut down",
    Cause.SUPERSEDED: "superseded by new input",
    Cause.STOPPED: "stopped on request",
    Cause.STORE_FAILURE: "the ledger failed",
    Cause.OWNER_DIED: "the process running it died",
    Cause.SERVER_RESTART: "the server restarted while it ran",
}


#: the reason an answer cut off by a failure is marked with (an interruption's is its cause's value)
INCOMPLETE_FAILED = "failed"


def describe(cause: Cause) -> str:
    """The committed ``error_message`` of a run interrupted for ``cause``."""
    return CAUSE_MESSAGES[cause]


TRANSITIONS: dict[RunStatus, frozenset[RunStatus]] = {
    RunStatus.RUNNING: frozenset(
        {RunStatus.RUNNING, RunStatus.WAITING, RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.INTERRUPTED}
    ),
    RunStatus.WAITING: frozenset({RunStatus.RUNNING, RunStatus.WAITING, RunStatus.INTERRUPTED}),
    RunStatus.COMPLETED: frozenset(),
    RunStatus.FAILED: frozenset(),
    RunStatus.INTERRUPTED: frozenset(),
}

TERMINAL: frozenset[RunStatus] = frozenset(s for s, nxt in TRANSITIONS.items() if not nxt)


class IllegalTransition(RuntimeError):
    """A run status change the table does not allow (a bug in the caller, never a client error)."""


def transition(current: RunStatus, new: RunStatus, cause: Cause | None = None) -> RunStatus:
    """The status a run moves to from ``current``: ``new``, if the table allows it.

    Raises ``IllegalTransition`` for a pair the table does not hold, for an interruption without a
    cause, and for a cause given to any other status. Callers commit only what this returned.
    """
    if new not in TRANSITIONS[current]:
        raise IllegalTransition(f"run cannot go from {current.value} to {new.value}")
    if (new is RunStatus.INTERRUPTED) != (cause is not None):
        raise IllegalTransition(
            f"run cannot go from {current.value} to {new.value} "
            + ("without a cause" if cause is None else f"with a cause ({cause.value})")
        )
    return new


@attrs.frozen
class Change:
    """One legal status change, as the ledger writes it: from ``previous`` to ``status``, with the
    interruption's ``cause`` and the words for it (``error_message``), or a failure's ``error_code``.

    Only ``RunState.change`` and ``recovery`` make one (both ask the table first)."""

    previous: RunStatus
    status: RunStatus
    cause: Cause | None = None
    error_code: str | None = None
    error_message: str | None = None

    @property
    def cause_value(self) -> str | None:
        """The cause as the ledger stores it (its value), or None."""
        return self.cause.value if self.cause is not None else None

    @property
    def incomplete_reason(self) -> str | None:
        """What an answer cut off by this change is marked with (``IncompletePart.reason``): an
        interruption's cause value, ``failed`` for a failure; None for every change that does not end
        a run early."""
        if self.status is RunStatus.INTERRUPTED:
            return self.cause_value
        return INCOMPLETE_FAILED if self.status is RunStatus.FAILED else None


def _change(current: RunStatus, new: RunStatus, cause: Cause | None, error_code: str | None,
            error_message: str | None) -> Change:
    transition(current, new, cause)
    if error_code is not None and new is not RunStatus.FAILED:
        raise IllegalTransition(f"run cannot go from {current.value} to {new.value} with an error code")
    if cause is not None and error_message is None:
        error_message = describe(cause)
    return Change(current, new, cause, error_code, error_message)


def recovery(cause: Cause) -> Change:
    """The change a ledger's crash recovery writes to every run it finds ``running`` whose process is
    gone: ``interrupted`` for ``cause`` (``SERVER_RESTART`` at open, ``OWNER_DIED`` when another
    process's lease lapsed), the cause in words, no error code. Backends write exactly these fields,
    to runs whose status is ``previous``."""
    if cause not in RECOVERY_CAUSES:
        raise IllegalTransition(f"crash recovery does not interrupt runs for {cause.value}")
    return _change(RunStatus.RUNNING, RunStatus.INTERRUPTED, cause, None, None)


#: the causes crash recovery writes (the process that ran the run is gone)
RECOVERY_CAUSES: frozenset[Cause] = frozenset({Cause.SERVER_RESTART, Cause.OWNER_DIED})


class RunState:
    """The changing status of one run in this process: the only code that changes a run's status, the
    cause it would be interrupted for, and whether it is settled. Pure: no I/O, no trio.

    In the manner of h11's ``ConnectionState``: every change is checked against ``TRANSITIONS``
    first, and an illegal one raises ``IllegalTransition`` with nothing changed. A status change is
    two steps around the ledger's write: ``change`` (or ``decide``, for a terminal outcome) asks the
    table and returns the ``Change`` to write; ``committed`` records it once the ledger took it.

    * ``status``: the run's committed status, as far as this process wrote it (a fresh run starts
      ``running``; ``resumed`` makes it the committed ``waiting`` run; ``replayed`` completes a
      request that only repeats committed decisions, with nothing written).
    * ``cause``: why a cancellation interrupts the run (``blame``: the first recorded cause wins).
    * ``outcome``: a terminal change decided and not committed yet (the store is slow or failing),
      and ``refused``: the store refused its last attempt.
    * ``settled``: the outcome is committed (or could not be) and the run let its thread go; set once
      (``settle``), after which nothing changes.
    """

    __slots__ = ("_on_settle", "cause", "metrics", "outcome", "refused", "settled", "status")

    def __init__(self, on_settle: Callable[[], object] | None = None) -> None:
        self.status = RunStatus.RUNNING
        self.cause: Cause | None = None
        self.outcome: Change | None = None
        self.refused = False
        self.settled = False
        self._on_settle = on_settle
        #: the run's metrics (``awaken.telemetry.metrics``): told when it begins executing, when it
        #: enters or leaves ``waiting`` and when it stops executing, by the changes made here
        self.metrics: RunMetrics = NO_RUN_METRICS

    def __repr__(self) -> str:
        return (f"RunState({self.status.value}, cause={self.cause and self.cause.value}, "
                f"outcome={self.outcome and self.outcome.status.value}, settled={self.settled})")

    def _check_open(self) -> None:
        if self.settled:
            raise IllegalTransition(f"run is settled ({self.status.value}): nothing changes any more")

    # -- where the run starts ---------------------------------------------------------------------

    def resumed(self) -> None:
        """The run is the committed ``waiting`` one a resume continues (before anything is written)."""
        self._check_open()
        if self.status is not RunStatus.RUNNING or self.outcome is not None:
            raise IllegalTransition(f"run cannot be resumed from {self.status.value}")
        self.status = RunStatus.WAITING

    def begin(self) -> None:
        """The run starts executing (a fresh run, or the resumed ``waiting`` one): its metrics count a
        start. A replay (nothing runs) does not."""
        if not self.settled and self.status is not RunStatus.COMPLETED:
            self.metrics.begin()

    def _report(self, previous: RunStatus, change: Change | None = None) -> None:
        """Tell the run's metrics what the change from ``previous`` to the current status means: a run
        entering or leaving ``waiting``, a run stopping executing (waiting, or an outcome; counted once
        per execution by ``RunMetrics.ended``)."""
        status = self.status
        if previous is RunStatus.WAITING and status is not RunStatus.WAITING:
            self.metrics.left_waiting()
        if status is RunStatus.WAITING and previous is not RunStatus.WAITING:
            self.metrics.entered_waiting()
        if status is RunStatus.WAITING or status in TERMINAL:
            self.metrics.ended(status.value, change.cause_value if change else (self.cause and self.cause.value),
                               change.error_code if change else None)

    def replayed(self) -> None:
        """The request only repeats committed decisions: the run is ``completed`` at once, nothing
        runs and nothing is written (its stream starts and finishes)."""
        self._check_open()
        if self.outcome is not None:
            raise IllegalTransition("run cannot be replayed: an outcome is pending")
        self.status = transition(self.status, RunStatus.COMPLETED)

    # -- why it would be interrupted --------------------------------------------------------------

    def blame(self, cause: Cause) -> None:
        """Record ``cause`` for an interruption to come; the first cause recorded wins."""
        if self.cause is None:
            self.cause = cause

    @property
    def interrupt_cause(self) -> Cause:
        """Why the run would be interrupted now: the recorded cause, else the client went away."""
        return self.cause or Cause.CLIENT_GONE

    # -- changes around a write -------------------------------------------------------------------

    def change(self, new: RunStatus, *, cause: Cause | None = None, error_code: str | None = None,
               error_message: str | None = None) -> Change:
        """The change from the current status to ``new``, to be written; nothing changes here.
        Raises ``IllegalTransition`` when the table does not allow it, or once the run is settled."""
        self._check_open()
        return _change(self.status, new, cause, error_code, error_message)

    def committed(self, change: Change) -> None:
        """The ledger took ``change``: the run is now in its status (and a pending outcome that it
        was is no longer pending). A change made from another status raises, changing nothing."""
        self._check_open()
        if change.previous is not self.status:
            raise IllegalTransition(f"run is {self.status.value}, not {change.previous.value}: "
                                    f"a change to {change.status.value} made earlier cannot be committed")
        previous, self.status = self.status, change.status
        if change.status in TERMINAL:
            self.outcome = None
        self._report(previous, change)

    def decide(self, new: RunStatus, *, cause: Cause | None = None, error_code: str | None = None,
               error_message: str | None = None) -> Change:
        """Decide the run's terminal outcome (from ``running``): it is pending until ``committed``;
        returned, to be written. A decided outcome is decided once (``redecide`` rewords it)."""
        if new not in TERMINAL:
            raise IllegalTransition(f"{new.value} is not an outcome")
        if self.outcome is not None:
            raise IllegalTransition(f"run already has an outcome pending ({self.outcome.status.value})")
        self.outcome = self.change(new, cause=cause, error_code=error_code, error_message=error_message)
        return self.outcome

    def redecide(self, error_code: str, error_message: str) -> Change:
        """Reword a pending failure (what the client was told is what gets committed)."""
        if self.outcome is None or self.outcome.status is not RunStatus.FAILED:
            raise IllegalTransition("only a pending failure can be reworded")
        self.outcome = self.change(RunStatus.FAILED, error_code=error_code, error_message=error_message)
        return self.outcome

    def store_refused(self) -> None:
        """The store refused the pending outcome (as opposed to being slow with it)."""
        if self.outcome is None:
            raise IllegalTransition("no outcome is pending")
        self.refused = True

    def abandon_outcome(self) -> None:
        """The pending outcome has nothing to close (the run record was never written), or the
        reconciler gave up on it: nothing is pending any more, the status stays."""
        self.outcome = None

    def found(self, status: RunStatus, cause: Cause | None) -> None:
        """The ledger already holds this run's outcome (a slow commit got through after all): the run
        is in it, if the table allows getting there."""
        self._check_open()
        previous, outcome = self.status, self.outcome
        if status is not self.status:
            self.status = transition(self.status, status, cause)
        self.outcome = None
        self._report(previous, outcome)

    # -- the end ---------------------------------------------------------------------------------

    def settle(self) -> None:
        """The run's outcome is committed (or could not be) and it let its thread go: nothing changes
        from now on. Refused while an outcome is still pending; a no-op the second time."""
        if self.settled:
            return
        if self.outcome is not None:
            raise IllegalTransition(f"run cannot settle: its outcome ({self.outcome.status.value}) is pending")
        self.settled = True
        if self.status is RunStatus.RUNNING:  # it never reached an outcome (its record was never written)
            self.metrics.ended("unrecorded")
        if self._on_settle is not None:
            self._on_settle()


class Interruptible(Protocol):
    """What a transport may do to the run it streams, without knowing the engine."""

    def cancel(self, cause: Cause) -> None:
        """Stop the run now; it is committed ``interrupted`` for ``cause``."""

    def blame(self, cause: Cause) -> None:
        """Record ``cause`` for a cancellation that will come from outside (e.g. a shutdown's grace
        running out) without stopping the run now."""
