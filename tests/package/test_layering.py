"""The package's shape: every subpackage is named in the layout, and no module imports one above it.

Read from the source: every ``awaken`` and ``storage_backends`` import a module makes, type-only
imports (``if TYPE_CHECKING:``) included, resolved to the module it names. ``LAYERS`` orders the
layers from the bottom up; a module may import its own layer and the ones below, never one above,
and no chain of imports leads a module back to itself.
"""

from __future__ import annotations

import ast
import re

import awaken
from tests.builders import ROOT

#: the layers, lowest first; a module belongs to the longest prefix that names it
LAYERS: tuple[tuple[str, ...], ...] = (
    ("awaken.core",),                                   # errors, ids, messages, events, principal: no I/O
    ("awaken.runtime",),                                # the process: memory tuning, hypercorn seams, workers
    ("awaken.telemetry",),                              # traces, metrics, logs: names in one place
    ("awaken.engine.state", "awaken.engine.claims"),    # run states and thread claims, which the ledger stores
    ("awaken.models",),
    ("awaken.tools", "awaken.mcp"),
    ("awaken.config",),
    ("awaken.engine.agents",),                          # published agents: config bound to models and tools
    ("awaken.ledger",),                                 # the history authority's interface and its kits
    ("storage_backends",),                              # the shipped ledgers
    ("awaken.wires",),                                  # protocols: parsers, encoders, adapters (no engine)
    ("awaken.engine",),                                 # RunApplication
    ("awaken.transports",),                             # SSE and WebSocket framing
    ("awaken.streams",),                                # one request, one run, one stream; rejoin
    ("awaken.http",),                                   # the ASGI app, auth, CORS, hosts, threads API, console
    ("awaken.cli", "awaken.__main__", "awaken"),        # the command and the package face
)


def _modules() -> dict[str, tuple[list[str], ast.AST]]:
    modules: dict[str, tuple[list[str], ast.AST]] = {}
    for top in ("awaken", "storage_backends"):
        for path in (ROOT / top).rglob("*.py"):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            package = parts[:-1]
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join(parts)] = (package, ast.parse(path.read_text()))
    return modules


def import_graph() -> dict[str, set[str]]:
    """module -> the ``awaken``/``storage_backends`` modules it imports (type-only imports included)."""
    modules = _modules()

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (package, tree) in modules.items():
        targets: set[str] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets |= {a.name for a in node.names if a.name.startswith(("awaken", "storage_backends"))}
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[: len(package) - node.level + 1])
                    stem = f"{base}.{node.module}" if node.module else base
                else:
                    stem = node.module or ""
                if not stem.startswith(("awaken", "storage_backends")):
                    continue
                targets |= {stem} | {f"{stem}.{a.name}" for a in node.names}
        graph[name] = {t for t in map(resolve, targets) if t and t != name}
    return graph


def layer_of(module: str) -> int:
    best, rank = -1, -1
    for index, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            if (module == prefix or module.startswith(prefix + ".")) and len(prefix) > best:
                best, rank = len(prefix), index
    assert rank >= 0, f"{module} belongs to no layer: add it to LAYERS"
    return rank


def test_no_module_imports_a_layer_above_its_own():
    graph = import_graph()
    upward = sorted(f"{m} -> {t}" for m, targets in graph.items() for t in targets
                    if layer_of(t) > layer_of(m) and not (m == "awaken" or t.startswith(m + ".")))
    assert upward == []


def test_no_import_cycle_between_modules():
    graph = import_graph()

    def reaches(start: str) -> set[str]:
        seen: set[str] = set()
        todo = list(graph[start])
        while todo:
            name = todo.pop()
            if name not in seen:
                seen.add(name)
                todo.extend(graph.get(name, ()))
        return seen

    # a package's __init__ re-exporting its own modules is its face, not a cycle
    cyclic = sorted(m for m in graph if m in reaches(m) and not (ROOT / m.replace(".", "/")).is_dir())
    assert cyclic == []


def test_the_root_holds_only_the_face_the_command_and_the_config():
    root = sorted(p.name for p in (ROOT / "awaken").iterdir()
                  if p.suffix == ".py" or (p.is_dir() and (p / "__init__.py").exists()))
    modules = [n for n in root if n.endswith(".py")]
    assert modules == ["__init__.py", "__main__.py", "cli.py"]


def test_the_layout_docstring_names_every_subpackage():
    listed = set(re.findall(r"^\s{4}(\w+)/", awaken.__doc__ or "", re.M))
    present = {p.name for p in (ROOT / "awaken").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    assert sorted(present - listed) == []
    assert sorted(listed - present) == []


def test_the_transports_know_no_protocol_engine_or_stream():
    graph = import_graph()
    for transport in ("awaken.transports.sse", "awaken.transports.ws"):
        assert sorted(t for t in graph[transport]
                      if t.startswith(("awaken.wires.agui", "awaken.wires.aisdk", "awaken.streams", "awaken.http"))
                      or (t.startswith("awaken.engine") and layer_of(t) == layer_of("awaken.engine"))) == []


def test_the_wires_import_no_engine():
    graph = import_graph()
    for module in graph:
        if module.startswith("awaken.wires"):
            assert sorted(t for t in graph[module] if t.startswith("awaken.engine")
                          and layer_of(t) == layer_of("awaken.engine")) == [], module
