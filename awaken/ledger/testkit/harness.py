"""What the conformance suite and the crash test share: opening ledgers, record factories, reads
that walk a whole thread, a snapshot of everything observable, and the crash workload with the
check a ledger must pass after any number of kills.

A *ledger factory* is ``factory(root: Path, **options) -> Ledger``: it builds an unopened ledger
that keeps all its data under the directory ``root`` (which exists). For the crash test it must be
a module-level function, importable in a child process as ``module:name``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from pathlib import Path
from typing import Any

import attrs

from awaken.core.messages import Message, TextPart, ToolCallPart, ToolResultPart, Usage
from awaken.engine.state import Cause, RunStatus
from awaken.ledger.interface import (
    Commit,
    Ledger,
    PendingCall,
    PendingKind,
    RunRecord,
    ThreadRecord,
)

LedgerFactory = Callable[..., Ledger]


@contextlib.asynccontextmanager
async def opened(factory: LedgerFactory, root: Path | str, **options: Any) -> AsyncIterator[Ledger]:
    """Open the ledger ``factory`` builds under ``root`` (created if missing) and close it on exit."""
    Path(root).mkdir(parents=True, exist_ok=True)
    ledger = factory(Path(root), **options)
    await ledger.open()
    try:
        yield ledger
    finally:
        await ledger.aclose()


def factory_reference(factory: LedgerFactory) -> str:
    """``module:name`` of a module-level factory (how a child process finds it again)."""
    reference = f"{factory.__module__}:{factory.__qualname__}"
    if resolve_factory(reference) is not factory:
        raise ValueError(f"the ledger factory {reference} is not importable by that name (make it module-level)")
    return reference


def resolve_factory(reference: str) -> LedgerFactory:
    module, _, name = reference.partition(":")
    target: Any = importlib.import_module(module)
    for part in name.split("."):
        target = getattr(target, part)
    return target


# -- record factories ---------------------------------------------------------------------------

_clock = [1_700_000_000_000]


def tick() -> int:
    """A strictly increasing fake timestamp (ms), so ordering by ``created_at`` is deterministic."""
    _clock[0] += 1
    return _clock[0]


def run_record(
    run_id: str, thread_id: str, *, status: RunStatus = RunStatus.RUNNING, created_at: int | None = None
) -> RunRecord:
    at = tick() if created_at is None else created_at
    return RunRecord(run_id, thread_id, "assistant", status, at, at)


def user(msg_id: str, text: str = "hello", run_id: str | None = None) -> Message:
    return Message(msg_id, "user", (TextPart(text),), run_id)


def assistant(msg_id: str, text: str = "hi", run_id: str | None = None, calls: Sequence[str] = ()) -> Message:
    parts: tuple[Any, ...] = (TextPart(text),) + tuple(ToolCallPart(c, "calculator", "{}") for c in calls)
    return Message(msg_id, "assistant", parts, run_id)


def tool_result(msg_id: str, call_id: str, content: str = "42", run_id: str | None = None) -> Message:
    return Message(msg_id, "tool", (ToolResultPart(call_id, "calculator", content),), run_id)


def pending(
    call_id: str, run_id: str, thread_id: str, message_id: str, kind: PendingKind = "approval"
) -> PendingCall:
    return PendingCall(call_id, run_id, thread_id, "calculator", '{"expression": "6*7"}', kind, message_id)


def step_ids(run_id: str, step: int, k: int) -> list[str]:
    """The ids of one step's ``k`` messages: ``<run>-<step>-<i>`` (how the crash suite groups them)."""
    return [f"{run_id}-{step}-{i}" for i in range(k)]


def step_messages(run_id: str, step: int, k: int) -> tuple[Message, ...]:
    return tuple(assistant(i, f"step {step} part {i}", run_id) for i in step_ids(run_id, step, k))


def strip(messages: Iterable[Message]) -> list[Message]:
    """Messages without ledger-assigned fields, to compare what went in with what came out."""
    return [attrs.evolve(m, seq=0, created_at=0) for m in messages]


# -- reads and invariants -----------------------------------------------------------------------


async def read_all(ledger: Ledger, thread_id: str, page: int = 100, branch: int | None = None) -> list[Message]:
    """Every committed message of the path of ``branch`` (None: the active one), read through cursor
    pages of ``page``."""
    out: list[Message] = []
    after = 0
    while True:
        batch = await ledger.read_messages(thread_id, after, page) if branch is None else (
            await ledger.read_messages(thread_id, after, page, branch=branch))
        out.extend(batch)
        if len(batch) < page:
            return out
        after = batch[-1].seq


async def snapshot(ledger: Ledger) -> dict[str, Any]:
    """Everything observable through the Ledger interface, for before/after comparisons (the active
    path's messages, and every other branch's path)."""
    threads: list[ThreadRecord] = await ledger.list_threads()
    out: dict[str, Any] = {"threads": threads}
    for t in threads:
        branches = await ledger.list_branches(t.thread_id)
        out[t.thread_id] = {
            "messages": await read_all(ledger, t.thread_id),
            "runs": await ledger.list_runs(t.thread_id),
            "pending": await ledger.pending_calls(t.thread_id),
            "summary": await ledger.thread_summary(t.thread_id),
            "branches": branches,
            "paths": {b.branch: await read_all(ledger, t.thread_id, branch=b.branch) for b in branches if b.branch},
        }
    return out


async def every_message(ledger: Ledger, thread_id: str) -> list[Message]:
    """Every message of the thread, on any branch, by seq (the union of every branch's path)."""
    by_seq: dict[int, Message] = {}
    for b in await ledger.list_branches(thread_id):
        for m in await read_all(ledger, thread_id, branch=b.branch):
            by_seq.setdefault(m.seq, m)
    return [by_seq[seq] for seq in sorted(by_seq)]


async def check_thread_invariants(ledger: Ledger, thread_id: str) -> list[Message]:
    """Seqs are 1..last_seq without gaps or repeats, ids are unique; returns the messages."""
    thread = await ledger.get_thread(thread_id)
    assert thread is not None, thread_id
    messages = await read_all(ledger, thread_id)
    assert [m.seq for m in messages] == list(range(1, thread.last_seq + 1)), thread_id
    assert len({m.id for m in messages}) == len(messages), thread_id
    return messages


# -- the crash workload (written by crash_child.py, checked by test_ledger_crash.py) -----------

#: threads the crash child writes to, one task each; path-like and non-ASCII on purpose
CRASH_THREADS = ("crash-a", "crash/β", "../crash γ")
#: messages per step
CRASH_K = 3
#: a run: step 0 = start_run with K inputs; step 1 waits on a tool call; 2 resolves it; 3 completes
CRASH_STEPS = 3
CRASH_USAGE = Usage(1, 2)


def crash_commit(run_id: str, thread_id: str, step: int) -> Commit:
    """The commit of ``step`` (1..CRASH_STEPS) of a crash-workload run."""
    call_id = f"{run_id}-call"
    state = {"run": run_id, "step": step}
    messages = step_messages(run_id, step, CRASH_K)
    if step == 1:
        return Commit(
            status=RunStatus.WAITING,
            messages=messages,
            pending=(pending(call_id, run_id, thread_id, messages[0].id),),
            state=state,
            usage=CRASH_USAGE,
            steps=1,
        )
    if step == 2:
        return Commit(
            status=RunStatus.RUNNING,
            messages=messages,
            resolved=(call_id,),
            state=state,
            usage=CRASH_USAGE,
            steps=1,
        )
    return Commit(status=RunStatus.COMPLETED, messages=messages, state=state, usage=CRASH_USAGE, steps=1)


#: the status a crash-workload run must have on reopen, by its number of committed steps (after step 0)
CRASH_STATUS_AFTER = {
    0: RunStatus.INTERRUPTED,  # was running when killed
    1: RunStatus.WAITING,  # a committed waiting run survives a restart as it is
    2: RunStatus.INTERRUPTED,
    3: RunStatus.COMPLETED,
}


async def check_crash_ledger(ledger: Ledger, acks: Sequence[tuple[str, str, int]]) -> dict[str, int]:
    """Check a reopened crash-workload ledger against the acknowledged commits; return counts.

    * every acknowledged commit is present: the message at the acked seq is the last of that step;
    * no partial step: every ``<run>-<step>-*`` group has all ``CRASH_K`` messages at consecutive seqs;
    * seqs are gapless; no run is left ``running``; each run's status, steps, usage, the pending calls
      and the thread state agree with the steps whose messages are committed.
    """
    threads = {t.thread_id: t for t in await ledger.list_threads()}
    by_seq: dict[str, dict[int, Message]] = {}
    groups: dict[tuple[str, int], list[Message]] = {}
    steps_of_run: dict[str, set[int]] = {}
    last_group: dict[str, tuple[str, int]] = {}
    for thread_id in threads:
        messages = await check_thread_invariants(ledger, thread_id)
        by_seq[thread_id] = {m.seq: m for m in messages}
        for m in messages:
            run_id, step, _ = m.id.split("-")
            groups.setdefault((run_id, int(step)), []).append(m)
            steps_of_run.setdefault(run_id, set()).add(int(step))
            last_group[thread_id] = (run_id, int(step))
    for (run_id, step), group in groups.items():
        assert [m.id for m in group] == step_ids(run_id, step, CRASH_K), f"partial step {run_id}/{step}"
        seqs = [m.seq for m in group]
        assert seqs == list(range(seqs[0], seqs[0] + CRASH_K)), f"step {run_id}/{step} is not contiguous"
    for thread_id, run_id, seq in acks:
        message = by_seq.get(thread_id, {}).get(seq)
        assert message is not None, f"acknowledged commit {thread_id} {run_id} {seq} is lost"
        assert message.id.startswith(f"{run_id}-") and message.id.endswith(f"-{CRASH_K - 1}"), message.id
    for thread_id in threads:
        expected_pending: list[str] = []
        runs = await ledger.list_runs(thread_id)
        for run in runs:
            steps = steps_of_run.get(run.run_id, set())
            assert 0 in steps, f"run {run.run_id} has no inputs"
            done = len(steps) - 1
            assert steps == set(range(done + 1)), f"run {run.run_id} skipped a step: {sorted(steps)}"
            assert run.status is CRASH_STATUS_AFTER[done], (run.run_id, done, run.status)
            assert run.steps == done, (run.run_id, run.steps, done)
            assert run.usage == Usage(done * CRASH_USAGE.input_tokens, done * CRASH_USAGE.output_tokens)
            expected_cause = Cause.SERVER_RESTART.value if run.status is RunStatus.INTERRUPTED else None
            assert run.cause == expected_cause, (run.run_id, run.status, run.cause)
            if done == 1:
                expected_pending.append(f"{run.run_id}-call")
        assert [p.tool_call_id for p in await ledger.pending_calls(thread_id)] == expected_pending
        run_id, step = last_group[thread_id]
        state = threads[thread_id].state
        if step == 0:  # the newest run has only its inputs: the state is the one of an earlier step
            assert state == {} or state.get("run") != run_id
        else:
            assert state == {"run": run_id, "step": step}
    owners = {run_id for run_id, _ in groups}
    all_runs = {r.run_id for t in threads for r in await ledger.list_runs(t)}
    assert owners == all_runs, "messages without a run or runs without inputs"
    return {"threads": len(threads), "runs": len(all_runs), "steps": len(groups)}
