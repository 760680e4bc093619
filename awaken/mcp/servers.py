"""``McpServers``: every configured MCP server's connection, run under the server's nursery."""

from __future__ import annotations

import os
from collections.abc import Mapping

import trio

from awaken.mcp.config import McpServerConfig, resolve_headers
from awaken.mcp.connection import McpConnection
from awaken.tools import ToolRegistry


class McpServers:
    """Every configured MCP server's connection; ``run`` keeps them alive until cancelled."""

    def __init__(self, servers: Mapping[str, McpServerConfig], registry: ToolRegistry,
                 environ: Mapping[str, str] | None = None) -> None:
        environ = os.environ if environ is None else environ
        self.connections = {
            name: McpConnection(name, config, registry, resolve_headers(name, config, environ))
            for name, config in servers.items()
        }

    async def run(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        """Start every server; report started once each has made its first attempt (connected or
        not: a server that is down at start-up keeps being retried and its tools appear when it
        comes up). Cancelling this task stops every server (stdio children included)."""
        async with trio.open_nursery() as nursery:
            for connection in self.connections.values():
                nursery.start_soon(connection.run)
            for connection in self.connections.values():
                await connection.first_attempt.wait()
            task_status.started()
