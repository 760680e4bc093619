"""The Managed Agents request bodies, parsed and checked (pure): a session's create and update, and the
events a client sends (``POST /v1/sessions/{id}/events``), turned into the engine's ``RunRequest``.

The events of one send are a turn's input (``user.message``), answers to the calls the session waits on
(``user.tool_confirmation``, ``user.custom_tool_result``) or ``user.interrupt``; a send mixes no two of
these kinds (an interrupt may come alone or before new messages). Anything else, or a field of the
wrong type, is ``InputRejected`` (400): nothing is committed.
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import attrs
import orjson

from awaken.core.errors import InputRejected
from awaken.core.messages import ImagePart, Message, TextPart
from awaken.wires.protocol import RunRequest, ToolDecision

EventKind = Literal["message", "answers", "interrupt"]
#: the metadata limits the API documents: 16 pairs, keys to 64 characters, values to 512
MAX_METADATA, MAX_KEY, MAX_VALUE = 16, 64, 512


def load(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body or b"{}")
    except orjson.JSONDecodeError as exc:
        raise InputRejected(f"the body is not JSON: {exc}", code="INVALID_JSON") from None
    if not isinstance(data, dict):
        raise InputRejected("the body must be a JSON object")
    return data


@attrs.frozen
class SessionCreate:
    agent_id: str | None
    title: str | None
    metadata: dict[str, str]
    environment_id: str | None
    initial: tuple[dict[str, Any], ...] = ()


def _metadata(value: Any, *, patch: bool = False) -> dict[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, dict):
        raise InputRejected("metadata must be an object of strings")
    for key, item in value.items():
        if len(key) > MAX_KEY or not (isinstance(item, str) or (patch and item is None)) \
                or (isinstance(item, str) and len(item) > MAX_VALUE):
            raise InputRejected(f"metadata {key[:64]!r}: keys are at most {MAX_KEY} characters, values strings "
                                f"of at most {MAX_VALUE}")
    return dict(value)


def _title(value: Any) -> str | None:
    if value is not None and not isinstance(value, str):
        raise InputRejected("title must be a string or null")
    return value


def parse_create(body: bytes) -> SessionCreate:
    """``POST /v1/sessions``: ``agent`` (an id, or ``{type: "agent", id, version?}``; absent: the default
    agent), ``title``, ``metadata``, ``environment_id`` (echoed), ``initial_events`` (user messages);
    other fields are ignored."""
    data = load(body)
    agent = data.get("agent")
    if isinstance(agent, dict):
        agent = agent.get("id")
    if agent is not None and (not isinstance(agent, str) or not agent):
        raise InputRejected("agent must be an agent id or {type: \"agent\", id}")
    environment = data.get("environment_id")
    if environment is not None and not isinstance(environment, str):
        raise InputRejected("environment_id must be a string")
    metadata = _metadata(data.get("metadata"))
    if len(metadata) > MAX_METADATA:
        raise InputRejected(f"metadata holds at most {MAX_METADATA} pairs")
    initial = data.get("initial_events") or []
    if not isinstance(initial, list) or not all(isinstance(e, dict) and e.get("type") == "user.message"
                                                for e in initial):
        raise InputRejected("initial_events must be a list of user.message events")
    return SessionCreate(agent, _title(data.get("title")), metadata, environment, tuple(initial))


def parse_update(body: bytes) -> tuple[bool, str | None, dict[str, Any] | None]:
    """``POST /v1/sessions/{id}``: (whether ``title`` was given, the title, the metadata patch or None)."""
    data = load(body)
    patch = _metadata(data.get("metadata"), patch=True) if "metadata" in data and data["metadata"] is not None \
        else None
    return "title" in data, _title(data.get("title")), patch


@attrs.frozen
class SentEvents:
    """One send, parsed: its kind and its events (as sent, each with the id its receipt will carry)."""

    kind: EventKind
    events: tuple[dict[str, Any], ...]
    #: an interrupt that comes before new messages in the same send
    interrupt_first: bool = False


def _content(event: dict[str, Any]) -> tuple[TextPart | ImagePart, ...]:
    content = event.get("content")
    if isinstance(content, str):
        content = [{"type": "text", "text": content}]
    if not isinstance(content, list) or not content:
        raise InputRejected(f"{event.get('type')}: content must be a non-empty list of blocks")
    parts: list[TextPart | ImagePart] = []
    for block in content:
        kind = block.get("type") if isinstance(block, dict) else None
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(TextPart(block["text"]))
        elif kind == "image" and isinstance(block.get("source"), dict):
            source = block["source"]
            if source.get("type") == "url" and isinstance(source.get("url"), str):
                parts.append(ImagePart(source["url"]))
            elif source.get("type") == "base64" and isinstance(source.get("data"), str):
                media = source.get("media_type") or "image/png"
                parts.append(ImagePart(f"data:{media};base64,{source['data']}", media))
            else:
                raise InputRejected("an image block's source must be {type: url, url} or {type: base64, data}")
        else:
            raise InputRejected(f"a content block of type {kind!r} is not supported (text and image are)")
    return tuple(parts)


def _text_of(content: Any) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise InputRejected("content must be a list of blocks")
    texts = []
    for block in content:
        if not isinstance(block, dict) or block.get("type") != "text" or not isinstance(block.get("text"), str):
            raise InputRejected("a tool result's content holds text blocks only")
        texts.append(block["text"])
    return "".join(texts)


def parse_events(body: bytes) -> SentEvents:
    data = load(body)
    events = data.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(e, dict) for e in events):
        raise InputRejected("events must be a non-empty list of event objects")
    kinds = []
    for event in events:
        kind = event.get("type")
        if kind == "user.message":
            _content(event)
            kinds.append("message")
        elif kind == "user.tool_confirmation":
            if not isinstance(event.get("tool_use_id"), str) or event.get("result") not in ("allow", "deny"):
                raise InputRejected("user.tool_confirmation needs tool_use_id and result allow or deny")
            if event.get("deny_message") is not None and (event["result"] != "deny"
                                                          or not isinstance(event["deny_message"], str)):
                raise InputRejected("deny_message is a string, allowed only when result is deny")
            kinds.append("answers")
        elif kind == "user.custom_tool_result":
            if not isinstance(event.get("custom_tool_use_id"), str):
                raise InputRejected("user.custom_tool_result needs custom_tool_use_id")
            _text_of(event.get("content"))
            kinds.append("answers")
        elif kind == "user.interrupt":
            kinds.append("interrupt")
        else:
            raise InputRejected(f"events of type {kind!r} cannot be sent to this server (user.message, "
                                "user.tool_confirmation, user.custom_tool_result and user.interrupt can)")
    stamped = tuple({**e, "id": f"msg_{uuid.uuid4().hex}"} for e in events)
    if set(kinds) == {"interrupt"}:
        return SentEvents("interrupt", stamped)
    if kinds[0] == "interrupt" and set(kinds[1:]) == {"message"}:
        return SentEvents("message", stamped[1:], interrupt_first=True)
    if len(set(kinds)) > 1:
        raise InputRejected("one send carries either new messages or answers to waiting calls, not both")
    return SentEvents(kinds[0], stamped)  # type: ignore[arg-type]


def input_messages(sent: SentEvents) -> tuple[Message, ...]:
    return tuple(Message(e["id"], "user", _content(e)) for e in sent.events)


def decisions(sent: SentEvents, calls: dict[str, str]) -> tuple[ToolDecision, ...]:
    """The answers of ``sent`` as decisions; ``calls``: tool-use event id -> the tool call id it names
    (an id that names no waiting call is refused: ``TOOL_CALL_NOT_PENDING``, nothing changes)."""
    out = []
    for event in sent.events:
        named = event.get("tool_use_id") or event.get("custom_tool_use_id")
        call = calls.get(named)
        if call is None:
            raise InputRejected(f"{named!r} names no call this session waits on", code="TOOL_CALL_NOT_PENDING")
        if event["type"] == "user.tool_confirmation":
            if event["result"] == "allow":
                out.append(ToolDecision(call, "approve"))
            else:
                out.append(ToolDecision(call, "deny", event.get("deny_message") or ""))
        else:
            kind = "error" if event.get("is_error") else "ok"
            out.append(ToolDecision(call, kind, _text_of(event.get("content"))))  # type: ignore[arg-type]
    if len({d.tool_call_id for d in out}) != len(out):
        raise InputRejected("one send answers each call at most once", code="TOOL_CALL_NOT_PENDING")
    return tuple(out)


def run_request(sent: SentEvents, thread_id: str, agent_id: str | None, calls: dict[str, str]) -> RunRequest:
    if sent.kind == "message":
        return RunRequest(thread_id, agent_id, input_messages(sent))
    return RunRequest(thread_id, agent_id, decisions=decisions(sent, calls))
