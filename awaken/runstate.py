"""Rule 1: every run status and every legal transition between them lives here.

The ledger stores a run's status; this table decides which changes are legal. ``RunApplication``
asks ``check_transition`` before it commits one, so an illegal change raises instead of being
written.

Theory of operation::

    RUNNING ──step committed with pending calls──▶ WAITING ──all calls decided──▶ RUNNING
    RUNNING ──final answer committed───────────▶ COMPLETED
    RUNNING ──model/tool/store failure─────────▶ FAILED
    RUNNING ──client disconnected / overflow───▶ INTERRUPTED
    WAITING ──new user input supersedes it─────▶ INTERRUPTED
    (process crash while RUNNING) ──ledger reopen──▶ INTERRUPTED

WAITING is a committed state, not a task: nothing in memory belongs to a waiting run.
"""

from __future__ import annotations

import enum


class RunStatus(enum.StrEnum):
    RUNNING = "running"
    WAITING = "waiting"
    COMPLETED = "completed"
    FAILED = "failed"
    INTERRUPTED = "interrupted"


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


def check_transition(current: RunStatus, new: RunStatus) -> None:
    if new not in TRANSITIONS[current]:
        raise IllegalTransition(f"run cannot go from {current.value} to {new.value}")
