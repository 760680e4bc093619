"""Every ledger write of a run: its first write (``write_start``), every status change (``write``)
and every step (a model step, a resume's decided results: ``commit_step``, which also announces
what it committed to the run's sink).

``write`` asks ``runstate.transition`` first, so an illegal status change raises
``IllegalTransition`` and nothing reaches the ledger.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

import attrs
import jsonpatch
import trio

from awaken.core.errors import AwakenError, RunFailure
from awaken.core.events import StateChanged, ToolApprovalRequested, ToolResult
from awaken.core.messages import Message
from awaken.engine.state import Cause, RunStatus, describe, transition
from awaken.ledger.interface import Commit, DuplicateRun, Ledger, RunRecord
from awaken.wires.protocol import Sink, new_id

if TYPE_CHECKING:
    from awaken.engine.run import AdmittedRun


def now_ms() -> int:
    return int(time.time() * 1000)


async def write_start(run: AdmittedRun) -> None:
    """Write a fresh run's record and its input, shielded (a disconnect cannot tear it).

    A state the client sent (``run.client_state``) is committed right after, before anything names
    the run. It runs in the run's nursery beside the first model step; the first step waits for it
    (``run.started``) before anything names the run. If the store fails, the error is kept in
    ``run.start_error`` and raised there. A run id the client reused gets a fresh one.
    """
    assert run.start is not None
    inputs = tuple(m for m in run.history if m.run_id == run.run_id and m.seq == 0)
    try:
        with trio.CancelScope(shield=True):
            now = now_ms()
            for _attempt in range(3):
                record = RunRecord(run.run_id, run.thread_id, run.agent.id, RunStatus.RUNNING, now, now,
                                   tools=run.client_tools)
                try:
                    committed = await run.ledger.start_run(record, inputs, owner=run.owner)
                    break
                except DuplicateRun:  # the client reused a run id: the ledger gets a fresh one
                    run.run_id = new_id("run")
                    inputs = tuple(attrs.evolve(m, run_id=run.run_id) for m in inputs)
            else:  # pragma: no cover - three uuid4 collisions
                raise RunFailure("could not allocate a run id")
            if run.client_state:  # the client's state is the thread's from this run on
                await write(run.ledger, run.thread_id, run.run_id, RunStatus.RUNNING,
                            Commit(status=RunStatus.RUNNING, state=run.state))
        by_id = {m.id: m for m in committed}
        run.history = [by_id.get(m.id, m) if m.seq == 0 else m for m in run.history]
    except (AwakenError, ValueError) as exc:
        run.start_error = exc if isinstance(exc, AwakenError) else RunFailure(str(exc))
    finally:
        run.start.set()


async def write(ledger: Ledger, thread_id: str, run_id: str, current: RunStatus, commit: Commit,
                cause: Cause | None = None) -> tuple[Message, ...]:
    """Commit ``commit`` to a run now in ``current`` status, if the transition is legal.

    An interruption's ``cause`` is committed with it, and its ``error_message`` says it in words
    unless the commit names one. Returns the committed messages (as the ledger stored them).
    """
    transition(current, commit.status, cause)
    if cause is not None:
        commit = attrs.evolve(commit, cause=cause.value, error_message=commit.error_message or describe(cause))
    return tuple(await ledger.commit(thread_id, run_id, commit))


async def commit_step(run: AdmittedRun, sink: Sink, commit: Commit) -> tuple[Message, ...]:
    """Commit one step of ``run`` and announce it: the tool results it committed, the approvals it
    asks for, the state change. ``commit.state`` is None when the state did not change."""
    committed = await write(run.ledger, run.thread_id, run.run_id, run.status, commit)
    run.status = commit.status
    run.steps_done += commit.steps
    run.usage = run.usage + commit.usage
    run.history.extend(committed)
    for message in committed:
        if message.role == "tool":
            sink(tool_result_event(message))
    for call in commit.pending:
        if call.kind == "approval":
            sink(ToolApprovalRequested(call.tool_call_id))
    if commit.state is not None:
        sink(state_change(run.state, commit.state))
        run.state = commit.state
    return committed


def tool_result_event(message: Message) -> ToolResult:
    part = message.tool_result
    assert part is not None
    return ToolResult(part.tool_call_id, message.id, part.name, part.content, part.status, part.approval)


def state_change(old: dict[str, Any], new: dict[str, Any]) -> StateChanged:
    return StateChanged(new, jsonpatch.make_patch(old, new).patch)
