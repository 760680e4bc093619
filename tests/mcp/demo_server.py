"""A real MCP server for the tests, written with the SDK's own server API (``MCPServer``, formerly FastMCP).

Run over stdio (``python -m tests.mcp.demo_server stdio``) or streamable HTTP
(``python -m tests.mcp.demo_server http PORT``). Its tools: ``echo`` (text), ``fail`` (an ``isError``
result), ``sleep`` (sleeps; it appends ``started sleep N`` to the file named by the ``DEMO_CANCEL_LOG``
environment variable, and ``cancelled sleep N`` if the call is cancelled, so a test can see the call
running and the cancel notification arriving; ``echo`` appends ``traceparent <value>`` when the HTTP
request carried one),
``image`` (a PNG), ``report`` (text plus an embedded resource), ``pid`` (the server's process id),
and ``grow`` (adds a tool ``extra_<name>`` and announces ``notifications/tools/list_changed``).
"""

from __future__ import annotations

import base64
import os
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.types import Image
from mcp.types import EmbeddedResource, TextContent, TextResourceContents

#: a 1x1 transparent PNG
PNG = base64.b64decode(
    "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mNkYPhfDwAChwGA60e6kgAAAABJRU5ErkJggg=="
)

server = MCPServer("demo")


@server.tool()
def echo(text: str, ctx: Context) -> str:
    """Return the text unchanged."""
    traceparent = (ctx.headers or {}).get("traceparent")
    if traceparent:  # a traced caller's HTTP request: the tracing test reads it from the log
        _note(f"traceparent {traceparent}")
    return text


@server.tool()
def fail(message: str) -> str:
    """Always fail with the given message."""
    raise ToolError(message)


@server.tool()
async def sleep(seconds: float) -> str:
    """Sleep for the given number of seconds, then say so."""
    _note(f"started sleep {seconds}")
    try:
        await anyio.sleep(seconds)
    except anyio.get_cancelled_exc_class():
        _note(f"cancelled sleep {seconds}")
        raise
    return f"slept {seconds}"


def _note(line: str) -> None:
    log = os.environ.get("DEMO_CANCEL_LOG")
    if log:
        with open(log, "a", encoding="utf-8") as f:
            f.write(line + "\n")


@server.tool()
def image() -> Image:
    """A 1x1 PNG."""
    return Image(data=PNG, format="png")


@server.tool()
def report() -> list:
    """A text part and an embedded text resource."""
    return [
        TextContent(type="text", text="see the attached report"),
        EmbeddedResource(type="resource", resource=TextResourceContents(
            uri="file:///report.txt", mime_type="text/plain", text="all systems nominal")),
    ]


@server.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


@server.tool()
async def grow(name: str, ctx: Context) -> str:
    """Add a tool ``extra_<name>`` (which returns its name) and announce the changed tool list."""

    def extra() -> str:
        return name

    server.add_tool(extra, name=f"extra_{name}", description=f"The extra tool {name}.")
    await ctx.session.send_tool_list_changed()
    return f"added extra_{name}"


def main(argv: list[str]) -> None:
    if argv[:1] == ["http"]:
        server.run("streamable-http", host="127.0.0.1", port=int(argv[1]))
    else:
        server.run("stdio")


if __name__ == "__main__":
    main(sys.argv[1:])
