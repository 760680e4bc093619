"""ServerContext: the one place the server's parts are built, opened and closed.

It owns the ledger, the tool registry, the published agents, the ``RunApplication``, the MCP
servers and the SSE streams' keep-alive ``Heartbeat``; the HTTP and WebSocket layers receive it and
use only these handles. Its lifetime: ``open()``, then ``run_mcp`` started in the server's nursery
(it returns at once when no MCP server is configured), and ``aclose()`` after that nursery is done.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

import attrs
import trio

from awaken.config import AppConfig
from awaken.config.telemetry import trace_settings
from awaken.engine import RunApplication
from awaken.engine.agents import AgentRegistry, build_models, build_tools
from awaken.engine.limits import Limits, RunLimiter
from awaken.http import auth
from awaken.ledger.interface import Ledger
from awaken.ledger.registry import build_ledger
from awaken.models import Model
from awaken.telemetry import tracing
from awaken.telemetry.metrics import ServerMetrics
from awaken.telemetry.tracing import Timelines
from awaken.transports.body import LARGE_BODY, LargeBodies
from awaken.transports.sse import Heartbeat

if TYPE_CHECKING:
    from awaken.mcp.servers import McpServers






@attrs.define
class ServerContext:
    config: AppConfig
    ledger: Ledger
    agents: AgentRegistry
    app: RunApplication
    models: dict[str, Model]
    #: who a request is: built at start-up from ``[auth]`` and the final bind
    auth: auth.Authenticator
    #: the MCP servers' connections (None when none is configured: the SDK is not even imported)
    mcp: McpServers | None = None
    #: the slots of request bodies over 256 KiB being read or parsed (``server.max_large_bodies``)
    large_bodies: LargeBodies = attrs.field(factory=lambda: LargeBodies(4, LARGE_BODY))
    #: this server's Prometheus metrics, in a registry of its own (``GET /metrics``)
    metrics: ServerMetrics = attrs.field(factory=ServerMetrics)
    #: the timelines of the runs this server ran recently (the console's; ``awaken.telemetry.tracing``)
    timelines: Timelines = attrs.field(factory=Timelines)
    #: the keep-alive comments of the open SSE streams (``[server] keepalive_seconds``): its task runs
    #: in the server's lifespan nursery (``build_asgi``)
    heartbeat: Heartbeat = attrs.field(
        default=attrs.Factory(lambda self: Heartbeat(self.config.server.keepalive_seconds), takes_self=True))

    @classmethod
    def build(cls, config: AppConfig) -> ServerContext:
        """Build every part (raising ``ConfigError`` for a bad tool, plugin, backend or ``[auth]``
        setting, e.g. a key's environment variable unset); opens nothing."""
        authenticator = auth.build(config.auth, config.server.bind, os.environ)
        tools = build_tools(config)
        models = build_models(config)
        agents = AgentRegistry(config, tools, models)
        ledger = build_ledger(config)
        mcp = None
        if config.mcp_servers:
            from awaken.mcp.servers import McpServers

            mcp = McpServers(config.mcp_servers, tools)
        limits = config.limits
        limiter = RunLimiter(Limits(limits.max_concurrent_runs, limits.runs_per_minute, frozenset(limits.roles)))
        metrics = ServerMetrics(config.ledger.backend)
        metrics.time_commits(ledger)
        timelines = Timelines()
        app = RunApplication(ledger, agents, tools, limiter, metrics, timelines)
        metrics.count_watchers(lambda: watchers(app))
        return cls(config, ledger, agents, app, models, authenticator, mcp,
                   LargeBodies(config.server.max_large_bodies, LARGE_BODY), metrics, timelines)

    async def open(self) -> None:
        # tracing is decided here, once: with no exporter configured no OpenTelemetry object exists
        tracing.configure(trace_settings(self.config.telemetry, os.environ))
        await self.ledger.open()

    async def run_mcp(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        """Keep the MCP servers connected until cancelled (started once each made a first attempt)."""
        if self.mcp is None:
            task_status.started()
            return
        await self.mcp.run(task_status=task_status)

    async def run_claims(self, *, task_status=trio.TASK_STATUS_IGNORED) -> None:  # noqa: ANN001
        """The thread claims' upkeep (lease heartbeat, dead-process sweep, stop requests from other
        processes) until cancelled; returns at once for an embedded ledger's local claims."""
        relay = self.ledger.relay()
        if relay is None:
            await self.app.claims.serve(self.app.stop_local, task_status=task_status)
            return
        # a shared ledger's run relay too: staging this process's runs, following other processes'
        relay.limit = self.config.server.replay_bytes  # type: ignore[attr-defined]
        async with trio.open_nursery() as nursery:
            await nursery.start(relay.serve)
            await nursery.start(functools.partial(self.app.claims.serve, self.app.stop_local))
            task_status.started()

    async def aclose(self) -> None:
        for model in {id(m): m for m in self.models.values()}.values():
            await model.aclose()
        await self.agents.tools.aclose()  # a class tool's shared clients
        await self.ledger.aclose()
        await tracing.flush()  # what is queued reaches the collector (off the event loop, bounded)


def watchers(app: RunApplication) -> int:
    """The watchers attached to the active runs' broadcasts now (``awaken_stream_watchers``, when scraped)."""
    count = 0
    for run in app.runs():
        for channel in getattr(run.broadcast, "channels", {}).values():
            count += len(channel.watchers) + len(channel.awaiting)
    return count
