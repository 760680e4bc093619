"""What the model sees of an MCP tool result: one text, and whether the call succeeded.

Pure functions over the SDK's result types. Text parts are kept as they are (joined by newlines).
Parts a tool result message cannot carry as such are summarised in brackets, so the model knows
they were there: ``[image: image/png, 68 bytes]``, ``[audio: audio/wav, N bytes]``,
``[resource link: URI (name)]``; an embedded text resource becomes ``[resource: URI]`` followed by its
text, a binary one ``[resource: URI, MIME, N bytes]``. A result with no content but structured
content is that structure as JSON. ``isError`` makes the whole text an error result.
"""

from __future__ import annotations

import base64
import binascii
import json
from typing import Any

import mcp.types as types


def _size(data: str) -> str:
    try:
        return f"{len(base64.b64decode(data, validate=True))} bytes"
    except (binascii.Error, ValueError):
        return "undecodable data"


def part_text(part: Any) -> str:
    if isinstance(part, types.TextContent):
        return part.text
    if isinstance(part, types.ImageContent):
        return f"[image: {part.mime_type}, {_size(part.data)}]"
    if isinstance(part, types.AudioContent):
        return f"[audio: {part.mime_type}, {_size(part.data)}]"
    if isinstance(part, types.ResourceLink):
        return f"[resource link: {part.uri} ({part.name})]"
    if isinstance(part, types.EmbeddedResource):
        resource = part.resource
        if isinstance(resource, types.TextResourceContents):
            return f"[resource: {resource.uri}]\n{resource.text}"
        mime = resource.mime_type or "application/octet-stream"
        return f"[resource: {resource.uri}, {mime}, {_size(resource.blob)}]"
    return f"[{getattr(part, 'type', type(part).__name__)} content]"


def result_text(result: types.CallToolResult) -> str:
    if not result.content and result.structured_content is not None:
        return json.dumps(result.structured_content, separators=(",", ":"), ensure_ascii=False)
    return "\n".join(part_text(part) for part in result.content)
