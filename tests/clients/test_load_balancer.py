"""Two hosts behind a real load balancer (issue 29 item 4): two ``awaken serve`` processes on different
addresses, one Postgres ledger (the session's throwaway cluster), and Debian's HAProxy in front of them
with the settings docs/deploying.md gives (round robin, no stickiness, no buffering, long timeouts:
``tests/balancer.py``). Every request may reach either process.

One Node process (tests/node/balanced.mjs) drives the real clients through the balancer: an
``@ag-ui/client`` HttpAgent streams two turns; pages reloaded mid-answer rejoin (HttpAgent on the AG-UI
thread stream, ai 7's ``reconnectToStream``) and stop the run, wherever it streams; a gate is approved
and a client tool answered with the waiting run's resume on whichever process gets it. Afterwards
every message a client was acknowledged is in each thread's history.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from tests.balancer import HAPROXY, balancer, haproxy_config
from tests.builders import squeeze
from tests.clients.test_workers_reload import NODE_DIR, detached_config
from tests.ledger.test_scaleout import awaken_serve

RELOADS = 5
TEXT_RUN = ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
            "STEP_FINISHED", "RUN_FINISHED"]

DOCS = Path(__file__).resolve().parents[2] / "docs" / "deploying.md"


def settings(lines: list[str]) -> list[str]:
    """HAProxy directives without comments, addresses and process settings (a server line: its options)."""
    out = []
    for line in lines:
        words = line.split("#", 1)[0].split()
        if not words or words[0] in ("global", "maxconn", "bind"):
            continue
        out.append(" ".join(["server", *words[3:]] if words[0] == "server" else words))
    return list(dict.fromkeys(out))


def test_the_docs_give_the_balancer_settings_the_test_runs() -> None:
    """docs/deploying.md's HAProxy block is the configuration ``tests/balancer.py`` writes (addresses aside)."""
    block = DOCS.read_text().split("```haproxy\n", 1)[1].split("```", 1)[0]
    assert settings(block.splitlines()) == settings(haproxy_config(8000, ["10.0.0.11:8000"]).splitlines())


def answers(messages: list[dict[str, Any]]) -> list[str]:
    return [m["content"] for m in messages if m["role"] == "assistant" and m.get("content")]


def clean(runs: list[dict[str, Any]]) -> list[list[str]]:
    """Each turn's squeezed event types; no turn failed or carried a RUN_ERROR."""
    for run in runs:
        assert "failed" not in run and run["errors"] == [], run
    return [squeeze(run["types"]) for run in runs]


@pytest.mark.skipif(not Path(HAPROXY).exists(), reason="haproxy is not installed (scripts/setup-tests installs it)")
@pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed")
@pytest.mark.slow
@pytest.mark.timeout(180)
async def test_the_real_clients_through_a_round_robin_balancer(tmp_path: Path) -> None:
    config = detached_config(tmp_path, workers=1, lease_seconds=10)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                balancer([a.url, b.url], tmp_path) as url):
        async with httpx.AsyncClient() as client:
            names = {(await client.get(f"{url}/healthz")).headers["x-awaken-process"] for _ in range(4)}
        assert len(names) == 2, names  # round robin: both processes answer through the one address
        result = await trio.run_process(["node", str(NODE_DIR / "balanced.mjs"), url, "lb", str(RELOADS)],
                                        capture_stdout=True, capture_stderr=True, check=False, cwd=NODE_DIR)
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    assert out["logs"] == [], out["logs"]
    steps, histories = out["steps"], out["histories"]

    stream = steps["stream"]
    assert clean(stream["runs"]) == [TEXT_RUN, TEXT_RUN]
    assert answers(stream["messages"]) == ['You said: "hello through the balancer".',
                                           "alpha bravo charlie delta echo foxtrot golf hotel india juliet alpha bravo"]
    assert histories[stream["thread"]] == stream["messages"]

    for kind in ("agui", "aisdk"):
        rounds = steps["reloads"][kind]
        assert len(rounds) == RELOADS
        for record in rounds:
            assert "failed" not in record and record["rejoined"], json.dumps(record)
            assert record["text"].startswith("alpha"), record  # from the first word: missed positions, then live
            stop = record["stop"] or {}
            assert stop.get("status") == 200 and stop["body"]["status"] == "interrupted", record
            if kind == "agui":
                assert stop["body"]["runId"] == f"run-{record['thread']}", record
            history = histories[record["thread"]]
            assert [m["id"] for m in history][:1] == [f"u-{record['thread']}"], history
            assert answers(history) == [record["text"]], (history, record)  # the cut-off answer, as streamed

    approve = steps["approve"]
    waiting, resumed, after = clean(approve["runs"])
    assert approve["interrupts"] == 1 and approve["runs"][0]["outcome"] == "interrupt"
    assert resumed == ["RUN_STARTED", "TOOL_CALL_RESULT", *TEXT_RUN[1:]] and after == TEXT_RUN, waiting
    assert answers(approve["messages"]) == ['Here is what the tools said: calculator returned {"result":42}.',
                                            'You said: "and now?".']
    assert histories[approve["thread"]] == approve["messages"]

    tool = steps["client_tool"]
    assert clean(tool["runs"])[1:] == [TEXT_RUN, TEXT_RUN]
    assert answers(tool["messages"]) == ["Here is what the tools said: ask_user returned Ada.", 'You said: "bye".']
    assert histories[tool["thread"]] == tool["messages"]
