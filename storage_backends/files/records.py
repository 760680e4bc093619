"""The JSON forms of runs, pending calls and branches inside file-ledger records (written and replayed)."""

from __future__ import annotations

import sys
from collections.abc import Sequence
from typing import Any

import attrs

from awaken.core.messages import Usage
from awaken.engine.state import RunStatus
from awaken.ledger.interface import (
    Branch,
    PendingCall,
    RunRecord,
    tools_from_json,
    tools_to_json,
)


def run_to_json(run: RunRecord) -> dict[str, Any]:
    return {
        "run_id": run.run_id,
        "thread_id": run.thread_id,
        "agent_id": run.agent_id,
        "status": run.status.value,
        "created_at": run.created_at,
        "updated_at": run.updated_at,
        "error_code": run.error_code,
        "error_message": run.error_message,
        "usage": [run.usage.input_tokens, run.usage.output_tokens],
        "steps": run.steps,
        "cause": run.cause,
        **({"tools": tools_to_json(run.tools)} if run.tools else {}),
        **({"branch": run.branch} if run.branch else {}),  # a run of branch 0 is written as it always was
    }


NO_USAGE = Usage()


def usage_from_pair(pair: Sequence[int]) -> Usage:
    return NO_USAGE if not pair[0] and not pair[1] else Usage(*pair)


def run_from_json(d: dict[str, Any], thread_id: str | None = None) -> RunRecord:
    """A run record; ``thread_id`` (the index's own copy of the id) is shared instead of kept twice."""
    if thread_id is not None and d["thread_id"] != thread_id:
        raise CorruptRecord(f"run {d['run_id']!r} names thread {d['thread_id']!r}")
    return RunRecord(
        run_id=d["run_id"],
        thread_id=d["thread_id"] if thread_id is None else thread_id,
        agent_id=sys.intern(d["agent_id"]),
        status=RunStatus(d["status"]),
        created_at=d["created_at"],
        updated_at=d["updated_at"],
        error_code=d.get("error_code"),
        error_message=d.get("error_message"),
        usage=usage_from_pair(d.get("usage", (0, 0))),
        steps=d.get("steps", 0),
        cause=d.get("cause"),
        tools=tools_from_json(d.get("tools")),
        branch=d.get("branch", 0),
    )


def pending_to_json(p: PendingCall) -> dict[str, Any]:
    return attrs.asdict(p)


def pending_from_json(
    d: dict[str, Any], thread_id: str, run_id: str | None = None, ids: dict[str, str] | None = None
) -> PendingCall:
    """A pending call; the index's copies of the thread, run and message ids (``ids``) are shared,
    names interned."""
    if d["thread_id"] != thread_id:
        raise CorruptRecord(f"pending call {d['tool_call_id']!r} names thread {d['thread_id']!r}")
    return PendingCall(
        tool_call_id=d["tool_call_id"],
        run_id=run_id if run_id is not None and d["run_id"] == run_id else d["run_id"],
        thread_id=thread_id,
        name=sys.intern(d["name"]),
        arguments=d["arguments"],
        kind=sys.intern(d["kind"]),
        message_id=ids.get(d["message_id"], d["message_id"]) if ids else d["message_id"],
    )


def branch_to_json(b: Branch) -> dict[str, Any]:
    return {"branch": b.branch, "parent": b.parent, "fork_seq": b.fork_seq, "created_at": b.created_at,
            "run_id": b.run_id, "reason": b.reason}


def branch_from_json(d: dict[str, Any]) -> Branch:
    branch, parent, fork_seq = d["branch"], d["parent"], d["fork_seq"]
    if type(branch) is not int or type(parent) is not int or type(fork_seq) is not int:
        raise CorruptRecord(f"branch {branch!r} is not a branch record")
    return Branch(branch, parent, fork_seq, d["created_at"], d.get("run_id"), sys.intern(d.get("reason", "root")))


class CorruptRecord(Exception):
    """A whole, checksummed record that cannot be applied: a bug or a hand-edited file."""

