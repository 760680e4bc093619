"""Configuration from the environment: the ``AWAKEN_<SECTION>__<KEY>`` overlay, secrets from files, the
embedded default agents, and the effective settings with their secrets redacted (``awaken config check``).

Precedence: environment over file over default. ``overlay(data, environ)`` is the one function that
puts the environment into the configuration: it edits the parsed TOML (a plain dict) *before* it is
structured and validated, so a value from the environment is checked exactly as the same value in
the file would be, and a bad one is named by its variable.

* ``AWAKEN_<SECTION>__<KEY>`` sets ``[section] key`` (``AWAKEN_SERVER__BIND=0.0.0.0:8000``); deeper
  tables add parts (``AWAKEN_AUTH__JWT__ISSUER``, ``AWAKEN_PROVIDERS__OPENAI__BASE_URL``). Parts are
  matched case-insensitively; ``__`` separates them, a single ``_`` belongs to a name
  (``AWAKEN_MCP_SERVERS__CRM__URL``). A tool's ``[tools.<name>]`` table: ``AWAKEN_TOOLS__<NAME>__<KEY>``.
* ``AWAKEN_AGENTS__<ID>__<KEY>`` sets a key of an agent; the id is matched case-insensitively against
  the agents the file (or the defaults) define, and names a new agent (lower-cased) when none matches.
* A top-level key is ``AWAKEN_<KEY>`` (``AWAKEN_DEFAULT_AGENT``).
* A value is read as the key's type says: text, an integer, a number, ``true``/``false`` (also
  ``1``/``0``, ``yes``/``no``); a list or an array of tables (``[[auth.tokens]]``) or a whole table
  takes a JSON value (``AWAKEN_AUTH__TOKENS='[{"name": "ops", ...}]'``). Inside a free-form table
  (``[ledger] options``, ``[providers.<name>]``, an agent's ``provider``) a value that parses as JSON
  is that JSON, anything else is the text.
* ``AWAKEN_<...>_FILE`` reads the value of ``AWAKEN_<...>`` from a file (its content, trailing
  newline removed): a Docker or Kubernetes secret. The variable itself wins when both are set.
* Secrets never go in the configuration itself: it names the environment variable that holds each one
  (``env``, ``secret_env``, ``password_env``, ``api_key_env``, ``headers_env``). Every such variable may
  instead be given as ``<NAME>_FILE`` (``secret_files``).

``AWAKEN_`` variables without ``__`` are not settings (``AWAKEN_OPS_TOKEN`` is a key that a token
table names), except the top-level keys. An ``AWAKEN_<X>__…`` whose section or key does not exist is
refused, naming the variable, as an unknown key in the file is.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Literal

import attrs
import orjson

from awaken.core.errors import ConfigError

PREFIX = "AWAKEN_"
SEPARATOR = "__"
FILE_SUFFIX = "_FILE"

#: the agents served when nothing defines any: the demo agents of the repository's ``config.toml``
#: (a test holds the two equal), so a container started with no config file serves them
DEFAULT_AGENTS: dict[str, dict[str, Any]] = {
    "assistant": {
        "description": "Answers, and uses the calculator, the clock and the shared state freely.",
        "model": "scripted",
        "system_prompt": "You are a helpful assistant.",
        "tools": ["calculator", "current_time", "set_state"],
        "default_permission": "allow",
        "max_steps": 8,
        "on_disconnect": "cancel",
    },
    "guarded": {
        "description": "The same tools, each one asking a person for permission first.",
        "model": "scripted",
        "tools": ["calculator", "current_time", "set_state"],
        "default_permission": "ask",
    },
    "frontend": {
        "description": "Asks the user through a tool the browser executes.",
        "model": "scripted",
        "client_tools": [{
            "name": "ask_user",
            "description": "Ask the user a question and return their answer.",
            "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                           "required": ["question"]},
        }],
    },
}

#: keys whose values are secrets, wherever they appear (redacted by ``redacted``)
SECRET_KEYS = frozenset({"password", "secret", "token", "api_key", "dsn"})


def _variables(environ: Mapping[str, str]) -> dict[str, str]:
    """The ``AWAKEN_`` settings in ``environ``, each ``_FILE`` variant read (the variable wins)."""
    found: dict[str, str] = {}
    for name, value in environ.items():
        if not name.startswith(PREFIX) or not name.endswith(FILE_SUFFIX):
            continue
        target = name[: -len(FILE_SUFFIX)]
        if target in environ:
            continue
        found[target] = _read_secret(name, value)
    for name, value in environ.items():
        if name.startswith(PREFIX) and not name.endswith(FILE_SUFFIX):
            found[name] = value
    return found


def _read_secret(variable: str, path: str) -> str:
    try:
        return Path(path).read_text(encoding="utf-8").removesuffix("\n").removesuffix("\r")
    except OSError as exc:
        raise ConfigError(f"{variable}: cannot read {path!r}: {exc.strerror or exc}") from None


def _hints(cls: type) -> dict[str, Any]:
    return typing.get_type_hints(cls)


def _strip_optional(kind: Any) -> Any:
    if typing.get_origin(kind) in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(kind) if a is not type(None)]
        if len(args) == 1:
            return args[0]
    return kind


def _convert(variable: str, text: str, kind: Any) -> Any:
    """``text`` as a value of ``kind`` (the type of the key it sets); ``ConfigError`` naming ``variable``."""
    kind = _strip_optional(kind)
    origin = typing.get_origin(kind)
    if kind is Any:
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    if kind is bool:
        lowered = text.strip().lower()
        if lowered in ("true", "1", "yes", "on"):
            return True
        if lowered in ("false", "0", "no", "off"):
            return False
        raise ConfigError(f"{variable}: expected true or false, got {text!r}")
    if kind is int:
        try:
            return int(text.strip())
        except ValueError:
            raise ConfigError(f"{variable}: expected an integer, got {text!r}") from None
    if kind is float:
        try:
            return float(text.strip())
        except ValueError:
            raise ConfigError(f"{variable}: expected a number, got {text!r}") from None
    if kind is str or origin is Literal:
        return text
    # a list, an array of tables, a whole table: JSON
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        expected = "a JSON array" if origin is list else "a JSON object"
        raise ConfigError(f"{variable}: expected {expected}, got {text!r}") from None
    return value


def _table(data: dict[str, Any], key: str, variable: str) -> dict[str, Any]:
    table = data.get(key)
    if table is None:
        table = data[key] = {}
    if not isinstance(table, dict):
        raise ConfigError(f"{variable}: {key} is not a table in the config file")
    return table


def _set(data: dict[str, Any], parts: list[str], kind: Any, variable: str, text: str, where: str,
         open_tables: tuple[type, ...] = ()) -> None:
    """Put ``text`` at ``parts`` under ``data``, whose type is ``kind`` (an attrs class, a dict type, Any)."""
    kind = _strip_optional(kind)
    part = parts[0]
    if attrs.has(kind):
        fields = _hints(kind)
        name = part.lower()
        if name not in fields and kind in open_tables and len(parts) > 1:  # ``[tools.<name>]``: a free table
            _set(_table(data, name, variable), parts[1:], Any, variable, text, f"{where}.{name}")
            return
        if name not in fields:
            raise ConfigError(f"{variable}: {where or 'the configuration'} has no key {name!r}")
        path = f"{where}.{name}" if where else name
        if len(parts) == 1:
            data[name] = _convert(variable, text, fields[name])
        else:
            target = _strip_optional(fields[name])
            if not (attrs.has(target) or typing.get_origin(target) is dict or target is Any):
                raise ConfigError(f"{variable}: {path} is not a table")
            _set(_table(data, name, variable), parts[1:], target, variable, text, path, open_tables)
        return
    if typing.get_origin(kind) is dict or kind is Any:
        value_kind = typing.get_args(kind)[1] if typing.get_origin(kind) is dict else Any
        # a key matched case-insensitively against those already there (an agent's id), else lower-cased
        name = next((k for k in data if k.lower() == part.lower()), part.lower())
        path = f"{where}.{name}"
        if len(parts) == 1:
            data[name] = _convert(variable, text, value_kind)
        else:
            _set(_table(data, name, variable), parts[1:], value_kind, variable, text, path, open_tables)
        return
    raise ConfigError(f"{variable}: {where} is not a table")  # pragma: no cover - guarded above


def overlay(data: dict[str, Any], environ: Mapping[str, str], app_config: type, *,
            default_agents: bool = False, open_tables: tuple[type, ...] = ()) -> dict[str, Any]:
    """``data`` (a parsed config file, or ``{}``) with every ``AWAKEN_`` setting of ``environ`` put in
    (environment over file); a copy. ``app_config`` is the class the result will be structured into
    (``AppConfig``). With ``default_agents`` (no config file), ``DEFAULT_AGENTS`` are the agents the
    environment's ``AWAKEN_AGENTS__…`` settings edit or add to. ``open_tables``: the config classes whose
    keys beyond their fields are free-form tables of their own (``[tools.<name>]``: ``ToolsConfig``)."""
    data = copy.deepcopy(data)
    if default_agents and "agents" not in data:
        data["agents"] = copy.deepcopy(DEFAULT_AGENTS)
    top = _hints(app_config)
    settings = _variables(environ)
    for variable in sorted(settings):
        body = variable[len(PREFIX):]
        if SEPARATOR not in body:
            name = body.lower()
            if name in top and not attrs.has(_strip_optional(top[name])) and typing.get_origin(top[name]) is not dict:
                data[name] = _convert(variable, settings[variable], top[name])
            continue  # not a setting: e.g. the key a token table names
        parts = body.split(SEPARATOR)
        if not all(parts):
            raise ConfigError(f"{variable}: an empty part between '__'")
        _set(data, parts, app_config, variable, settings[variable], "", open_tables)
    return data


def secret_names(data: Any) -> set[str]:
    """The environment variables the configuration names for secrets: every ``env`` or ``*_env`` key's
    text (a token's ``env``, ``secret_env``, ``password_env``, ``api_key_env``) and a ``headers_env``
    table's values."""
    names: set[str] = set()
    if isinstance(data, dict):
        for key, value in data.items():
            if isinstance(key, str) and (key == "env" or key.endswith("_env")) and isinstance(value, str):
                names.add(value)
            elif isinstance(key, str) and key.endswith("_env") and isinstance(value, dict):
                names.update(v for v in value.values() if isinstance(v, str))  # headers_env: name -> variable
            elif key != "env":  # an MCP server's ``env`` table holds its child's values, not names
                names |= secret_names(value)
    elif isinstance(data, list):
        for item in data:
            names |= secret_names(item)
    return names


def secret_files(data: Any, environ: Mapping[str, str]) -> dict[str, str]:
    """The secrets to add to the environment: for each variable the configuration names for a secret
    that is unset while ``<NAME>_FILE`` is set, that file's content (trailing newline removed)."""
    found: dict[str, str] = {}
    for name in sorted(secret_names(data)):
        path = environ.get(name + FILE_SUFFIX)
        if name not in environ and path is not None:
            found[name] = _read_secret(name + FILE_SUFFIX, path)
    return found


def redacted(value: Any, key: str = "") -> Any:
    """``value`` (an attrs config, or what it holds) as plain data, every secret replaced by
    ``"<redacted>"``: keys named like a secret, credentials in a URL, the values of a ``headers`` or an
    ``env`` table (an MCP server's child environment)."""
    if attrs.has(type(value)):
        return {f.name: redacted(getattr(value, f.name), f.name) for f in attrs.fields(type(value))}
    if isinstance(value, dict):
        if key in ("headers", "env"):  # header values, a child process's environment (an MCP server's)
            return {k: "<redacted>" for k in value}
        return {k: redacted(v, k) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [redacted(v, key) for v in value]
    if isinstance(value, str):
        lowered = key.lower()
        if any(lowered == s or lowered.endswith("_" + s) for s in SECRET_KEYS) and value:
            return "<redacted>"
        scheme, sep, rest = value.partition("://")
        if sep and "@" in rest.split("/", 1)[0]:  # a URL or DSN with credentials
            return f"{scheme}://<redacted>@{rest.split('/', 1)[0].rsplit('@', 1)[1]}" + (
                "/" + rest.split("/", 1)[1] if "/" in rest else "")
        return value
    return value
