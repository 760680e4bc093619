"""The AI SDK UI Message Stream chunk field set we emit, ported from ``ai@6.0.0``.

Source: ``uiMessageChunkSchema`` in ``ai@6.0.0`` ``dist/index.mjs`` (``src/ui-message-stream/
ui-message-chunks.ts``). In 6.0.0 … 6.0.230 every branch is a ``z.strictObject``: one unknown key, one
``null`` for an optional field, or a missing ``z.unknown()`` key (with zod 4) fails the whole stream
(``reference/aisdk.md`` §1.1, §2.2). So the server emits exactly this field set and nothing newer
(no ``providerMetadata`` on tool chunks, no ``abort.reason``, no ``toolMetadata``…).

``CHUNKS`` maps each chunk type we may emit to ``(required keys, optional keys)``; ``ALWAYS`` are the
``z.unknown()`` keys that must be present even when their value is ``null``. ``check_chunk`` is the
pure validator the tests run over every emitted chunk. Ids that the server mints for the wire live
here too (``approval_id``), and ``DONE``, the marker that ends every stream (``data: [DONE]`` over
SSE, one ``[DONE]`` text message over WebSocket).
"""

from __future__ import annotations

from typing import Any

from awaken.wires.encoding import Verbatim

WireChunk = dict[str, Any]
#: what follows the terminal chunk of every stream (sent as it is, not as JSON)
DONE = Verbatim("[DONE]")

#: chunk type -> (required keys besides ``type``, optional keys) — the 6.0.0 schema, tool chunks without
#: the later ``providerMetadata``/``toolMetadata`` additions
CHUNKS: dict[str, tuple[frozenset[str], frozenset[str]]] = {
    "start": (frozenset(), frozenset({"messageId", "messageMetadata"})),
    "start-step": (frozenset(), frozenset()),
    "finish-step": (frozenset(), frozenset()),
    "finish": (frozenset(), frozenset({"finishReason", "messageMetadata"})),
    "text-start": (frozenset({"id"}), frozenset()),
    "text-delta": (frozenset({"id", "delta"}), frozenset()),
    "text-end": (frozenset({"id"}), frozenset()),
    "reasoning-start": (frozenset({"id"}), frozenset()),
    "reasoning-delta": (frozenset({"id", "delta"}), frozenset()),
    "reasoning-end": (frozenset({"id"}), frozenset()),
    "tool-input-start": (frozenset({"toolCallId", "toolName"}), frozenset({"providerExecuted", "dynamic", "title"})),
    "tool-input-delta": (frozenset({"toolCallId", "inputTextDelta"}), frozenset()),
    "tool-input-available": (frozenset({"toolCallId", "toolName", "input"}),
                             frozenset({"providerExecuted", "dynamic", "title"})),
    "tool-input-error": (frozenset({"toolCallId", "toolName", "input", "errorText"}),
                         frozenset({"providerExecuted", "dynamic", "title"})),
    "tool-approval-request": (frozenset({"approvalId", "toolCallId"}), frozenset()),
    "tool-output-available": (frozenset({"toolCallId", "output"}),
                              frozenset({"providerExecuted", "dynamic", "preliminary"})),
    "tool-output-error": (frozenset({"toolCallId", "errorText"}), frozenset({"providerExecuted", "dynamic"})),
    "tool-output-denied": (frozenset({"toolCallId"}), frozenset()),
    "error": (frozenset({"errorText"}), frozenset()),
    # ``data-${string}``: the only data part we send
    "data-state": (frozenset({"id", "data"}), frozenset({"transient"})),
}
#: ``z.unknown()`` keys: required on the wire (zod 4 rejects a missing one), ``null`` allowed
ALWAYS = frozenset({"input", "output", "data"})
FINISH_REASONS = frozenset({"stop", "length", "content-filter", "tool-calls", "error", "other"})
_STRINGS = frozenset({"id", "delta", "messageId", "toolCallId", "toolName", "inputTextDelta", "approvalId",
                      "errorText", "title"})
_BOOLS = frozenset({"providerExecuted", "dynamic", "preliminary"})


def approval_id(tool_call_id: str) -> str:
    """The ``approvalId`` the server issues for a permission gate on ``tool_call_id``.

    Derived, not stored: ``apr_<toolCallId>``. An ``approval-responded`` part is accepted only when its
    ``approval.id`` is exactly this, so a decision cannot be replayed onto another call.
    """
    return f"apr_{tool_call_id}"


def check_chunk(chunk: WireChunk) -> None:
    """Raise ``ValueError`` unless ``chunk`` passes the ai@6.0.0 strict schema (as far as we emit it)."""
    kind = chunk.get("type")
    if kind not in CHUNKS:
        raise ValueError(f"unknown chunk type {kind!r}")
    required, optional = CHUNKS[kind]
    keys = set(chunk) - {"type"}
    if missing := required - keys:
        raise ValueError(f"{kind}: missing {sorted(missing)}")
    if extra := keys - required - optional:
        raise ValueError(f"{kind}: keys outside the 6.0.0 field set {sorted(extra)}")
    for key, value in chunk.items():
        if value is None and key not in ALWAYS:
            raise ValueError(f"{kind}.{key} is null; omit absent optional fields")
        if key in _STRINGS and not isinstance(value, str):
            raise ValueError(f"{kind}.{key} must be a string")
        if key in _BOOLS and not isinstance(value, bool):
            raise ValueError(f"{kind}.{key} must be a boolean")
    if kind == "finish" and "finishReason" in chunk and chunk["finishReason"] not in FINISH_REASONS:
        raise ValueError(f"finish.finishReason {chunk['finishReason']!r} is not in the 6.0.0 enum")
