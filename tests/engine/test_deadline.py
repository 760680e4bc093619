"""The suite's per-test deadline (tests/conftest.py): a hang fails its test in seconds, not the suite.

Each test runs pytest in a subprocess on a tiny file of hanging tests, with this suite's conftest loaded
as a plugin (in one process: no workers to start for one file), and reads every test's outcome and
duration from the JUnit XML report.
"""

from __future__ import annotations

import subprocess
import sys
import time
import xml.etree.ElementTree as ET

from tests.builders import ROOT

HANGING = r'''
import pytest
import trio


async def test_body_hangs():
    await trio.sleep_forever()


@pytest.fixture
async def stuck():
    await trio.sleep_forever()
    yield


async def test_fixture_hangs(stuck):
    pass


@pytest.mark.timeout(1)
async def test_marked_one_second_hangs():
    await trio.sleep_forever()


async def test_live_server_request_hangs(server, client):
    """A streamed reply that never ends, with a live server and its client to tear down."""
    async with client.stream("POST", "/v1/ag-ui", json={
            "threadId": "t", "runId": "r", "state": {}, "tools": [], "context": [], "forwardedProps": {},
            "messages": [{"id": "u", "role": "user", "content": "/delay 100000\n/words 2"}]}) as response:
        async for _ in response.aiter_bytes():
            pass


async def test_virtual_hours_pass(autojump_clock):
    """The deadline is wall-clock time, not the test's trio clock."""
    await trio.sleep(3 * 3600)


async def test_quick_passes():
    await trio.sleep(0)


def test_sync_passes():
    pass
'''


def run_pytest(tmp_path, *args: str) -> tuple[subprocess.CompletedProcess, dict[str, tuple[str, float, str]], float]:
    (tmp_path / "test_hanging.py").write_text(HANGING)
    xml = tmp_path / "report.xml"
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.conftest", "-p", "no:cacheprovider", "-q", "-n", "0",
         "-c", str(ROOT / "pyproject.toml"), "--rootdir", str(tmp_path), f"--junitxml={xml}",
         str(tmp_path / "test_hanging.py"), *args],
        cwd=ROOT, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL,
    )
    wall = time.monotonic() - started
    outcomes = {}
    for case in ET.parse(xml).getroot().iter("testcase"):
        failure = case.find("failure")
        outcomes[case.get("name")] = ("failed" if failure is not None else "passed", float(case.get("time")),
                                      "" if failure is None else failure.get("message", ""))
    return proc, outcomes, wall


def test_a_hanging_test_fails_at_its_deadline_and_the_run_goes_on(tmp_path):
    proc, outcomes, wall = run_pytest(tmp_path, "--test-timeout=4")
    assert proc.returncode == 1, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert {name: outcome for name, (outcome, _, _) in outcomes.items()} == {
        "test_body_hangs": "failed", "test_fixture_hangs": "failed", "test_marked_one_second_hangs": "failed",
        "test_live_server_request_hangs": "failed", "test_virtual_hours_pass": "passed", "test_quick_passes": "passed",
        "test_sync_passes": "passed"}
    for name in ("test_body_hangs", "test_fixture_hangs", "test_live_server_request_hangs"):
        outcome, seconds, message = outcomes[name]
        assert "TestTimedOut" in message and "4 s deadline" in message, message
        assert 4 <= seconds < 30, (name, seconds)  # never before the deadline; seconds after it, not minutes
    outcome, seconds, message = outcomes["test_marked_one_second_hangs"]
    assert "1 s deadline" in message and 1 <= seconds < 4, (seconds, message)  # the mark beats the default
    assert wall < 100

