"""The built-in backends (``sqlite``, ``files``, ``postgres``) against the importable crash test
(``awaken.ledger.testkit.crash``); for the file ledger, the kills must also have torn records that open cut off.
The kill-mid-delete test is its own module (``test_ledger_crash_delete``): the suite runs a module per worker,
and the two together were the longest module by far.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

import pytest

from awaken.ledger.testkit.crash import test_sigkill_at_random_instants_loses_nothing_acknowledged  # noqa: F401
from awaken.ledger.testkit.harness import LedgerFactory
from tests.ledger_harness import BACKENDS


@pytest.fixture(params=list(BACKENDS))
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def crash_kills() -> int:
    """50 kills per backend in the suite (``AWAKEN_CRASH_KILLS`` for more): the fewest at which the file
    ledger's torn tails must have been exercised (``after_crashes``)."""
    return int(os.environ.get("AWAKEN_CRASH_KILLS", "50"))


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
