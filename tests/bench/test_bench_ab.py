"""``python -m bench.ab`` runs the tree each server names: a server starts in its tree, whose ``awaken``
is imported ahead of this repository's (PYTHONPATH alone did not: ``python -m`` puts the working
directory first, and every server ran this checkout)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from bench.ab import parse_server
from bench.servers import REPO, awaken_server


def fake_tree(root: Path) -> Path:
    (root / "awaken").mkdir(parents=True)
    (root / "awaken" / "__init__.py").write_text("")
    return root


def test_a_server_imports_the_awaken_of_its_tree(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "other")
    server = awaken_server("other", "sqlite", tmp_path / "data", tmp_path / "logs", tree=tree)
    where = subprocess.run([sys.executable, "-c", "import awaken; print(awaken.__file__)"], cwd=server.cwd,
                           env=server.env(), capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == tree / "awaken" / "__init__.py"


def test_a_server_with_no_tree_runs_this_repository(tmp_path: Path) -> None:
    server = awaken_server("here", "sqlite", tmp_path / "data", tmp_path / "logs")
    where = subprocess.run([sys.executable, "-c", "import awaken; print(awaken.__file__)"], cwd=server.cwd,
                           env=server.env(), capture_output=True, text=True, check=True).stdout.strip()
    assert Path(where) == REPO / "awaken" / "__init__.py"


def test_a_server_spec_names_its_tree_and_backend(tmp_path: Path) -> None:
    tree = fake_tree(tmp_path / "a:b")  # the last colon splits the backend off
    assert parse_server(f"new={tree}:files") == ("new", tree.resolve(), "files")


@pytest.mark.parametrize("spec", ["new", "new=.", "=.:sqlite", "new=:sqlite", "new=/nonexistent:sqlite"])
def test_a_malformed_server_spec_is_refused(spec: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError):
        parse_server(spec)
