"""The built-in backends (``sqlite``, ``files``) against the importable crash test
(``awaken.ledger.testkit.crash``); for the file ledger, the kills must also have torn records that open cut off.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from awaken.ledger.testkit.crash import *  # noqa: F403 - the crash test and its fixtures
from awaken.ledger.testkit.harness import LedgerFactory
from tests.ledger_harness import BACKENDS


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def ledger_factory(backend: str) -> LedgerFactory:
    return BACKENDS[backend]


@pytest.fixture
def after_crashes(backend: str) -> Callable[[Path, int], None] | None:
    if backend != "files":
        return None

    def torn_tails_were_cut(root: Path, kills: int) -> None:
        torn = root / "ledger" / "torn"
        if kills >= 50:
            assert torn.exists() and list(torn.iterdir()), (
                "no kill tore a record: the torn-tail recovery was not exercised"
            )

    return torn_tails_were_cut
