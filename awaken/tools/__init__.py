"""Server tools: what a tool is, the context it runs in, and the registry that validates and runs calls.

A ``Tool`` has a name, a description, JSON-schema ``parameters`` and an async ``call(args, ctx)``
returning any JSON value. Most tools are written as a plain function or class instead
(``functions.py``: the schema comes from type hints and the docstring) and declared by dotted path or
the ``awaken.tools`` entry-point group (``plugins.py``); docs/tools.md is the guide.

A call's ``ToolContext`` says who asks (the principal's subject and role), the thread, the run and
the call; holds the thread's state (a private copy the tool may change), the tool's own validated
settings (``[tools.<name>]``); reads secrets from the environment (``ctx.secret``) and streams progress
the clients see while the tool runs (``ctx.progress``).

``ToolRegistry.execute`` validates the arguments with ``jsonschema``
before the call; bad arguments and tool exceptions become an error result the model sees, never a
failed run. Arguments must be valid Unicode: a string holding a lone surrogate (``"\\ud800"`` in the
JSON, or the raw character) never reaches the tool. A result that is not valid Unicode is an error result;
an error text that is not is sent with U+FFFD in place of each lone surrogate. A tool that returns ``ToolText`` gives the model that text as it is (not JSON-encoded).
What a tool leaves behind is checked before it can be committed: a result nested deeper than
``jsonbody.MAX_DEPTH`` or longer than ``MAX_RESULT_BYTES``, or a state that grew past
``MAX_STATE_BYTES`` or ``MAX_DEPTH`` (the state is then put back as it was), is an error result
instead, so nothing committed is ever impossible to send. A cancellation (the run stopped, its
client gone) is never caught: it ends the call where it awaits, and the run commits its outcome.
MCP tools (``awaken.mcp``) are entries like any other, of kind ``mcp``, added and removed as their
servers' tool lists change. Built-ins live in ``builtins.py``.
"""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Iterable
from typing import Any

import attrs
import jsonschema

from awaken.core.errors import ConfigError
from awaken.core.jsonbody import MAX_DEPTH, too_deep
from awaken.tools.base import MAX_PROGRESS_BYTES as MAX_PROGRESS_BYTES
from awaken.tools.base import MissingSecret as MissingSecret
from awaken.tools.base import Tool as Tool
from awaken.tools.base import ToolContext as ToolContext
from awaken.tools.base import ToolError as ToolError
from awaken.tools.base import ToolText as ToolText
from awaken.tools.functions import tool as tool  # the decorator

log = logging.getLogger("awaken.tools")


@attrs.frozen
class ToolOutcome:
    content: str
    ok: bool


#: the largest tool result (its JSON text) and the largest thread state (as JSON) the server commits:
#: well under the transports' default buffer (``server.max_buffered_bytes``, 4 MiB)
MAX_RESULT_BYTES = 1024 * 1024
MAX_STATE_BYTES = 1024 * 1024


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False)


#: a UTF-16 surrogate: in a Python string always a lone one (a valid pair decodes to one character)
_SURROGATE = re.compile("[\ud800-\udfff]")


def is_unicode(text: str) -> bool:
    """Whether ``text`` can be encoded as UTF-8 (holds no lone surrogate)."""
    return text.isascii() or _SURROGATE.search(text) is None


def repaired(text: str) -> str:
    """``text`` with U+FFFD in place of each lone surrogate."""
    return text if is_unicode(text) else _SURROGATE.sub("\ufffd", text)


class ToolRegistry:
    def __init__(self, tools: Iterable[Tool] = ()) -> None:
        self._tools: dict[str, Tool] = {}
        self._validators: dict[str, jsonschema.protocols.Validator] = {}
        #: counts the changes (``add``, ``remove``): what was derived from the tools at one count holds
        self.generation = 0
        for each in tools:
            self.add(each)

    def add(self, tool: Tool) -> None:
        cls = jsonschema.validators.validator_for(tool.parameters)
        try:
            cls.check_schema(tool.parameters)
        except jsonschema.SchemaError as exc:
            raise ConfigError(f"tool {tool.name}: parameters is not a valid JSON schema: {exc.message}") from None
        self._tools[tool.name] = tool
        self._validators[tool.name] = cls(tool.parameters)
        self.generation += 1

    async def aclose(self) -> None:
        """Close what the tools hold (each ``Tool.close``, once, in turn); a failure is logged, the rest
        still close."""
        for each in list(self._tools.values()):
            if each.close is None:
                continue
            try:
                await each.close()
            except Exception:
                log.exception("the tool %s failed to close", each.name)

    def remove(self, name: str) -> None:
        self._tools.pop(name, None)
        self._validators.pop(name, None)
        self.generation += 1

    def __contains__(self, name: str) -> bool:
        return name in self._tools

    def get(self, name: str) -> Tool:
        return self._tools[name]

    def names(self) -> list[str]:
        return sorted(self._tools)

    def check_arguments(self, name: str, args: Any) -> str | None:
        """Why ``args`` do not satisfy the tool's parameters (None: they do)."""
        errors = sorted(self._validators[name].iter_errors(args), key=lambda e: list(e.path))
        if not errors:
            return None
        where = "/".join(str(p) for p in errors[0].path) or "arguments"
        return f"{where}: {errors[0].message}"

    async def execute(self, name: str, arguments: str, ctx: ToolContext) -> ToolOutcome:
        """Run one call. Never raises for bad arguments or tool failures: those are error outcomes."""
        tool = self._tools.get(name)
        if tool is None:
            return ToolOutcome(f"unknown tool {name!r}", False)
        try:
            args = json.loads(arguments) if arguments.strip() else {}
        except ValueError as exc:
            return ToolOutcome(f"invalid arguments: not JSON ({repaired(exc.msg)})", False)
        except RecursionError:
            return ToolOutcome("invalid arguments: nested too deeply", False)
        if not is_unicode(dumps(args)):
            return ToolOutcome("invalid arguments: not valid Unicode (a string holds a lone surrogate)", False)
        if (problem := self.check_arguments(name, args)) is not None:
            return ToolOutcome(f"invalid arguments: {problem}", False)
        state_before = dict(ctx.state)
        ctx.tool_name, ctx.settings = name, tool.settings
        try:
            result = await self._call(tool, args, ctx)
        finally:
            ctx.finished = True
        if ctx.state != state_before and (problem := state_problem(ctx.state)):
            ctx.state.clear()
            ctx.state.update(state_before)
            return ToolOutcome(f"{name} failed: {problem}; the state was not changed", False)
        return result

    async def _call(self, tool: Tool, args: dict[str, Any], ctx: ToolContext) -> ToolOutcome:
        name = tool.name
        try:
            value = await tool.call(args, ctx)
        except ToolError as exc:
            return ToolOutcome(repaired(str(exc)), False)
        except Exception as exc:  # a plugin's bug is the model's error result, not a dead run
            return ToolOutcome(f"{name} failed: {type(exc).__name__}", False)
        if isinstance(value, ToolText):
            if not is_unicode(value.text):
                return ToolOutcome(f"{name} failed: its result is not valid Unicode", False)
            if len(value.text.encode()) > MAX_RESULT_BYTES:
                return ToolOutcome(f"{name} failed: its result is larger than {MAX_RESULT_BYTES} bytes", False)
            return ToolOutcome(value.text, True)
        if isinstance(value, (dict, list)) and too_deep(value):
            return ToolOutcome(f"{name} failed: its result nests deeper than {MAX_DEPTH} levels", False)
        try:
            content = dumps(value)
        except (TypeError, ValueError, RecursionError) as exc:  # not JSON (or an int too long to print)
            return ToolOutcome(f"{name} failed: its result is not JSON ({type(exc).__name__})", False)
        if not is_unicode(content):
            return ToolOutcome(f"{name} failed: its result is not valid Unicode", False)
        if len(content.encode()) > MAX_RESULT_BYTES:
            return ToolOutcome(f"{name} failed: its result is larger than {MAX_RESULT_BYTES} bytes", False)
        return ToolOutcome(content, True)


def state_problem(state: dict[str, Any]) -> str | None:
    """Why ``state`` may not be committed (too deep, too large, not JSON), or None."""
    if too_deep(state):
        return f"the state would nest deeper than {MAX_DEPTH} levels"
    try:
        size = len(dumps(state).encode())
    except (TypeError, ValueError, RecursionError):
        return "the state would not be JSON"
    if size > MAX_STATE_BYTES:
        return f"the state would be larger than {MAX_STATE_BYTES} bytes"
    return None


def load_plugin(path: str) -> Tool:
    """The tool at ``pkg.module:attr`` (a ``Tool``, a function, a class, or a zero-argument factory
    annotated ``-> Tool``), without settings; see ``plugins.py`` for the loader the server uses."""
    from awaken.tools.plugins import load_path

    return load_path(path).build(None)
