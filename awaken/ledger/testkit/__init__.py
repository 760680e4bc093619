"""Test kits for ledger backends: the conformance suite and the SIGKILL crash test, importable.

* ``awaken.ledger.testkit.conformance``: every promise of the ``Ledger`` interface as pytest tests over a
  ``ledger_factory`` fixture (``from awaken.ledger.testkit.conformance import *`` plus that fixture),
  the branch promises of ``awaken.ledger.testkit.branches`` included;
* ``awaken.ledger.testkit.crash``: the crash test (a child process writes until SIGKILLed at random instants,
  the reopened ledger must hold every acknowledged commit and no partial one), same fixture;
* ``awaken.ledger.testkit.harness``: what both share (record factories, snapshots, the crash workload).

They need the ``dev`` extra (pytest, pytest-trio with ``trio_mode = true``, hypothesis).
"""

import pytest

# Plain ``assert`` statements in these modules explain their failures like those of a test module.
pytest.register_assert_rewrite("awaken.ledger.testkit.conformance", "awaken.ledger.testkit.branches",
                               "awaken.ledger.testkit.crash", "awaken.ledger.testkit.harness")
