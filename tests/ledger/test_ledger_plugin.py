"""A third-party backend runs Awaken's ledger checks with one import: the JSON-file plugin
(``tests/plugins/json_ledger.py``), registered under ``awaken.ledgers`` by a package's metadata
(a ``dist-info`` directory put on ``sys.path``, as ``pip install`` would leave it), passes the whole
importable conformance suite and the SIGKILL crash test, found by its config name.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from awaken.ledger.interface import Ledger, known_backends, ledger_class
from awaken.ledger.testkit.conformance import *  # noqa: F403 - the conformance suite
from awaken.ledger.testkit.crash import *  # noqa: F403 - the crash test
from awaken.ledger.testkit.harness import LedgerFactory
from tests.plugins.json_ledger import JsonFileLedger

PLUGIN = "json-file"
ENTRY_POINTS = f"[awaken.ledgers]\n{PLUGIN} = tests.plugins.json_ledger:JsonFileLedger\n"


@pytest.fixture(scope="module", autouse=True)
def installed_plugin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """A site directory holding the plugin package's metadata, on ``sys.path`` (and so on the crash
    child's ``PYTHONPATH``) while this module's tests run."""
    site = tmp_path_factory.mktemp("site")
    info = site / "awaken_json_ledger-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: awaken-json-ledger\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(ENTRY_POINTS)
    with pytest.MonkeyPatch.context() as patch:
        patch.syspath_prepend(str(site))
        yield site


def json_plugin_ledger(root: Path, **options: Any) -> Ledger:
    """The plugin as the server would build it: its class found by its config name."""
    return ledger_class(PLUGIN)(path=str(root / "ledger.json"), **options)


@pytest.fixture
def ledger_factory() -> LedgerFactory:
    return json_plugin_ledger


@pytest.fixture
def crash_kills() -> int:
    """20 kills, not 60: this plugin rewrites its whole file on every write, so a long history is slow."""
    return 20


def test_the_plugin_is_found_by_its_config_name_through_its_entry_point() -> None:
    """``known_backends`` lists the plugin next to the built-ins (all three from entry points) and
    ``ledger_class`` loads its class."""
    assert {"sqlite", "files", PLUGIN} <= set(known_backends())
    assert known_backends()[PLUGIN].value == "tests.plugins.json_ledger:JsonFileLedger"
    assert ledger_class(PLUGIN) is JsonFileLedger
