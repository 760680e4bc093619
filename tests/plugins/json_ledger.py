"""A tiny out-of-tree ledger backend: the whole ledger in one JSON file, rewritten on every write.

It stands for a third-party plugin: it knows Awaken only through ``awaken.ledger.interface`` and is registered
under the ``awaken.ledgers`` entry-point group by a test (``tests/test_ledger_plugin.py``), which then
runs the importable conformance suite and crash test against it. It is durable: every write builds
the new state in memory, writes it to a temporary file, fsyncs it, renames it over ``ledger.json``
and fsyncs the directory, and only then becomes visible; a kill leaves the old file or the new one.
Not fast (each write costs the size of the whole ledger); small on purpose. It keeps branches the
simplest way: every message is stored with its branch, and each read keeps those on the path asked for
(``branch_path`` and ``path_of`` from the interface).
"""

from __future__ import annotations

import copy
import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import attrs
import trio

from awaken.core.errors import StoreUnavailable
from awaken.core.messages import Message, Usage, message_from_json, message_to_json
from awaken.engine.state import Cause, RunStatus, recovery
from awaken.ledger.interface import (
    ALL_OWNERS,
    Branch,
    BranchPath,
    Commit,
    DuplicateRun,
    Fork,
    Ledger,
    OwnerFilter,
    PendingCall,
    RunRecord,
    ThreadPage,
    ThreadRecord,
    ThreadSummary,
    WriteClock,
    branch_path,
    check_import_branches,
    check_limit,
    decode_cursor,
    encode_cursor,
    imported_updated_at,
    last_run_of,
    path_of,
    run_summary,
    thread_title,
    tools_from_json,
    tools_to_json,
)

State = dict[str, Any]


def _empty() -> State:
    return {"threads": {}, "runs": {}, "messages": {}, "pending": {}}


def _run_to_json(run: RunRecord) -> dict[str, Any]:
    d = attrs.asdict(run, recurse=False)
    d["status"] = run.status.value
    d["usage"] = [run.usage.input_tokens, run.usage.output_tokens]
    d["tools"] = tools_to_json(run.tools)
    return d


def _run_from_json(d: dict[str, Any]) -> RunRecord:
    return RunRecord(**{**d, "status": RunStatus(d["status"]), "usage": Usage(*d["usage"]),
                        "tools": tools_from_json(d.get("tools"))})


def _now_ms() -> int:
    return int(time.time() * 1000)


def _branches(thread: dict[str, Any]) -> list[Branch]:
    return [Branch(0, None, 0, thread["created_at"]), *(Branch(**b) for b in thread.get("branches", []))]


def _path(thread: dict[str, Any], branch: int | None = None) -> BranchPath:
    """The path of ``branch`` (None: the active one); an unknown branch raises ValueError."""
    return branch_path(_branches(thread), thread.get("active_branch", 0) if branch is None else branch)


def _on(state: State, thread_id: str, path: BranchPath) -> list[Message]:
    return path_of(path, (message_from_json(m) for m in state["messages"].get(thread_id, [])))


def _record(thread_id: str, t: dict[str, Any]) -> ThreadRecord:
    return ThreadRecord(thread_id, t["created_at"], copy.deepcopy(t["state"]), t["last_seq"], t["owner"],
                        t.get("active_branch", 0))


class JsonFileLedger(Ledger):
    """Options: ``path``, the JSON file."""

    def __init__(self, path: str) -> None:
        self.path = Path(path)
        self._state: State | None = None
        self._lock = trio.Lock()
        self._clock = WriteClock()

    # -- plumbing ---------------------------------------------------------------------------------

    def _require(self) -> State:
        if self._state is None:
            raise StoreUnavailable("the JSON ledger is closed")
        return self._state

    def _save(self, state: State) -> None:
        """Write ``state`` durably: temporary file, fsync, rename, fsync the directory."""
        tmp = self.path.with_name(self.path.name + ".tmp")
        data = json.dumps(state, ensure_ascii=False).encode("utf-8", "surrogatepass")
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)
        os.replace(tmp, self.path)
        dir_fd = os.open(self.path.parent, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(dir_fd)
        finally:
            os.close(dir_fd)

    async def _write(self, change: Callable[[State], Any]) -> Any:
        """Apply ``change`` to a copy of the state, save the copy, then make it the state."""
        async with self._lock:
            state = copy.deepcopy(self._require())
            result = change(state)  # raises before anything is written
            try:
                await trio.to_thread.run_sync(self._save, state)
            except OSError as exc:
                raise StoreUnavailable(f"the JSON ledger failed: {exc}") from None
            self._state = state
            return result

    # -- lifecycle --------------------------------------------------------------------------------

    async def open(self) -> None:
        def load() -> State:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            if not self.path.exists():
                return _empty()
            return json.loads(self.path.read_bytes().decode("utf-8", "surrogatepass"))

        try:
            self._state = await trio.to_thread.run_sync(load)
            self._clock.advance_to(max((t["updated_at"] for t in self._state["threads"].values()), default=0))
        except OSError as exc:
            raise StoreUnavailable(f"cannot open the JSON ledger: {exc}") from None

        def recover(state: State) -> None:
            now = _now_ms()
            change = recovery(Cause.SERVER_RESTART)  # what recovery writes is the run state's, not ours
            for run in state["runs"].values():
                if run["status"] == change.previous.value:
                    run.update(status=change.status.value, error_code=change.error_code,
                               error_message=change.error_message, cause=change.cause_value, updated_at=now)

        await self._write(recover)

    async def aclose(self) -> None:
        self._state = None

    async def ping(self) -> None:
        self._require()
        await trio.lowlevel.checkpoint()

    # -- reads ------------------------------------------------------------------------------------

    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        await trio.lowlevel.checkpoint()
        t = self._require()["threads"].get(thread_id)
        return None if t is None else _record(thread_id, t)

    async def get_run(self, run_id: str) -> RunRecord | None:
        await trio.lowlevel.checkpoint()
        d = self._require()["runs"].get(run_id)
        return None if d is None else _run_from_json(d)

    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        await trio.lowlevel.checkpoint()
        state = self._require()
        ids = state["threads"].get(thread_id, {}).get("runs", [])
        return sorted((_run_from_json(state["runs"][r]) for r in ids), key=lambda r: r.created_at)

    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        await trio.lowlevel.checkpoint()
        return [PendingCall(**p) for p in self._require()["pending"].get(thread_id, [])]

    async def read_messages(self, thread_id: str, after_seq: int, limit: int, branch: int | None = None) -> list[Message]:
        await trio.lowlevel.checkpoint()
        state = self._require()
        thread = state["threads"].get(thread_id)
        if thread is None:
            return []
        found = [m for m in _on(state, thread_id, _path(thread, branch)) if m.seq > after_seq]
        return found if limit < 0 else found[:limit]

    async def list_branches(self, thread_id: str) -> list[Branch]:
        await trio.lowlevel.checkpoint()
        thread = self._require()["threads"].get(thread_id)
        return [] if thread is None else _branches(thread)

    async def list_threads(self) -> list[ThreadRecord]:
        await trio.lowlevel.checkpoint()
        threads = self._require()["threads"]
        ordered = sorted(threads, key=lambda tid: (threads[tid]["created_at"], tid))
        return [_record(tid, threads[tid]) for tid in ordered]

    # -- writes -----------------------------------------------------------------------------------

    async def start_run(
        self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *, fork: Fork | None = None
    ) -> list[Message]:
        def change(state: State) -> list[Message]:
            if run.run_id in state["runs"]:
                raise DuplicateRun(run.run_id)
            if fork is not None:
                _fork(state, run, fork)
            thread = state["threads"].setdefault(
                run.thread_id, {"created_at": run.created_at, "state": {}, "last_seq": 0, "runs": [],
                                "owner": owner, "title": None}
            )
            thread.update(agent_id=run.agent_id, updated_at=self._clock.now())
            state["messages"].setdefault(run.thread_id, [])
            branch = thread.get("active_branch", 0)
            appended = _append(state, run.thread_id, inputs, branch)
            state["runs"][run.run_id] = _run_to_json(attrs.evolve(run, branch=branch))
            thread["runs"].append(run.run_id)
            return appended

        return await self._write(change)

    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        def change(state: State) -> list[Message]:
            run = state["runs"].get(run_id)
            if run is None or run["thread_id"] != thread_id:
                raise ValueError(f"run {run_id!r} is not a run of thread {thread_id!r}")
            appended = _append(state, thread_id, commit.messages, run.get("branch", 0))
            calls = [p for p in state["pending"].get(thread_id, []) if p["tool_call_id"] not in commit.resolved]
            for p in commit.pending:
                if any(c["tool_call_id"] == p.tool_call_id for c in calls):
                    raise ValueError(f"tool call {p.tool_call_id!r} is already pending")
                calls.append(attrs.asdict(attrs.evolve(p, thread_id=thread_id)))
            state["pending"][thread_id] = calls
            if commit.state is not None:
                state["threads"][thread_id]["state"] = copy.deepcopy(commit.state)
            now = self._clock.now()
            state["threads"][thread_id]["updated_at"] = now
            run.update(
                status=commit.status.value,
                updated_at=now,
                error_code=commit.error_code,
                error_message=commit.error_message,
                cause=commit.cause,
                usage=[run["usage"][0] + commit.usage.input_tokens, run["usage"][1] + commit.usage.output_tokens],
                steps=run["steps"] + commit.steps,
            )
            return appended

        return await self._write(change)

    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
        updated_at: int | None = None,
        branches: Sequence[Branch] = (),
    ) -> None:
        tid = thread.thread_id
        latest = last_run_of(runs)
        at = imported_updated_at(thread, runs, messages) if updated_at is None else updated_at

        def change(state: State) -> None:
            if tid in state["threads"]:
                raise ValueError(f"thread {tid!r} already exists in the ledger")
            for run in runs:
                if run.run_id in state["runs"]:
                    raise DuplicateRun(run.run_id)
                if run.thread_id != tid:
                    raise ValueError("a run of another thread")
            seqs = [m.seq for m in messages]
            if len(set(seqs)) != len(seqs):
                raise ValueError("a message seq repeats")
            if any(not 0 < s <= thread.last_seq for s in seqs):
                raise ValueError("a message seq lies outside 1..last_seq")
            tree = check_import_branches(thread, runs, messages, branches)
            if len(tree) == 1 and len({m.id for m in messages}) != len(messages):
                raise ValueError("a message id repeats")
            if any(p.thread_id != tid for p in pending) or len({p.tool_call_id for p in pending}) != len(pending):
                raise ValueError("a pending call repeats or is of another thread")
            state["threads"][tid] = {"created_at": thread.created_at, "state": copy.deepcopy(thread.state),
                                     "last_seq": thread.last_seq, "runs": [r.run_id for r in runs],
                                     "owner": thread.owner, "agent_id": latest.agent_id if latest else None,
                                     "updated_at": at, "title": thread_title(sorted(messages, key=lambda m: m.seq)),
                                     "active_branch": thread.active_branch,
                                     "branches": [attrs.asdict(b) for b in tree[1:]]}
            state["messages"][tid] = [message_to_json(m) for m in sorted(messages, key=lambda m: m.seq)]
            state["pending"][tid] = [attrs.asdict(p) for p in pending]
            for run in runs:
                state["runs"][run.run_id] = _run_to_json(run)

        await self._write(change)
        self._clock.advance_to(at)

    # -- listing and deletion ---------------------------------------------------------------------

    def _summary(self, state: State, tid: str) -> ThreadSummary:
        t = state["threads"][tid]
        return ThreadSummary(
            thread_id=tid, title=t["title"], agent_id=t["agent_id"], created_at=t["created_at"],
            updated_at=t["updated_at"], message_count=len(_on(state, tid, _path(t))),
            last_run=run_summary(last_run_of(_run_from_json(state["runs"][r]) for r in t["runs"])),
            waiting=bool(state["pending"].get(tid)), owner=t["owner"],
        )

    async def thread_summary(self, thread_id: str) -> ThreadSummary | None:
        await trio.lowlevel.checkpoint()
        state = self._require()
        return self._summary(state, thread_id) if thread_id in state["threads"] else None

    async def list_thread_summaries(
        self, owner: OwnerFilter, agent: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ThreadPage:
        check_limit(limit)
        after = decode_cursor(cursor) if cursor is not None else None
        await trio.lowlevel.checkpoint()
        state = self._require()
        keys = sorted(
            ((t["updated_at"], tid) for tid, t in state["threads"].items()
             if (owner is ALL_OWNERS or t["owner"] == owner) and (agent is None or t["agent_id"] == agent)
             and (after is None or (t["updated_at"], tid) < after)),
            reverse=True,
        )
        items = tuple(self._summary(state, tid) for _, tid in keys[:limit])
        return ThreadPage(items, encode_cursor(*keys[limit - 1]) if len(keys) > limit else None)

    async def delete_thread(self, thread_id: str) -> bool:
        def change(state: State) -> bool:
            thread = state["threads"].pop(thread_id, None)
            if thread is None:
                return False
            for run_id in thread["runs"]:
                del state["runs"][run_id]
            state["messages"].pop(thread_id, None)
            state["pending"].pop(thread_id, None)
            return True

        return await self._write(change)


def _fork(state: State, run: RunRecord, fork: Fork) -> None:
    """A new branch keeping the active path up to ``fork.after_seq``, made active."""
    thread = state["threads"].get(run.thread_id)
    if thread is None:
        raise ValueError(f"cannot fork thread {run.thread_id!r}: it does not exist")
    if fork.reason not in ("regenerate", "edit"):
        raise ValueError(f"a fork's reason is regenerate or edit, not {fork.reason!r}")
    kept = {m.seq: m for m in _on(state, run.thread_id, _path(thread))}
    if fork.after_seq != 0 and fork.after_seq not in kept:
        raise ValueError(f"no message of the active path has seq {fork.after_seq!r}")
    number = len(thread.get("branches", [])) + 1
    branch = Branch(number, kept[fork.after_seq].branch if fork.after_seq else 0, fork.after_seq, run.created_at,
                    run.run_id, fork.reason)
    thread.setdefault("branches", []).append(attrs.asdict(branch))
    thread["active_branch"] = number


def _append(state: State, thread_id: str, messages: Sequence[Message], branch: int) -> list[Message]:
    thread = state["threads"].get(thread_id)
    if thread is None:
        raise ValueError(f"no thread {thread_id!r}")
    taken = {m.id for m in _on(state, thread_id, _path(thread, branch))}
    out: list[Message] = []
    now = _now_ms()
    for m in messages:
        if m.id in taken:
            raise ValueError(f"message id {m.id!r} is already committed on the path of branch {branch}")
        taken.add(m.id)
        thread["last_seq"] += 1
        out.append(attrs.evolve(m, seq=thread["last_seq"], created_at=m.created_at or now, branch=branch))
    state["messages"][thread_id].extend(message_to_json(m) for m in out)
    if thread["title"] is None:
        thread["title"] = thread_title(out)
    return out
