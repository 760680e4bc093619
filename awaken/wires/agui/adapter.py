"""The AG-UI protocol adapter: validate, deduplicate, split input from decisions, pick the encoder.

It decides no run state: it scans the body (``request.py``), drops messages the ledger already
holds (replayed history: their content is never decoded nor validated, only their id, role and
tool call id are read), decodes the rest, and turns new ``role: "tool"`` messages (at a permission gate, read by
the denial grammar of ``awaken.wires.denial``) and ``resume[]`` entries (``interrupts.py``) into
``ToolDecision``s. The page's per-run tools, context and state go into the ``RunRequest`` as they
were parsed. Every
refusal is one ``RUN_ERROR`` stream (HTTP 200) and starts no run. ``PROTOCOL`` is what the SSE and
WebSocket routes serve; ``read_history`` answers the history route (``{items, cursor}``); ``WIRE``
declares the routes (the ``ag-ui`` entry point of the ``awaken.wires`` group).
"""

from __future__ import annotations

from awaken.core.errors import InputRejected
from awaken.core.messages import Message
from awaken.ledger.interface import Ledger, ThreadView
from awaken.ledger.paging import read_page
from awaken.wires.agui.encoder import AguiEncoder, messages_snapshot
from awaken.wires.agui.history import project_history
from awaken.wires.agui.interrupts import call_of, open_interrupts, resume_decisions
from awaken.wires.agui.request import AguiInput, InputMessage, scan_known_run_input, scan_run_input
from awaken.wires.denial import read_gate_answer
from awaken.wires.encoding import WireEvent
from awaken.wires.memo import Parses
from awaken.wires.protocol import Asks, Protocol, RunRequest, ToolDecision
from awaken.wires.registry import Wire


class AguiProtocol(Protocol):
    #: what a server's replay memo wraps (``awaken.wires.memo.with_memos``)
    parses = Parses(scan_run_input, scan_known_run_input)

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

    def asks(self, parsed: AguiInput) -> Asks:
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
        if data.modern and inputs and (still := open_interrupts(view, {d.tool_call_id for d in decisions})):
            raise InputRejected(
                f"interrupts are open on this thread ({', '.join(still)}); answer them with resume first",
                code="INTERRUPTS_OPEN",
            )
        replay = replay and not inputs and not decisions
        return RunRequest(thread_id, agent_id, tuple(inputs), tuple(decisions), data.run_id,
                          tools=data.tools, context=data.context, state=data.state, replay=replay)


PROTOCOL = AguiProtocol()


async def read_history(ledger: Ledger, thread_id: str, cursor: str | None, limit: int) -> tuple[list, str]:
    """One page of AG-UI messages and the cursor after it."""
    messages, next_cursor = await read_page(ledger, thread_id, cursor, limit)
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
