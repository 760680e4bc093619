"""Tools from Model Context Protocol servers (``[mcp_servers.<name>]`` in config.toml).

``config`` holds the config classes and their checks, ``results`` turns an MCP tool result into the
text the model sees, ``connection`` owns one server's session (connect, tool list, calls,
reconnect), and ``servers.McpServers`` starts every configured server under the server's nursery.
MCP tools are plain entries of the ``ToolRegistry`` named ``<server>__<tool>``, so a call takes the
engine's usual path: argument validation, the permission gate, the step commit.
"""
