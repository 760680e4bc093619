"""Message mapping: a ``ModelRequest`` as chat-completions ``messages`` and ``tools`` (pure functions).

* the agent's system prompt first, as a ``system`` message; the run's context entries (AG-UI
  ``context``) follow it as one more ``system`` message, one ``description: value`` line each;
* ``user`` text, with image parts as ``{"type": "image_url", "image_url": {"url": ...}}`` content items
  (hosted ``http(s)`` or ``data:`` URLs are passed through unchanged);
* ``system`` *and* ``developer`` input as ``role: "system"``: many OpenAI-compatible servers (vLLM,
  llama.cpp, Ollama, older gateways) reject ``developer``, and OpenAI itself treats ``system`` as
  ``developer`` for the models that have one;
* assistant steps as their text plus ``tool_calls``. Reasoning is never sent back;
* tool results as ``{"role": "tool", "tool_call_id", "content"}``. An ``error`` result is prefixed with
  ``error:`` so the model can tell it failed. A call with no result in history gets a synthetic
  "no result" message and a result whose call is not in history is dropped, because the endpoint
  rejects both with a 400.
"""

from __future__ import annotations

from typing import Any

from awaken.core.messages import ImagePart, Message, TextPart, ToolResultPart
from awaken.models import ModelRequest, ToolSpec


def tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def context_text(request: ModelRequest) -> str:
    """The run's context entries as the model reads them."""
    lines = "\n".join(f"- {c.description}: {c.value}" for c in request.context)
    return f"Context from the application:\n{lines}"


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for a request (see the module docstring for the rules)."""
    wire: list[dict[str, Any]] = []
    if request.system_prompt.strip():
        wire.append({"role": "system", "content": request.system_prompt})
    if request.context:
        wire.append({"role": "system", "content": context_text(request)})
    open_calls: list[str] = []  # ids of the last assistant step's calls still waiting for a result

    def close_open_calls() -> None:
        for call_id in open_calls:
            wire.append({"role": "tool", "tool_call_id": call_id, "content": "error: no result was recorded"})
        open_calls.clear()

    for message in request.messages:
        if message.role == "tool":
            result = message.tool_result
            if result is not None and result.tool_call_id in open_calls:
                open_calls.remove(result.tool_call_id)
                wire.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": _result_text(result)})
            continue
        close_open_calls()
        if message.role == "assistant":
            text, calls = message.text, message.tool_calls
            if not text and not calls:
                continue
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = [
                    {"id": c.tool_call_id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                    for c in calls
                ]
                open_calls.extend(c.tool_call_id for c in calls)
            wire.append(item)
        elif message.role == "user":
            content = _user_content(message)
            if content:
                wire.append({"role": "user", "content": content})
        elif message.text:  # system, developer
            wire.append({"role": "system", "content": message.text})
    close_open_calls()
    return wire


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not any(isinstance(p, ImagePart) for p in message.parts):
        return message.text
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            items.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            items.append({"type": "image_url", "image_url": {"url": part.url}})
    return items


def _result_text(result: ToolResultPart) -> str:
    if result.status == "error" and not result.content.lower().startswith("error"):
        return f"error: {result.content}"
    return result.content
