"""Published agents: the config's agent definitions bound to their model, tools and policy.

One ``Agent`` serves every protocol. ``AgentRegistry`` builds them once at start-up from
``AppConfig`` (checking that every named tool exists) and is what ``GET /v1/agents`` lists.

An agent's server tools are resolved from the tool registry at each use, because MCP tools come and
go with their servers: ``<server>__<tool>`` is that tool while its server lists it, and
``<server>__*`` every tool the server lists now. A run sees the tools of the moment each step
starts; a tool whose server has never connected is simply not offered.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Mapping
from typing import Any

import attrs

from awaken.config import AgentConfig, AppConfig, Permission
from awaken.core.errors import ConfigError, InputRejected
from awaken.mcp.config import SEP, agent_tool_problem
from awaken.models import Model, ToolSpec
from awaken.models.providers import Provider, resolve_model
from awaken.tools import ToolRegistry
from awaken.tools.builtins import BUILTINS
from awaken.tools.plugins import (
    TOOLS_GROUP,
    add_import_directory,
    known_entry_points,
    load_entry_point,
    load_path,
)

log = logging.getLogger("awaken.tools")


@attrs.frozen
class Agent:
    id: str
    config: AgentConfig
    model: Model
    #: tools the client executes
    client_tools: tuple[ToolSpec, ...]
    #: where the server tools named in ``config.tools`` are looked up
    registry: ToolRegistry
    #: the registry's generation, the server tools, all the tools and their names, as of that generation
    #: (every run asks; an MCP server's tools change the registry, and so its generation)
    _known: list[Any] = attrs.field(factory=lambda: [-1, (), (), frozenset()], init=False, eq=False, repr=False)

    def _current(self) -> list[Any]:
        known = self._known
        if known[0] != self.registry.generation:
            server = tuple(self.registry.get(name).spec for name in self._server_tool_names())
            every = server + self.client_tools
            known[:] = [self.registry.generation, server, every, frozenset(t.name for t in every)]
        return known

    @property
    def server_tools(self) -> tuple[ToolSpec, ...]:
        """The server tools this agent may call now."""
        return self._current()[1]

    @property
    def tool_names(self) -> frozenset[str]:
        """The names of ``tools``."""
        return self._current()[3]

    def _server_tool_names(self) -> list[str]:
        names: dict[str, None] = {}
        for entry in self.config.tools:
            if entry.endswith(f"{SEP}*"):
                prefix = entry[:-1]
                names.update((n, None) for n in self.registry.names()
                             if n.startswith(prefix) and self.registry.get(n).kind == "mcp")
            elif entry in self.registry:
                names[entry] = None
        return list(names)

    def permission(self, tool: str) -> Permission:
        """The agent's own setting for the tool, else the tool's (an MCP server's), else the default."""
        if tool in self.config.permissions:
            return self.config.permissions[tool]
        own = self.registry.get(tool).permission if tool in self.registry else None
        return own or self.config.default_permission  # type: ignore[return-value]

    def is_client_tool(self, name: str) -> bool:
        return any(t.name == name for t in self.client_tools)

    @property
    def tools(self) -> tuple[ToolSpec, ...]:
        """The server tools, then the client tools."""
        return self._current()[2]

    def describe(self) -> dict[str, Any]:
        return {
            "id": self.id,
            "description": self.config.description,
            "model": self.config.model,
            "tools": [
                {"name": t.name, "description": t.description, "kind": self.registry.get(t.name).kind,
                 "permission": self.permission(t.name), "parameters": t.parameters}
                for t in self.server_tools
            ]
            + [
                {"name": t.name, "description": t.description, "kind": "client", "permission": self.permission(t.name),
                 "parameters": t.parameters}
                for t in self.client_tools
            ],
        }


class AgentRegistry:
    def __init__(self, config: AppConfig, tools: ToolRegistry, models: dict[str, Model]) -> None:
        self.default_id = config.default_agent
        self.tools = tools
        self._agents: dict[str, Agent] = {}
        for agent_id, agent in config.agents.items():
            for name in agent.tools:
                if name not in tools and (problem := agent_tool_problem(name, config.mcp_servers)):
                    raise ConfigError(
                        f"agents.{agent_id}.tools: {problem}; known tools: {', '.join(tools.names())}"
                        + "".join(f", {server}{SEP}*" for server in config.mcp_servers)
                    )
            self._agents[agent_id] = Agent(
                id=agent_id,
                config=agent,
                model=models[agent_id],
                client_tools=tuple(ToolSpec(t.name, t.description, t.parameters) for t in agent.client_tools),
                registry=tools,
            )

    def get(self, agent_id: str | None) -> Agent:
        agent = self._agents.get(agent_id or self.default_id)
        if agent is None:
            raise InputRejected(
                f"unknown agent {agent_id!r}; published agents: {', '.join(sorted(self._agents))}",
                code="UNKNOWN_AGENT",
            )
        return agent

    def all(self) -> list[Agent]:
        return list(self._agents.values())


def build_tools(config: AppConfig, environ: Mapping[str, str] | None = None) -> ToolRegistry:
    """The server tools: the built-ins, ``[tools] plugins`` by dotted path (imported with the config
    file's directory on the import path), and the ``awaken.tools`` entry points an agent or a
    ``[tools.<name>]`` table names; each bound to its validated settings. ``ConfigError`` names a tool
    that cannot load, a bad setting, or a settings table for no tool; a secret a tool declares that
    ``environ`` lacks is logged as a warning (the tool's calls will say so too)."""
    add_import_directory(config.config_directory)
    definitions = [load_path(path) for path in config.tools.plugins]
    named = {name for agent in config.agents.values() for name in agent.tools} | set(config.tools.settings)
    loaded = {d.name for d in definitions} | {t.name for t in BUILTINS}
    points = known_entry_points()
    definitions += [load_entry_point(points[name]) for name in sorted(named - loaded) if name in points]
    registry = ToolRegistry(BUILTINS)
    for found in definitions:
        registry.add(found.build(config.tool_settings(found.name, found.settings_class)))
    for name in config.tools.settings:
        if name not in registry:
            raise ConfigError(f"tools.{name}: no tool named {name!r} is loaded (a [tools.<name>] table configures "
                              f"a tool from [tools] plugins or the {TOOLS_GROUP} entry points; loaded: "
                              f"{', '.join(registry.names())})")
    environ = os.environ if environ is None else environ
    for found in definitions:
        for secret in found.secrets:
            if not environ.get(secret) and not environ.get(f"{secret}_FILE"):
                log.warning("the tool %s reads the secret %s, which is not set (nor %s_FILE): its calls will "
                            "fail until it is", found.name, secret, secret)
    return registry


def build_models(config: AppConfig) -> dict[str, Model]:
    """The model of each agent, by agent id, from the provider its ``model`` names. Each provider is
    made once and decides what its agents share (one scripted model; one OpenAI client per agent)."""
    providers: dict[str, Provider] = {}
    models: dict[str, Model] = {}
    for agent_id, agent in config.agents.items():
        name, provider_class, model_name = resolve_model(agent.model)
        if name not in providers:
            providers[name] = provider_class()
        models[agent_id] = providers[name].model(model_name, config.provider_for(agent))
    return models
