"""Tools as a documented API (issue 31 item 1, docs/tools.md): a tool written as a plain function (sync or
async) or a class, its parameters' JSON schema derived from type hints and docstring (or given), declared by
dotted path (a module beside config.toml needs no PYTHONPATH) or by the ``awaken.tools`` entry-point group;
its ``[tools.<name>]`` settings validated like a provider's; its secrets read from the environment."""

from __future__ import annotations

import enum
import logging
import sys
import uuid
from pathlib import Path
from typing import Annotated, Any, Literal, TypedDict

import attrs
import pytest

from awaken.config import load_config
from awaken.core.errors import ConfigError
from awaken.core.events import ToolProgress
from awaken.core.principal import Principal
from awaken.engine.agents import build_tools
from awaken.tools import MissingSecret, Tool, ToolContext, ToolRegistry, load_plugin, tool
from awaken.tools.plugins import definition, load_path
from tests.builders import make_config


def ctx(**kw: Any) -> ToolContext:
    return ToolContext("t", "r", kw.pop("state", {}), **kw)


class Unit(enum.Enum):
    CELSIUS = "celsius"
    FAHRENHEIT = "fahrenheit"


class Place(TypedDict):
    city: str
    country: str


async def forecast(city: str, days: int = 1, unit: Unit = Unit.CELSIUS, *, ctx: ToolContext) -> dict:
    """The weather forecast for a city.

    Args:
        city: the city's name,
            e.g. Oslo
        days: how many days ahead
    """
    return {"city": city, "days": days, "unit": unit.value, "thread": ctx.thread_id}


def add(a: float, b: float, tags: list[str] | None = None, mode: Literal["sum", "concat"] = "sum",
        place: Place | None = None, note: Annotated[str, "a note for the log"] = "") -> float:
    """Add two numbers.

    :param a: the first number
    :param b: the second number
    """
    return a + b


def test_a_functions_schema_comes_from_its_type_hints_and_docstring():
    forecast_tool = definition(forecast, "test").build(None)
    assert (forecast_tool.name, forecast_tool.description) == ("forecast", "The weather forecast for a city.")
    assert forecast_tool.parameters == {
        "type": "object",
        "properties": {
            "city": {"type": "string", "description": "the city's name, e.g. Oslo"},
            "days": {"type": "integer", "description": "how many days ahead", "default": 1},
            "unit": {"type": "string", "enum": ["celsius", "fahrenheit"], "default": "celsius"},
        },
        "required": ["city"],
        "additionalProperties": False,
    }
    add_tool = definition(add, "test").build(None)
    assert add_tool.description == "Add two numbers."
    assert add_tool.parameters == {
        "type": "object",
        "properties": {
            "a": {"type": "number", "description": "the first number"},
            "b": {"type": "number", "description": "the second number"},
            "tags": {"anyOf": [{"type": "array", "items": {"type": "string"}}, {"type": "null"}], "default": None},
            "mode": {"type": "string", "enum": ["sum", "concat"], "default": "sum"},
            "place": {"anyOf": [{"type": "object", "properties": {"city": {"type": "string"},
                                                                   "country": {"type": "string"}},
                                 "required": ["city", "country"], "additionalProperties": False},
                                {"type": "null"}], "default": None},
            "note": {"type": "string", "description": "a note for the log", "default": ""},
        },
        "required": ["a", "b"],
        "additionalProperties": False,
    }


async def test_functions_sync_and_async_run_with_their_arguments_by_name():
    registry = ToolRegistry([definition(forecast, "test").build(None), definition(add, "test").build(None)])
    outcome = await registry.execute("forecast", '{"city": "Oslo", "unit": "fahrenheit"}', ctx())
    assert (outcome.ok, outcome.content) == (True, '{"city":"Oslo","days":1,"unit":"fahrenheit","thread":"t"}')
    assert (await registry.execute("add", '{"a": 1, "b": 2.5}', ctx())).content == "3.5"  # in a worker thread
    refused = await registry.execute("add", '{"a": 1, "b": 2, "c": 3}', ctx())
    assert refused.content == "invalid arguments: arguments: Additional properties are not allowed ('c' was unexpected)"


def test_tool_overrides_what_is_derived_and_returns_the_function_itself():
    schema = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}

    @tool(name="search_docs", description="Search the documentation.", parameters=schema, permission="ask")
    async def search(q: str) -> list[str]:
        return [q]

    made = definition(search, "test").build(None)
    assert (made.name, made.description, made.parameters, made.permission) == (
        "search_docs", "Search the documentation.", schema, "ask")
    assert callable(search) and search.__name__ == "search"  # still the function its own tests call


def test_todays_tool_objects_and_factories_keep_working():
    assert load_plugin("tests.plugins.weather:forecast").name == "forecast"  # a factory annotated -> Tool
    legacy = Tool("legacy", "d", {"type": "object"}, forecast)  # type: ignore[arg-type]
    assert definition(legacy, "test").build(None) == legacy


def test_what_is_not_a_tool_is_named_at_load():
    with pytest.raises(ConfigError, match=r"^test: int is not a tool \(a Tool, a function or a class\)$"):
        definition(3, "test")

    def bad(when: complex) -> None:
        """Nope."""

    with pytest.raises(ConfigError, match=r"^test: no JSON schema for the type <class 'complex'>"):
        definition(bad, "test")

    def variadic(*names: str) -> None:
        """Nope."""

    with pytest.raises(ConfigError, match=r"^test: \*names or \*\*names: a tool's parameters must each be named$"):
        definition(variadic, "test")


def _module_beside(tmp_path: Path, source: str) -> str:
    name = f"tools_beside_config_{uuid.uuid4().hex[:8]}"
    (tmp_path / f"{name}.py").write_text(source)
    return name


def _config_file(tmp_path: Path, text: str) -> Path:
    path = tmp_path / "config.toml"
    path.write_text(f'[ledger]\npath = "{tmp_path / "awaken.db"}"\n\n[agents.assistant]\n{text}')
    return path


def test_a_module_beside_config_toml_loads_without_pythonpath(tmp_path, monkeypatch):
    module = _module_beside(tmp_path, 'def shout(text: str) -> str:\n    """Say it louder."""\n'
                                      '    return text.upper()\n')
    path = _config_file(tmp_path, f'tools = ["shout"]\n\n[tools]\nplugins = ["{module}:shout"]\n')
    monkeypatch.chdir("/")
    monkeypatch.setattr(sys, "path", [p for p in sys.path if p not in ("", ".", str(tmp_path))])
    registry = build_tools(load_config(path, environ={}))
    assert registry.get("shout").description == "Say it louder."


@attrs.frozen
class ShoutSettings:
    suffix: str
    times: int = 1


class Shout:
    """Say it louder."""

    name = "shout"
    settings_class = ShoutSettings

    def __init__(self, settings: ShoutSettings) -> None:
        self.settings = settings

    def __call__(self, text: str) -> str:
        return text.upper() + self.settings.suffix * self.settings.times


def _shout_config(tmp_path: Path, table: dict[str, Any] | None, plugin: str = "tests.engine.test_tools_api:Shout"):
    tools: dict[str, Any] = {"plugins": [plugin]}
    if table is not None:
        tools["shout"] = table
    return make_config(tmp_path, tools=tools, agents={"assistant": {"tools": ["shout"]}})


async def test_a_class_gets_its_validated_settings_table(tmp_path):
    registry = build_tools(_shout_config(tmp_path, {"suffix": "!", "times": 3}))
    assert registry.get("shout").settings == ShoutSettings("!", 3)
    assert (await registry.execute("shout", '{"text": "hey"}', ctx())).content == '"HEY!!!"'


@pytest.mark.parametrize(("table", "message"), [
    ({}, "missing key tools.shout.suffix"),
    ({"suffix": "!", "loud": True}, "unknown key tools.shout.loud"),
    ({"suffix": 1}, "tools.shout.suffix: expected str, got int 1"),
])
def test_settings_are_validated_like_a_providers(tmp_path, table, message):
    with pytest.raises(ConfigError, match=f"^{message}$"):
        build_tools(_shout_config(tmp_path, table))


def test_a_settings_table_must_configure_a_tool_that_takes_settings(tmp_path):
    config = _shout_config(tmp_path, {"suffix": "!"}, plugin="tests.engine.test_tools_api:add")
    with pytest.raises(ConfigError, match=r"^tools\.shout: no tool named 'shout' is loaded"):
        build_tools(attrs.evolve(config, agents={"assistant": attrs.evolve(config.agents["assistant"], tools=[])}))
    config = make_config(tmp_path, tools={"plugins": ["tests.engine.test_tools_api:add"], "add": {"x": 1}})
    with pytest.raises(ConfigError, match=r"^tools\.add: the tool add takes no settings$"):
        build_tools(config)
    with pytest.raises(ConfigError, match=r"tools: shout: expected the tool's settings table \[tools\.shout\]"):
        make_config(tmp_path, tools={"shout": "loud"})


def test_tools_load_from_the_awaken_tools_entry_point_group(tmp_path, monkeypatch):
    module = _module_beside(tmp_path, 'def echo(text: str) -> str:\n    """Echo the text."""\n    return text\n')
    dist = tmp_path / "echo_tools-1.0.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: echo-tools\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[awaken.tools]\necho = {module}:echo\nunused = nowhere:x\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    config = make_config(tmp_path, agents={"assistant": {"tools": ["echo"]}})
    registry = build_tools(config)
    assert registry.get("echo").description == "Echo the text."  # and ``unused``, named by no agent, never loads
    (dist / "entry_points.txt").write_text(f"[awaken.tools]\nrepeat = {module}:echo\n")
    with pytest.raises(ConfigError, match=r"the tool it loads is named 'echo', not 'repeat'$"):
        build_tools(make_config(tmp_path, agents={"assistant": {"tools": ["repeat"]}}))


def test_the_context_says_who_asks():
    asking = ctx(principal=Principal("alice", "user"))
    assert (asking.subject, asking.role) == ("alice", "user")
    assert (ctx().subject, ctx().role) == (None, None)  # built outside a run


async def test_secrets_come_from_the_environment_or_a_file(tmp_path):
    assert ctx(environ={"API_KEY": "k1"}).secret("API_KEY") == "k1"
    (tmp_path / "key").write_text("k2\n")
    assert ctx(environ={"API_KEY_FILE": str(tmp_path / "key")}).secret("API_KEY") == "k2"
    with pytest.raises(MissingSecret, match=r"^the secret API_KEY is not set: the server's environment has no "
                                            r"API_KEY \(nor API_KEY_FILE\)$"):
        ctx(environ={}).secret("API_KEY")
    registry = build_tools(make_config(tmp_path, tools={"plugins": ["tests.plugins.toolkit:token_length"]}),
                           environ={})
    outcome = await registry.execute("token_length", "{}", ctx(environ={}))
    assert (outcome.ok, outcome.content) == (False, "the secret TOOLKIT_TOKEN is not set: the server's environment "
                                                    "has no TOOLKIT_TOKEN (nor TOOLKIT_TOKEN_FILE)")
    assert (await registry.execute("token_length", "{}", ctx(environ={"TOOLKIT_TOKEN": "abc"}))).content == "3"


def test_an_unset_secret_is_a_start_up_warning(tmp_path, caplog):
    config = make_config(tmp_path, tools={"plugins": ["tests.plugins.toolkit:token_length"]})
    with caplog.at_level(logging.WARNING, logger="awaken.tools"):
        build_tools(config, environ={})
    assert caplog.messages == ["the tool token_length reads the secret TOOLKIT_TOKEN, which is not set (nor "
                               "TOOLKIT_TOKEN_FILE): its calls will fail until it is"]


async def test_progress_is_json_sent_as_the_calls_event_and_never_after_it_returned():
    sent: list[ToolProgress] = []
    registry = ToolRegistry([load_path("tests.plugins.toolkit:count_up").build(None),
                             load_path("tests.plugins.toolkit:count_up_in_a_thread").build(None)])
    call = ctx(tool_call_id="c1", emit=sent.append)
    assert (await registry.execute("count_up", '{"to": 2}', call)).content == '{"done":2}'
    assert (await registry.execute("count_up_in_a_thread", '{"to": 1}', ctx(tool_call_id="c2", emit=sent.append))
            ).content == '{"done":1}'
    assert sent == [ToolProgress("c1", "count_up", {"counted": 1}), ToolProgress("c1", "count_up", {"counted": 2}),
                    ToolProgress("c2", "count_up_in_a_thread", {"counted": 1})]
    call.progress({"late": True})
    assert len(sent) == 3
    with pytest.raises(ValueError, match=r"^tool progress must be JSON: TypeError$"):
        ctx(emit=sent.append).progress({1j})


async def test_a_class_tools_aclose_is_awaited_when_the_server_closes(tmp_path):
    """A class tool's shared resources (an HTTP client) are closed with the server, once."""
    from awaken.http.context import ServerContext

    closed: list[str] = []

    class Pool:
        """Hold a pool."""

        def __call__(self) -> str:
            return "ok"

        async def aclose(self) -> None:
            closed.append("pool")

    registry = ToolRegistry([definition(Pool, "test").build(None)])
    await registry.aclose()
    assert closed == ["pool"]
    ctx = ServerContext.build(make_config(tmp_path, tools={"plugins": ["tests.engine.test_tools_api:Shout"],
                                                           "shout": {"suffix": "!"}}))
    ctx.agents.tools.add(definition(Pool, "test").build(None))
    await ctx.open()
    await ctx.aclose()
    assert closed == ["pool", "pool"]
