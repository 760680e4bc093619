"""The AI SDK protocol adapter: validate, deduplicate, split input from decisions, pick the encoder.

It decides no run state. ``to_run_request`` (pure, over the thread's committed view) drops what the
ledger already holds — user/system messages by id, and tool parts whose call already has a committed
result (replayed history) — and turns the rest of the continued assistant message's tool parts into
``ToolDecision``s:

* ``output-available`` → ``ok`` with the JSON text of ``output``; ``output-error`` → ``error`` with
  ``errorText``; ``approval-responded`` → ``approve``/``deny`` (the denial ``reason`` is kept), after
  checking that ``approval.id`` is the ``approvalId`` this server issued (``wire.approval_id``).
* A call counts as answered when a committed tool result names it, under whatever message id
  (``tr_<toolCallId>`` for the engine's own, the client's id for a call answered over AG-UI).
* A decision for a call that is not pending reaches the engine, which refuses it
  (``TOOL_CALL_NOT_PENDING`` / ``NO_PENDING_RUN``): one ``error`` + ``finish{error}`` stream, nothing
  committed.
* Branches (``useChat``'s ``regenerate()`` and ``sendMessage({text, messageId})``, ai 6 and 7 alike):
  ``trigger: "regenerate-message"`` with nothing new is a run on a new branch that keeps the active path
  up to the user message before the answer it names (``regenerated``); ``trigger: "submit-message"``
  whose ``messageId`` names a committed user message of the request is an edit: a new branch from the
  message before it, with the request's version as input (``edited``). A regenerate that carries a new
  message (one that never reached the thread) is an ordinary turn.

``PROTOCOL`` is what the SSE and WebSocket routes serve; ``read_history`` answers the history route (``{items, cursor}``,
paging that never splits one run's assistant UIMessage); ``WIRE`` declares the routes (the ``ai-sdk``
entry point of the ``awaken.wires`` group).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

import orjson

from awaken.core.errors import InputRejected
from awaken.core.messages import Message
from awaken.ledger.interface import Ledger, ThreadView
from awaken.ledger.paging import encode_cursor, read_page, read_path
from awaken.wires.aisdk.encoder import AiSdkEncoder
from awaken.wires.aisdk.history import project_history, same_group
from awaken.wires.aisdk.request import (
    AiSdkInput,
    ToolPartAnswer,
    join_ui_scans,
    scan_chat_request,
    scan_known_chat_request,
    served_ui_scan,
)
from awaken.wires.aisdk.wire import DONE, approval_id
from awaken.wires.encoding import WireEvent
from awaken.wires.memo import Parses
from awaken.wires.protocol import Asks, ForkAt, Protocol, RunRequest, ToolDecision
from awaken.wires.registry import Wire

#: ``UI_MESSAGE_STREAM_HEADERS`` beyond what the SSE transport sends itself
EXTRA_HEADERS = [(b"connection", b"keep-alive"), (b"x-vercel-ai-ui-message-stream", b"v1")]
#: messages read per ledger call when a history page is extended to a run boundary
_EXTEND_BATCH = 64


def decision_of(answer: ToolPartAnswer) -> ToolDecision:
    """The engine's decision for one answered tool part (``message_id`` None: committed as ``tr_<id>``)."""
    if answer.state == "approval-responded":
        if answer.approved:
            return ToolDecision(answer.tool_call_id, "approve")
        return ToolDecision(answer.tool_call_id, "deny", answer.reason or "")
    if answer.state == "output-error":
        return ToolDecision(answer.tool_call_id, "error", answer.error_text)
    return ToolDecision(answer.tool_call_id, "ok", orjson.dumps(answer.output).decode())


class AiSdkProtocol(Protocol):
    sse_headers = EXTRA_HEADERS

    def closing(self) -> list[WireEvent]:
        """Every AI SDK stream, a run's or a refusal's, ends with ``[DONE]`` after its ``finish``."""
        return [DONE]

    #: what a server's replay memo wraps (``awaken.wires.memo.with_memos``)
    parses = Parses(scan_chat_request, scan_known_chat_request, served_ui_scan, join_ui_scans)

    def parse(self, body: bytes, content_type: str | None) -> AiSdkInput:
        # messages are decoded at admission, only those the thread does not hold (``fresh_inputs``)
        return scan_chat_request(body, content_type)

    def encoder(self, parsed: AiSdkInput | None) -> AiSdkEncoder:
        return AiSdkEncoder(parsed.continued_id if parsed is not None else None)

    def target(self, parsed: AiSdkInput, route_agent: str | None) -> tuple[str | None, str | None]:
        return parsed.thread_id, route_agent or parsed.agent_id  # the route's agent wins over the body's

    def asks(self, parsed: AiSdkInput) -> Asks:
        return Asks(parsed.message_ids(), dict.fromkeys(a.tool_call_id for a in parsed.answers))

    def to_run_request(self, parsed: AiSdkInput, thread_id: str, agent_id: str | None,
                       view: ThreadView) -> RunRequest:
        committed = view.message_ids()
        answered = view.answered_calls()
        inputs = tuple(Message(m.id, m.role, m.parts) for m in parsed.fresh_inputs(committed) if m.parts)
        answers = [a for a in parsed.answers if a.tool_call_id not in answered]
        for a in answers:
            if a.state == "approval-responded" and a.approval_id != approval_id(a.tool_call_id):
                raise InputRejected(
                    f"approval {a.approval_id!r} was not issued for tool call {a.tool_call_id!r}; "
                    "answer the approval request the server sent",
                    code="TOOL_CALL_NOT_PENDING",
                )
        if parsed.trigger == "regenerate-message" and not inputs:
            return RunRequest(thread_id, agent_id, fork=regenerated(parsed, committed))
        if parsed.trigger == "submit-message" and (edit := edited(parsed, committed)) is not None:
            edits = tuple(Message(m.id, m.role, m.parts) for m in parsed.fresh_inputs(committed - {edit}) if m.parts)
            if edits and edits[0].id == edit:
                return RunRequest(thread_id, agent_id, edits, fork=ForkAt(edit, False, "edit"))
        return RunRequest(thread_id, agent_id, inputs, tuple(decision_of(a) for a in answers))


def regenerated(parsed: AiSdkInput, committed: AbstractSet[str]) -> ForkAt:
    """Where ``regenerate()`` forks: after the last user (or system) message before the assistant message
    it names (``messageId``; absent: the end of the request, as ``useChat`` sliced its messages before
    that answer). That message must be committed on the thread's active path."""
    order = parsed.roles()
    ids = [mid for mid, _ in order]
    if parsed.message_id is not None and parsed.message_id in ids:
        named = ids.index(parsed.message_id)
        order = order[: named + 1 if order[named][1] != "assistant" else named]
    point = next((mid for mid, role in reversed(order) if role != "assistant"), None)
    if point is None or point not in committed:
        raise InputRejected("nothing to regenerate: the request holds no question this thread committed (send "
                            "the history up to the user message whose answer is made again)", code="NO_NEW_INPUT")
    return ForkAt(point, True, "regenerate")


def edited(parsed: AiSdkInput, committed: AbstractSet[str]) -> str | None:
    """The id of the user message ``sendMessage({text, messageId})`` replaced: ``messageId`` names a user
    message of the request that the thread's active path holds (a tool continuation names an assistant
    message: not an edit). The run then continues from the message before it, on a new branch, with the
    request's version of it as input (whatever its content: an edit is what the person asked for)."""
    target = parsed.message_id
    if target is None or target == parsed.continued_id or target not in committed:
        return None
    return target if (target, "user") in parsed.roles() else None


PROTOCOL = AiSdkProtocol()


async def read_history(ledger: Ledger, thread_id: str, cursor: str | None, limit: int,
                       branch: int | None = None) -> tuple[list[dict], str]:
    """One page of UIMessages of the path of ``branch`` (None: the active one) and the cursor after it.

    Paging never splits one run's assistant UIMessage: a page that would end inside one is
    **extended** forward to the run's boundary (so a page may hold more than ``limit`` messages;
    extending, unlike cutting before, always makes progress). A page that starts inside one — the
    run went on after the previous page was read, e.g. a waiting run was resumed — re-sends that
    UIMessage **whole**, with the same id: a client replaces messages by id. The cursor still marks the
    last committed message the page holds, with the AG-UI route's 400/404/503 rules.
    """
    messages, next_cursor = await read_page(ledger, thread_id, cursor, limit, branch)
    if messages and messages[-1].role in ("assistant", "tool"):
        run_id = messages[-1].run_id
        while True:
            more = await read_path(ledger, thread_id, messages[-1].seq, _EXTEND_BATCH, branch)
            taken = 0
            for m in more:
                if not same_group(m, run_id):
                    break
                messages.append(m)
                taken += 1
            if taken < _EXTEND_BATCH:
                break
        next_cursor = encode_cursor(thread_id, messages[-1].seq)
    if messages and messages[0].role in ("assistant", "tool"):
        messages = await _group_head(ledger, thread_id, messages[0], branch) + messages
    pending = await ledger.pending_calls(thread_id)
    usage = {r.run_id: r.usage for r in await ledger.list_runs(thread_id)}
    thread = await ledger.get_thread(thread_id)
    # the thread's state is its active path's: only a page ending that path carries it
    last = thread is not None and bool(messages) and messages[-1].seq == thread.last_seq and (
        branch is None or branch == thread.active_branch)
    return project_history(messages, pending, usage, thread.state if last and thread else None), next_cursor


async def _group_head(ledger: Ledger, thread_id: str, first: Message, branch: int | None) -> list[Message]:
    """The earlier messages of the assistant UIMessage ``first`` belongs to (read backward in windows)."""
    head: list[Message] = []
    end = first.seq - 1
    while end > 0:
        start = max(0, end - _EXTEND_BATCH)
        window = [m for m in await read_path(ledger, thread_id, start, end - start, branch) if m.seq <= end]
        for m in reversed(window):
            if not same_group(m, first.run_id):
                return head
            head.insert(0, m)
        end = start
    return head


#: what the ``ai-sdk`` entry point of the ``awaken.wires`` group registers
WIRE = Wire(
    PROTOCOL,
    runs=("/v1/ai-sdk/chat", "/v1/ai-sdk/agents/{agent}/chat"),
    sockets=("/v1/ai-sdk/ws", "/v1/ai-sdk/agents/{agent}/ws"),
    rejoins=("/v1/ai-sdk/chat/{thread}/stream", "/v1/ai-sdk/agents/{agent}/chat/{thread}/stream"),
    history=("/v1/ai-sdk/threads/{thread}/messages",),
    read_history=read_history,
)
