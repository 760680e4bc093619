"""Parse what a page declares for one run (sans-IO): ``RunAgentInput.tools``, ``context`` and ``state``.

* ``tools`` — tools the client executes for this run (CopilotKit's ``useFrontendTool`` and
  ``useHumanInTheLoop`` put them here). Each is ``{name, description?, parameters?}``; ``parameters``
  must be a valid JSON Schema object (absent means ``{"type": "object", "properties": {}}``). At most
  ``MAX_TOOLS`` tools, names unique, ``MAX_TOOLS_BYTES`` of JSON in all.
* ``context`` — ``{description, value}`` entries the model is told for this run (``useAgentContext``).
  At most ``MAX_CONTEXT`` entries, ``MAX_CONTEXT_BYTES`` of text in all.
* ``state`` — the page's shared state: a JSON object of at most ``MAX_STATE_BYTES``; an empty one is
  "no state sent".

Every failure is an ``InputRejected`` naming the field (``INVALID_REQUEST``; a ``state`` that is not
an object is ``UNSUPPORTED_FIELD``); nothing is run.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from jsonschema import SchemaError
from jsonschema.validators import validator_for

from awaken.core.jsonbody import reject
from awaken.models import ContextEntry, ToolSpec

MAX_TOOLS = 64
MAX_TOOLS_BYTES = 256 * 1024
MAX_CONTEXT = 64
MAX_CONTEXT_BYTES = 256 * 1024
MAX_STATE_BYTES = 256 * 1024
#: what every model provider accepts as a function name
_TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_EMPTY_PARAMETERS: dict[str, Any] = {"type": "object", "properties": {}}


def _size(value: Any) -> int:
    return len(orjson.dumps(value))


def parse_tools(raw: Any) -> tuple[ToolSpec, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise reject("tools must be an array")
    if len(raw) > MAX_TOOLS:
        raise reject(f"tools: at most {MAX_TOOLS} tools per run, not {len(raw)}")
    if _size(raw) > MAX_TOOLS_BYTES:
        raise reject(f"tools: at most {MAX_TOOLS_BYTES} bytes of tool declarations per run")
    specs: list[ToolSpec] = []
    for i, tool in enumerate(raw):
        where = f"tools[{i}]"
        if not isinstance(tool, dict):
            raise reject(f"{where} must be an object")
        name = tool.get("name")
        if not isinstance(name, str) or not _TOOL_NAME.match(name):
            raise reject(f"{where}.name must be 1-64 letters, digits, '_' or '-'")
        if any(s.name == name for s in specs):
            raise reject(f"{where}.name {name!r} is declared twice")
        description = tool.get("description")
        if description is None:
            description = ""
        if not isinstance(description, str):
            raise reject(f"{where}.description must be a string")
        parameters = tool.get("parameters")
        if parameters is None:
            parameters = dict(_EMPTY_PARAMETERS)
        if not isinstance(parameters, dict):
            raise reject(f"{where}.parameters must be a JSON Schema object")
        try:
            validator_for(parameters).check_schema(parameters)
        except SchemaError as exc:
            raise reject(f"{where}.parameters is not a valid JSON Schema: {exc.message}") from None
        specs.append(ToolSpec(name, description, parameters))
    return tuple(specs)


def parse_context(raw: Any) -> tuple[ContextEntry, ...]:
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise reject("context must be an array")
    if len(raw) > MAX_CONTEXT:
        raise reject(f"context: at most {MAX_CONTEXT} entries per run, not {len(raw)}")
    entries: list[ContextEntry] = []
    total = 0
    for i, entry in enumerate(raw):
        where = f"context[{i}]"
        if not isinstance(entry, dict):
            raise reject(f"{where} must be an object")
        description, value = entry.get("description"), entry.get("value")
        if not isinstance(description, str):
            raise reject(f"{where}.description must be a string")
        if not isinstance(value, str):
            raise reject(f"{where}.value must be a string")
        total += len(description.encode()) + len(value.encode())
        if total > MAX_CONTEXT_BYTES:
            raise reject(f"context: at most {MAX_CONTEXT_BYTES} bytes of context per run")
        entries.append(ContextEntry(description, value))
    return tuple(entries)


def parse_state(raw: Any) -> dict[str, Any] | None:
    """The page's state, or None when it sent none (absent, null or ``{}``)."""
    if raw is None:
        return None
    if not isinstance(raw, dict):
        raise reject("state must be a JSON object; this server keeps no other kind of state", "UNSUPPORTED_FIELD")
    if not raw:
        return None
    if _size(raw) > MAX_STATE_BYTES:
        raise reject(f"state: at most {MAX_STATE_BYTES} bytes of JSON")
    return raw
