"""The run's end: it waits (a committed ``waiting`` with pending calls), fails (``failed`` with a
code), or is interrupted (``interrupted`` with a ``Cause``). The failed and interrupted commits are
shielded and bounded, so a cancellation cannot tear them and a stuck store cannot hold the
connection.

Nothing a person read is lost: an early end (failed or interrupted) commits, in the same commit as
its outcome, what the step streaming at that moment had streamed (its text and reasoning) as the
step's assistant message, marked incomplete with the reason (``IncompletePart``; ``cut_off``). It is
one whole message written once with the outcome, never a torn step: the step's tool calls, which
never ran, are not in it.

A final commit that cannot happen in time (the store is slow or failing) is not given up: the run
keeps its outcome pending in its ``RunState`` (``run.unsettled``), the failure is logged, the thread stays claimed
(new input waits while the run's own commit is under way, then ``THREAD_BUSY`` while the store is only slow
with it: admission's ``_reserve``; ``STORE_UNAVAILABLE`` once the store
refused it: ``run.outcome_refused``), and the reconciler (``reconcile.py``) commits it once the store answers and only
then frees the thread. No run is ever left ``running`` next to a newer run on its thread.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

import trio

from awaken.core.errors import StoreUnavailable
from awaken.core.events import Gate, RunFailed, RunFinished
from awaken.core.messages import Message
from awaken.engine.commit import write
from awaken.engine.rundata import RunBase
from awaken.engine.state import Cause, Change, RunStatus
from awaken.ledger.interface import Commit, PendingCall
from awaken.wires.protocol import Sink

log = logging.getLogger("awaken.engine")
#: how long a shielded final commit may hold the connection before the reconciler takes it over
FINAL_COMMIT_TIMEOUT = 2.0


def finish_waiting(run: RunBase, sink: Sink, pending: Sequence[PendingCall]) -> None:
    """The stream's end for a run that waits (its ``waiting`` status is already committed): the
    pending call ids, the permission gates among them, and the thread as committed."""
    tools = run.tools
    gates = tuple(
        Gate(p.tool_call_id, p.name, p.arguments, tools.get(p.name).parameters if p.name in tools else {})
        for p in pending if p.kind == "approval"
    )
    # the thread's messages are numbered from 1: a history that holds message 1 is the whole thread
    whole = min((m.seq for m in run.history if m.seq), default=1) == 1
    sink(RunFinished(run.thread_id, run.run_id, "waiting", run.usage, tuple(p.tool_call_id for p in pending),
                     gates, tuple(run.history), dict(run.state), whole))


async def fail(run: RunBase, sink: Sink, code: str, message: str) -> None:
    """Commit ``failed`` with ``code`` and end the stream with it."""
    committed = await commit_final(run, RunStatus.FAILED, code, message)
    if not committed and code != "STORE_UNAVAILABLE":
        code, message = "STORE_UNAVAILABLE", f"{message} (and the failure could not be committed)"
        if run.runstate.outcome is not None:  # the reconciler commits what the client was told
            run.runstate.redecide(code, message)
    sink(RunFailed(code, message, run.usage))


async def interrupt(run: RunBase) -> None:
    """Commit ``interrupted`` for the run's cause, if it is still running (the stream just stops)."""
    if run.status is RunStatus.RUNNING and run.run_id:
        await commit_final(run, RunStatus.INTERRUPTED, None, None, run.cause)


def cut_off(run: RunBase, change: Change) -> tuple[Message, ...]:
    """The answer ``change`` cuts off: what the step streaming now streamed (text and reasoning),
    marked incomplete with the change's reason, when that step is not committed yet; else nothing."""
    reason = change.incomplete_reason
    streaming = run.progress.streaming
    if reason is None or streaming is None:
        return ()
    partial = streaming.partial(run.run_id, reason)
    if partial is None or any(m.id == partial.id for m in run.history):
        return ()
    return (partial,)


async def commit_final(run: RunBase, status: RunStatus, code: str | None, message: str | None,
                       cause: Cause | None = None) -> bool:
    """Commit a terminal status, shielded and bounded. Returns whether it was committed.

    When the store does not answer in time (or fails), the outcome stays pending in the run's
    ``RunState`` for the reconciler, and the thread stays claimed until it is committed.
    """
    state = run.runstate
    if state.status is not RunStatus.RUNNING or not run.run_id or state.outcome is not None:
        return state.status is not RunStatus.RUNNING
    change = state.decide(status, cause=cause, error_code=code, error_message=message)
    with trio.move_on_after(FINAL_COMMIT_TIMEOUT, shield=True):
        if not await run.started():
            state.abandon_outcome()
            return False  # the run record was never written: there is nothing to close
        run.progress.closing = cut_off(run, change)
        try:
            committed = await write(run.ledger, run.thread_id, run.run_id, change,
                                    Commit(status=status, messages=run.progress.closing))
        except StoreUnavailable as exc:
            state.store_refused()
            log.error("run %s: could not commit %s (%s); thread %s stays busy until it is committed",
                      run.run_id, status.value, exc.message, run.thread_id)
            return False
        state.committed(change)
        run.progress.history.extend(committed)
        return True
    log.error("run %s: committing %s took longer than %.1f s; thread %s stays busy until it is committed",
              run.run_id, status.value, FINAL_COMMIT_TIMEOUT, run.thread_id)
    return False
