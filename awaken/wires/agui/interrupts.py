"""AG-UI 1.0 interrupts (sans-IO): permission gates as ``Interrupt`` objects, and ``resume[]`` entries
back into tool decisions.

The mapping (docs/clients.md, "AG-UI interrupts"):

* every call waiting at a permission gate is one interrupt: ``id`` ``int_<toolCallId>`` (derived, so
  it is stable across processes and never stored), ``reason: "tool_call"``, ``toolCallId``, a
  ``message`` and a ``responseSchema`` ``{approved: boolean, reason?: string, editedArgs?: <the tool's
  parameters>}``. A client-executed tool is not an interrupt (the 1.0 frontend-tools rule).
* ``{status: "resolved", payload: {approved: true, editedArgs?}}`` approves (edited arguments replace
  the model's, once they satisfy the tool's parameters); ``{approved: false, reason?}`` and
  ``{status: "cancelled"}`` deny, the reason committed. An optional key that is present has the
  schema's type: ``editedArgs: null`` or ``reason: null`` is ``INVALID_RESUME``, not an absent key.
* one resume answers every open interrupt (``INTERRUPT_MISSING``); an id that names no interrupt of
  the thread is ``INTERRUPT_UNKNOWN``; an interrupt already answered is ``INTERRUPT_ANSWERED`` unless
  the entry repeats the committed answer exactly (then it is an idempotent replay); a payload
  outside the schema is ``INVALID_RESUME``; new user input while interrupts are open, from a 1.0
  client, is ``INTERRUPTS_OPEN``.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs
import orjson

from awaken.core.errors import InputRejected
from awaken.core.events import Gate
from awaken.core.messages import ToolCallPart, ToolResultPart
from awaken.ledger.interface import ThreadView
from awaken.wires.protocol import ToolDecision, denial

REASON = "tool_call"
_PREFIX = "int_"
#: the reason committed for a cancelled interrupt
CANCELLED = "cancelled"
_ABSENT: Any = object()


@attrs.frozen
class ResumeEntry:
    """One ``RunAgentInput.resume[]`` entry as parsed."""

    interrupt_id: str
    status: Literal["resolved", "cancelled"]
    payload: Any = _ABSENT

    @property
    def has_payload(self) -> bool:
        return self.payload is not _ABSENT

    @staticmethod
    def payload_absent() -> Any:
        return _ABSENT


def interrupt_id(tool_call_id: str) -> str:
    return f"{_PREFIX}{tool_call_id}"


def call_of(interrupt: str) -> str:
    """The tool call id an interrupt id names (the id itself when it is not one of ours)."""
    return interrupt.removeprefix(_PREFIX)


def response_schema(parameters: dict[str, Any]) -> dict[str, Any]:
    edited = {**(parameters or {"type": "object"}),
              "description": "Full replacement of the tool's arguments (not merged)."}
    return {
        "type": "object",
        "properties": {
            "approved": {"type": "boolean"},
            "reason": {"type": "string"},
            "editedArgs": edited,
        },
        "required": ["approved"],
    }


def interrupt(gate: Gate) -> dict[str, Any]:
    return {
        "id": interrupt_id(gate.tool_call_id),
        "reason": REASON,
        "message": f"Allow {gate.name} with arguments {gate.arguments}?",
        "toolCallId": gate.tool_call_id,
        "responseSchema": response_schema(gate.parameters),
    }


def _invalid(entry: ResumeEntry, what: str) -> InputRejected:
    return InputRejected(f"resume entry {entry.interrupt_id!r}: {what}", code="INVALID_RESUME")


def decision(entry: ResumeEntry, tool_call_id: str) -> ToolDecision:
    """The decision a resume entry makes for the call its interrupt gates."""
    if entry.status == "cancelled":
        return ToolDecision(tool_call_id, "deny", CANCELLED)
    payload = entry.payload
    if not isinstance(payload, dict):
        raise _invalid(entry, "a resolved entry needs a payload object {approved: boolean, reason?, editedArgs?}")
    approved = payload.get("approved")
    if not isinstance(approved, bool):
        raise _invalid(entry, "payload.approved must be a boolean")
    # Present means present: ``null`` is not an absent ``reason`` or ``editedArgs`` (the schema's types).
    reason = payload.get("reason", "")
    if not isinstance(reason, str):
        raise _invalid(entry, "payload.reason must be a string")
    edited = payload.get("editedArgs", _ABSENT)
    if edited is not _ABSENT and not isinstance(edited, dict):
        raise _invalid(entry, "payload.editedArgs must be an object")
    if not approved:
        if edited is not _ABSENT:
            raise _invalid(entry, "payload.editedArgs only goes with approved: true")
        return ToolDecision(tool_call_id, "deny", reason)
    arguments = orjson.dumps(edited).decode() if edited is not _ABSENT else None
    return ToolDecision(tool_call_id, "approve", reason, arguments=arguments)


def _repeats(made: ToolDecision, result: ToolResultPart, call: ToolCallPart | None) -> bool:
    """Whether ``made`` is exactly the answer ``result`` committed."""
    if made.kind == "deny":
        return result.approval == "denied" and result.content == denial(made.content)
    if result.approval != "approved":
        return False
    if made.arguments is None:
        return result.arguments is None
    ran = result.arguments if result.arguments is not None else (call.arguments if call else None)
    return ran is not None and orjson.loads(ran) == orjson.loads(made.arguments)


def resume_decisions(entries: tuple[ResumeEntry, ...], view: ThreadView) -> tuple[list[ToolDecision], bool]:
    """Decisions for the open interrupts ``entries`` answer, and whether every entry only repeated a
    committed answer (an idempotent replay). Raises ``InputRejected`` (changing nothing) otherwise.

    An answered interrupt is recognised by its call's committed result (``view.answered_calls``, which
    the adapter's ``asks`` covers). Its answer is compared when the result is in the view's messages;
    one older than an admission view's tail cannot be compared and is taken as a repeat (it changes
    nothing either way)."""
    open_calls = {interrupt_id(p.tool_call_id): p for p in view.pending if p.kind == "approval"}
    answered = view.answered_calls()
    results = {m.tool_result.tool_call_id: m.tool_result for m in view.messages if m.tool_result is not None}
    calls = {c.tool_call_id: c for m in view.messages for c in m.tool_calls}
    decisions: list[ToolDecision] = []
    replayed = 0
    for entry in entries:
        call = open_calls.get(entry.interrupt_id)
        if call is not None:
            decisions.append(decision(entry, call.tool_call_id))
            continue
        tool_call_id = call_of(entry.interrupt_id)
        result = results.get(tool_call_id)
        ours = entry.interrupt_id.startswith(_PREFIX) and tool_call_id in answered
        if not ours or (result is not None and result.approval is None):
            raise InputRejected(
                f"resume names interrupt {entry.interrupt_id!r}, which is not an interrupt of this thread"
                + (f"; open: {', '.join(open_calls)}" if open_calls else ""),
                code="INTERRUPT_UNKNOWN",
            )
        made = decision(entry, tool_call_id)
        if result is not None and not _repeats(made, result, calls.get(tool_call_id)):
            raise InputRejected(
                f"interrupt {entry.interrupt_id!r} was already answered ({result.approval}); "
                "a repeated resume must carry the same answer",
                code="INTERRUPT_ANSWERED",
            )
        replayed += 1
    done = {interrupt_id(d.tool_call_id) for d in decisions}
    if (decisions or replayed) and (missing := [i for i in open_calls if i not in done]):
        raise InputRejected(f"the resume must answer every open interrupt; missing: {', '.join(missing)}",
                            code="INTERRUPT_MISSING")
    return decisions, bool(entries) and replayed == len(entries)


def open_interrupts(view: ThreadView, decided: set[str]) -> list[str]:
    """Interrupt ids still open on the thread once ``decided`` call ids are answered."""
    return [interrupt_id(p.tool_call_id) for p in view.pending
            if p.kind == "approval" and p.tool_call_id not in decided]
