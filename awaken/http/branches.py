"""The threads API for threads that branch: a thread's branches, and a fork into a new thread.

Routes (JSON; times in ms since the epoch; errors ``{"error": {"code", "message"}}``):

    GET  /v1/threads/{id}/branches
        {activeBranch, items: [{branch, parent, forkSeq, forkMessageId, createdAt, runId, reason}]}
        every branch of the thread, branch 0 first (a thread that never branched: branch 0 alone).
        ``forkMessageId`` is the id of the message at ``forkSeq`` (the last one the branch keeps of its
        parent's path; null for 0); ``reason``: ``root``, ``regenerate`` or ``edit``. The thread detail
        (``GET /v1/threads/{id}``) carries the same ``activeBranch`` and ``branches``.
    POST /v1/threads/{id}/fork    body {"messageId": "<id>", "branch"?: N}
        201 {threadId}: a new thread owned by the caller, holding the path of the thread's active branch
        (or of ``branch``) up to and including that message: the same message ids, seqs 1..k, one branch,
        titled by its first user text. The runs those messages came from are copied under new ids when they
        ended (a run still running or waiting there is not: its messages keep a fresh run id of their
        own); the thread's state goes along only for a fork at the end of its active path. 400
        ``UNKNOWN_MESSAGE`` when the message is not on that path, ``UNKNOWN_BRANCH`` for a branch the
        thread does not have, ``INVALID_REQUEST``/``INVALID_JSON``/``UNSUPPORTED_MEDIA_TYPE`` for the body.

Both answer 404 ``UNKNOWN_THREAD`` for a thread the caller may not see (``access.visible_thread``), 503
``STORE_UNAVAILABLE`` when the ledger does not answer; the fork, a state change, is refused from a
foreign page as every POST is (``hosts.py``). The fork is built from ``read_messages`` and
``import_thread``: no backend method of its own.
"""

from __future__ import annotations

import time
from typing import Any

import attrs
from quart import jsonify, request
from quart_trio import QuartTrio

from awaken.core.errors import (
    AwakenError,
    InputRejected,
    StoreUnavailable,
    UnknownBranch,
    UnknownMessage,
    UnknownThread,
)
from awaken.core.ids import id_problem
from awaken.core.jsonbody import check_content_type, load_json_object, reject
from awaken.core.messages import Message
from awaken.engine.access import visible_thread
from awaken.engine.state import RunStatus
from awaken.http.auth import principal_of
from awaken.http.context import ServerContext
from awaken.http.errors import answering
from awaken.ledger.interface import Branch, Ledger, RunRecord, ThreadRecord
from awaken.ledger.paging import read_path
from awaken.wires.protocol import new_id

#: the classified errors these routes answer, each with its code's status
ANSWERED: tuple[type[AwakenError], ...] = (InputRejected, UnknownBranch, UnknownMessage, UnknownThread,
                                           StoreUnavailable)
#: messages read per ledger call while a fork copies a path
PAGE = 500
#: the run statuses a fork copies (a run still running or waiting on the source is not copied)
ENDED = frozenset({RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.INTERRUPTED})


async def branch_items(ledger: Ledger, thread_id: str) -> list[dict[str, Any]]:
    """Every branch of the thread as the API shows it (one read per branch that forked at a message)."""
    items = []
    for b in await ledger.list_branches(thread_id):
        items.append(branch_item(b, await _fork_message_id(ledger, thread_id, b)))
    return items


def branch_item(b: Branch, fork_message_id: str | None) -> dict[str, Any]:
    return {"branch": b.branch, "parent": b.parent, "forkSeq": b.fork_seq, "forkMessageId": fork_message_id,
            "createdAt": b.created_at, "runId": b.run_id, "reason": b.reason}


async def _fork_message_id(ledger: Ledger, thread_id: str, b: Branch) -> str | None:
    """The id of the message at ``b.fork_seq``: it is on its parent's path (the parent holds it)."""
    if not b.fork_seq or b.parent is None:
        return None
    found = await read_path(ledger, thread_id, b.fork_seq - 1, 1, b.parent)
    return found[0].id if found and found[0].seq == b.fork_seq else None


async def branches_of(ledger: Ledger, record: ThreadRecord) -> dict[str, Any]:
    """``{activeBranch, branches}`` of the thread detail."""
    return {"activeBranch": record.active_branch, "branches": await branch_items(ledger, record.thread_id)}


def fork_target(body: bytes, content_type: str | None) -> tuple[str, int | None]:
    """``(messageId, branch)`` of a fork's body (``branch`` None: the active one)."""
    check_content_type(content_type)
    data = load_json_object(body)
    message_id = data.get("messageId")
    if not isinstance(message_id, str) or not message_id or id_problem(message_id):
        raise reject("messageId must name a message of the thread (a non-empty id)")
    branch = data.get("branch")
    if branch is not None and (type(branch) is not int or branch < 0):
        raise reject("branch must be a branch number of the thread (a non-negative integer)")
    return message_id, branch


async def path_to(ledger: Ledger, thread_id: str, message_id: str, branch: int | None) -> tuple[list[Message], bool]:
    """The path of ``branch`` up to and including ``message_id``, and whether it ends there (nothing
    after it on that path). ``UNKNOWN_MESSAGE`` when the message is not on it."""
    path: list[Message] = []
    after = 0
    while True:
        page = await read_path(ledger, thread_id, after, PAGE, branch)
        for i, m in enumerate(page):
            path.append(m)
            if m.id == message_id:
                if i + 1 < len(page):
                    return path, False
                return path, not await read_path(ledger, thread_id, m.seq, 1, branch)
        if len(page) < PAGE:
            raise UnknownMessage(f"message {message_id!r} is not on the path of "
                                 f"{'the active branch' if branch is None else f'branch {branch}'} of thread "
                                 f"{thread_id!r}")
        after = page[-1].seq


def forked(source: ThreadRecord, runs: list[RunRecord], path: list[Message], *, thread_id: str, owner: str | None,
           at_end: bool, now: int) -> tuple[ThreadRecord, list[RunRecord], list[Message]]:
    """The new thread of a fork (pure): ``path`` renumbered 1..k on branch 0, its ended runs copied under
    new ids (every run id its messages carry is replaced: nothing in it names the source's runs)."""
    renamed = {run_id: new_id("run") for run_id in dict.fromkeys(m.run_id for m in path if m.run_id is not None)}
    copied = [attrs.evolve(r, run_id=renamed[r.run_id], thread_id=thread_id, branch=0)
              for r in runs if r.run_id in renamed and r.status in ENDED]
    messages = [attrs.evolve(m, seq=i, branch=0, run_id=renamed.get(m.run_id) if m.run_id else None)
                for i, m in enumerate(path, 1)]
    thread = ThreadRecord(thread_id, now, dict(source.state) if at_end else {}, len(messages), owner)
    return thread, copied, messages


def add_routes(app: QuartTrio, ctx: ServerContext) -> None:
    """The branches and fork routes on ``app``."""

    @app.get("/v1/threads/<path:thread_id>/branches")
    @answering(ANSWERED)
    async def branches(thread_id: str) -> Any:
        await visible_thread(ctx.app, principal_of(request.scope), thread_id)
        record = await ctx.ledger.get_thread(thread_id)
        if record is None:  # its first run is still being admitted
            raise UnknownThread(f"no thread {thread_id!r}")
        return jsonify({"activeBranch": record.active_branch, "items": await branch_items(ctx.ledger, thread_id)})

    @app.post("/v1/threads/<path:thread_id>/fork")
    @answering(ANSWERED)
    async def fork(thread_id: str) -> Any:
        principal = principal_of(request.scope)
        await visible_thread(ctx.app, principal, thread_id)
        message_id, branch = fork_target(await request.get_data(), request.headers.get("content-type"))
        record = await ctx.ledger.get_thread(thread_id)
        if record is None:
            raise UnknownThread(f"no thread {thread_id!r}")
        path, at_end = await path_to(ctx.ledger, thread_id, message_id, branch)
        at_end = at_end and branch in (None, record.active_branch)
        runs = await ctx.ledger.list_runs(thread_id)
        new_thread = new_id("thread")
        thread, copied, messages = forked(record, runs, path, thread_id=new_thread, owner=principal.subject,
                                          at_end=at_end, now=int(time.time() * 1000))
        await ctx.ledger.import_thread(thread, copied, messages, ())
        return jsonify({"threadId": new_thread}), 201
