"""The read side of the threads API (issue 13 item 4), as the console needs it.

A stand-in until the front-door branch lands its own: it answers exactly the shape that issue
fixes, computed from the ledger interface as it is on main (no owners yet, so every caller sees
every thread; no ledger-side listing order, so the listing reads every thread's runs):

    GET /v1/threads?cursor=&limit=&agent=
        {items: [{threadId, title, agentId, createdAt, updatedAt, messageCount,
                  lastRun: {runId, status, cause, errorCode} | null, waiting}], cursor}
        most recently updated first; ``cursor`` is opaque, and a page with no items is the end.
    GET /v1/threads/{id}
        {threadId, title, agentId, createdAt, updatedAt, messageCount, waiting,
         runs: [{runId, agentId, status, cause, createdAt, updatedAt, steps,
                 usage: {inputTokens, outputTokens}, error: {code, message} | null}],
         pending: [{toolCallId, runId, name, arguments, kind}], state}

Times are milliseconds since the epoch. 400 ``INVALID_CURSOR`` for a bad cursor or limit, 404
``UNKNOWN_THREAD``, 503 ``STORE_UNAVAILABLE``.
"""

from __future__ import annotations

import base64
from typing import Any

import orjson
from quart import jsonify, request
from quart_trio import QuartTrio

from .context import ServerContext
from .errors import AwakenError, BadCursor, StoreUnavailable, UnknownThread
from .history import parse_limit
from .ledger import Ledger, PendingCall, RunRecord, ThreadRecord
from .runstate import RunStatus

TITLE_CHARS = 120
#: messages read from a thread's start to find its first user text
TITLE_SCAN = 8


def _run_summary(run: RunRecord) -> dict[str, Any]:
    return {"runId": run.run_id, "status": run.status.value if isinstance(run.status, RunStatus) else run.status,
            "cause": run.cause, "errorCode": run.error_code}


def _run_detail(run: RunRecord) -> dict[str, Any]:
    error = {"code": run.error_code, "message": run.error_message} if run.error_code else None
    return {
        **_run_summary(run),
        "agentId": run.agent_id,
        "createdAt": run.created_at,
        "updatedAt": run.updated_at,
        "steps": run.steps,
        "usage": {"inputTokens": run.usage.input_tokens, "outputTokens": run.usage.output_tokens},
        "error": error,
    }


def _pending(call: PendingCall) -> dict[str, Any]:
    return {"toolCallId": call.tool_call_id, "runId": call.run_id, "name": call.name,
            "arguments": call.arguments, "kind": call.kind}


async def _summary(ledger: Ledger, thread: ThreadRecord) -> tuple[dict[str, Any], list[RunRecord]]:
    runs = await ledger.list_runs(thread.thread_id)
    first = await ledger.read_messages(thread.thread_id, 0, TITLE_SCAN)
    title = next((m.text.strip() for m in first if m.role == "user" and m.text.strip()), "")
    last = runs[-1] if runs else None
    summary = {
        "threadId": thread.thread_id,
        "title": " ".join(title.split())[:TITLE_CHARS],
        "agentId": last.agent_id if last else None,
        "createdAt": thread.created_at,
        "updatedAt": max([thread.created_at, *(r.updated_at for r in runs)]),
        "messageCount": thread.last_seq,
        "lastRun": _run_summary(last) if last else None,
        "waiting": bool(last and last.status == RunStatus.WAITING),
    }
    return summary, runs


def _encode(updated_at: int, thread_id: str) -> str:
    return base64.urlsafe_b64encode(orjson.dumps([updated_at, thread_id])).decode()


def _decode(cursor: str) -> tuple[int, str]:
    try:
        updated_at, thread_id = orjson.loads(base64.urlsafe_b64decode(cursor.encode()))
        if not isinstance(updated_at, int) or not isinstance(thread_id, str):
            raise ValueError(cursor)
    except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
        raise BadCursor("the cursor is not one this listing gave; start again without a cursor") from exc
    return updated_at, thread_id


async def list_page(ledger: Ledger, cursor: str | None, limit: int, agent: str | None) -> tuple[list, str]:
    """One page of thread summaries, most recently updated first, and the cursor after it."""
    after = _decode(cursor) if cursor else None
    summaries = [(await _summary(ledger, t))[0] for t in await ledger.list_threads()]
    if agent:
        summaries = [s for s in summaries if s["agentId"] == agent]
    # newest first; ties by thread id so the order (and the cursor) is total
    summaries.sort(key=lambda s: (-s["updatedAt"], s["threadId"]))
    if after is not None:
        key = (-after[0], after[1])
        summaries = [s for s in summaries if (-s["updatedAt"], s["threadId"]) > key]
    page = summaries[:limit]
    next_cursor = _encode(page[-1]["updatedAt"], page[-1]["threadId"]) if page else (cursor or _encode(2**62, ""))
    return page, next_cursor


async def thread_detail(ledger: Ledger, thread_id: str) -> dict[str, Any]:
    thread = await ledger.get_thread(thread_id)
    if thread is None:
        raise UnknownThread(f"no thread {thread_id!r}")
    summary, runs = await _summary(ledger, thread)
    del summary["lastRun"]
    pending = await ledger.pending_calls(thread_id)
    return {**summary, "runs": [_run_detail(r) for r in runs], "pending": [_pending(p) for p in pending],
            "state": thread.state}


def add_routes(app: QuartTrio, ctx: ServerContext) -> None:
    def error(exc: AwakenError, status: int):  # noqa: ANN202 - a quart response tuple
        return jsonify({"error": {"code": exc.code, "message": exc.message}}), status

    @app.get("/v1/threads")
    async def threads():  # noqa: ANN202
        try:
            limit = parse_limit(request.args.get("limit"))
            items, cursor = await list_page(ctx.ledger, request.args.get("cursor") or None, limit,
                                            request.args.get("agent") or None)
        except BadCursor as exc:
            return error(exc, 400)
        except StoreUnavailable as exc:
            return error(exc, 503)
        return jsonify({"items": items, "cursor": cursor})

    @app.get("/v1/threads/<path:thread_id>")
    async def thread(thread_id: str):  # noqa: ANN202
        try:
            return jsonify(await thread_detail(ctx.ledger, thread_id))
        except UnknownThread as exc:
            return error(exc, 404)
        except StoreUnavailable as exc:
            return error(exc, 503)
