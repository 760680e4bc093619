"""The package's layering (issue 11): no module imports one above it.

Read from the source: each module's ``awaken`` imports that run (``if TYPE_CHECKING:`` blocks are
annotations only, and left out), resolved to the module they name.
"""

from __future__ import annotations

import ast

from .helpers import ROOT

PACKAGE = ROOT / "awaken"


def _is_type_checking(node: ast.If) -> bool:
    test = node.test
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING")


def _runtime_imports(tree: ast.AST) -> list[ast.Import | ast.ImportFrom]:
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if isinstance(node, ast.If) and _is_type_checking(node):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph() -> dict[str, set[str]]:
    """``awaken.x.y`` -> the ``awaken`` modules it imports at run time."""
    modules: dict[str, tuple[list[str], ast.AST]] = {}
    for path in PACKAGE.rglob("*.py"):
        parts = list(path.relative_to(ROOT).with_suffix("").parts)
        package = parts[:-1]
        if parts[-1] == "__init__":
            parts = parts[:-1]
        modules[".".join(parts)] = (package, ast.parse(path.read_text()))

    def resolve(name: str) -> str | None:
        while name and name not in modules:
            name = name.rpartition(".")[0]
        return name or None

    graph: dict[str, set[str]] = {}
    for name, (package, tree) in modules.items():
        targets: set[str] = set()
        for node in _runtime_imports(tree):
            if isinstance(node, ast.Import):
                targets |= {alias.name for alias in node.names if alias.name.startswith("awaken")}
            elif node.level:
                base = ".".join(package[: len(package) - node.level + 1])
                stem = f"{base}.{node.module}" if node.module else base
                targets |= {stem} if node.module else {f"{stem}.{alias.name}" for alias in node.names}
            elif node.module and node.module.startswith("awaken"):
                targets.add(node.module)
        graph[name] = {t for t in map(resolve, targets) if t and t != name}
    return graph


def reaches(graph: dict[str, set[str]], start: str) -> set[str]:
    seen: set[str] = set()
    todo = list(graph[start])
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(graph.get(name, ()))
    return seen


def test_no_module_imports_itself_back_through_others():
    graph = import_graph()
    assert {"awaken.engine", "awaken.exchange", "awaken.transports.sse", "awaken.protocol"} <= set(graph)
    assert sorted(name for name in graph if name in reaches(graph, name)) == []


def test_transports_know_nothing_of_exchange_the_engine_or_the_protocols():
    graph = import_graph()
    above = ("awaken.exchange", "awaken.engine", "awaken.rejoin", "awaken.server", "awaken.agui", "awaken.aisdk")
    for transport in ("awaken.transports.sse", "awaken.transports.ws"):
        assert sorted(m for m in reaches(graph, transport) if m.startswith(above)) == [], transport


def test_the_protocol_interface_and_the_adapters_import_no_engine():
    graph = import_graph()
    for module in ("awaken.protocol", "awaken.agui.adapter", "awaken.aisdk.adapter"):
        assert sorted(m for m in reaches(graph, module)
                      if m.startswith(("awaken.engine", "awaken.exchange", "awaken.server"))) == [], module


def test_the_ledger_messages_and_runstate_sit_below_the_engine():
    graph = import_graph()
    for module in ("awaken.ledger", "awaken.messages", "awaken.runstate"):
        assert sorted(m for m in reaches(graph, module)
                      if m.startswith(("awaken.engine", "awaken.exchange", "awaken.protocol",
                                       "awaken.transports"))) == [], module
