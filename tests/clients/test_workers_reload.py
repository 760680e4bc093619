"""``[server] workers = 2`` on one address with the real clients (issue 29 item 3): a page reloaded
mid-answer resumes every time, whichever worker the reload's request reaches.

One ``awaken serve`` supervising two workers on the session's Postgres cluster; per client one Node
process (tests/node/reload_loop.mjs) runs ``ROUNDS`` reloads in a loop: start a run held open by the
scripted model's ``/hold``, drop the connection after its first text delta, rejoin with the library
(``@ag-ui/client`` HttpAgent on the AG-UI thread stream; ``ai`` 6 and 7 ``reconnectToStream``, what
``useChat({ resume: true })`` calls), and once the rejoined stream shows text, stop the run with
``POST /v1/threads/{id}/stop`` (whichever worker gets it). None may be refused (409/204) or fail.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.ledger.test_scaleout import LEASE_SECONDS, awaken_serve, postgres_config

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
ROUNDS = 20

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

DETACHED = '\n[agents.detached]\nmodel = "scripted"\non_disconnect = "continue"\n'


def detached_config(tmp_path: Path, workers: int, lease_seconds: int = LEASE_SECONDS) -> Path:
    """The Postgres test config with ``workers``, ``lease_seconds`` and an agent whose runs outlive their
    connection."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path, workers=workers)
    text = config.read_text().replace(f"lease_seconds = {LEASE_SECONDS}", f"lease_seconds = {lease_seconds}", 1)
    config.write_text(text + DETACHED)
    return config


async def reload_loop(kind: str, package: str, base_url: str, rounds: int, prefix: str) -> dict[str, Any]:
    result = await trio.run_process(
        ["node", str(NODE_DIR / "reload_loop.mjs"), kind, package, base_url, "detached", str(rounds), prefix],
        capture_stdout=True, capture_stderr=True, check=False, cwd=NODE_DIR)
    assert result.returncode == 0, result.stderr.decode()
    return json.loads(result.stdout)


def assert_every_reload_resumed(out: dict[str, Any], rounds: int) -> None:
    assert out["logs"] == [], out["logs"]
    assert len(out["rounds"]) == rounds
    for record in out["rounds"]:
        assert "failed" not in record and record["rejoined"], json.dumps(record)
        assert record["text"].startswith("alpha"), record  # from the run's first word: the missed positions, then live
        assert record["stop"]["status"] == 200 and record["stop"]["body"]["status"] == "interrupted", record


async def test_a_reload_mid_answer_resumes_on_either_worker(tmp_path: Path) -> None:
    config = detached_config(tmp_path, workers=2)
    async with awaken_serve(config, tmp_path / "serve.log") as server:
        outs: dict[str, dict[str, Any]] = {}

        async def client(kind: str, package: str) -> None:
            outs[package] = await reload_loop(kind, package, server.url, ROUNDS, f"w-{package}")

        async with trio.open_nursery() as nursery:
            for kind, package in [("agui", "agui-client-1"), ("aisdk", "ai-6"), ("aisdk", "ai-7")]:
                nursery.start_soon(client, kind, package)
        for out in outs.values():
            assert_every_reload_resumed(out, ROUNDS)
