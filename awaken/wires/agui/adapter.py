"""The AG-UI protocol adapter: validate, deduplicate, split input from decisions, pick the encoder.

It decides no run state: it scans the body (``request.py``), drops messages the ledger already
holds (replayed history: their content is never decoded nor validated, only their id, role and
tool call id are read), decodes the rest, and turns new ``role: "tool"`` messages (at a permission gate, read by
the denial grammar of ``awaken.wires.denial``) and ``resume[]`` entries (``interrupts.py``) into
``ToolDecision``s. The page's per-run tools, context and state go into the ``RunRequest`` as they
were parsed. Every
refusal is one ``RUN_ERROR`` stream (HTTP 200) and starts no run. ``PROTOCOL`` is what the SSE and
WebSocket routes serve; ``read_history`` answers the history route (``{items, cursor}``, a branch's
path with ``?branch=N``); ``WIRE`` declares the routes (the ``ag-ui`` entry point of the
``awaken.wires`` group).

Branches, by the documented ``forwardedProps`` flags (``request.Branching``): ``{"awaken":
{"regenerate": true}}`` with no new message makes the answer to the request's last user message again, on
a new branch (``regenerate_at``); ``{"awaken": {"edit": true}}`` opts in to edits: a user message the
thread holds whose content differs is continued from on a new branch (``edit_of``; the opt-in reads the
whole active path to compare). A waiting run on the path left behind is closed by the engine.
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet

from awaken.core.errors import InputRejected
from awaken.core.messages import Message
from awaken.ledger.interface import Ledger, ThreadView
from awaken.ledger.paging import read_page
from awaken.wires.agui.encoder import AguiEncoder, messages_snapshot
from awaken.wires.agui.history import project_history
from awaken.wires.agui.interrupts import call_of, open_interrupts, resume_decisions
from awaken.wires.agui.request import (
    AguiInput,
    InputMessage,
    join_scans,
    scan_known_run_input,
    scan_run_input,
    served_scan,
)
from awaken.wires.denial import read_gate_answer
from awaken.wires.encoding import WireEvent
from awaken.wires.memo import Parses
from awaken.wires.protocol import Asks, ForkAt, Protocol, RunRequest, ToolDecision
from awaken.wires.registry import Wire


class AguiProtocol(Protocol):
    #: what a server's replay memo wraps (``awaken.wires.memo.with_memos``)
    parses = Parses(scan_run_input, scan_known_run_input, served_scan, join_scans)

    def parse(self, body: bytes, content_type: str | None) -> AguiInput:
        # messages are decoded at admission, only those the thread does not hold (``AguiInput.fresh``)
        return scan_run_input(body, content_type)

    def encoder(self, parsed: AguiInput | None) -> AguiEncoder:
        if parsed is None:
            return AguiEncoder("", "")
        # The client already holds its own tool messages: echoing one as TOOL_CALL_RESULT would make the
        # client's reducer append a second message with the same id (both client generations do).
        client_held = parsed.tool_message_ids()
        return AguiEncoder(parsed.thread_id, parsed.run_id, modern=parsed.modern, client_held=client_held)

    def watch_encoder(self, thread_id: str, run_id: str) -> AguiEncoder:
        return AguiEncoder(thread_id, run_id)

    def snapshot(self, messages: list[Message]) -> list[WireEvent]:
        return messages_snapshot(messages)

    def target(self, parsed: AguiInput, route_agent: str | None) -> tuple[str, str | None]:
        return parsed.thread_id, route_agent

    def asks(self, parsed: AguiInput) -> Asks | None:
        if parsed.branching.edit:  # an edit is found by content: the opt-in reads the whole active path
            return None
        calls: dict[str, str | None] = {}
        for mid, call in parsed.entries():
            # a call carried by two messages is asked about whatever becomes of either
            calls[call] = mid if call not in calls else None
        for entry in parsed.resume:  # an interrupt already answered is found by its call's result
            calls.setdefault(call_of(entry.interrupt_id), None)
        return Asks(parsed.input_ids(), calls)

    def to_run_request(self, parsed: AguiInput, thread_id: str, agent_id: str | None,
                       view: ThreadView) -> RunRequest:
        data = parsed
        committed = view.message_ids()
        extra = {"tools": data.tools, "context": data.context, "state": data.state}
        if data.branching.edit and (edit := edit_of(data, view, committed)) is not None:
            at, edited = edit
            return RunRequest(thread_id, agent_id, tuple(edited), (), data.run_id, fork=at, **extra)
        # A tool message whose call already has a committed result (a decision at a permission gate,
        # or a call superseded by new input) is the client's copy of an earlier decision: replayed.
        answered = view.answered_calls()
        gates = frozenset(p.tool_call_id for p in view.pending if p.kind == "approval")
        inputs: list[Message] = []
        decisions: list[ToolDecision] = []
        for m in data.fresh(committed):
            if isinstance(m, InputMessage):
                if m.parts:
                    inputs.append(Message(m.id, m.role, m.parts))
            elif m.tool_call_id in answered:
                continue
            elif m.tool_call_id in gates:
                answer = read_gate_answer(m.content, m.error)
                decisions.append(ToolDecision(m.tool_call_id, "deny" if answer.denied else "approve",
                                              answer.reason if answer.denied else m.content, m.id))
            elif m.error is not None:
                decisions.append(ToolDecision(m.tool_call_id, "error", m.error or m.content, m.id))
            else:
                decisions.append(ToolDecision(m.tool_call_id, "ok", m.content, m.id))
        replay = False
        if data.resume:
            resumed, replay = resume_decisions(data.resume, view)
            by_call = {d.tool_call_id: d for d in decisions} | {d.tool_call_id: d for d in resumed}
            decisions = list(by_call.values())
        if data.branching.regenerate and not inputs:
            return RunRequest(thread_id, agent_id, (), (), data.run_id, fork=regenerate_at(data, committed), **extra)
        if data.modern and inputs and (still := open_interrupts(view, {d.tool_call_id for d in decisions})):
            raise InputRejected(
                f"interrupts are open on this thread ({', '.join(still)}); answer them with resume first",
                code="INTERRUPTS_OPEN",
            )
        replay = replay and not inputs and not decisions
        return RunRequest(thread_id, agent_id, tuple(inputs), tuple(decisions), data.run_id, replay=replay, **extra)


def regenerate_at(data: AguiInput, committed: AbstractSet[str]) -> ForkAt:
    """``forwardedProps.awaken.regenerate``: the answer to the request's last user (or system, developer)
    message is made again on a new branch that keeps the active path up to that message, which the
    thread must hold."""
    point = next((mid for mid, role, _ in reversed(data.inputs_in_order()) if role != "tool"), None)
    if point is None or point not in committed:
        raise InputRejected("nothing to regenerate: the messages must end with the history up to a user message "
                            "this thread holds", code="NO_NEW_INPUT")
    return ForkAt(point, True, "regenerate")


def edit_of(data: AguiInput, view: ThreadView, committed: AbstractSet[str]) -> tuple[ForkAt, list[Message]] | None:
    """``forwardedProps.awaken.edit``: the first user message of the request that the active path holds with
    other content is an edit. The run continues from the message before it on a new branch; its input is
    the edited message and the request's later messages the thread does not hold. None: no edit (the
    committed messages win, as without the flag)."""
    held = {m.id: m for m in view.messages if m.role == "user"}
    order = data.inputs_in_order()
    for k, (mid, role, decode) in enumerate(order):
        if role != "user" or mid not in held:
            continue
        try:
            message = decode()
        except InputRejected:  # the client's copy of a committed message, not content to run
            continue
        if not isinstance(message, InputMessage) or not message.parts or message.parts == held[mid].parts:
            continue
        inputs = [Message(mid, "user", message.parts)]
        for later, later_role, later_decode in order[k + 1:]:
            if later_role != "tool" and later not in committed:
                fresh = later_decode()
                if isinstance(fresh, InputMessage) and fresh.parts:
                    inputs.append(Message(fresh.id, fresh.role, fresh.parts))
        return ForkAt(mid, False, "edit"), inputs
    return None


PROTOCOL = AguiProtocol()


async def read_history(ledger: Ledger, thread_id: str, cursor: str | None, limit: int,
                       branch: int | None = None) -> tuple[list, str]:
    """One page of AG-UI messages of the path of ``branch`` (None: the active one) and the cursor after it."""
    messages, next_cursor = await read_page(ledger, thread_id, cursor, limit, branch)
    return project_history(messages), next_cursor




#: what the ``ag-ui`` entry point of the ``awaken.wires`` group registers
WIRE = Wire(
    PROTOCOL,
    runs=("/v1/ag-ui", "/v1/ag-ui/agents/{agent}"),
    sockets=("/v1/ag-ui/ws", "/v1/ag-ui/agents/{agent}/ws"),
    rejoins=("/v1/ag-ui/threads/{thread}/stream",),
    history=("/v1/ag-ui/threads/{thread}/messages",),
    read_history=read_history,
)
