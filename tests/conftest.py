"""Shared fixtures: ``config`` (the repo config with a temporary ledger) and ``server`` (live)."""

from __future__ import annotations

import pytest

from .helpers import live_server, make_config


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
