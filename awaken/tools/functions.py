"""Tools written as plain Python: a function (sync or async) or a class, turned into a ``Tool``.

A function's parameters become the tool's JSON-schema ``parameters`` (from its type hints and the
``Args:`` section of its docstring, or ``:param name:`` lines); its docstring's text before that
section is the description; its name is the tool's name. A parameter annotated ``ToolContext`` (or
named ``ctx`` without annotation) receives the call's context and is not offered to the model::

    async def forecast(city: str, days: int = 1, *, ctx: ToolContext) -> dict:
        \"\"\"The weather forecast for a city.

        Args:
            city: the city's name, e.g. Oslo
            days: how many days ahead (1 to 7)
        \"\"\"

``@tool(...)`` overrides what is derived (``name``, ``description``, ``parameters``) and declares
what the function needs (``settings_class``: the attrs class its ``[tools.<name>]`` table is
validated into; ``secrets``: environment variables it reads; ``permission``). It returns the function
unchanged, so it stays a function its own tests can call.

A class is a tool when an instance is callable: the class is made once at start-up, with its
validated settings when its ``__init__`` takes an argument (the place for a shared HTTP client), and
its ``__call__`` is described like a function; the class docstring is the description and its name,
in snake case, the tool's, unless the class says ``name = ...`` (or ``@tool(name=...)``).

A sync function or ``__call__`` runs in a worker thread (``trio.to_thread``), so it never blocks the
server; a stop abandons that thread (Python cannot interrupt it) and the run ends at once. An async one
runs in the run's own task and is cancelled where it awaits.
"""

from __future__ import annotations

import enum
import functools
import inspect
import re
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import attrs
import trio

from awaken.tools.base import ToolContext

#: the attribute ``@tool`` puts its options under
OPTIONS = "__awaken_tool__"


@attrs.frozen
class ToolOptions:
    """What ``@tool`` declared (None: derive it)."""

    name: str | None = None
    description: str | None = None
    parameters: dict[str, Any] | None = None
    settings_class: type | None = None
    secrets: tuple[str, ...] = ()
    permission: str | None = None


def tool(obj: Any = None, *, name: str | None = None, description: str | None = None,
         parameters: dict[str, Any] | None = None, settings_class: type | None = None,
         secrets: Sequence[str] = (), permission: str | None = None) -> Any:
    """Declare a function or class a tool (``@tool`` or ``@tool(name=..., settings_class=...)``);
    returns it unchanged. Everything not given is derived when the server loads it."""
    if isinstance(secrets, str):
        raise TypeError("tool(secrets=...) takes a sequence of names, not a string")
    options = ToolOptions(name, description, parameters, settings_class, tuple(secrets), permission)

    def mark(target: Any) -> Any:
        setattr(target, OPTIONS, options)
        return target

    return mark if obj is None else mark(obj)


def options_of(obj: Any) -> ToolOptions:
    """What ``@tool`` declared on ``obj``; for a class, its attributes (``name``, ``description``,
    ``parameters``, ``settings_class``, ``secrets``, ``permission``) fill what the decorator left out."""
    # a class's own decoration only (a subclass of a decorated class declares its own)
    own = vars(obj).get(OPTIONS) if inspect.isclass(obj) else getattr(obj, OPTIONS, None)
    options = own if own is not None else ToolOptions()
    if not inspect.isclass(obj):
        return options
    given = {f.name: getattr(options, f.name) for f in attrs.fields(ToolOptions)}
    for key, value in given.items():
        attr = inspect.getattr_static(obj, key, None)
        if value in (None, ()) and isinstance(attr, (str, dict, type, tuple, list)):
            given[key] = ((attr,) if isinstance(attr, str) else tuple(attr)) if key == "secrets" else attr
    return ToolOptions(**given)


def snake_case(name: str) -> str:
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


# -- docstrings ------------------------------------------------------------------------------------

_SECTION = re.compile(r"^(Args|Arguments|Parameters|Params|Returns|Return|Raises|Yields|Example|Examples|Note|Notes):\s*$")
_GOOGLE_ARG = re.compile(r"^(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)$")
_SPHINX_ARG = re.compile(r"^:param\s+(?:[\w\[\], |.]+\s+)?(\w+)\s*:\s*(.*)$")


def parse_docstring(doc: str | None) -> tuple[str, dict[str, str]]:
    """``(description, {parameter: its description})`` of a Google- or Sphinx-style docstring."""
    if not doc:
        return "", {}
    lines = inspect.cleandoc(doc).splitlines()
    summary: list[str] = []
    params: dict[str, str] = {}
    section: str | None = None
    current: str | None = None
    arg_indent = -1
    for line in lines:
        stripped = line.strip()
        indent = len(line) - len(line.lstrip())
        if match := _SECTION.match(stripped):
            section, current, arg_indent = match.group(1), None, -1
            continue
        if match := _SPHINX_ARG.match(stripped):
            section, current = "sphinx", match.group(1)
            params[current] = match.group(2).strip()
            continue
        if section is None:
            if not stripped.startswith(":"):
                summary.append(line)
        elif section in ("Args", "Arguments", "Parameters", "Params") and stripped:
            if arg_indent < 0:
                arg_indent = indent
            if indent > arg_indent and current is not None:  # the previous argument's text goes on
                params[current] = f"{params[current]} {stripped}".strip()
            elif match := _GOOGLE_ARG.match(stripped):
                current = match.group(1).lstrip("*")
                params[current] = match.group(2).strip()
        elif section == "sphinx" and current is not None and stripped and not stripped.startswith(":"):
            params[current] = f"{params[current]} {stripped}".strip()
    return "\n".join(summary).strip(), params


# -- type hints -> JSON schema -------------------------------------------------------------------

_SIMPLE: dict[Any, dict[str, Any]] = {
    str: {"type": "string"}, int: {"type": "integer"}, float: {"type": "number"}, bool: {"type": "boolean"},
    type(None): {"type": "null"}, None: {"type": "null"}, Any: {}, object: {},
}


def schema_of(hint: Any) -> dict[str, Any]:
    """The JSON schema of a type hint: str, int, float, bool, None, Any, ``list``/``tuple``/``set`` of a
    type, ``dict`` (of str keys), ``Literal``, enums, unions (``X | None``), ``TypedDict`` and
    ``Annotated[T, "description"]``. Anything else raises ``TypeError`` naming it."""
    if hint in _SIMPLE:
        return dict(_SIMPLE[hint])
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:
        schema = schema_of(args[0])
        notes = [a for a in args[1:] if isinstance(a, str)]
        if notes:
            schema["description"] = " ".join(notes)
        return schema
    if origin is typing.Literal:
        values = list(args)
        kinds = {type(v) for v in values}
        schema = {"enum": values}
        if len(kinds) == 1 and (kind := next(iter(kinds))) in _SIMPLE:
            schema = {**_SIMPLE[kind], "enum": values}
        return schema
    if origin in (typing.Union, types.UnionType):
        options = [schema_of(a) for a in args]
        return {"anyOf": options}
    if inspect.isclass(hint) and issubclass(hint, enum.Enum):
        values = [m.value for m in hint]
        kinds = {type(v) for v in values}
        if len(kinds) == 1 and (kind := next(iter(kinds))) in _SIMPLE:
            return {**_SIMPLE[kind], "enum": values}
        return {"enum": values}
    if typing.is_typeddict(hint):
        hints = typing.get_type_hints(hint, include_extras=True)
        return {"type": "object", "properties": {k: schema_of(v) for k, v in hints.items()},
                "required": sorted(hint.__required_keys__), "additionalProperties": False}
    if hint in (list, tuple, set, frozenset) or origin in (list, set, frozenset, Sequence, typing.Sequence):
        return {"type": "array", "items": schema_of(args[0])} if args else {"type": "array"}
    if origin is tuple:
        if len(args) == 2 and args[1] is Ellipsis:
            return {"type": "array", "items": schema_of(args[0])}
        return {"type": "array", "prefixItems": [schema_of(a) for a in args], "minItems": len(args),
                "maxItems": len(args)}
    if hint is dict or origin in (dict, Mapping, typing.Mapping):
        if args and args[0] is not str:
            raise TypeError(f"{hint!r}: JSON object keys are strings (use dict[str, ...])")
        return {"type": "object", "additionalProperties": schema_of(args[1])} if args else {"type": "object"}
    raise TypeError(f"no JSON schema for the type {hint!r} (use str, int, float, bool, list, dict, Literal, "
                    "an Enum, a TypedDict or a union of them)")


def _is_context(name: str, hint: Any) -> bool:
    if typing.get_origin(hint) is typing.Annotated:
        hint = typing.get_args(hint)[0]
    return hint is ToolContext or (hint is inspect.Parameter.empty and name == "ctx")


def enum_parameters(fn: Callable[..., Any]) -> dict[str, type[enum.Enum]]:
    """The parameters of ``fn`` annotated with an Enum: their JSON values are turned into its members."""
    try:
        hints = typing.get_type_hints(fn if inspect.isroutine(fn) else type(fn).__call__)
    except Exception:
        return {}
    return {k: v for k, v in hints.items() if inspect.isclass(v) and issubclass(v, enum.Enum)}


def describe_callable(fn: Callable[..., Any], *, drop_self: bool = False) -> tuple[str, dict[str, Any], str | None]:
    """``(description, parameters, the name of the context parameter or None)`` of a function
    (``drop_self``: of a class's ``__call__``, read from the class, without its ``self``)."""
    target = fn if inspect.isfunction(fn) or inspect.ismethod(fn) else type(fn).__call__
    signature = inspect.signature(fn)
    if drop_self:
        signature = signature.replace(parameters=list(signature.parameters.values())[1:])
    try:
        hints = typing.get_type_hints(target, include_extras=True)
    except Exception as exc:  # an annotation that names something not importable
        raise TypeError(f"its type hints cannot be resolved: {type(exc).__name__}: {exc}") from None
    description, notes = parse_docstring(inspect.getdoc(fn))
    properties: dict[str, Any] = {}
    required: list[str] = []
    context: str | None = None
    for name, param in signature.parameters.items():
        hint = hints.get(name, param.annotation)
        if _is_context(name, hint):
            context = name
            continue
        if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
            raise TypeError(f"*{name} or **{name}: a tool's parameters must each be named")
        if param.kind is param.POSITIONAL_ONLY:
            raise TypeError(f"{name}: a tool's parameters are passed by name (no positional-only ones)")
        schema = schema_of(Any if hint is inspect.Parameter.empty else hint)
        if name in notes and "description" not in schema:
            schema["description"] = notes[name]
        if param.default is param.empty:
            required.append(name)
        elif _is_json(default := param.default.value if isinstance(param.default, enum.Enum) else param.default):
            schema["default"] = default
        properties[name] = schema
    parameters: dict[str, Any] = {"type": "object", "properties": properties}
    if required:
        parameters["required"] = required
    parameters["additionalProperties"] = False
    return description, parameters, context


def _is_json(value: Any) -> bool:
    if value is None or isinstance(value, (str, bool, int, float)):
        return True
    if isinstance(value, (list, tuple)):
        return all(_is_json(v) for v in value)
    if isinstance(value, dict):
        return all(isinstance(k, str) and _is_json(v) for k, v in value.items())
    return False


def caller(fn: Callable[..., Any], context: str | None) -> Callable[[dict[str, Any], Any], Any]:
    """``call(args, ctx)`` for a function taking the arguments by name (and the context, if it asks)."""
    is_async = inspect.iscoroutinefunction(fn if inspect.isroutine(fn) else type(fn).__call__)
    enums = enum_parameters(fn)

    async def call(args: dict[str, Any], ctx: Any) -> Any:
        kwargs = dict(args)
        for name, kind in enums.items():
            if name in kwargs:
                kwargs[name] = kind(kwargs[name])
        if context is not None:
            kwargs[context] = ctx
        if is_async:
            return await fn(**kwargs)
        return await trio.to_thread.run_sync(functools.partial(fn, **kwargs), abandon_on_cancel=True)

    return call
