"""Rule 1: every run status, every legal change between them, and why a run was interrupted, live here.

The ledger stores a run's status; this table decides which changes are legal. ``transition`` is the
only way a run's status changes: the engine calls it on every commit path (a step, a resume, a
superseded waiting run, the final or interrupted outcome, a failure) *before* it writes, so an
illegal change raises ``IllegalTransition`` and nothing is committed.

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
from typing import Protocol


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
    #: new input arrived while the run waited for tool results or decisions
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


class Interruptible(Protocol):
    """What a transport may do to the run it streams, without knowing the engine."""

    def cancel(self, cause: Cause) -> None:
        """Stop the run now; it is committed ``interrupted`` for ``cause``."""

    def blame(self, cause: Cause) -> None:
        """Record ``cause`` for a cancellation that will come from outside (e.g. a shutdown's grace
        running out) without stopping the run now."""
