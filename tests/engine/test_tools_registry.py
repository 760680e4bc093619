"""The tool registry: schema validation before a call, error results, plugins by dotted path."""

from __future__ import annotations

import pytest

from awaken.core.errors import ConfigError
from awaken.tools import ToolContext, ToolRegistry, load_plugin
from awaken.tools.builtins import BUILTINS
from tests.builders import agui_body, live_server, make_config, post_agui, types


def ctx(state=None):
    return ToolContext("t", "r", {} if state is None else state)


async def test_arguments_are_validated_before_the_tool_runs():
    """Issue 3.1: bad arguments become an error result the model sees; the tool never runs."""
    registry = ToolRegistry(BUILTINS)
    assert (await registry.execute("calculator", '{"expression": "2*(3+4)"}', ctx())).content == '{"result":14}'
    bad = await registry.execute("calculator", '{"expr": "1"}', ctx())
    assert not bad.ok and bad.content == "invalid arguments: arguments: 'expression' is a required property"
    not_json = await registry.execute("calculator", "{oops", ctx())
    assert not not_json.ok and not_json.content.startswith("invalid arguments: not JSON")
    wrong_type = await registry.execute("calculator", '{"expression": 5}', ctx())
    assert wrong_type.content == "invalid arguments: expression: 5 is not of type 'string'"


async def test_set_state_changes_only_the_context_copy():
    state = {"a": 1}
    outcome = await ToolRegistry(BUILTINS).execute("set_state", '{"key": "b", "value": [1, 2]}', ctx(state))
    assert outcome.ok and outcome.content == '{"key":"b","value":[1,2]}'
    assert state == {"a": 1, "b": [1, 2]}


def test_plugins_load_by_dotted_path():
    tool = load_plugin("tests.plugins.weather:forecast")
    assert tool.name == "forecast"
    with pytest.raises(ConfigError, match=r"^tools\.plugins: 'tests\.plugins\.weather' is not of the form"):
        load_plugin("tests.plugins.weather")
    with pytest.raises(ConfigError, match=r"^tools\.plugins: cannot load 'tests\.plugins\.nowhere:x'"):
        load_plugin("tests.plugins.nowhere:x")


async def test_a_plugin_tool_serves_an_agent_end_to_end(tmp_path):
    """Issue 3.1: plugin tools load by dotted path and run like built-ins."""
    config = make_config(
        tmp_path,
        tools={"plugins": ["tests.plugins.weather:forecast"]},
        agents={"assistant": {"tools": ["forecast"]}},
    )
    async with live_server(config) as server, server.client() as client:
        events = await post_agui(client, agui_body("t", "r", [
            {"id": "u1", "role": "user", "content": '/call forecast {"city": "Oslo"}'}]))
    assert "TOOL_CALL_RESULT" in types(events)
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == '{"city":"Oslo","forecast":"sunny","celsius":21}'
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == 'Here is what the tools said: forecast returned {"city":"Oslo","forecast":"sunny","celsius":21}.'


def test_an_agent_s_tools_follow_every_change_of_the_registry():
    """An agent names ``docs__*``: a tool its MCP server adds is offered from the next run on, one it
    removes is not, and a tool under another prefix never is."""
    from awaken.config import AgentConfig
    from awaken.engine.agents import Agent
    from awaken.models import ToolSpec
    from awaken.tools.base import Tool

    async def call(args, ctx):  # noqa: ANN001, ANN202
        return "ok"

    registry = ToolRegistry(BUILTINS)
    browser = ToolSpec("pick_color", "asks the page", {"type": "object"})
    agent = Agent("a", AgentConfig(tools=["calculator", "docs__*"]), None, (browser,), registry)  # type: ignore[arg-type]
    assert [t.name for t in agent.tools] == ["calculator", "pick_color"]
    registry.add(Tool("docs__search", "search", {"type": "object"}, call, kind="mcp"))
    registry.add(Tool("other__search", "search", {"type": "object"}, call, kind="mcp"))
    assert [t.name for t in agent.server_tools] == ["calculator", "docs__search"]
    assert [t.name for t in agent.tools] == ["calculator", "docs__search", "pick_color"]
    assert agent.tool_names == {"calculator", "docs__search", "pick_color"}
    registry.remove("docs__search")
    assert [t.name for t in agent.tools] == ["calculator", "pick_color"]
    assert agent.tool_names == {"calculator", "pick_color"}
