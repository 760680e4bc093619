"""The denial grammar: whether a tool message answering a permission gate allows or denies the call.

Pure. A tool message at a gate **denies** the call when

1. it carries ``error`` (the reason is the error text, else its content); or
2. its content is an explicit refusal:

   * a JSON object whose ``approved`` is ``false`` (``{"approved": false, "reason": "..."}``: the
     reason is its ``reason`` when that is a string);
   * JSON ``false``;
   * a refusal word, alone, case-insensitive, surrounding whitespace, quotes and a final ``.`` or
     ``!`` ignored: ``deny``, ``denied``, ``reject``, ``rejected``, ``no``, ``cancel``, ``cancelled``
     (and ``canceled``). A JSON string holding one of them counts too.

Every other content without ``error`` allows the call (the contract's "no error allows"):
``{"approved": true}``, ``true``, ``"yes"``, ``""``, any other text.
"""

from __future__ import annotations

from typing import Any

import attrs
import orjson

REFUSAL_WORDS = frozenset({"deny", "denied", "reject", "rejected", "no", "cancel", "cancelled", "canceled"})


@attrs.frozen
class GateAnswer:
    denied: bool
    #: why, when denied and the message said (an object's ``reason`` or the error text); else ""
    reason: str = ""


def _is_refusal_word(text: str) -> bool:
    word = text.strip().strip("\"'").strip().rstrip(".!").strip().lower()
    return word in REFUSAL_WORDS


def read_gate_answer(content: str, error: str | None = None) -> GateAnswer:
    """Read a tool message that answers a permission gate (see the module docstring)."""
    if error is not None:
        return GateAnswer(True, (error or content).strip())
    try:
        value: Any = orjson.loads(content)
    except orjson.JSONDecodeError:
        return GateAnswer(_is_refusal_word(content))
    if value is False:
        return GateAnswer(True)
    if isinstance(value, dict) and value.get("approved") is False:
        reason = value.get("reason")
        return GateAnswer(True, reason.strip() if isinstance(reason, str) else "")
    if isinstance(value, str):
        return GateAnswer(_is_refusal_word(value))
    return GateAnswer(False)
