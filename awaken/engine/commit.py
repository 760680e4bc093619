"""Every ledger write of a run: its first write (``write_start``), every status change (``write``, of
a ``Change`` the run's ``RunState`` made from the table) and every step (``apply``: a model step's
or a resume's commit, which the step loop and the tool policy return; ``apply`` writes it, moves the
run's progress and state, and announces what it committed to the run's sink).

The ``Change`` comes from ``RunState`` before anything is written, so an illegal status change raises
``IllegalTransition`` and nothing reaches the ledger.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
import jsonpatch
import trio

from awaken.core.errors import AwakenError, RunFailure
from awaken.core.events import StateChanged, ToolApprovalRequested, ToolResult
from awaken.core.messages import Message
from awaken.engine.rundata import RunBase
from awaken.engine.state import Change, RunStatus
from awaken.ledger.interface import Commit, DuplicateRun, Ledger, RunRecord
from awaken.telemetry import tracing
from awaken.wires.protocol import Sink, new_id


def now_ms() -> int:
    return int(time.time() * 1000)


async def write_start(run: RunBase) -> None:
    """Write a fresh run's record and its input, shielded (a disconnect cannot tear it).

    A state the client sent (``client_state``) is committed right after, before anything names the
    run. It runs in the run's nursery beside the first model step; the first step waits for it
    (``run.started``) before anything names the run. If the store fails, the error is kept in
    ``run.start_error`` and raised there. A run id the client reused gets a fresh one (the run's
    spec is replaced with it). A run on a new branch (``spec.fork``) forks the thread in the same write.
    """
    assert run.start is not None
    run_id = run.run_id
    inputs = tuple(m for m in run.history if m.run_id == run_id and m.seq == 0)
    try:
        with trio.CancelScope(shield=True):
            now = now_ms()
            for _attempt in range(3):
                record = RunRecord(run_id, run.thread_id, run.agent.id, RunStatus.RUNNING, now, now,
                                   tools=run.client_tools)
                try:
                    with tracing.commit("start", len(inputs), type(run.ledger).__name__):
                        if run.spec.fork is None:
                            committed = await run.ledger.start_run(record, inputs, owner=run.owner)
                        else:
                            committed = await run.ledger.start_run(record, inputs, owner=run.owner,
                                                                   fork=run.spec.fork)
                    break
                except DuplicateRun:  # the client reused a run id: the ledger gets a fresh one
                    run_id = new_id("run")
                    inputs = tuple(attrs.evolve(m, run_id=run_id) for m in inputs)
            else:  # pragma: no cover - three uuid4 collisions
                raise RunFailure("could not allocate a run id")
            if run_id != run.run_id:
                run.spec = attrs.evolve(run.spec, run_id=run_id)
                tracing.renamed(run_id)
            if run.spec.client_state:  # the client's state is the thread's from this run on
                change = run.runstate.change(RunStatus.RUNNING)
                await write(run.ledger, run.thread_id, run_id, change, Commit(status=RunStatus.RUNNING,
                                                                              state=run.state))
                run.runstate.committed(change)
        by_id = {m.id: m for m in committed}
        run.progress.history = [by_id.get(m.id, m) if m.seq == 0 else m for m in run.history]
    except (AwakenError, ValueError) as exc:
        run.start_error = exc if isinstance(exc, AwakenError) else RunFailure(str(exc))
    finally:
        run.start.set()


async def write(ledger: Ledger, thread_id: str, run_id: str, change: Change, commit: Commit) -> tuple[Message, ...]:
    """Commit ``commit`` (its messages, pending calls, state, usage) with ``change``'s status, cause and
    error. Returns the committed messages (as the ledger stored them)."""
    commit = attrs.evolve(commit, status=change.status, cause=change.cause_value,
                          error_code=change.error_code, error_message=change.error_message)
    with tracing.commit(change.status.value, len(commit.messages), type(ledger).__name__):
        written = tuple(await ledger.commit(thread_id, run_id, commit))
    if change.status is not RunStatus.RUNNING:
        tracing.committed(run_id, change.status.value, change.cause_value, change.error_code, change.error_message)
    return written


async def apply(run: RunBase, sink: Sink, commit: Commit) -> tuple[Message, ...]:
    """Commit one step of ``run`` (``commit.status`` is the status it moves to, asked of the run's
    ``RunState`` first) and announce it: the tool results it committed, the approvals it asks for, the
    state change. ``commit.state`` is None when the state did not change."""
    change = run.runstate.change(commit.status)
    committed = await write(run.ledger, run.thread_id, run.run_id, change, commit)
    run.runstate.committed(change)
    run.runstate.metrics.committed(commit)  # its tool results and gate decisions
    progress = run.progress
    progress.steps_done += commit.steps
    progress.usage = progress.usage + commit.usage
    progress.history.extend(committed)
    for message in committed:
        if message.role == "tool":
            sink(tool_result_event(message))
    for call in commit.pending:
        if call.kind == "approval":
            sink(ToolApprovalRequested(call.tool_call_id))
    if commit.state is not None:
        sink(state_change(progress.state, commit.state))
        progress.state = commit.state
    return committed


def tool_result_event(message: Message) -> ToolResult:
    part = message.tool_result
    assert part is not None
    return ToolResult(part.tool_call_id, message.id, part.name, part.content, part.status, part.approval)


def state_change(old: dict[str, Any], new: dict[str, Any]) -> StateChanged:
    return StateChanged(new, jsonpatch.make_patch(old, new).patch)
