"""Project committed messages as AI SDK ``UIMessage``s (the history route's ``items``). Pure.

* user / system (and AG-UI ``developer``, shown as ``system``) → ``{id, role, parts}`` with ``text``
  parts and image ``file`` parts (``{type: "file", mediaType, url}``).
* The assistant and tool messages of one run, up to the next input message, become **one** assistant
  ``UIMessage`` — what the live stream built — with ``id`` = the run's first assistant message id
  (the stream's ``start.messageId``) and ``metadata: {runId, usage}`` (the run's committed usage, as
  the live ``finish`` sent it), plus ``incomplete: <reason>`` when the run's early end cut the answer off
  (``stopped``, ``client_gone``, ``shutdown``, ``superseded``, ``failed``…: what was streamed is kept). The thread's last run ends with a ``data-state`` part holding the
  thread's current state (when it has one; the live stream sent it where the state changed). Each committed step is ``step-start``, then ``reasoning`` parts (with the
  stream's reasoning ``id``, as ai ≥ 6.0.x folds it; 6.0.0 strips it) and a ``text`` part (both
  ``state: "done"``), then one ``tool-<name>`` part per call in its final state:

  ========================== ==========================================================================
  committed                  tool part
  ========================== ==========================================================================
  result ok                  ``output-available`` + ``input``, ``output`` (JSON of the content, else
                             the text); ``approval {id, approved: true}`` when a person allowed it
  result error               ``output-error`` + ``errorText`` (same approval rule)
  denied by a person         ``output-denied`` + ``approval {id, approved: false, reason?}``
  denied by policy           ``output-error`` + ``errorText``
  pending approval           ``approval-requested`` + ``approval {id}``
  pending client tool        ``input-available``
  neither (never answered)   ``output-error``
  ========================== ==========================================================================

  Arguments that are not JSON are given as ``rawInput`` instead of ``input`` (as the client folds a
  ``tool-input-error``). Absent fields are omitted, never null.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from awaken.core.jsonbody import loads_bounded
from awaken.core.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from awaken.ledger.interface import PendingCall
from awaken.wires.aisdk.encoder import parse_json_or_text, state_part_id, usage_metadata
from awaken.wires.aisdk.wire import approval_id
from awaken.wires.protocol import DENIED

GROUP_ROLES = frozenset({"assistant", "tool"})
UNANSWERED = "this call was never answered"


def same_group(message: Message, run_id: str | None) -> bool:
    """Whether ``message`` belongs to the assistant UIMessage of run ``run_id``."""
    return message.role in GROUP_ROLES and message.run_id == run_id


def _image_media_type(part: ImagePart) -> str:
    if part.mime_type:
        return part.mime_type
    if part.url.startswith("data:"):
        head = part.url[5:].split(",", 1)[0].split(";", 1)[0]
        if head:
            return head
    return "image/*"


def _input_message(message: Message) -> dict[str, Any]:
    parts: list[dict[str, Any]] = []
    for p in message.parts:
        if isinstance(p, TextPart):
            parts.append({"type": "text", "text": p.text})
        elif isinstance(p, ImagePart):
            parts.append({"type": "file", "mediaType": _image_media_type(p), "url": p.url})
    role = "user" if message.role == "user" else "system"
    return {"id": message.id, "role": role, "parts": parts}


def _deny_reason(content: str) -> str | None:
    prefix = f"{DENIED}: "
    return content[len(prefix):] if content.startswith(prefix) else None


def tool_part(call: ToolCallPart, result: ToolResultPart | None, pending: PendingCall | None) -> dict[str, Any]:
    """The final-state ``tool-<name>`` part of one call."""
    part: dict[str, Any] = {"type": f"tool-{call.name}", "toolCallId": call.tool_call_id}
    try:
        arguments, raw = loads_bounded(call.arguments), False
    except ValueError:
        arguments, raw = call.arguments, True
    if result is not None and result.status == "ok":
        part["state"] = "output-available"
        part["output"] = parse_json_or_text(result.content)
    elif result is not None and result.status == "denied" and result.approval == "denied":
        part["state"] = "output-denied"
        approval: dict[str, Any] = {"id": approval_id(call.tool_call_id), "approved": False}
        reason = _deny_reason(result.content)
        if reason:
            approval["reason"] = reason
        part["approval"] = approval
    elif result is not None:
        part["state"] = "output-error"
        part["errorText"] = result.content
    elif pending is not None and pending.kind == "approval":
        part["state"] = "approval-requested"
        part["approval"] = {"id": approval_id(call.tool_call_id)}
    elif pending is not None:
        part["state"] = "input-available"
    else:
        part["state"] = "output-error"
        part["errorText"] = UNANSWERED
    if result is not None and result.approval == "approved":
        part["approval"] = {"id": approval_id(call.tool_call_id), "approved": True}
    part["rawInput" if raw else "input"] = arguments
    return part


def _assistant_message(group: list[Message], pending: Mapping[str, PendingCall],
                       usage: Mapping[str, Usage], state: dict[str, Any] | None = None) -> dict[str, Any]:
    results = {r.tool_call_id: r for m in group if (r := m.tool_result) is not None}
    steps = [m for m in group if m.role == "assistant"]
    parts: list[dict[str, Any]] = []
    called: set[str] = set()
    for step in steps:
        parts.append({"type": "step-start"})
        parts += [{"type": "reasoning", "id": p.id, "text": p.text, "state": "done"}
                  for p in step.parts if isinstance(p, ReasoningPart)]
        if step.text:
            parts.append({"type": "text", "text": step.text, "state": "done"})
        for call in step.tool_calls:
            called.add(call.tool_call_id)
            parts.append(tool_part(call, results.get(call.tool_call_id), pending.get(call.tool_call_id)))
    # results whose call is not in the group (only possible for an imported or truncated thread)
    for call_id, result in results.items():
        if call_id not in called:
            parts.append(tool_part(ToolCallPart(call_id, result.name, "null"), result, None))
    out: dict[str, Any] = {"id": (steps[0] if steps else group[0]).id, "role": "assistant"}
    run_id = group[0].run_id
    if run_id is not None and run_id in usage:
        out["metadata"] = usage_metadata(usage[run_id], run_id)
    cut = next((m.incomplete for m in steps if m.incomplete is not None), None)
    if cut is not None:  # the run's early end cut its answer off: what was streamed, marked
        out.setdefault("metadata", {})["incomplete"] = cut
    if state is not None and run_id is not None:
        parts.append({"type": "data-state", "id": state_part_id(run_id), "data": state})
    out["parts"] = parts
    return out


def project_history(messages: Iterable[Message], pending: Iterable[PendingCall] = (),
                    usage: Mapping[str, Usage] | None = None,
                    state: dict[str, Any] | None = None) -> list[dict[str, Any]]:
    """UIMessages for ``messages`` (oldest first). ``pending``: the thread's waiting calls;
    ``usage``: committed usage by run id; ``state``: the thread's current state when ``messages`` end
    with the thread's last run (its UIMessage ends with a ``data-state`` part holding it)."""
    waiting = {p.tool_call_id: p for p in pending}
    usage = usage or {}
    items: list[dict[str, Any]] = []
    group: list[Message] = []
    for m in messages:
        if group and not same_group(m, group[0].run_id):
            items.append(_assistant_message(group, waiting, usage))
            group = []
        if m.role in GROUP_ROLES:
            group.append(m)
        else:
            items.append(_input_message(m))
    if group:
        items.append(_assistant_message(group, waiting, usage, state or None))
    return items
