"""The wire registry: the ``awaken.wires`` entry-point group, and what a wire declares.

A wire is a protocol the server speaks (AG-UI, the AI SDK, the CopilotKit runtime), registered under
the group by name; the shipped ones come from Awaken's own package metadata, a plugin package adds its
own the same way:

.. code-block:: toml

    [project.entry-points."awaken.wires"]
    plain = "my_package.plain:WIRE"

The entry point names a ``Wire``: its ``Protocol`` and its routes, as data. The HTTP edge iterates the
registry (``known_wires``) and serves every declared route, with the same front door (Host and
cross-site checks, CORS, authentication) as every other ``/v1/`` route:

* ``runs``: ``POST`` paths, one request → one run, streamed over SSE (``streams.exchange``);
* ``sockets``: WebSocket paths, one run per text message;
* ``rejoins``: ``GET`` paths that rejoin the thread's active run (``Last-Event-ID``; 204 when idle);
* ``history``: ``GET`` paths answering ``{items, cursor}`` pages read by ``read_history``, with the
  visibility rule and the 400/404/503 of every history route (``?branch=N`` reads another branch's path:
  ``read_history(..., branch=N)``);
* ``extra``: anything else, as ``Route``s whose handler does its own I/O: the edge builds it with
  ``serve(protocol)`` (the wire's protocol as this server serves it, its replay memo included, or None)
  and calls it with the server's context as its ``host`` argument.

Paths are templates: ``{agent}`` is one path segment naming the agent, ``{thread}`` the rest of the
path up to the next literal part (a thread id may hold ``/``), and a final ``{rest}`` the path's
optional tail (every route under a prefix). A trailing ``/`` is accepted on every path but a history
path (as the shipped routes always did).
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

import attrs

from awaken.core.errors import ConfigError
from awaken.wires.protocol import Protocol

WIRE_GROUP = "awaken.wires"

Method = Literal["GET", "POST", "WEBSOCKET"]
#: a wire's history page: (ledger, thread id, cursor, limit) -> (items, the cursor after them); a reader
#: that reads another branch's path takes ``branch=N`` too (the route passes it only when asked: ``?branch=``)
PageReader = Callable[..., Awaitable[tuple[list, str]]]
#: an extra route's ASGI handler: ``handler(host, scope, receive, send, params)``; ``params`` are the
#: path template's parts (``agent``, ``thread``, ``rest``), ``host`` the server's context
Handler = Callable[[Any, dict, Any, Any, dict[str, str]], Awaitable[None]]
#: what builds an extra route's handler from the wire's protocol as the server serves it
HandlerFactory = Callable[[Protocol | None], Handler]

_PART = re.compile(r"\{(agent|thread|rest)\}")
_REGEX = {"agent": r"(?P<agent>[^/]+)", "thread": r"(?P<thread>.+)", "rest": r"(?P<rest>/.*)?"}


def path_pattern(template: str) -> re.Pattern[str]:
    """The compiled pattern of a path template (see the module docstring); a trailing ``/`` in the
    template is the optional one every path accepts."""
    if len(template) > 1 and template.endswith("/"):
        template = template[:-1]
    out, at = ["^"], 0
    for match in _PART.finditer(template):
        out += [re.escape(template[at:match.start()]), _REGEX[match[1]]]
        at = match.end()
        if match[1] == "rest" and at != len(template):
            raise ValueError(f"{template!r}: {{rest}} ends a path")
    out.append(re.escape(template[at:]))
    if not template.endswith("{rest}"):
        out.append("/?")
    return re.compile("".join(out) + "$")


def quart_rule(template: str) -> str:
    """A history path template as a Quart rule (``{thread}`` → ``<path:thread_id>``)."""
    if "{thread}" not in template or "{rest}" in template:
        raise ValueError(f"{template!r}: a history path names {{thread}} and no {{rest}}")
    return template.replace("{thread}", "<path:thread_id>").replace("{agent}", "<agent_id>")


def _templates(instance: Any, attribute: attrs.Attribute, value: tuple[str, ...]) -> None:
    for template in value:
        if not template.startswith("/"):
            raise ValueError(f"{attribute.name}: {template!r} does not start with /")
        path_pattern(template)


@attrs.frozen
class Route:
    """An extra route: its methods, its path template and what builds the handler that serves it."""

    methods: tuple[Method, ...]
    path: str = attrs.field(validator=lambda i, a, v: _templates(i, a, (v,)))
    serve: HandlerFactory


@attrs.frozen
class Wire:
    """What a wire serves. Run, socket and rejoin paths need a ``protocol`` (extra routes may use it too:
    the CopilotKit runtime's runs are AG-UI's); history paths a ``read_history``."""

    protocol: Protocol | None = None
    runs: tuple[str, ...] = attrs.field(default=(), validator=_templates)
    sockets: tuple[str, ...] = attrs.field(default=(), validator=_templates)
    rejoins: tuple[str, ...] = attrs.field(default=(), validator=_templates)
    history: tuple[str, ...] = attrs.field(default=(), validator=_templates)
    read_history: PageReader | None = None
    extra: tuple[Route, ...] = ()
    #: what the wire says of itself in ``GET /v1/agents`` (``wires.<name>``, beside its routes)
    capabilities: dict[str, Any] = attrs.field(factory=dict)

    def __attrs_post_init__(self) -> None:
        if (self.runs or self.sockets or self.rejoins) and self.protocol is None:
            raise ValueError("a wire with run, socket or rejoin paths needs a protocol")
        if self.history and self.read_history is None:
            raise ValueError("a wire with history paths needs read_history")
        for template in self.history:
            quart_rule(template)

    def routes(self) -> list[tuple[Method, str, str]]:
        """Every (method, path template, kind) this wire serves; kind: run, socket, rejoin, history, extra."""
        out: list[tuple[Method, str, str]] = []
        out += [("POST", p, "run") for p in self.runs]
        out += [("WEBSOCKET", p, "socket") for p in self.sockets]
        out += [("GET", p, "rejoin") for p in self.rejoins]
        out += [("GET", p, "history") for p in self.history]
        out += [(m, r.path, "extra") for r in self.extra for m in r.methods]
        return out


def wire_entry_points() -> dict[str, EntryPoint]:
    """Wire name -> where its ``Wire`` lives, for every entry point under ``awaken.wires``."""
    return {ep.name: ep for ep in entry_points(group=WIRE_GROUP)}


def known_wires() -> dict[str, Wire]:
    """Every registered wire by name, loaded (in name order). A plugin that fails to load, names no
    ``Wire``, or declares a route another wire declares is a ``ConfigError`` naming it."""
    wires: dict[str, Wire] = {}
    taken: dict[tuple[str, str], str] = {}
    for name, ep in sorted(wire_entry_points().items()):
        try:
            wire = ep.load()
        except Exception as exc:  # a broken plugin is a start-up error, named
            raise ConfigError(f"the wire {name!r} ({ep.value}) could not be loaded: "
                              f"{type(exc).__name__}: {exc}") from None
        if not isinstance(wire, Wire):
            raise ConfigError(f"the wire {name!r} ({ep.value}) is a {type(wire).__name__}, not an awaken Wire")
        for method, template, _kind in wire.routes():
            key = (method, path_pattern(template).pattern)
            if key in taken:
                raise ConfigError(f"the wire {name!r} declares {method} {template}, which the wire "
                                  f"{taken[key]!r} serves already")
            taken[key] = name
        wires[name] = wire
    if not wires:
        raise ConfigError("no wire is registered under awaken.wires: is the awaken package installed?")
    return wires


def protocols(wires: dict[str, Wire]) -> list[Protocol]:
    """The distinct protocols of ``wires`` (CopilotKit's runs are AG-UI's: one protocol, served twice)."""
    seen: dict[int, Protocol] = {}
    for wire in wires.values():
        if wire.protocol is not None:
            seen.setdefault(id(wire.protocol), wire.protocol)
    return list(seen.values())
