"""The run engine: ``RunApplication`` is the only execution authority.

It admits runs (one active run per thread), drives the step loop over a model, executes server
tools, applies permission gates, suspends a run as committed ``waiting`` state, resumes it from
tool results or decisions, and commits every outcome to the ledger. Adapters hand it a
``RunRequest`` and a synchronous event sink; they never run models or decide run state.

Usage, from a connection handler::

    async with app.admit(thread_id, agent_id, build, principal=principal) as run:  # InputRejected before any byte
        await run.execute(sink)  # a cancellation from outside, or run.cancel(cause), interrupts it

General layout (one job per module):

* ``admission`` — ``RunApplication``: the thread claim, the registry of active runs, ``admit``
  (everything that can refuse a request), ``stop``; the fresh run's first write.
* ``branching`` — where a regenerate or an edit forks the active path, and the history its run starts from.
* ``limits`` — ``RunLimiter``: the caps per caller (``[limits]``) that ``admit`` checks first.
* ``run`` — ``AdmittedRun``: one admitted run's execution, its own cancel scope and nursery, ``cancel``.
* ``steps`` — the step loop and ``StepBuilder`` (a model step's output, streamed and assembled); a
  step returns its commit.
* ``policy`` — tool policy: permission gates, server tools, client tools, a resume's decisions; it
  returns results and commits, never writes.
* ``commit`` — every write of a run; ``apply``, the one function that commits a step, moves the run
  and announces what it committed.
* ``outcome`` — the run's end: waiting, failure, the final and interrupted commits.
* ``reconcile`` — commits the outcomes the store was too slow or failing to take in time.
* ``rundata`` — the run's data that all of the above read: ``RunSpec`` (frozen at admission),
  ``Progress`` (what it committed), ``Broadcast`` (what the engine needs of the streams).
* ``state`` — run statuses, causes, the transition table and ``RunState``, the one object that
  changes a run's status, cause and settled flag (crash recovery's ``Change`` too).

Each module imports only the ones below it: admission → run → steps → policy → commit/outcome →
rundata → state.
"""

from __future__ import annotations

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from awaken.engine.admission import RunApplication
    from awaken.engine.outcome import FINAL_COMMIT_TIMEOUT
    from awaken.engine.run import AdmittedRun
    from awaken.engine.steps import StepBuilder

__all__ = ["FINAL_COMMIT_TIMEOUT", "AdmittedRun", "RunApplication", "StepBuilder"]

#: the face's names and their modules: loaded on first use, so that the run-state vocabulary
#: (``state``, ``claims``), which the ledger stores, is imported without the whole engine
_FACE = {"RunApplication": "admission", "FINAL_COMMIT_TIMEOUT": "outcome", "AdmittedRun": "run",
         "StepBuilder": "steps"}


def __getattr__(name: str) -> Any:
    if name in _FACE:
        return getattr(import_module(f"{__name__}.{_FACE[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
