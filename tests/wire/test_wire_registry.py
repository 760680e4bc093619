"""The wire registry, sans-IO: what a ``Wire`` declares, its path templates, the ``awaken.wires`` group
(the shipped wires registered by Awaken's own metadata, a broken or clashing plugin named at start-up),
and the wires layer importing nothing above it."""

from __future__ import annotations

import pytest

from awaken.core.errors import ConfigError
from awaken.wires import registry
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.adapter import WIRE as AGUI_WIRE
from awaken.wires.aisdk.adapter import PROTOCOL as AISDK
from awaken.wires.registry import Route, Wire, known_wires, path_pattern, protocols, quart_rule
from tests.package.test_layering import import_graph, layer_of


@pytest.mark.parametrize(("template", "path", "params"), [
    ("/v1/ag-ui", "/v1/ag-ui", {}),
    ("/v1/ag-ui", "/v1/ag-ui/", {}),
    ("/v1/ag-ui/agents/{agent}", "/v1/ag-ui/agents/guarded", {"agent": "guarded"}),
    ("/v1/ag-ui/threads/{thread}/stream", "/v1/ag-ui/threads/a/b/stream", {"thread": "a/b"}),
    ("/v1/ai-sdk/agents/{agent}/chat/{thread}/stream", "/v1/ai-sdk/agents/x/chat/c-1/stream",
     {"agent": "x", "thread": "c-1"}),
    ("/v1/copilotkit{rest}", "/v1/copilotkit", {"rest": None}),
    ("/v1/copilotkit{rest}", "/v1/copilotkit/agent/a/run", {"rest": "/agent/a/run"}),
])
def test_path_templates_match_their_paths(template, path, params):
    match = path_pattern(template).match(path)
    assert match is not None and match.groupdict() == params


@pytest.mark.parametrize(("template", "path"), [
    ("/v1/ag-ui", "/v1/ag-ui/x"),
    ("/v1/ag-ui/agents/{agent}", "/v1/ag-ui/agents/a/b"),
    ("/v1/ag-ui/agents/{agent}", "/v1/ag-ui/agents/"),
    ("/v1/copilotkit{rest}", "/v1/copilotkitx"),
    ("/v1/a.b", "/v1/aXb"),  # literal parts are literal
])
def test_path_templates_refuse_other_paths(template, path):
    assert path_pattern(template).match(path) is None


def test_history_templates_become_quart_rules():
    assert quart_rule("/v1/ag-ui/threads/{thread}/messages") == "/v1/ag-ui/threads/<path:thread_id>/messages"
    with pytest.raises(ValueError, match="names {thread}"):
        quart_rule("/v1/x/messages")


def test_a_wire_checks_what_it_declares():
    with pytest.raises(ValueError, match="needs a protocol"):
        Wire(runs=("/v1/x",))
    with pytest.raises(ValueError, match="needs read_history"):
        Wire(AGUI, history=("/v1/x/threads/{thread}/messages",))
    with pytest.raises(ValueError, match="does not start with /"):
        Wire(AGUI, runs=("v1/x",))
    with pytest.raises(ValueError, match="ends a path"):
        Route(("GET",), "/v1/x{rest}/y", lambda protocol: AGUI_WIRE.read_history)


def test_the_registry_holds_the_shipped_wires():
    wires = known_wires()
    assert {"ag-ui", "ai-sdk", "copilotkit"} <= set(wires)
    assert wires["ag-ui"].protocol is AGUI and wires["ai-sdk"].protocol is AISDK
    # CopilotKit's runs are AG-UI's: one protocol (and so one replay memo per server) for both wires
    assert wires["copilotkit"].protocol is AGUI and [r.path for r in wires["copilotkit"].extra] == ["/v1/copilotkit{rest}"]
    assert [id(p) for p in protocols(wires)].count(id(AGUI)) == 1 and AISDK in protocols(wires)


class _Point:
    def __init__(self, name: str, value: object) -> None:
        self.name, self.value, self._loaded = name, f"fake:{name}", value

    def load(self) -> object:
        if isinstance(self._loaded, Exception):
            raise self._loaded
        return self._loaded


def test_a_broken_or_clashing_plugin_is_a_config_error_naming_it(monkeypatch):
    def registered(*points: _Point) -> None:
        monkeypatch.setattr(registry, "wire_entry_points", lambda: {p.name: p for p in points})

    registered(_Point("ag-ui", AGUI_WIRE), _Point("broken", ImportError("no module named nowhere")))
    with pytest.raises(ConfigError, match=r"the wire 'broken' \(fake:broken\) could not be loaded: ImportError"):
        known_wires()
    registered(_Point("odd", object()))
    with pytest.raises(ConfigError, match="the wire 'odd' .* is a object, not an awaken Wire"):
        known_wires()
    registered(_Point("ag-ui", AGUI_WIRE), _Point("copycat", Wire(AISDK, runs=("/v1/ag-ui/",))))
    with pytest.raises(ConfigError, match="the wire 'copycat' declares POST /v1/ag-ui/, which the wire 'ag-ui' serves"):
        known_wires()
    registered()
    with pytest.raises(ConfigError, match="no wire is registered"):
        known_wires()


def test_the_wires_import_nothing_above_their_layer():
    """``awaken.wires`` (the CopilotKit runtime included) reaches neither the streams, the transports,
    the engine nor the HTTP edge: its ASGI routes are the edge's (``awaken.http.copilotkit``)."""
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items() if m.startswith("awaken.wires")
                    for t in targets if layer_of(t) > layer_of(m))
    assert upward == []
