"""The reconciler: commits the outcome of runs whose final commit did not happen in time.

``outcome.commit_final`` gives up waiting on a slow or failing store after
``FINAL_COMMIT_TIMEOUT`` so the connection is not held, but it never gives up the outcome: the run
keeps it pending in its ``RunState`` (``run.unsettled``) and stays in the registry, so its thread
answers ``THREAD_BUSY`` while the store is slow, and ``STORE_UNAVAILABLE`` (runs, stop and delete on it) once the store refused the
commit (``run.outcome_refused``): then the store, not another run, is what the client waits for.
``settle_late`` commits it (with the answer it cut off, ``outcome.cut_off``) as soon as the store answers (retrying with back-off), then frees the
thread. It runs in the server's nursery (``RunApplication.reconcile_forever``, started by the ASGI
lifespan), never in a connection's: the client that caused the run may be long gone.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

import trio

from awaken.core.errors import StoreUnavailable
from awaken.engine.commit import write
from awaken.engine.state import Cause, RunStatus
from awaken.ledger.interface import Commit

if TYPE_CHECKING:
    from awaken.engine.run import AdmittedRun

log = logging.getLogger("awaken.engine")
#: the first and the longest pause between two attempts to commit a late outcome
RETRY_FIRST = 0.05
RETRY_MAX = 5.0


async def settle_late(run: AdmittedRun) -> None:
    """Commit the run's pending outcome (unless the store already holds one), then free the thread."""
    final = run.unsettled
    assert final is not None
    delay = RETRY_FIRST
    try:
        while True:
            try:
                if await run.started():
                    final = run.unsettled or final
                    record = await run.ledger.get_run(run.run_id)
                    if record is not None and record.status is RunStatus.RUNNING:
                        await write(run.ledger, run.thread_id, run.run_id, final,
                                    Commit(status=final.status, messages=run.progress.closing))
                        run.runstate.committed(final)
                    elif record is not None:  # the slow commit got through after all
                        cause = final.cause if record.status is final.status else _cause(record.status, record.cause)
                        run.runstate.found(record.status, cause)
                break
            except StoreUnavailable as exc:
                run.runstate.store_refused()
                log.warning("run %s: still cannot commit %s (%s); retrying in %.2f s", run.run_id,
                            final.status.value, exc.message, delay)
                await trio.sleep(delay)
                delay = min(delay * 2, RETRY_MAX)
        log.warning("run %s: %s committed late; thread %s is free", run.run_id, run.status.value, run.thread_id)
    except Exception:  # a bug must not keep the thread busy for ever
        log.exception("run %s: the reconciler failed to commit %s", run.run_id, final.status.value)
    finally:
        run.runstate.abandon_outcome()
        await run.settle()


def _cause(status: RunStatus, value: str | None) -> Cause | None:
    """The cause of an outcome found in the store (an interruption's; a cause this version does not
    know, or none, reads as the client's going)."""
    if status is not RunStatus.INTERRUPTED:
        return None
    try:
        return Cause(value) if value is not None else Cause.CLIENT_GONE
    except ValueError:
        return Cause.CLIENT_GONE
