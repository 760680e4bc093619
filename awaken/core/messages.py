"""The protocol-neutral message model: what the ledger stores and what models read.

A ``Message`` is one committed history entry: a user/system/developer input, an assistant turn of
one model step (text, reasoning and tool calls; ending with an ``IncompletePart`` when the run ended
before the step did), or a tool result. Adapters translate their wire
messages into these and project them back; nothing here knows AG-UI or the AI SDK.

Parts are small frozen attrs classes tagged by ``kind``; ``to_json``/``from_json`` give the stored
form (plain dicts, stable keys) used by every ledger backend.
"""

from __future__ import annotations

from typing import Any, Literal

import attrs

Role = Literal["user", "system", "developer", "assistant", "tool"]
INPUT_ROLES: frozenset[str] = frozenset({"user", "system", "developer"})


@attrs.frozen
class Usage:
    """Token counts of a model step or a whole run."""

    input_tokens: int = 0
    output_tokens: int = 0

    def __add__(self, other: Usage) -> Usage:
        return Usage(self.input_tokens + other.input_tokens, self.output_tokens + other.output_tokens)

    @property
    def total_tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@attrs.frozen
class TextPart:
    text: str
    kind: Literal["text"] = "text"


@attrs.frozen
class ImagePart:
    """An image the model may see: a hosted ``url`` or a ``data:`` URL (inline base64)."""

    url: str
    mime_type: str | None = None
    kind: Literal["image"] = "image"


@attrs.frozen
class ReasoningPart:
    """Reasoning streamed before an answer. ``id`` is the reasoning message id shown on the wire."""

    id: str
    text: str
    kind: Literal["reasoning"] = "reasoning"


@attrs.frozen
class ToolCallPart:
    """One tool call of an assistant step. ``arguments`` is the JSON text the model produced."""

    tool_call_id: str
    name: str
    arguments: str
    kind: Literal["tool_call"] = "tool_call"


ToolStatus = Literal["ok", "error", "denied"]


@attrs.frozen
class ToolResultPart:
    """The outcome of one tool call. ``approval`` is set when a person decided at a permission gate."""

    tool_call_id: str
    name: str
    content: str
    status: ToolStatus = "ok"
    approval: Literal["approved", "denied"] | None = None
    #: the JSON arguments the call ran with, when a person edited the model's proposal before approving
    arguments: str | None = None
    kind: Literal["tool_result"] = "tool_result"


@attrs.frozen
class IncompletePart:
    """The mark of an assistant message cut off by its run's early end: the text and reasoning before it
    are what was streamed when the run stopped. ``reason`` is why (an interruption's cause value, e.g.
    ``stopped``, ``client_gone``, ``shutdown``, ``superseded``, or ``failed``); see
    ``awaken.engine.state.incomplete_reason``."""

    reason: str
    kind: Literal["incomplete"] = "incomplete"


Part = TextPart | ImagePart | ReasoningPart | ToolCallPart | ToolResultPart | IncompletePart
_PART_TYPES: dict[str, type] = {
    "text": TextPart,
    "image": ImagePart,
    "reasoning": ReasoningPart,
    "tool_call": ToolCallPart,
    "tool_result": ToolResultPart,
    "incomplete": IncompletePart,
}


@attrs.frozen
class Message:
    """One committed (or about to be committed) history entry.

    ``seq`` is the per-thread sequence number the ledger assigns at commit (0 before that);
    ``created_at`` is integer milliseconds since the epoch; ``branch`` is the thread's branch the
    message is stored on (set by the ledger when it returns messages; 0 for a thread that never
    branched: see ``awaken.ledger.interface.Branch``).
    """

    id: str
    role: Role
    parts: tuple[Part, ...]
    run_id: str | None = None
    seq: int = 0
    created_at: int = 0
    branch: int = 0

    @property
    def text(self) -> str:
        return "".join(p.text for p in self.parts if isinstance(p, TextPart))

    @property
    def tool_calls(self) -> list[ToolCallPart]:
        return [p for p in self.parts if isinstance(p, ToolCallPart)]

    @property
    def tool_result(self) -> ToolResultPart | None:
        for p in self.parts:
            if isinstance(p, ToolResultPart):
                return p
        return None

    @property
    def incomplete(self) -> str | None:
        """Why this assistant message was cut off (its ``IncompletePart``'s reason), or None when whole."""
        last = self.parts[-1] if self.parts else None
        return last.reason if isinstance(last, IncompletePart) else None


def result_id(tool_call_id: str) -> str:
    """The message id of a tool result the server commits (stable, so a replayed decision is found)."""
    return f"tr_{tool_call_id}"


def part_to_json(part: Part) -> dict[str, Any]:
    out = attrs.asdict(part)
    return {k: v for k, v in out.items() if v is not None}


def part_from_json(data: dict[str, Any]) -> Part:
    cls = _PART_TYPES[data["kind"]]
    return cls(**data)


def parts_to_json(parts: tuple[Part, ...]) -> list[dict[str, Any]]:
    return [part_to_json(p) for p in parts]


def parts_from_json(data: list[dict[str, Any]]) -> tuple[Part, ...]:
    return tuple(part_from_json(d) for d in data)


def message_to_json(m: Message) -> dict[str, Any]:
    """The stored form; ``branch`` is written only when not 0 (a thread that never branched stores what
    it always did)."""
    out: dict[str, Any] = {
        "id": m.id,
        "role": m.role,
        "parts": parts_to_json(m.parts),
        "run_id": m.run_id,
        "seq": m.seq,
        "created_at": m.created_at,
    }
    if m.branch:
        out["branch"] = m.branch
    return out


def message_from_json(d: dict[str, Any]) -> Message:
    return Message(
        id=d["id"],
        role=d["role"],
        parts=parts_from_json(d["parts"]),
        run_id=d.get("run_id"),
        seq=d.get("seq", 0),
        created_at=d.get("created_at", 0),
        branch=d.get("branch", 0),
    )
