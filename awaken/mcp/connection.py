"""One MCP server's connection: its session, its tool list in the registry, its calls.

``McpConnection.run`` connects (a stdio server is started as a child process of this task; an http
server is reached over streamable HTTP), reads the tool list, registers the tools as
``<server>__<tool>``, then keeps the session until it is lost (the child exits, the stream ends, a
ping fails) and connects again with exponential backoff (0.5 s doubling to 30 s). The list is read
again whenever the server sends ``notifications/tools/list_changed``. Cancelling ``run`` closes the
session; the SDK then closes the child's stdin, waits, and terminates its process group, so no child
outlives the server.

While a server is down its last known tools stay listed (agents keep a stable tool set) and a call
fails at once with ``MCP_UNAVAILABLE``. A call's errors are classified tool errors the model sees:
``MCP_TIMEOUT``, ``MCP_UNAVAILABLE``, ``MCP_PROTOCOL_ERROR``; an ``isError`` result is the server's
own text. Cancelling a call (a disconnect, a stop) makes the SDK send ``notifications/cancelled``.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator
from typing import Any

import anyio
import mcp.types as types
import trio
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.streamable_http import create_mcp_http_client, streamable_http_client
from mcp.shared.exceptions import MCPError

from awaken.core.errors import ConfigError
from awaken.mcp.config import TOOL_NAME, McpServerConfig, tool_name
from awaken.mcp.results import result_text
from awaken.telemetry import tracing
from awaken.tools import Tool, ToolContext, ToolError, ToolRegistry, ToolText

log = logging.getLogger("awaken.mcp")

INITIAL_BACKOFF = 0.5
MAX_BACKOFF = 30.0
#: seconds between liveness pings of a connected server
PING_SECONDS = 10.0
#: seconds a connection's handshake and first tool list may take (a stdio server may start slowly)
CONNECT_SECONDS = 30.0


class _Watched:
    """A transport's read stream that sets ``ended`` when the stream ends (the server is gone)."""

    def __init__(self, inner: Any, ended: trio.Event) -> None:
        self._inner = inner
        self._ended = ended

    async def receive(self) -> Any:
        try:
            return await self._inner.receive()
        except (anyio.EndOfStream, anyio.ClosedResourceError, anyio.BrokenResourceError):
            self._ended.set()
            raise

    def __aiter__(self) -> _Watched:
        return self

    async def __anext__(self) -> Any:
        try:
            return await self.receive()
        except anyio.EndOfStream:
            raise StopAsyncIteration from None

    async def aclose(self) -> None:
        await self._inner.aclose()

    async def __aenter__(self) -> _Watched:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    def __getattr__(self, name: str) -> Any:  # e.g. ``last_context`` of the SDK's context streams
        return getattr(self._inner, name)


class McpConnection:
    def __init__(self, name: str, config: McpServerConfig, registry: ToolRegistry, headers: dict[str, str]) -> None:
        self.name = name
        self.config = config
        self.registry = registry
        self.headers = headers
        self.session: ClientSession | None = None
        #: set once the first connection attempt has ended (connected or failed)
        self.first_attempt = trio.Event()
        #: how many times a session was established (a reconnect adds one)
        self.connects = 0
        self._names: set[str] = set()
        self._lost = trio.Event()
        self._changed = trio.Event()
        self.ping_seconds = PING_SECONDS

    # -- lifetime -------------------------------------------------------------------------------

    async def run(self) -> None:
        backoff = INITIAL_BACKOFF
        while True:
            connects = self.connects
            try:
                await self._serve_session()
            except Exception as exc:  # whatever a transport or a server throws ends this session only
                log.warning("mcp server %s: %s", self.name, _describe(exc))
            finally:
                self.session = None
                self.first_attempt.set()
            if self.connects != connects:
                backoff = INITIAL_BACKOFF
            await trio.sleep(backoff)
            backoff = min(backoff * 2, MAX_BACKOFF)

    @contextlib.asynccontextmanager
    async def _transport(self) -> AsyncIterator[tuple[Any, Any]]:
        if self.config.transport == "stdio":
            assert self.config.command is not None
            params = StdioServerParameters(command=self.config.command, args=list(self.config.args),
                                           env=dict(self.config.env) or None, cwd=self.config.cwd)
            async with stdio_client(params) as streams:
                yield streams
        else:
            assert self.config.url is not None
            async with (create_mcp_http_client(headers=self.headers) as client,
                        streamable_http_client(self.config.url, http_client=client) as streams):
                # with tracing on, each request carries the span of the call it is sent for
                for hook in tracing.request_hooks().get("request", ()):
                    client.event_hooks["request"].append(hook)
                yield streams

    async def _serve_session(self) -> None:
        async with self._transport() as (read, write):
            lost = trio.Event()
            async with ClientSession(_Watched(read, lost), write, message_handler=self._on_message) as session:
                with trio.fail_after(max(CONNECT_SECONDS, self.config.timeout_seconds)):
                    await session.initialize()
                    await self._load_tools(session)
                self._lost, self.session = lost, session
                self.connects += 1
                log.info("mcp server %s: connected (%d tools)", self.name, len(self._names))
                self.first_attempt.set()
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(self._follow_list_changes, session)
                    nursery.start_soon(self._ping, session, lost)
                    await lost.wait()
                    nursery.cancel_scope.cancel()
                self.session = None
                log.warning("mcp server %s: the connection was lost; reconnecting", self.name)

    async def _on_message(self, message: Any) -> None:
        if isinstance(message, Exception):
            log.warning("mcp server %s: transport error: %s", self.name, _describe(message))
        elif isinstance(message, types.ToolListChangedNotification):
            self._changed.set()

    async def _follow_list_changes(self, session: ClientSession) -> None:
        while True:
            await self._changed.wait()
            self._changed = trio.Event()
            try:
                with trio.fail_after(self.config.timeout_seconds):
                    await self._load_tools(session)
                log.info("mcp server %s: tool list changed (%d tools)", self.name, len(self._names))
            except Exception as exc:
                log.warning("mcp server %s: could not read the changed tool list: %s", self.name, _describe(exc))

    async def _ping(self, session: ClientSession, lost: trio.Event) -> None:
        while True:
            await trio.sleep(self.ping_seconds)
            try:
                with trio.fail_after(self.config.timeout_seconds):
                    await session.send_ping()
            except Exception:
                lost.set()
                return

    # -- tools ----------------------------------------------------------------------------------

    async def _load_tools(self, session: ClientSession) -> None:
        listed: list[types.Tool] = []
        cursor: str | None = None
        while True:
            page = await session.list_tools(params=types.PaginatedRequestParams(cursor=cursor) if cursor else None)
            listed.extend(page.tools)
            cursor = page.next_cursor
            if not cursor:
                break
        include = self.config.include
        fresh: dict[str, Tool] = {}
        for tool in listed:
            if include is not None and tool.name not in include:
                continue
            name = tool_name(self.name, tool.name)
            if not TOOL_NAME.match(name):
                log.warning("mcp server %s: tool %r skipped: %r is not a valid function name", self.name,
                            tool.name, name)
                continue
            fresh[name] = Tool(name, tool.description or "", dict(tool.input_schema), self._caller(tool.name, name),
                               kind="mcp", permission=self.config.permission)
        for name in self._names - fresh.keys():
            self.registry.remove(name)
        added = set()
        for name, tool in fresh.items():
            try:
                self.registry.add(tool)
            except ConfigError as exc:
                log.warning("mcp server %s: tool %r skipped: %s", self.name, tool.name, exc)
                self.registry.remove(name)
                continue
            added.add(name)
        self._names = added

    def _caller(self, tool: str, name: str):  # noqa: ANN202 - a Tool.call
        async def call(args: dict[str, Any], ctx: ToolContext) -> ToolText:
            return await self.call(tool, name, args)

        return call

    async def call(self, tool: str, name: str, args: dict[str, Any]) -> ToolText:
        """Call ``tool``; its text on success, else ``ToolError`` with a classified message."""
        session = self.session
        if session is None:
            raise ToolError(f"MCP_UNAVAILABLE: the MCP server {self.name!r} is not connected; try again later")
        timeout = self.config.timeout_seconds
        try:
            result = await session.call_tool(tool, args, read_timeout_seconds=timeout)
        except MCPError as exc:
            if exc.code == types.REQUEST_TIMEOUT:
                raise ToolError(f"MCP_TIMEOUT: {name} did not answer within {_seconds(timeout)}") from None
            if exc.code == types.CONNECTION_CLOSED:
                self._lose(session)
                raise ToolError(f"MCP_UNAVAILABLE: the MCP server {self.name!r} closed the connection during "
                                f"the call") from None
            raise ToolError(f"MCP_PROTOCOL_ERROR: {name}: {exc.message} (code {exc.code})") from None
        except OSError as exc:
            self._lose(session)
            raise ToolError(f"MCP_UNAVAILABLE: the MCP server {self.name!r} failed: {_describe(exc)}") from None
        except Exception as exc:
            raise ToolError(f"MCP_PROTOCOL_ERROR: {name}: {_describe(exc)}") from None
        text = result_text(result)
        if result.is_error:
            raise ToolError(text or f"{name} failed")
        return ToolText(text)

    def _lose(self, session: ClientSession) -> None:
        if self.session is session:
            self._lost.set()


def _seconds(value: float) -> str:
    return f"{int(value)} s" if math.isclose(value, round(value)) else f"{value:g} s"


def _describe(exc: BaseException) -> str:
    if isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        return _describe(exc.exceptions[0])
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0]}" if text else type(exc).__name__
