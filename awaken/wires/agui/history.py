"""Project committed messages as AG-UI messages (the history route's ``items``).

user → ``{id, role, content}`` (a string, or text/image parts when there are images); system and
developer → string content; an assistant step → an optional ``reasoning`` message, then
``{id, role: "assistant", content?, toolCalls?, metadata?}`` (``metadata: {"incomplete": <reason>}`` when
the run's early end cut it off: ``stopped``, ``client_gone``, ``shutdown``, ``superseded``, ``failed``…;
AG-UI messages carry an open ``metadata`` object in every client generation); a tool result → ``{id, role: "tool", toolCallId,
content, error?}``. Absent fields are omitted, never null.
"""

from __future__ import annotations

from typing import Any

from awaken.core.messages import ImagePart, Message, ReasoningPart, TextPart


def _image(part: ImagePart) -> dict[str, Any]:
    if part.url.startswith("data:") and ";base64," in part.url:
        head, _, value = part.url.partition(";base64,")
        mime = part.mime_type or head.removeprefix("data:")
        return {"type": "image", "source": {"type": "data", "value": value, "mimeType": mime}}
    source: dict[str, Any] = {"type": "url", "value": part.url}
    if part.mime_type:
        source["mimeType"] = part.mime_type
    return {"type": "image", "source": source}


def project_message(message: Message, edited: dict[str, str] | None = None) -> list[dict[str, Any]]:
    """One committed message as AG-UI messages. ``edited``: call id → the arguments a person edited
    before approving (the call shows what ran)."""
    if message.role in ("user", "system", "developer"):
        if message.role == "user" and any(isinstance(p, ImagePart) for p in message.parts):
            content: Any = [
                {"type": "text", "text": p.text} if isinstance(p, TextPart) else _image(p)
                for p in message.parts
                if isinstance(p, TextPart | ImagePart)
            ]
        else:
            content = message.text
        return [{"id": message.id, "role": message.role, "content": content}]
    if message.role == "tool":
        result = message.tool_result
        if result is None:
            return []
        out: dict[str, Any] = {"id": message.id, "role": "tool", "toolCallId": result.tool_call_id,
                               "content": result.content}
        if result.status != "ok":
            out["error"] = result.content
        return [out]
    items: list[dict[str, Any]] = [
        {"id": p.id, "role": "reasoning", "content": p.text} for p in message.parts if isinstance(p, ReasoningPart)
    ]
    assistant: dict[str, Any] = {"id": message.id, "role": "assistant"}
    if message.text:
        assistant["content"] = message.text
    calls = message.tool_calls
    if calls:
        assistant["toolCalls"] = [
            {"id": c.tool_call_id, "type": "function",
             "function": {"name": c.name, "arguments": (edited or {}).get(c.tool_call_id, c.arguments)}}
            for c in calls
        ]
    if message.incomplete is not None:  # cut off by the run's early end: what was streamed, marked
        assistant["metadata"] = {"incomplete": message.incomplete}
    if len(assistant) > 2:
        items.append(assistant)
    return items


def project_history(messages: list[Message]) -> list[dict[str, Any]]:
    edited = {r.tool_call_id: r.arguments for m in messages if (r := m.tool_result) is not None and r.arguments}
    return [item for m in messages for item in project_message(m, edited)]
