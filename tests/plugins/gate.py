"""A server tool that holds its run open until the test opens its gate: ``tests.plugins.gate:gate``.

``/call gate {"name": "g1"}`` waits until ``open_gate("g1")``; each gate is a fresh ``trio.Event``
(``reset`` between tests). Tests use it to hold a run open deterministically, never by a timing window.
"""

from __future__ import annotations

from typing import Any

import trio

from awaken.tools import Tool, ToolContext

_gates: dict[str, trio.Event] = {}


def _gate(name: str) -> trio.Event:
    return _gates.setdefault(name, trio.Event())


def open_gate(name: str) -> None:
    _gate(name).set()


def reset() -> None:
    _gates.clear()


async def _wait(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    await _gate(args["name"]).wait()
    return {"opened": args["name"]}


def gate() -> Tool:
    return Tool(
        name="gate",
        description="Wait until the test opens the named gate.",
        parameters={"type": "object", "properties": {"name": {"type": "string"}}, "required": ["name"]},
        call=_wait,
    )
