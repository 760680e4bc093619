"""The chunk reader: ``chat.completion.chunk`` objects in, ``ModelOutput`` calls out (sans-IO).

``delta.content`` goes to ``out.text``. ``delta.reasoning_content`` (DeepSeek, vLLM) or
``delta.reasoning`` (OpenRouter, Ollama) goes to ``out.reasoning``, never to text.
``delta.tool_calls[]`` fragments are assembled by ``index``; a call is announced once its name is known,
with the first id seen (or a generated one). The usage chunk is reported once, by ``end()``.
A malformed chunk or an in-stream error raises ``Failed``.

A chunk's JSON may decode to strings no UTF-8 can carry (a lone surrogate escape, ``"\\ud800"``).
Text, reasoning, tool names and ids get U+FFFD in its place; tool-call arguments get the escape back
(``\\ud800``, six ASCII characters), so the arguments text stays what the model wrote and the tool
layer answers the call with an error result the model reads (``awaken.tools``).
"""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import attrs

from awaken.core.messages import Usage
from awaken.models import ModelOutput
from awaken.models.openai.failure import Failed
from awaken.models.openai.sanitize import error_detail
from awaken.models.openai.sse import Event

#: a UTF-16 surrogate: in a decoded string always a lone one (a valid pair decodes to one character)
_SURROGATE = re.compile("[\ud800-\udfff]")


def _text(value: str) -> str:
    """``value`` with U+FFFD in place of each lone surrogate."""
    return value if value.isascii() or not _SURROGATE.search(value) else _SURROGATE.sub("\ufffd", value)


def _arguments(value: str) -> str:
    """Tool-call arguments with each lone surrogate written back as its JSON escape."""
    if value.isascii() or not _SURROGATE.search(value):
        return value
    return _SURROGATE.sub(lambda m: f"\\u{ord(m.group()):04x}", value)


class ChunkReader:
    """``chat.completion.chunk`` objects in, ``ModelOutput`` calls out."""

    def __init__(self, out: ModelOutput) -> None:
        self.out = out
        self.seen_data = False
        self.finished = False
        self._usage: Usage | None = None
        self._calls: dict[int, _Call] = {}
        self._last_index: int | None = None

    def event(self, event: Event) -> bool:
        """Handle one SSE event; True once ``[DONE]`` arrived."""
        self.seen_data = True
        if event.data.strip() == "[DONE]":
            return True
        obj = parse_json(event.data.encode())
        if event.event == "error" and isinstance(obj, dict) and "error" not in obj:
            obj = {"error": obj}
        self.chunk(obj)
        return False

    def chunk(self, obj: Any, *, key: str = "delta") -> None:
        if not isinstance(obj, dict):
            raise Failed("MODEL_ERROR", "the model stream sent a chunk that is not a JSON object")
        if obj.get("error"):
            raise stream_error(obj["error"])
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
        choices = obj.get("choices") or []
        if not isinstance(choices, list):
            raise Failed("MODEL_ERROR", "the model stream sent a chunk whose choices are not a list")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            if choice.get("finish_reason"):
                self.finished = True
            delta = choice.get(key)
            if isinstance(delta, dict):
                self._delta(delta)

    def _delta(self, delta: dict[str, Any]) -> None:
        reasoning = delta.get("reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.out.reasoning(_text(reasoning))
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self.out.text(_text(content))
        elif isinstance(content, list):  # a few servers stream content as typed parts
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    if part["text"]:
                        self.out.text(_text(part["text"]))
        elif content is not None:
            raise Failed("MODEL_ERROR", "the model stream sent content that is not text")
        calls = delta.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            raise Failed("MODEL_ERROR", "the model stream sent tool_calls that are not a list")
        for call in calls:
            if not isinstance(call, dict):
                raise Failed("MODEL_ERROR", "the model stream sent a tool call that is not an object")
            self._tool_call(call)

    def _tool_call(self, call: dict[str, Any]) -> None:
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) and function.get("name") else None
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, dict):  # some servers send the arguments as an object
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            raise Failed("MODEL_ERROR", "the model stream sent tool-call arguments that are not text")
        arguments = _arguments(arguments)
        call_id = _text(call_id) if call_id is not None else None
        name = _text(name) if name is not None else None
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._guess_index(call_id)
        self._last_index = index
        entry = self._calls.setdefault(index, _Call())
        entry.call_id = entry.call_id or call_id
        entry.name = entry.name or name
        if entry.announced:
            if arguments:
                self.out.tool_call(index, call_id=None, name=None, arguments=arguments)
            return
        entry.buffered.append(arguments)
        if entry.name is None:
            return  # wait for the name: a call is announced with its name
        entry.announced = True
        call_id = entry.call_id or f"call_{uuid.uuid4().hex[:24]}"
        self.out.tool_call(index, call_id=call_id, name=entry.name, arguments="".join(entry.buffered))
        entry.buffered.clear()

    def _guess_index(self, call_id: str | None) -> int:
        """For servers that omit ``index``: a new id starts a new call, anything else continues the last."""
        if call_id is not None:
            for index, entry in self._calls.items():
                if entry.call_id == call_id:
                    return index
            return max(self._calls, default=-1) + 1
        return self._last_index if self._last_index is not None else 0

    def end(self) -> None:
        if any(not entry.announced for entry in self._calls.values()):
            raise Failed("MODEL_ERROR", "the model sent a tool call without a name")
        if self._usage is not None:
            self.out.usage(self._usage)


@attrs.define
class _Call:
    call_id: str | None = None
    name: str | None = None
    announced: bool = False
    buffered: list[str] = attrs.field(factory=list)


def parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise Failed("MODEL_ERROR", "the model stream sent a malformed chunk (not JSON)") from None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def stream_error(error: Any) -> Failed:
    detail = error_detail(json.dumps({"error": error}).encode())
    text = json.dumps(error).lower() if not isinstance(error, str) else error.lower()
    limited = ("rate" in text and "limit" in text) or '"code": 429' in text
    code = "MODEL_RATE_LIMITED" if limited else "MODEL_ERROR"
    return Failed(code, f"the model endpoint reported an error mid-stream: {detail or 'no details'}")
