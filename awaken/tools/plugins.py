"""Where server tools come from: dotted paths (``[tools] plugins``) and the ``awaken.tools`` entry-point
group, each turned into a ``ToolDefinition`` the server binds to its settings at start-up.

``[tools] plugins = ["mytools:forecast"]`` names ``module:attribute``; the config file's directory is
on the import path for these modules (appended, so an installed module of the same name wins), so a
``mytools.py`` beside ``config.toml`` loads without ``PYTHONPATH``. An installed package registers
its tools under the group, by the name agents list them with::

    [project.entry-points."awaken.tools"]
    forecast = "weather_tools:forecast"

Entry-point tools load only when an agent names them (or ``[tools.<name>]`` configures them), so an
installed package's code runs only if the config asks for it.

What the attribute may be (``definition``): a ``Tool``; a function or a class (``functions.py``);
or a zero-argument factory annotated ``-> Tool`` (the older form, called once at start-up).
"""

from __future__ import annotations

import inspect
import re
import sys
from collections.abc import Callable
from importlib import import_module
from importlib.metadata import EntryPoint, entry_points
from pathlib import Path
from typing import Any

import attrs

from awaken.core.errors import ConfigError
from awaken.tools.base import Tool
from awaken.tools.functions import caller, describe_callable, options_of, snake_case

TOOLS_GROUP = "awaken.tools"
#: a tool name every model provider accepts (OpenAI's function-name rule)
_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


@attrs.frozen
class ToolDefinition:
    """A loaded tool before its settings: what start-up validates and then ``build``s."""

    name: str
    #: where it came from, for messages (``tools.plugins: 'mytools:forecast'``)
    origin: str
    settings_class: type | None
    secrets: tuple[str, ...]
    #: the tool, given its validated settings (None when it declares no ``settings_class``)
    build: Callable[[Any], Tool]


def add_import_directory(directory: str | Path | None) -> None:
    """Put ``directory`` (the config file's) on the import path for tool modules, once."""
    if directory is None:
        return
    entry = str(Path(directory).resolve())
    if entry not in sys.path:
        sys.path.append(entry)


def load_path(path: str, origin: str = "tools.plugins") -> ToolDefinition:
    """The definition at ``package.module:attribute``; ``ConfigError`` naming ``origin`` otherwise."""
    module_name, _, attr = path.partition(":")
    if not module_name or not attr:
        raise ConfigError(f"{origin}: {path!r} is not of the form 'package.module:name'")
    try:
        obj = import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except (ImportError, AttributeError) as exc:
        raise ConfigError(f"{origin}: cannot load {path!r}: {exc}") from None
    return definition(obj, f"{origin}: {path!r}")


def known_entry_points() -> dict[str, EntryPoint]:
    """Tool name -> where it lives, for every entry point under ``awaken.tools``."""
    return {ep.name: ep for ep in entry_points(group=TOOLS_GROUP)}


def load_entry_point(entry: EntryPoint) -> ToolDefinition:
    origin = f"the {TOOLS_GROUP} entry point {entry.name} = {entry.value!r}"
    try:
        obj = entry.load()
    except Exception as exc:  # a broken plugin is a start-up error, named
        raise ConfigError(f"{origin} could not be loaded: {type(exc).__name__}: {exc}") from None
    found = definition(obj, origin)
    if found.name != entry.name:
        raise ConfigError(f"{origin}: the tool it loads is named {found.name!r}, not {entry.name!r}")
    return found


def definition(obj: Any, origin: str) -> ToolDefinition:
    """What ``obj`` declares as a tool. ``ConfigError`` (naming ``origin``) when it is none, or when
    its parameters have no JSON schema."""
    try:
        found = _definition(obj)
    except TypeError as exc:
        raise ConfigError(f"{origin}: {exc}") from None
    if not _NAME.match(found.name):
        raise ConfigError(f"{origin}: the tool name {found.name!r} is not 1 to 64 letters, digits, '_' or '-'")
    return attrs.evolve(found, origin=origin)


def _definition(obj: Any) -> ToolDefinition:
    if isinstance(obj, Tool):
        return ToolDefinition(obj.name, "", obj.settings_class, obj.secrets,
                              lambda settings: attrs.evolve(obj, settings=settings))
    if _is_factory(obj):
        made = obj()
        if not isinstance(made, Tool):
            raise TypeError(f"its factory returned {type(made).__name__}, not an awaken.tools.Tool")
        return _definition(made)
    if inspect.isclass(obj):
        return _class_definition(obj)
    if callable(obj):
        return _function_definition(obj)
    raise TypeError(f"{type(obj).__name__} is not a tool (a Tool, a function or a class)")


def _is_factory(obj: Any) -> bool:
    """A zero-argument function annotated ``-> Tool`` (``from __future__`` annotations included)."""
    if not inspect.isfunction(obj) or inspect.signature(obj).parameters:
        return False
    returns = obj.__annotations__.get("return")
    if isinstance(returns, str):
        return returns.rsplit(".", 1)[-1] == "Tool"
    return returns is Tool


def _function_definition(fn: Callable[..., Any]) -> ToolDefinition:
    options = options_of(fn)
    name = options.name or getattr(fn, "__name__", None) or snake_case(type(fn).__name__)
    described, parameters, context = describe_callable(fn)
    tool = Tool(
        name=name,
        description=options.description if options.description is not None else described,
        parameters=options.parameters if options.parameters is not None else parameters,
        call=caller(fn, context),
        permission=options.permission,
        settings_class=options.settings_class,
        secrets=options.secrets,
    )
    return ToolDefinition(name, "", tool.settings_class, tool.secrets,
                          lambda settings: attrs.evolve(tool, settings=settings))


def _class_definition(cls: type) -> ToolDefinition:
    if not any("__call__" in vars(k) for k in cls.__mro__[:-1]):
        raise TypeError(f"the class {cls.__name__} is not callable (a tool class defines __call__)")
    options = options_of(cls)
    name = options.name or snake_case(cls.__name__)
    # the parameters of ``__call__`` without ``self``, described before any instance exists
    method_doc, parameters, context = describe_callable(cls.__call__, drop_self=True)
    description = options.description if options.description is not None else (
        inspect.cleandoc(cls.__doc__) if cls.__doc__ else method_doc)
    takes_settings = len([p for p in inspect.signature(cls.__init__).parameters.values()
                          if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]) > 1 \
        if cls.__init__ is not object.__init__ else False
    if options.settings_class is not None and not takes_settings:
        raise TypeError(f"the class {cls.__name__} declares settings_class but its __init__ takes no settings")

    def build(settings: Any) -> Tool:
        instance = cls(settings) if takes_settings else cls()
        return Tool(name=name, description=description,
                    parameters=options.parameters if options.parameters is not None else parameters,
                    call=caller(instance, context), permission=options.permission,
                    settings_class=options.settings_class, settings=settings, secrets=options.secrets,
                    close=getattr(instance, "aclose", None))

    return ToolDefinition(name, "", options.settings_class, options.secrets, build)
