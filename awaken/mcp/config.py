"""MCP server configuration: ``[mcp_servers.<name>]`` tables and their start-up checks.

Keys: ``transport`` (``stdio`` | ``http``); for stdio ``command``, ``args``, ``env``, ``cwd``; for
http (streamable HTTP) ``url`` and ``headers_env`` (header name → the environment variable holding
its value, so secrets stay out of the file); for both ``include`` (the server's tools to offer; all
when absent), ``timeout_seconds`` (a call's limit; the connect handshake has at least 30 s) and ``permission``
(the gate of the server's tools when the agent's ``permissions`` names none; default ``ask``: an MCP
tool is someone else's code). Every check raises ``ConfigError`` with one line naming the key.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from typing import Literal

import attrs

from awaken.core.errors import ConfigError

#: the same values as ``awaken.config.Permission`` (kept here so this module does not import config)
Permission = Literal["allow", "ask", "deny"]
#: separates the server from the tool in the name the model sees (function names may not hold dots)
SEP = "__"
_SERVER_NAME = re.compile(r"^[A-Za-z0-9-]+(?:_[A-Za-z0-9-]+)*$")
#: what a function name may hold (OpenAI-compatible providers refuse anything else)
TOOL_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")
_HEADER = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]+$")


@attrs.frozen
class McpServerConfig:
    transport: Literal["stdio", "http"]
    command: str | None = None
    args: list[str] = attrs.field(factory=list)
    env: dict[str, str] = attrs.field(factory=dict)
    cwd: str | None = None
    url: str | None = None
    headers_env: dict[str, str] = attrs.field(factory=dict)
    include: list[str] | None = None
    timeout_seconds: float = 30.0
    permission: Permission = "ask"


def tool_name(server: str, tool: str) -> str:
    """The name the model (and an agent's ``tools``) uses for a server's tool."""
    return f"{server}{SEP}{tool}"


def check_servers(servers: Mapping[str, McpServerConfig], source: str) -> None:
    for name, server in servers.items():
        key = f"mcp_servers.{name}"
        if not _SERVER_NAME.match(name):
            raise ConfigError(f"{source}: {key}: a server name is letters, digits, '-' and single '_' "
                              f"(not '{SEP}', which separates it from the tool name)")
        given = {k for k, v in attrs.asdict(server).items() if v not in (None, [], {})}
        if server.transport == "stdio":
            if not server.command:
                raise ConfigError(f"{source}: {key}.command: a stdio server needs the command that starts it")
            wrong = sorted(given & {"url", "headers_env"})
        else:
            if not server.url or not re.match(r"^https?://[^/\s]+", server.url):
                raise ConfigError(f"{source}: {key}.url: an http server needs an http:// or https:// URL")
            wrong = sorted(given & {"command", "args", "env", "cwd"})
            for header, variable in server.headers_env.items():
                if not _HEADER.match(header):
                    raise ConfigError(f"{source}: {key}.headers_env.{header}: not a valid header name")
                if not variable:
                    raise ConfigError(f"{source}: {key}.headers_env.{header}: name an environment variable")
        if wrong:
            raise ConfigError(f"{source}: {key}.{wrong[0]}: not a key of a {server.transport} server")
        if not server.timeout_seconds > 0:
            raise ConfigError(f"{source}: {key}.timeout_seconds: {server.timeout_seconds!r} is out of range "
                              f"(must be positive)")
        for tool in server.include or ():
            if not TOOL_NAME.match(tool_name(name, tool)):
                raise ConfigError(f"{source}: {key}.include: {tool!r} cannot be a tool name")


def resolve_headers(name: str, server: McpServerConfig, environ: Mapping[str, str]) -> dict[str, str]:
    """The HTTP headers of a server, their values read from the environment (at start-up)."""
    headers = {}
    for header, variable in server.headers_env.items():
        value = environ.get(variable)
        if value is None:
            raise ConfigError(f"mcp_servers.{name}.headers_env.{header}: the environment variable "
                              f"{variable} is not set")
        headers[header] = value
    return headers


def agent_tool_problem(name: str, servers: Mapping[str, McpServerConfig]) -> str | None:
    """Why an agent's ``tools`` entry ``<server>__<tool>`` or ``<server>__*`` is wrong (None: it is
    fine). The tool itself is not checked: a server's tool list is known only once it connects."""
    server, sep, tool = name.partition(SEP)
    if not sep or server not in servers:
        return f"unknown tool {name!r}"
    include = servers[server].include
    if tool != "*" and include is not None and tool not in include:
        return f"{name!r} is not in mcp_servers.{server}.include"
    return None


def covered(name: str, listed: Iterable[str]) -> bool:
    """Whether tool ``name`` is among an agent's ``tools`` (by name or through ``<server>__*``)."""
    return any(name == entry or (entry.endswith(f"{SEP}*") and name.startswith(entry[:-1])) for entry in listed)
