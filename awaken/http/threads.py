"""The threads API (issue 13 item 4): list, read, delete and stop the caller's threads.

Routes (JSON; times in ms since the epoch; errors ``{"error": {"code", "message"}}``):

    GET    /v1/threads?cursor=&limit=&agent=
        {items: [{threadId, title, agentId, createdAt, updatedAt, messageCount,
                  lastRun: {runId, status, cause, errorCode} | null, waiting}], cursor}
        the caller's threads (an admin's: every thread), most recently updated first; ``cursor``
        asks for the next page and is null after the last one. 400 ``INVALID_CURSOR`` for a bad
        cursor or limit.
    GET    /v1/threads/{id}
        {threadId, title, agentId, createdAt, updatedAt, messageCount, waiting,
         runs: [{runId, agentId, status, cause, errorCode, createdAt, updatedAt, steps,
                 usage: {inputTokens, outputTokens}, error: {code, message} | null,
                 timeline: {spans: [{id, parentId, kind, name, start, end, durationMs, attributes,
                                     error}], dropped} | null}],
         pending: [{toolCallId, runId, name, arguments, kind}], state,
         activeBranch, branches: [{branch, parent, forkSeq, forkMessageId, createdAt, runId, reason}]}
        (the branches as ``GET /v1/threads/{id}/branches`` lists them: awaken/http/branches.py, with the fork)
    DELETE /v1/threads/{id}
        204; the whole thread goes in one ledger transaction; 409 ``THREAD_BUSY`` while a run is
        active. Afterwards its history is 404 and the id can start a new thread.
    POST   /v1/threads/{id}/stop
        200 {runId, status} once the active run's outcome is committed (``interrupted``, cause
        ``stopped``, unless it reached another outcome first); its stream, on whichever protocol
        and transport, ends with the protocol's terminal event for a stop; a run another server process
        of a shared ledger holds is stopped there (the same answer). 204 when nothing runs anywhere.

Every route on a thread answers 404 ``UNKNOWN_THREAD`` for a thread the caller may not see
(``access.visible_thread``), exactly as for one that does not exist. 503 ``STORE_UNAVAILABLE``
when the ledger does not answer.
"""

from __future__ import annotations

from typing import Any

from quart import jsonify, request
from quart_trio import QuartTrio

from awaken.core.errors import (
    AwakenError,
    BadCursor,
    BadLimit,
    InputRejected,
    StoreUnavailable,
    UnknownThread,
)
from awaken.engine.access import sees_every_thread, visible_thread
from awaken.http import branches as branches_api
from awaken.http.auth import principal_of
from awaken.http.context import ServerContext
from awaken.http.errors import answering
from awaken.ledger.interface import ALL_OWNERS, PendingCall, RunRecord, RunSummary, ThreadSummary
from awaken.ledger.paging import parse_limit
from awaken.telemetry import tracing
from awaken.wires.memo import Memoized
from awaken.wires.protocol import Protocol

#: the classified errors the routes here answer, each with its code's status (``errors.CODES``): 400
#: ``INVALID_CURSOR``/``INVALID_LIMIT``, 404 ``UNKNOWN_THREAD``, 409 ``THREAD_BUSY``, 503 ``STORE_UNAVAILABLE``
ANSWERED: tuple[type[AwakenError], ...] = (BadCursor, BadLimit, UnknownThread, InputRejected, StoreUnavailable)


def run_summary(run: RunSummary | None) -> dict[str, Any] | None:
    if run is None:
        return None
    return {"runId": run.run_id, "status": str(run.status), "cause": run.cause, "errorCode": run.error_code}


def summary(s: ThreadSummary) -> dict[str, Any]:
    return {"threadId": s.thread_id, "title": s.title or "", "agentId": s.agent_id, "createdAt": s.created_at,
            "updatedAt": s.updated_at, "messageCount": s.message_count, "lastRun": run_summary(s.last_run),
            "waiting": s.waiting}


def run_detail(run: RunRecord) -> dict[str, Any]:
    error = {"code": run.error_code, "message": run.error_message} if run.error_code else None
    return {"runId": run.run_id, "agentId": run.agent_id, "status": str(run.status), "cause": run.cause,
            "errorCode": run.error_code, "createdAt": run.created_at, "updatedAt": run.updated_at,
            "steps": run.steps, "usage": {"inputTokens": run.usage.input_tokens,
                                          "outputTokens": run.usage.output_tokens},
            "error": error}


def timeline(timelines: tracing.Timelines, thread_id: str, run_id: str) -> dict[str, Any] | None:
    """The run's spans as this server recorded them (``timelines``: awaken/telemetry/tracing.py), None
    when it holds none (an older run, or one another process ran)."""
    kept = timelines.get(thread_id, run_id)
    return kept.as_json() if kept is not None else None


def pending_call(call: PendingCall) -> dict[str, Any]:
    return {"toolCallId": call.tool_call_id, "runId": call.run_id, "name": call.name,
            "arguments": call.arguments, "kind": call.kind}


def add_routes(app: QuartTrio, ctx: ServerContext, protocols: list[Protocol]) -> None:
    """The threads API on ``app``; ``protocols``: the registered wires' (a deleted thread's last request
    bytes leave their replay memos)."""
    branches_api.add_routes(app, ctx)  # /v1/threads/{id}/branches and /fork

    @app.get("/v1/threads")
    @answering(ANSWERED)
    async def threads() -> Any:
        principal = principal_of(request.scope)
        limit = parse_limit(request.args.get("limit"))
        owner = ALL_OWNERS if sees_every_thread(principal) else principal.subject
        try:
            page = await ctx.ledger.list_thread_summaries(owner, request.args.get("agent") or None,
                                                          request.args.get("cursor") or None, limit)
        except ValueError as exc:
            raise BadCursor(f"{exc}; start again without a cursor") from None
        return jsonify({"items": [summary(s) for s in page.items], "cursor": page.cursor})

    @app.get("/v1/threads/<path:thread_id>")
    @answering(ANSWERED)
    async def thread(thread_id: str) -> Any:
        await visible_thread(ctx.app, principal_of(request.scope), thread_id)
        found = await ctx.ledger.thread_summary(thread_id)
        record = await ctx.ledger.get_thread(thread_id)
        if found is None or record is None:  # its first run is still being admitted
            raise UnknownThread(f"no thread {thread_id!r}")
        detail = summary(found)
        del detail["lastRun"]
        runs = await ctx.ledger.list_runs(thread_id)
        pending = await ctx.ledger.pending_calls(thread_id)
        return jsonify({**detail, "runs": [{**run_detail(r), "timeline": timeline(ctx.timelines, thread_id, r.run_id)} for r in runs],
                        "pending": [pending_call(p) for p in pending], "state": record.state,
                        **await branches_api.branches_of(ctx.ledger, record)})

    @app.delete("/v1/threads/<path:thread_id>")
    @answering(ANSWERED)
    async def delete(thread_id: str) -> Any:
        await visible_thread(ctx.app, principal_of(request.scope), thread_id)
        if not await ctx.app.delete(thread_id):
            raise UnknownThread(f"no thread {thread_id!r}")
        for protocol in protocols:  # its last request's bytes go too
            if isinstance(protocol, Memoized):
                protocol.memo.forget(thread_id)
        return "", 204

    @app.post("/v1/threads/<path:thread_id>/stop")
    @answering(ANSWERED)
    async def stop(thread_id: str) -> Any:
        await visible_thread(ctx.app, principal_of(request.scope), thread_id)
        run = ctx.app.active(thread_id)
        status = await ctx.app.stop(thread_id)  # a run another process holds is stopped there
        if status is None:
            return "", 204
        if run is None:  # it ran on another process: its committed record says which run stopped
            runs = await ctx.ledger.list_runs(thread_id)
            return jsonify({"runId": runs[-1].run_id, "status": str(runs[-1].status)})
        return jsonify({"runId": run.run_id, "status": str(status)})  # the id as committed
