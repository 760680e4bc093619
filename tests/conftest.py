"""Shared fixtures (``config``: the repo config with a temporary ledger; ``server``: live; ``client``; for browser
tests ``browser``: one Chromium per module, and ``cross_origin_server``) and the per-test deadline.

The deadline. Every Trio test (fixtures, body and teardown: one ``trio.run``) runs in a cancel scope
that a wall-clock timer cancels: a hang fails that test in ``DEFAULT_TIMEOUT_S`` seconds with
``TestTimedOut``, and the suite goes on. ``@pytest.mark.timeout(N)`` gives one test N seconds; ``--test-timeout=N`` changes the
default (``0``: no deadline, e.g. under a debugger). It works through pytest-trio's ``trio`` marker,
whose ``run`` argument is the function that runs the test: ours wraps ``trio.run`` in the deadline.
A cancel scope rather than a signal, so a timed-out test is cancelled the Trio way (its fixtures tear
down, nothing is left half-run) and the rest of the suite runs normally. Synchronous tests are pure
functions or bound their own subprocesses (``subprocess.run(timeout=...)``); Hypothesis' Trio tests
run each example under pytest-trio's own ``trio.run`` and keep Hypothesis' per-example ``deadline``.
"""

from __future__ import annotations

import threading
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
import trio

from tests import pg_cluster
from tests.browser_harness import BrowserRunner
from tests.builders import default_config_data, live_server, make_config

#: seconds a Trio test may take (set-up, body and teardown) unless marked ``@pytest.mark.timeout(N)``
DEFAULT_TIMEOUT_S = 60.0


class TestTimedOut(Exception):
    """A test ran past its deadline (``DEFAULT_TIMEOUT_S`` or its ``timeout`` mark)."""

    __test__ = False  # not a test class, whatever pytest's name pattern says


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption("--test-timeout", type=float, default=None, metavar="SECONDS",
                     help=f"deadline of each Trio test without a timeout mark (default {DEFAULT_TIMEOUT_S:g}; "
                          "0 turns deadlines off)")


def deadline_run(seconds: float) -> Callable[..., Any]:
    """A ``trio.run`` whose main function must end within ``seconds`` (pytest-trio's ``run`` hook)."""

    def run(afn: Callable[[], Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        async def under_deadline() -> Any:
            token = trio.lowlevel.current_trio_token()
            with trio.CancelScope() as scope:
                # wall-clock time, whatever clock the test gives trio (autojump_clock tests sleep for
                # virtual hours): a timer thread that only asks the run to cancel the scope
                timer = threading.Timer(seconds, _cancel_soon, (token, scope))
                timer.daemon = True
                timer.start()
                try:
                    return await afn(*args)
                finally:
                    timer.cancel()
            raise TestTimedOut(f"the test ran past its {seconds:g} s deadline (a hang, or mark it "
                                   f"@pytest.mark.timeout(N) if it is slow on purpose)")

        return trio.run(under_deadline, **kwargs)

    return run


def _cancel_soon(token: trio.lowlevel.TrioToken, scope: trio.CancelScope) -> None:
    try:
        token.run_sync_soon(scope.cancel)
    except trio.RunFinishedError:
        pass  # the test ended meanwhile


def timeout_of(item: pytest.Item) -> float:
    mark = item.get_closest_marker("timeout")
    if mark is not None:
        return float(mark.args[0])
    option = item.config.getoption("--test-timeout")
    return DEFAULT_TIMEOUT_S if option is None else option


@pytest.hookimpl(trylast=True)  # after pytest-trio's trio_mode has marked the async tests
def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if item.get_closest_marker("trio") is None:
            continue
        seconds = timeout_of(item)
        if seconds > 0:
            # pytest-trio takes the ``run`` of the closest ``trio`` mark: put ours first.
            item.add_marker(pytest.mark.trio(run=deadline_run(seconds)), append=False)


@pytest.fixture
def config(tmp_path):
    return make_config(tmp_path)


@pytest.fixture
async def server(config):
    async with live_server(config) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with server.client() as c:
        yield c


@pytest.fixture(scope="module")
def browser():
    """One headless Chromium (and the pages' origin) for a whole test module; see browser_harness."""
    runner = BrowserRunner.start()
    try:
        yield runner
    finally:
        runner.stop()


@pytest.fixture
async def cross_origin_server(browser, tmp_path):
    """A live server that allows the browser pages' origin (another origin than its own)."""
    server = dict(default_config_data()["server"], cors_origins=[browser.pages_origin])
    async with live_server(make_config(tmp_path, server=server)) as srv:
        yield srv


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster_teardown():
    """Stop the throwaway Postgres cluster at the end of the session, if a test started one."""
    yield
    pg_cluster.stop_cluster()
