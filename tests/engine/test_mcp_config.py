"""MCP configuration, name resolution and result text, without a server (issue 20)."""

from __future__ import annotations

import base64
import re

import mcp.types as types
import pytest

from awaken.core.errors import ConfigError
from awaken.http.context import ServerContext
from awaken.mcp.config import McpServerConfig
from awaken.mcp.connection import McpConnection
from awaken.mcp.results import result_text
from awaken.tools import ToolError, ToolRegistry
from tests.builders import default_config_data, make_config

STDIO = {"transport": "stdio", "command": "mcp-server-time"}
HTTP = {"transport": "http", "url": "http://127.0.0.1:9/mcp"}


def build(tmp_path, servers, tools=("time__*",), **agent):
    agents = {**default_config_data()["agents"], "mcp": {"tools": list(tools), **agent}}
    return make_config(tmp_path, mcp_servers=servers, agents=agents)


@pytest.mark.parametrize(("server", "line"), [
    ({"transport": "ftp"}, "mcp_servers.time.transport: "),
    ({"transport": "stdio"}, "mcp_servers.time.command: a stdio server needs the command that starts it"),
    ({**STDIO, "url": "http://x"}, "mcp_servers.time.url: not a key of a stdio server"),
    ({"transport": "http"}, "mcp_servers.time.url: an http server needs an http:// or https:// URL"),
    ({**HTTP, "url": "ws://x"}, "mcp_servers.time.url: an http server needs an http:// or https:// URL"),
    ({**HTTP, "args": ["-v"]}, "mcp_servers.time.args: not a key of a http server"),
    ({**HTTP, "headers_env": {"Bad Header": "TOKEN"}}, "mcp_servers.time.headers_env.Bad Header: not a valid header name"),
    ({**STDIO, "timeout_seconds": 0}, "mcp_servers.time.timeout_seconds: 0.0 is out of range (must be positive)"),
    ({**STDIO, "permission": "maybe"}, "mcp_servers.time.permission: "),
    ({**STDIO, "include": ["a.b"]}, "mcp_servers.time.include: 'a.b' cannot be a tool name"),
    ({**STDIO, "commands": "x"}, "unknown key mcp_servers.time.commands"),
    ({**STDIO, "args": "-v"}, "mcp_servers.time.args"),
])
def test_bad_config_stops_start_up_with_one_line_naming_the_key(tmp_path, server, line):
    with pytest.raises(ConfigError) as caught:
        build(tmp_path, {"time": server})
    message = str(caught.value)
    assert "\n" not in message and message.startswith(f"test config: {line}")


def test_a_server_name_may_not_hold_the_separator(tmp_path):
    with pytest.raises(ConfigError, match=r"^test config: mcp_servers\.my__time: a server name is "):
        build(tmp_path, {"my__time": STDIO}, tools=[])


def test_the_defaults(tmp_path):
    config = build(tmp_path, {"time": STDIO})
    assert config.mcp_servers["time"] == McpServerConfig(transport="stdio", command="mcp-server-time")
    assert (config.mcp_servers["time"].permission, config.mcp_servers["time"].timeout_seconds) == ("ask", 30.0)


def test_header_values_come_from_the_environment(tmp_path, monkeypatch):
    config = build(tmp_path, {"time": {**HTTP, "headers_env": {"Authorization": "TIME_TOKEN"}}})
    monkeypatch.delenv("TIME_TOKEN", raising=False)
    with pytest.raises(ConfigError, match=r"^mcp_servers\.time\.headers_env\.Authorization: the environment "
                                          r"variable TIME_TOKEN is not set$"):
        ServerContext.build(config)
    monkeypatch.setenv("TIME_TOKEN", "Bearer s3cret")
    ctx = ServerContext.build(config)
    assert ctx.mcp.connections["time"].headers == {"Authorization": "Bearer s3cret"}


@pytest.mark.parametrize(("tools", "problem"), [
    (["clock__*"], "unknown tool 'clock__*'"),
    (["time__convert_time"], None),
    (["time__*"], None),
])
def test_agents_name_mcp_tools_by_server(tmp_path, tools, problem):
    config = build(tmp_path, {"time": STDIO}, tools=tools)
    if problem is None:
        ServerContext.build(config)
    else:
        with pytest.raises(ConfigError, match=rf"^agents\.mcp\.tools: {re.escape(problem)}; known tools: .*, time__\*$"):
            ServerContext.build(config)


def test_a_tool_outside_include_is_refused(tmp_path):
    config = build(tmp_path, {"time": {**STDIO, "include": ["get_current_time"]}}, tools=["time__convert_time"])
    with pytest.raises(ConfigError, match=r"^agents\.mcp\.tools: 'time__convert_time' is not in "
                                          r"mcp_servers\.time\.include"):
        ServerContext.build(config)


def test_permissions_may_name_a_tool_a_wildcard_covers(tmp_path):
    config = build(tmp_path, {"time": STDIO}, permissions={"time__get_current_time": "allow"})
    assert config.agents["mcp"].permissions == {"time__get_current_time": "allow"}
    with pytest.raises(ConfigError, match=r"agents\.mcp\.permissions\.clock__x: the agent has no such tool"):
        build(tmp_path, {"time": STDIO}, permissions={"clock__x": "allow"})


def test_no_mcp_server_configured_means_no_mcp_part(tmp_path):
    assert ServerContext.build(make_config(tmp_path)).mcp is None


async def test_a_call_to_a_server_that_is_not_connected_fails_at_once():
    connection = McpConnection("time", McpServerConfig(transport="stdio", command="x"), ToolRegistry(), {})
    with pytest.raises(ToolError, match=r"^MCP_UNAVAILABLE: the MCP server 'time' is not connected; try again later$"):
        await connection.call("convert_time", "time__convert_time", {})


def test_result_text_keeps_text_and_summarises_other_parts():
    png = base64.b64encode(b"\x89PNG....").decode()
    result = types.CallToolResult(content=[
        types.TextContent(type="text", text="one"),
        types.ImageContent(type="image", data=png, mime_type="image/png"),
        types.AudioContent(type="audio", data=base64.b64encode(b"abc").decode(), mime_type="audio/wav"),
        types.ResourceLink(type="resource_link", uri="file:///a.txt", name="a"),
        types.EmbeddedResource(type="resource", resource=types.BlobResourceContents(
            uri="file:///b.bin", blob=base64.b64encode(b"12345").decode(), mime_type="application/zip")),
    ])
    assert result_text(result) == ("one\n[image: image/png, 8 bytes]\n[audio: audio/wav, 3 bytes]\n"
                                   "[resource link: file:///a.txt (a)]\n[resource: file:///b.bin, application/zip, 5 bytes]")


def test_structured_content_alone_is_its_json():
    assert result_text(types.CallToolResult(content=[], structured_content={"a": [1, "é"]})) == '{"a":[1,"é"]}'
