"""The tests share their builders (``tests/builders.py``): no helper is defined more than twice across ``tests/``.

A helper is a top-level function of a ``tests/**/*.py`` file that is neither a test (``test_*``) nor a
pytest fixture. A third definition of one name means a builder was copied instead of imported."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

TESTS = Path(__file__).resolve().parent.parent
MAX_DEFINITIONS = 2


def is_fixture(decorator: ast.expr) -> bool:
    target = decorator.func if isinstance(decorator, ast.Call) else decorator
    if isinstance(target, ast.Attribute):
        return target.attr == "fixture"
    return isinstance(target, ast.Name) and target.id == "fixture"


def helper_definitions(root: Path) -> dict[str, list[str]]:
    """Each helper name defined at the top level of a Python file under ``root``: where (``path:line``)."""
    found: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        if "node_modules" in path.parts or any(part.startswith(".") for part in path.relative_to(root).parts):
            continue
        for node in ast.parse(path.read_text(), str(path)).body:
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) or node.name.startswith("test_"):
                continue
            if any(is_fixture(d) for d in node.decorator_list):
                continue
            found[node.name].append(f"{path.relative_to(root)}:{node.lineno}")
    return found


def test_no_helper_is_defined_more_than_twice_across_tests():
    repeated = {name: where for name, where in helper_definitions(TESTS).items() if len(where) > MAX_DEFINITIONS}
    assert not repeated, (
        "helpers defined more than twice (share one in tests/builders.py instead): "
        + "; ".join(f"{name}: {', '.join(where)}" for name, where in sorted(repeated.items()))
    )


def test_the_check_sees_a_copied_helper(tmp_path):
    for n in range(3):
        (tmp_path / f"test_{n}.py").write_text(
            "import pytest\n\n"
            "def user(id, content):\n    return {}\n\n"
            "@pytest.fixture\ndef server():\n    pass\n\n"
            "def test_x():\n    pass\n"
        )
    found = helper_definitions(tmp_path)
    assert sorted(found) == ["user"]
    assert len(found["user"]) == 3
