"""Shared fixtures: ``config`` (the repo config with a temporary ledger), ``server`` (live), and for
browser tests ``browser`` (one Chromium per module) and ``cross_origin_server``."""

from __future__ import annotations

import pytest

from .browser_harness import BrowserRunner
from .helpers import default_config_data, live_server, make_config


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
