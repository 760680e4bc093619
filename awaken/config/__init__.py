"""Configuration: ``config.toml`` loaded into attrs classes with cattrs.

``load_config(path)`` returns an ``AppConfig`` or raises ``ConfigError`` whose text is one line
naming the offending key (unknown key, wrong type, missing agent). ``config.toml`` at the repo root
is the working default and documents every key. ``[providers.<name>]`` tables and an agent's
``provider`` overrides are structured here, strictly, into the named provider's own config class
(``awaken/models/providers.py``), so each provider owns its keys and the errors read the same.
"""

from __future__ import annotations

import os
import re
import tomllib
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import cattrs
from cattrs.cols import list_structure_factory
from cattrs.errors import (
    AttributeValidationNote,
    ClassValidationError,
    ForbiddenExtraKeysError,
    IterableValidationError,
    IterableValidationNote,
)

from awaken.config import auth as auth_config
from awaken.config import edge, environment, paths
from awaken.config import telemetry as telemetry_config
from awaken.core.errors import ConfigError
from awaken.mcp.config import McpServerConfig, check_servers, covered
from awaken.models.providers import provider_class, resolve_model

Permission = Literal["allow", "ask", "deny"]
OnDisconnect = Literal["cancel", "continue"]
OnNewInput = Literal["reject", "interrupt", "enqueue"]


@attrs.frozen
class ServerConfig:
    bind: str = "127.0.0.1:8000"
    #: seconds of silence before a ``: keep-alive`` comment on an SSE stream
    keepalive_seconds: float = 15.0
    #: bytes a slow reader may leave unsent before the connection is dropped (and the run interrupted)
    max_buffered_bytes: int = 4 * 1024 * 1024
    #: bytes of encoded events each active run keeps per protocol for watchers that join late (rejoin)
    replay_bytes: int = 1024 * 1024
    #: seconds between WebSocket pings
    ws_ping_seconds: float = 20.0
    #: seconds a shutdown waits, after the drain, for connections to close (hypercorn's graceful timeout)
    graceful_timeout: float = 2.0
    #: seconds a shutdown (SIGTERM, SIGINT) gives the runs in progress to reach their end or their next
    #: step boundary; then what still runs is committed ``interrupted`` with cause ``shutdown``
    drain_seconds: float = 30.0
    #: browser origins allowed to call ``/v1/`` (exact ``scheme://host[:port]``; ``"*"`` alone: any, see awaken/http/cors.py)
    cors_origins: list[str] = attrs.field(factory=list)
    #: request headers browsers may send beyond content-type, authorization, user-agent and last-event-id
    cors_extra_headers: list[str] = attrs.field(factory=list)
    #: names (``host`` or ``host:port``) a request's ``Host`` may carry beyond loopback names and the bind
    #: address (awaken/http/hosts.py): the names clients use behind a proxy or in a container
    allowed_hosts: list[str] = attrs.field(factory=list)
    #: server processes on ``bind`` (one Trio loop each); more than 1 needs a ledger shared by processes
    workers: int = 1
    #: seconds a write to a client may stay blocked (no byte taken by its socket) before the connection
    #: is closed; a run it was streaming is committed ``interrupted`` with cause ``client_too_slow``
    write_timeout_seconds: float = 30.0
    #: seconds a request body may take to arrive in full (from the request head); then HTTP 408 ``BODY_TIMEOUT``
    body_timeout_seconds: float = 30.0
    #: request bodies over ``OFF_LOOP_BODY`` bytes read or parsed at once; one more is refused with
    #: HTTP 503 ``TOO_MANY_LARGE_BODIES`` and ``Retry-After``
    max_large_bodies: int = 4
    #: bytes of recent requests' replayed histories kept so that the next replay of a thread has only
    #: its new messages parsed (``awaken.wires.memo``); 0 turns it off
    replay_memo_bytes: int = 16 * 1024 * 1024
    #: connections the kernel may hold accepted-but-not-yet-taken on the listening socket; a burst of
    #: clients beyond it loses SYNs (retried a second later) or is reset. Capped by the kernel's
    #: ``net.core.somaxconn`` (4096 on current Linux)
    backlog: int = 2048
    #: ``plain`` (readable lines) or ``json`` (one JSON object per line, plus a line per request and per
    #: run outcome: awaken/telemetry/logs.py; docs/deploying.md, "Logs")
    log_format: Literal["plain", "json"] = "plain"


@attrs.frozen
class LedgerConfig:
    #: ``sqlite``, ``files`` or a name registered under the ``awaken.ledgers`` entry-point group
    backend: str = "sqlite"
    #: the SQLite database file, or the file ledger's directory
    path: str = "./var/awaken.db"
    #: extra keyword options passed to the backend
    options: dict[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class ClientToolConfig:
    name: str
    description: str = ""
    parameters: dict[str, Any] = attrs.field(factory=lambda: {"type": "object", "properties": {}})


@attrs.frozen
class AgentConfig:
    description: str = ""
    #: ``<provider>:<model name>`` (``openai:gpt-4o-mini``), or ``scripted`` alone (see awaken/models/providers.py)
    model: str = "scripted"
    system_prompt: str = "You are a helpful assistant."
    #: server tools by name (built-ins, plugins, MCP tools as ``<server>__<tool>`` or ``<server>__*``)
    tools: list[str] = attrs.field(factory=list)
    #: tools the browser executes
    client_tools: list[ClientToolConfig] = attrs.field(factory=list)
    #: per-tool permission: allow | ask | deny
    permissions: dict[str, Permission] = attrs.field(factory=dict)
    default_permission: Permission = "allow"
    max_steps: int = 8
    #: how many of the thread's latest messages the model receives (the history budget); older ones
    #: stay in the ledger and in history pages. A window never starts with a tool result cut off from
    #: its call. It is also how much history admission reads.
    history_messages: int = 200
    #: overrides of its provider's ``[providers.<name>]`` table for this agent (validated by the provider)
    provider: dict[str, Any] | None = None
    #: what a run does when the connection that started it goes: ``cancel`` (interrupted, ``client_gone``)
    #: or ``continue`` (it runs on to its committed outcome in the server's nursery; rejoinable)
    on_disconnect: OnDisconnect = "cancel"
    #: whether the model reads, next turn, an answer a run's early end cut off (committed marked
    #: incomplete: stop, disconnect, failure, shutdown); history shows it either way
    keep_partial_answers: bool = True
    #: new input for a thread whose run is streaming: ``reject`` (``THREAD_BUSY``), ``interrupt`` (the
    #: running turn stops, its answer kept as cut off, and the new one starts) or ``enqueue`` (the new
    #: input is committed and runs once the current turn ends)
    on_new_input: OnNewInput = "reject"


Role = Literal["user", "admin", "anonymous"]


@attrs.frozen
class LimitsConfig:
    """``[limits]``: caps per principal (``awaken/engine/limits.py``); 0 turns a cap off."""

    #: runs one caller may have executing at once (a waiting run holds none)
    max_concurrent_runs: int = 8
    #: runs one caller may start in any 60 seconds
    runs_per_minute: int = 60
    #: the roles the caps apply to: ``user`` (authenticated non-admins), ``admin``, ``anonymous`` (mode none)
    roles: list[Role] = attrs.field(factory=lambda: ["user"])


@attrs.frozen
class ToolsConfig:
    """``[tools]``: ``plugins`` and, as ``[tools.<name>]`` tables, each tool's own settings."""

    #: plugin tools by dotted path, ``package.module:name`` (a module beside the config file is found)
    plugins: list[str] = attrs.field(factory=list)
    #: ``[tools.<name>]`` tables by tool name, each validated at start-up by the tool's ``settings_class``
    settings: dict[str, dict[str, Any]] = attrs.field(factory=dict)


@attrs.frozen
class AppConfig:
    agents: dict[str, AgentConfig]
    default_agent: str = "assistant"
    server: ServerConfig = ServerConfig()
    ledger: LedgerConfig = LedgerConfig()
    #: ``[providers.<name>]`` tables, each validated by its provider (``awaken.models`` entry points)
    providers: dict[str, dict[str, Any]] = attrs.field(factory=dict)
    tools: ToolsConfig = ToolsConfig()
    auth: auth_config.AuthConfig = auth_config.AuthConfig()
    #: MCP servers whose tools agents may use (``awaken.mcp``)
    mcp_servers: dict[str, McpServerConfig] = attrs.field(factory=dict)
    #: caps per principal on runs at once and new runs per minute
    limits: LimitsConfig = LimitsConfig()
    #: where traces go (OTLP over HTTP) and what they hold; the ``OTEL_*`` variables come first
    telemetry: telemetry_config.TelemetryConfig = telemetry_config.TelemetryConfig()
    #: the directory of the config file (None: no file); set by ``load_config``, never a key of the file.
    #: Tool modules named in ``[tools] plugins`` are imported from it (``awaken.tools.plugins``)
    config_directory: str | None = attrs.field(default=None, kw_only=True)

    def tool_settings(self, name: str, settings_class: type | None) -> Any:
        """The tool's ``[tools.<name>]`` table structured into its ``settings_class`` (``ConfigError``
        naming a bad key, as a provider's table); None for a tool that declares no class (a table for
        it is refused)."""
        table = self.tools.settings.get(name)
        if settings_class is None:
            if table is not None:
                raise ConfigError(f"tools.{name}: the tool {name} takes no settings")
            return None
        return _structure(table or {}, settings_class, f"$.tools['{name}']")

    def provider_for(self, agent: AgentConfig) -> Any:
        """The agent's provider settings: its ``[providers.<name>]`` table with the agent's ``provider``
        overrides, structured into the provider's config class (``ConfigError`` naming a bad key)."""
        agent_id = next((k for k, a in self.agents.items() if a is agent), "?")
        name, provider, _ = resolve_model(agent.model)
        return _provider_config(provider, name, self.providers.get(name, {}), agent_id, agent.provider)


_converter = cattrs.Converter(forbid_extra_keys=True)


def _strict(kind: type, *accepted: type):  # noqa: ANN202 - a cattrs hook factory
    def hook(value: Any, _: type) -> Any:
        if isinstance(value, bool) and kind is not bool or not isinstance(value, accepted):
            raise TypeError(f"expected {kind.__name__}, got {type(value).__name__} {value!r}")
        return kind(value)

    return hook


# TOML already types its values: refuse silent coercions such as 1 -> "1" or "x" -> error deep inside.
_converter.register_structure_hook(str, _strict(str, str))
_converter.register_structure_hook(int, _strict(int, int))
_converter.register_structure_hook(float, _strict(float, int, float))
_converter.register_structure_hook(bool, _strict(bool, bool))


def _strict_list(kind: Any, converter: cattrs.Converter):  # noqa: ANN202 - a cattrs hook factory
    items = list_structure_factory(kind, converter)

    def hook(value: Any, _: type) -> Any:
        if not isinstance(value, list):  # a string is iterable, and would become a list of its letters
            raise TypeError(f"expected list, got {type(value).__name__} {value!r}")
        return items(value, kind)

    return hook


_converter.register_structure_hook_factory(
    lambda t: getattr(t, "__origin__", None) is list, lambda t: _strict_list(t, _converter))


def _structure_tools(value: Any, _: type) -> ToolsConfig:
    """``[tools]``: ``plugins``, and every other key a tool's ``[tools.<name>]`` table."""
    if not isinstance(value, dict):
        raise TypeError(f"expected a table, got {type(value).__name__} {value!r}")
    for name, table in value.items():
        if name != "plugins" and not isinstance(table, dict):
            raise TypeError(f"{name}: expected the tool's settings table [tools.{name}], got "
                            f"{type(table).__name__} {table!r}")
    plugins = _converter.structure(value.get("plugins", []), list[str])
    return ToolsConfig(plugins, {k: v for k, v in value.items() if k != "plugins"})


_converter.register_structure_hook(ToolsConfig, _structure_tools)


def _path_to_key(path: str) -> str:
    # "$.agents['assistant'].tools[0]" -> "agents.assistant.tools[0]"
    key = re.sub(r"\['([^']*)'\]", r".\1", path.removeprefix("$"))
    return key.lstrip(".") or "(top level)"


def _first_problem(exc: BaseException, path: str = "$") -> str:
    if isinstance(exc, ForbiddenExtraKeysError):
        extra = sorted(exc.extra_fields)
        where = _path_to_key(path)
        names = ", ".join(f"{where}.{k}" if where != "(top level)" else k for k in extra)
        return f"unknown key {names}"
    if isinstance(exc, ClassValidationError | IterableValidationError):
        for sub in exc.exceptions:
            note = getattr(sub, "__notes__", [""])
            sub_path = path
            for n in note:
                if isinstance(n, AttributeValidationNote):
                    sub_path = f"{path}.{n.name}"
                elif isinstance(n, IterableValidationNote):
                    sub_path = f"{path}['{n.index}']" if isinstance(n.index, str) else f"{path}[{n.index}]"
            return _first_problem(sub, sub_path)
    key = _path_to_key(path)
    if isinstance(exc, KeyError):
        name = exc.args[0]
        # the attribute note already put the missing name at the end of the path
        if key == name or key.endswith(f".{name}"):
            return f"missing key {key}"
        return f"missing key {key}.{name}" if key != "(top level)" else f"missing key {name}"
    return f"{key}: {exc}"


def _structure(data: Any, cls: type, path: str) -> Any:
    """``data`` as ``cls``, strictly; a problem is a ``ConfigError`` naming the key under ``path``."""
    try:
        return _converter.structure(data, cls)
    except Exception as exc:
        raise ConfigError(_first_problem(exc, path)) from None


def _provider_config(provider: type, name: str, table: dict[str, Any], agent_id: str,
                     override: dict[str, Any] | None) -> Any:
    """``[providers.<name>]`` merged with an agent's overrides, structured into the provider's config class.
    The table is checked alone first, so a problem is named where it was written."""
    config = _structure(table, provider.config_class, f"$.providers['{name}']")
    if override is None:
        return config
    return _structure({**table, **override}, provider.config_class, f"$.agents['{agent_id}'].provider")


def parse_config(data: dict[str, Any], *, source: str = "config") -> AppConfig:
    if "config_directory" in data:  # where the file is, not something it says
        raise ConfigError(f"{source}: unknown key config_directory")
    try:
        config = _converter.structure(data, AppConfig)
    except Exception as exc:
        raise ConfigError(f"{source}: {_first_problem(exc)}") from None
    _check(config, source)
    return config


def _check(config: AppConfig, source: str) -> None:
    if not config.agents:
        raise ConfigError(f"{source}: agents: no agent is defined")
    if config.default_agent not in config.agents:
        raise ConfigError(
            f"{source}: default_agent: agent {config.default_agent!r} is not defined under [agents]"
        )
    for name, table in config.providers.items():
        try:
            provider = provider_class(name)
        except ConfigError as exc:
            raise ConfigError(f"{source}: providers.{name}: {exc}") from None
        try:
            _provider_config(provider, name, table, "", None)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
    for agent_id, agent in config.agents.items():
        try:
            name, provider, _ = resolve_model(agent.model)
        except ConfigError as exc:
            raise ConfigError(f"{source}: agents.{agent_id}.model: {exc}") from None
        try:
            _provider_config(provider, name, config.providers.get(name, {}), agent_id, agent.provider)
        except ConfigError as exc:
            raise ConfigError(f"{source}: {exc}") from None
        if agent.max_steps < 1:
            raise ConfigError(f"{source}: agents.{agent_id}.max_steps: must be at least 1")
        if agent.history_messages < 1:
            raise ConfigError(f"{source}: agents.{agent_id}.history_messages: must be at least 1")
        names = set(agent.tools) | {t.name for t in agent.client_tools}
        for tool in agent.permissions:
            if tool not in names and not covered(tool, agent.tools):
                raise ConfigError(f"{source}: agents.{agent_id}.permissions.{tool}: the agent has no such tool")
    check_servers(config.mcp_servers, source)
    server = config.server
    for key, value, ok in (
        ("keepalive_seconds", server.keepalive_seconds, server.keepalive_seconds > 0),
        ("max_buffered_bytes", server.max_buffered_bytes, server.max_buffered_bytes > 0),
        ("ws_ping_seconds", server.ws_ping_seconds, server.ws_ping_seconds > 0),
        ("graceful_timeout", server.graceful_timeout, server.graceful_timeout >= 0),
        ("drain_seconds", server.drain_seconds, server.drain_seconds >= 0),
        ("workers", server.workers, isinstance(server.workers, int) and server.workers >= 1),
        ("write_timeout_seconds", server.write_timeout_seconds, server.write_timeout_seconds > 0),
        ("body_timeout_seconds", server.body_timeout_seconds, server.body_timeout_seconds > 0),
        ("max_large_bodies", server.max_large_bodies, server.max_large_bodies >= 1),
        ("replay_memo_bytes", server.replay_memo_bytes,
         isinstance(server.replay_memo_bytes, int) and server.replay_memo_bytes >= 0),
        ("backlog", server.backlog, isinstance(server.backlog, int) and server.backlog >= 1),
    ):
        if not ok:
            raise ConfigError(f"{source}: server.{key}: {value!r} is out of range (must be positive)")
    _check_cors(config, source)
    for key in ("max_concurrent_runs", "runs_per_minute"):
        if getattr(config.limits, key) < 0:
            raise ConfigError(f"{source}: limits.{key}: {getattr(config.limits, key)!r} is out of range "
                              "(0 turns the cap off)")
    host, _, port = config.server.bind.rpartition(":")
    if not host or not port.isdigit():
        raise ConfigError(f"{source}: server.bind: {config.server.bind!r} is not HOST:PORT")
    auth_config.check(config.auth, source)
    telemetry_config.check(config.telemetry, source)


def _check_cors(config: AppConfig, source: str) -> None:
    server = config.server
    for i, origin in enumerate(server.cors_origins):
        if problem := edge.origin_problem(origin):
            raise ConfigError(f"{source}: server.cors_origins[{i}]: {problem}")
    for i, name in enumerate(server.cors_extra_headers):
        if problem := edge.header_problem(name):
            raise ConfigError(f"{source}: server.cors_extra_headers[{i}]: {problem}")
    if problem := edge.wildcard_problem(server.cors_origins, config.auth.mode):
        raise ConfigError(f"{source}: server.cors_origins: {problem}")
    for i, entry in enumerate(server.allowed_hosts):
        if problem := edge.allowed_host_problem(entry):
            raise ConfigError(f"{source}: server.allowed_hosts[{i}]: {problem}")


def unset_key_variables(config: AppConfig, environ: Mapping[str, str]) -> dict[str, list[str]]:
    """The API key variables the agents' providers name (``api_key_env``) that are unset or empty in
    ``environ``, each with the agents that use it: what start-up warns about once (a local endpoint may
    need no key, so it is not an error; a hosted one answers every run ``MODEL_UNAVAILABLE``)."""
    unset: dict[str, list[str]] = {}
    for agent_id, agent in config.agents.items():
        variable = getattr(config.provider_for(agent), "api_key_env", None)
        if variable and not environ.get(variable, "").strip():
            unset.setdefault(variable, []).append(agent_id)
    return unset


def load_config(path: str | Path | None, environ: Mapping[str, str] | None = None) -> AppConfig:
    """The configuration: the file at ``path`` (None: no file, defaults only) with the ``AWAKEN_``
    settings of ``environ`` (default ``os.environ``) over it (``environment.overlay``: environment over
    file over default), validated. With no agent defined anywhere the default agents are served."""
    environ = os.environ if environ is None else environ
    data: dict[str, Any] = {}
    if path is not None:
        path = Path(path)
        try:
            data = tomllib.loads(path.read_text(encoding="utf-8"))
        except FileNotFoundError:
            raise ConfigError(f"{path}: no such config file") from None
        except tomllib.TOMLDecodeError as exc:
            raise ConfigError(f"{path}: not valid TOML: {exc}") from None
        data = paths.resolve(data, path.resolve().parent)  # relative to the file, not the working directory
    data = environment.overlay(data, environ, AppConfig, default_agents=path is None, open_tables=(ToolsConfig,))
    if path is not None:
        data = paths.default_ledger_path(data, path.resolve().parent)
    config = parse_config(data, source=str(path) if path is not None else "environment")
    return config if path is None else attrs.evolve(config, config_directory=str(path.resolve().parent))
