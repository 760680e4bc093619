"""A third-party-style tool: ``tests.plugins.weather:forecast`` (a factory returning a Tool)."""

from __future__ import annotations

from typing import Any

from awaken.tools import Tool, ToolContext


async def _forecast(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"city": args["city"], "forecast": "sunny", "celsius": 21}


def forecast() -> Tool:
    return Tool(
        name="forecast",
        description="The weather forecast for a city.",
        parameters={"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]},
        call=_forecast,
    )
