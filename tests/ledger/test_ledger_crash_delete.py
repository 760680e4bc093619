"""The built-in backends against the importable kill-mid-delete crash test (``awaken.ledger.testkit.crash``):
a thread is wholly present or wholly gone after a kill during its delete. Apart from the other crash test
(``test_ledger_crash``, whose fixtures it uses) so the suite's two workers take one each."""

from __future__ import annotations

from awaken.ledger.testkit.crash import (  # noqa: F401 - the test and its fixture
    crash_delete_kills,
    test_sigkill_mid_delete_leaves_the_thread_wholly_present_or_wholly_gone,
)
from tests.ledger.test_ledger_crash import backend, crash_kills, ledger_factory  # noqa: F401 - its fixtures
