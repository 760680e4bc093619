"""``[server] workers = 2`` with CopilotKit in Chromium (issue 29 item 3): a page reloaded mid-answer
joins the run again through the runtime's ``connect``, whichever worker each request reaches, every
time: ``ROUNDS`` reloads in one browser session, none refused or silently empty.

One ``awaken serve`` supervising two workers on the session's Postgres cluster; the CopilotKit app of
``tests/browser/pages/copilotkit.tsx`` in runtime mode (``/v1/copilotkit``), agent ``detached`` (its runs
outlive the page). Each round, one more turn of one thread: send a message held after its first word
(scripted ``/hold``), reload once it shows, wait until the reloaded page shows the conversation and the
held run again, open the gate on the worker that runs it (gates are per process: ``/release`` runs on
fresh connections until the thread's run completed), and the page shows the whole answer, the same as
the committed history.
"""

from __future__ import annotations

import itertools
from pathlib import Path

import httpx
import pytest
import trio

from tests.browser_harness import read_history
from tests.builders import agui_body, post_agui, types, user
from tests.clients.test_workers_reload import detached_config
from tests.ledger.test_scaleout import awaken_serve

ROUNDS = 20

pytestmark = [pytest.mark.slow, pytest.mark.timeout(420)]  # about 175 s on a loaded 2-core machine


async def release_where_it_runs(url: str, thread: str, gate: str) -> int:
    """Open ``gate`` on the worker whose run on ``thread`` waits at it: ``/release`` runs, each on a fresh
    connection (either worker takes it), until the thread's latest run completed; returns how many."""
    async with httpx.AsyncClient(base_url=url, timeout=30, headers={"connection": "close"}) as client:
        with trio.fail_after(60):
            for n in itertools.count(1):
                tag = f"{gate}-release-{n}"
                events = await post_agui(client, agui_body(tag, tag, [user(tag, f"/release {gate}")]))
                assert types(events)[-1] == "RUN_FINISHED", events
                if (await client.get(f"/v1/threads/{thread}")).json()["runs"][-1]["status"] == "completed":
                    return n
    raise AssertionError("unreachable")


async def test_copilotkit_connect_after_a_reload_joins_the_run_on_either_worker(browser, tmp_path: Path) -> None:
    config = detached_config(tmp_path, workers=2, lease_seconds=10)
    text = config.read_text()
    config.write_text(text.replace('cors_origins = ["http://localhost:3000", "http://localhost:5173"]',
                                   f'cors_origins = ["{browser.pages_origin}"]', 1))
    async with awaken_serve(config, tmp_path / "serve.log") as server, \
            httpx.AsyncClient(base_url=server.url, timeout=30) as client:
        tab = browser.tab("ck-workers")
        thread = "ck-workers"
        await tab.open("copilotkit", server=server.url, thread=thread, agent="detached", mode="runtime")
        await tab.wait_for_state(f"s => s.page === 'copilotkit' && s.ready && s.thread === {thread!r}")
        for i in range(ROUNDS):
            n, gate = 2 * i + 2, f"{thread}-{i}"  # the page's messages once this round's answer shows
            await tab.fill("[data-testid=copilot-chat-textarea]", f"round {i}\n/hold {gate}")
            await tab.click("[data-testid=copilot-send-button]")
            await tab.wait_for_state(f"s => s.running && s.messages.length === {n} && s.messages[{n - 1}].content")
            await tab.reload()  # mid-answer: the run goes on, held, on whichever worker took it
            joined = await tab.wait_for_state(f"s => s.ready && s.running && s.messages.length === {n} "
                                              f"&& s.messages[{n - 1}].content", within=20)
            assert [m["role"] for m in joined["messages"]] == ["user", "assistant"] * (i + 1), (i, joined)
            assert joined["messages"][-1]["content"].strip() == "You", (i, joined)
            await release_where_it_runs(server.url, thread, gate)
            state = await tab.wait_for_state(f"s => !s.running && s.messages.length === {n} "
                                             f"&& s.messages[{n - 1}].content === 'You said: \"round {i}\".'")
            assert state["errors"] == [], (i, state)
            assert state["messages"] == await read_history(client, f"/v1/ag-ui/threads/{thread}/messages"), i
        assert await tab.page_errors() == []
