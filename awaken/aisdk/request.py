"""Parse an AI SDK chat POST body (sans-IO): bytes in, ``AiSdkInput`` or ``InputRejected``.

The body is what ``DefaultChatTransport`` sends (``reference/aisdk.md`` §3.1)::

    {messages: UIMessage[], id?, trigger?, messageId?, threadId?, agentId?, ...extra keys ignored}

Validation is lenient where the AI SDK is (unknown part types — ``step-start``, ``data-*``,
``source-*``, future ones — and unknown keys are ignored) and strict where a wrong type would be
misread (ids, roles, text, tool part states, approvals): those are ``INVALID_REQUEST``.

What becomes input (CONTRACT §4): ``text`` parts of user/system messages, and ``file`` parts with an
``image/*`` media type and an ``http(s):`` or ``data:`` URL. Other files, reasoning and UI-only parts
never reach the model and are not errors. Assistant messages are the client's copy of history;
only the tool parts of the request's **last** message, when it is an assistant message (the
continuation ``useChat`` posts after ``addToolOutput``/``addToolApprovalResponse``), are decision
candidates. Which candidates are real decisions (not replayed history) is the adapter's call: it
needs the ledger.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..jsonbody import check_content_type, load_json_object, reject
from ..media import check_count, check_image
from ..messages import ImagePart, Part, TextPart

#: tool part states that carry the client's answer to a waiting call
DECISION_STATES = frozenset({"output-available", "output-error", "approval-responded"})
_IMAGE_URL_PREFIXES = ("http://", "https://", "data:")


@attrs.frozen
class InputUIMessage:
    """A user/system message, already reduced to the parts the model may see."""

    id: str
    role: Literal["user", "system"]
    parts: tuple[Part, ...]


@attrs.frozen
class ToolPartAnswer:
    """A tool part of the continued assistant message in a decision state."""

    tool_call_id: str
    tool_name: str
    state: Literal["output-available", "output-error", "approval-responded"]
    #: ``output-available``: the output (``None`` when absent); ``output-error``: unused
    output: Any = None
    error_text: str = ""
    #: ``approval-responded`` (and any approval the part carries)
    approval_id: str | None = None
    approved: bool | None = None
    reason: str | None = None


@attrs.frozen
class AiSdkInput:
    """One parsed chat request."""

    #: ``threadId``, else the chat ``id``; None when the client sent neither
    thread_id: str | None
    agent_id: str | None
    trigger: str | None
    inputs: tuple[InputUIMessage, ...]
    #: decision candidates from the last message when it is an assistant message
    answers: tuple[ToolPartAnswer, ...]
    #: the last message's id when it is an assistant message (the stream continues it)
    continued_id: str | None


def _optional_id(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise reject(f"{key} must be a non-empty string")
    return value


def _string(part: dict[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise reject(f"{where}.{key} must be a string")
    return value


def _optional_string(part: dict[str, Any], key: str, where: str) -> str | None:
    value = part.get(key)
    if value is not None and not isinstance(value, str):
        raise reject(f"{where}.{key} must be a string")
    return value


def _image(part: dict[str, Any], where: str) -> ImagePart | None:
    """An image ``file`` part the model may see, or None for media it does not take."""
    media = _string(part, "mediaType", where)
    url = _string(part, "url", where)
    _optional_string(part, "filename", where)
    if not media.lower().startswith("image/") or not url.lower().startswith(_IMAGE_URL_PREFIXES):
        return None
    return check_image(ImagePart(url, media), where)


def _input_parts(parts: list[Any], where: str) -> tuple[Part, ...]:
    out: list[Part] = []
    for i, part in enumerate(parts):
        pw = f"{where}.parts[{i}]"
        kind = part["type"]
        if kind == "text":
            text = _string(part, "text", pw)
            if text:
                out.append(TextPart(text))
        elif kind == "file":
            image = _image(part, pw)
            if image is not None:
                out.append(image)
        elif kind == "reasoning":
            _string(part, "text", pw)
    check_count(out, f"{where}.parts")
    return tuple(out)


def _tool_answer(part: dict[str, Any], where: str) -> ToolPartAnswer | None:
    kind = part["type"]
    call_id = part.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        raise reject(f"{where}.toolCallId must be a non-empty string")
    state = _string(part, "state", where)
    name = _string(part, "toolName", where) if kind == "dynamic-tool" else kind.removeprefix("tool-")
    approval = part.get("approval")
    approval_id = approved = reason = None
    if approval is not None:
        if not isinstance(approval, dict):
            raise reject(f"{where}.approval must be an object")
        approval_id = _string(approval, "id", f"{where}.approval")
        approved = approval.get("approved")
        if approved is not None and not isinstance(approved, bool):
            raise reject(f"{where}.approval.approved must be a boolean")
        reason = _optional_string(approval, "reason", f"{where}.approval")
    if state not in DECISION_STATES:
        return None
    if state == "output-error":
        return ToolPartAnswer(call_id, name, state, error_text=_optional_string(part, "errorText", where) or "",
                              approval_id=approval_id, approved=approved, reason=reason)
    if state == "approval-responded" and (approval_id is None or approved is None):
        raise reject(f"{where}: an approval-responded part needs approval.id and approval.approved")
    return ToolPartAnswer(call_id, name, state, output=part.get("output"), approval_id=approval_id,
                          approved=approved, reason=reason)


def _is_tool_part(kind: str) -> bool:
    return kind == "dynamic-tool" or kind.startswith("tool-")


def parse_chat_request(body: bytes, content_type: str | None) -> AiSdkInput:
    """Parse and validate one chat request. Raises ``InputRejected`` with its catalogue code."""
    check_content_type(content_type)
    data = load_json_object(body)
    thread_id = _optional_id(data, "threadId") or _optional_id(data, "id")
    agent_id = _optional_id(data, "agentId")
    trigger = _optional_string(data, "trigger", "body")
    _optional_string(data, "messageId", "body")
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise reject("messages must be an array of UIMessages")
    inputs: list[InputUIMessage] = []
    ids: list[str] = []
    answers: tuple[ToolPartAnswer, ...] = ()
    continued_id: str | None = None
    for i, raw in enumerate(raw_messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise reject(f"{where} must be an object")
        message_id = raw.get("id")
        if not isinstance(message_id, str) or not message_id:
            raise reject(f"{where}.id must be a non-empty string")
        ids.append(message_id)
        role = raw.get("role")
        parts = raw.get("parts")
        if not isinstance(parts, list):
            raise reject(f"{where}.parts must be an array")
        for j, part in enumerate(parts):
            if not isinstance(part, dict) or not isinstance(part.get("type"), str):
                raise reject(f"{where}.parts[{j}] must be an object with a string type")
        if role in ("user", "system"):
            inputs.append(InputUIMessage(message_id, role, _input_parts(parts, where)))
        elif role == "assistant":
            found = []
            for j, part in enumerate(parts):
                pw = f"{where}.parts[{j}]"
                if _is_tool_part(part["type"]):
                    answer = _tool_answer(part, pw)
                    if answer is not None:
                        found.append(answer)
                elif part["type"] in ("text", "reasoning"):
                    _string(part, "text", pw)
            if i == len(raw_messages) - 1:
                answers, continued_id = tuple(found), message_id
        else:
            raise reject(f"{where}.role must be 'user', 'system' or 'assistant', not {role!r}")
    if len(set(ids)) != len(ids):
        raise reject("message ids must be unique within a request")
    return AiSdkInput(thread_id, agent_id, trigger, tuple(inputs), answers, continued_id)
