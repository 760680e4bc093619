"""Parse an AG-UI ``RunAgentInput`` POST body (sans-IO): bytes in, ``AguiInput`` or ``InputRejected``.

What is accepted follows CONTRACT §3 and ``reference/agui.md`` §3/§9: ``forwardedProps`` may be
absent, null or empty (what ``HttpAgent`` sends by default); a non-empty one, or any ``parentRunId``,
is ``UNSUPPORTED_FIELD``. ``tools``, ``context`` and ``state`` are the page's per-run declarations,
parsed by ``frontend.py``. ``resume`` is a list of ``{interruptId, status: "resolved"|"cancelled",
payload?, metadata?}`` entries (``interrupts.py`` maps them to decisions). Unknown keys are ignored.
User content may be a string or parts: ``text`` and ``image`` (URL or inline base64) are input;
``audio``, ``video``, ``document`` and legacy ``binary`` parts are ``UNSUPPORTED_CONTENT``.
Assistant, reasoning and activity messages are never input: they are the client's copy of history.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

from ..jsonbody import check_content_type, load_json_object, reject
from ..media import check_count, check_image
from ..messages import ImagePart, Part, TextPart
from ..models import ContextEntry, ToolSpec
from .frontend import parse_context, parse_state, parse_tools
from .interrupts import ResumeEntry

_MEDIA_PARTS = frozenset({"audio", "video", "document", "binary"})
_HISTORY_ROLES = ("assistant", "reasoning", "activity")  # a tuple: a role of any JSON type is compared, never hashed


@attrs.frozen
class InputMessage:
    """A user/system/developer message carrying input parts."""

    id: str
    role: Literal["user", "system", "developer"]
    parts: tuple[Part, ...]


@attrs.frozen
class ToolMessage:
    """A ``role: "tool"`` message: a client tool's result, or a decision at a permission gate."""

    id: str
    tool_call_id: str
    content: str
    error: str | None = None


@attrs.frozen
class AguiInput:
    thread_id: str
    run_id: str
    protocol_version: str | None
    #: input and tool messages in request order; history-only roles are dropped here
    messages: tuple[InputMessage | ToolMessage, ...]
    #: every message id in the request (history included), for dedup against the ledger
    message_ids: tuple[str, ...]
    #: a non-empty ``state`` the client sent: the thread's state from the start of this run
    state: dict[str, Any] | None = None
    #: tools the client executes, declared for this run
    tools: tuple[ToolSpec, ...] = ()
    #: context entries for the model, for this run
    context: tuple[ContextEntry, ...] = ()
    #: ``resume[]`` entries answering interrupts, in request order
    resume: tuple[ResumeEntry, ...] = ()

    @property
    def modern(self) -> bool:
        """Whether the client declared protocolVersion >= 1.0 (gates 1.0-only wire features)."""
        return version_at_least(self.protocol_version, (1, 0))


def version_at_least(version: str | None, floor: tuple[int, int]) -> bool:
    if not version:
        return False
    try:
        major, minor, *_ = (int(x) for x in version.split("."))
    except ValueError:
        return False
    return (major, minor) >= floor


def _string(data: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise reject(f"{where}{key} must be a non-empty string")
    return value


def _unsupported_if_set(data: dict[str, Any], key: str, empty: type) -> None:
    value = data.get(key)
    if value is None:
        return
    if not isinstance(value, empty):
        raise reject(f"{key} must be {'an array' if empty is list else 'an object'}")
    if value:
        raise reject(f"{key} is not supported by this server; send it empty", "UNSUPPORTED_FIELD")


def parse_image(part: dict[str, Any], where: str) -> ImagePart:
    source = part.get("source")
    if isinstance(source, dict):
        kind, value, mime = source.get("type"), source.get("value"), source.get("mimeType")
        if not isinstance(value, str) or not value:
            raise reject(f"{where}.source.value must be a non-empty string")
        if mime is not None and not isinstance(mime, str):
            raise reject(f"{where}.source.mimeType must be a string")
        if kind == "url":
            return ImagePart(value, mime)
        if kind == "data":
            if not mime:
                raise reject(f"{where}.source.mimeType is required for inline data")
            return ImagePart(f"data:{mime};base64,{value}", mime)
        raise reject(f"{where}.source.type must be 'url' or 'data'", "UNSUPPORTED_CONTENT")
    url = part.get("url")
    if isinstance(url, str) and url:
        return ImagePart(url, part.get("mimeType") if isinstance(part.get("mimeType"), str) else None)
    raise reject(f"{where}.source must be an object")


def _parts(content: Any, where: str) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),) if content else ()
    if not isinstance(content, list):
        raise reject(f"{where}.content must be a string or an array of parts")
    parts: list[Part] = []
    for i, part in enumerate(content):
        pw = f"{where}.content[{i}]"
        if not isinstance(part, dict):
            raise reject(f"{pw} must be an object")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise reject(f"{pw}.text must be a string")
            if text:
                parts.append(TextPart(text))
        elif kind == "image":
            parts.append(check_image(parse_image(part, pw), pw))
        elif kind in _MEDIA_PARTS:
            raise reject(f"{pw}: {kind} content is not supported; send text or images", "UNSUPPORTED_CONTENT")
        else:
            raise reject(f"{pw}.type {kind!r} is not a known content part")
    check_count(parts, f"{where}.content")
    return tuple(parts)


def _tool_content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise reject(f"{where}.content[{i}] must be a text part", "UNSUPPORTED_CONTENT")
            texts.append(part["text"])
        return "".join(texts)
    raise reject(f"{where}.content must be a string")


def parse_run_input(body: bytes, content_type: str | None) -> AguiInput:
    """Parse and validate one request. Raises ``InputRejected`` with its catalogue code."""
    check_content_type(content_type)
    data = load_json_object(body)
    thread_id = _string(data, "threadId", "")
    run_id = _string(data, "runId", "")
    version = data.get("protocolVersion")
    if version is not None and not isinstance(version, str):
        raise reject("protocolVersion must be a string")
    if data.get("parentRunId") is not None:
        raise reject("parentRunId is not supported by this server", "UNSUPPORTED_FIELD")
    _unsupported_if_set(data, "forwardedProps", dict)
    resume = parse_resume(data.get("resume"))
    tools, context, state = parse_tools(data.get("tools")), parse_context(data.get("context")), \
        parse_state(data.get("state"))
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise reject("messages must be an array")
    messages: list[InputMessage | ToolMessage] = []
    ids: list[str] = []
    # One pass, no per-message allocation beyond what is kept: a replayed history is mostly assistant
    # messages (only their id is read) and plain-text user messages (one TextPart each); the field
    # path for an error message is built only when a message is refused.
    append_id, append = ids.append, messages.append
    for i, raw in enumerate(raw_messages):
        if type(raw) is not dict:
            raise reject(f"messages[{i}] must be an object")
        message_id = raw.get("id")
        if type(message_id) is not str or not message_id:
            _string(raw, "id", f"messages[{i}].")  # raises with the plain path's message
        append_id(message_id)
        role = raw.get("role")
        if role in _HISTORY_ROLES:
            continue
        content = raw.get("content")
        if role == "user" and type(content) is str:
            append(InputMessage(message_id, "user", (TextPart(content),) if content else ()))
        elif role in ("user", "system", "developer"):
            where = f"messages[{i}]"
            if role != "user" and not isinstance(content, str):
                raise reject(f"{where}.content must be a string")
            append(InputMessage(message_id, role, _parts(content, where)))
        elif role == "tool":
            where = f"messages[{i}]"
            tool_call_id = _string(raw, "toolCallId", f"{where}.")
            error = raw.get("error")
            if error is not None and not isinstance(error, str):
                raise reject(f"{where}.error must be a string")
            append(ToolMessage(message_id, tool_call_id, _tool_content(raw.get("content", ""), where), error))
        else:
            raise reject(f"messages[{i}].role {role!r} is not a known role")
    if len(set(ids)) != len(ids):
        raise reject("message ids must be unique within a request")
    return AguiInput(thread_id, run_id, version, tuple(messages), tuple(ids), state, tools, context, resume)


def parse_resume(raw: Any) -> tuple[ResumeEntry, ...]:
    """``resume``: absent, null or a list of entries with unique ``interruptId``s."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise reject("resume must be an array")
    entries: list[ResumeEntry] = []
    for i, item in enumerate(raw):
        where = f"resume[{i}]"
        if not isinstance(item, dict):
            raise reject(f"{where} must be an object")
        interrupt = _string(item, "interruptId", f"{where}.")
        status = item.get("status")
        if status not in ("resolved", "cancelled"):
            raise reject(f"{where}.status must be 'resolved' or 'cancelled'")
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise reject(f"{where}.metadata must be an object")
        payload = item["payload"] if item.get("payload") is not None else ResumeEntry.payload_absent()
        entries.append(ResumeEntry(interrupt, status, payload))
    if len({e.interrupt_id for e in entries}) != len(entries):
        raise reject("resume answers an interrupt twice")
    return tuple(entries)
