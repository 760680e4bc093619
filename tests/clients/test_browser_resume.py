"""Rejoining runs from a real browser (issue 16 item 7), from another origin than the server.

The page is tests/browser/pages/resume.tsx: ``useChat({ resume: true })`` (ai@6, @ai-sdk/react), or a
fetch-based AG-UI client that drops its connection and rejoins with ``Last-Event-ID``. Runs are held
open by the scripted model's ``/hold`` (``release`` opens it): the reload or the drop lands while the
answer is half streamed, deterministically.
"""

from __future__ import annotations

import pytest
import trio

from awaken.engine.state import RunStatus
from tests.browser_harness import Tab, read_history
from tests.builders import default_config_data, held, live_server, make_config, release

WORDS = 30


@pytest.fixture
async def server(browser, tmp_path):
    """A live server allowing the pages' origin, with a ``continue`` agent and a ``cancel`` one."""
    agents = default_config_data()["agents"]
    agents["detached"] = dict(agents["assistant"], on_disconnect="continue")
    agents["attached"] = dict(agents["assistant"], on_disconnect="cancel")
    config = make_config(tmp_path, agents=agents,
                         server=dict(default_config_data()["server"], cors_origins=[browser.pages_origin]))
    async with live_server(config) as srv:
        yield srv


async def wait_for_run(ledger, thread_id: str, status: RunStatus, within: float = 10.0):  # noqa: ANN001
    with trio.fail_after(within):
        while True:
            runs = await ledger.list_runs(thread_id)
            if runs and runs[-1].status is status:
                return runs[-1]
            await trio.sleep(0.02)


async def open_resume(browser, server, thread: str, agent: str, **query: str) -> Tab:  # noqa: ANN001
    tab = browser.tab("resume")
    await tab.open("resume", server=server.base_url, thread=thread, agent=agent, **query)
    return tab


FIRST_WORD_SHOWN = ("s => s.messages.length === 2 && s.messages[1].role === 'assistant'"
                    " && s.messages[1].parts.some(p => p.type === 'text' && p.text.length > 0)")


async def test_usechat_resume_after_a_reload_shows_the_completed_answer_identical_to_history(browser, server):
    thread = "br-resume"
    tab = await open_resume(browser, server, thread, "detached", mode="usechat", send=held("resume", WORDS))
    await tab.wait_for_state(FIRST_WORD_SHOWN)
    await tab.reload()  # the POST's connection goes; the continue agent's run goes on, held
    await tab.wait_for_state("s => s.historyStatus === 200 && s.status === 'streaming'")
    assert server.ctx.app.is_active(thread)
    await release(server, "resume")
    state = await tab.wait_for_state("s => s.status === 'ready' && s.messages.length === 2")
    assert state["error"] is None
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
    assert state["messages"] == history
    text = "".join(p["text"] for p in history[1]["parts"] if p["type"] == "text")
    assert len(text.split()) == WORDS
    assert await tab.text("#messages .message[data-role=assistant]") == f"assistant\n{text}"
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED]
    await tab.screenshot("resume-usechat-completed")
    assert await tab.page_errors() == []


async def test_a_fetch_client_rejoining_with_last_event_id_gets_no_duplicate_and_no_missing_event(browser, server):
    thread = "br-fetch"
    tab = await open_resume(browser, server, thread, "detached", mode="fetch", send=held("fetch", WORDS))
    state = await tab.wait_for_state("s => s.phase === 'rejoined'")
    assert state["rejoinStatus"] == 200
    await release(server, "fetch")
    state = await tab.wait_for_state("s => s.phase === 'done'")
    frames = state["first"] + state["rejoined"]
    ids = [f["id"] for f in frames]
    key = ids[0].rpartition(":")[0]
    assert ids == [f"{key}:{n}" for n in range(1, len(ids) + 1)]  # contiguous: nothing twice, nothing lost
    events = [f["event"] for f in frames]
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    async with server.client() as client:
        history = await read_history(client, f"/v1/ag-ui/threads/{thread}/messages")
    assert text == history[-1]["content"]
    assert len(text.split()) == WORDS
    assert await tab.page_errors() == []


async def test_with_a_cancel_agent_a_reload_still_interrupts_the_run(browser, server):
    thread = "br-cancel"
    tab = await open_resume(browser, server, thread, "attached", mode="usechat", send=held("cancel", WORDS))
    await tab.wait_for_state(FIRST_WORD_SHOWN)
    await tab.reload()
    run = await wait_for_run(server.ctx.ledger, thread, RunStatus.INTERRUPTED)
    assert run.cause == "client_gone"
    # the reloaded page's resume finds nothing running (204) and shows the committed history
    state = await tab.wait_for_state("s => s.historyStatus === 200 && s.status === 'ready'")
    assert state["error"] is None
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
    assert state["messages"] == history
    assert not server.ctx.app.is_active(thread)
