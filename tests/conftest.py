"""Shared fixtures: ``config`` (the repo config with a temporary ledger) and ``server`` (live)."""

from __future__ import annotations

import pytest

from . import pg_cluster
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


@pytest.fixture(scope="session", autouse=True)
def _postgres_cluster_teardown():
    """Stop the throwaway Postgres cluster at the end of the session, if a test started one."""
    yield
    pg_cluster.stop_cluster()
