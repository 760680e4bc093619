"""The console in headless Chromium (tests/browser harness), against a live server on its own origin.

Each test drives the console a person would: the chat over each protocol and transport with a
server tool, an approval, a denial and a client tool; the sessions list; a session compared with the
history route; a 503 banner. Screenshots of each page at 1280 px and 390 px go to ``docs/``.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import trio

from awaken.core.errors import StoreUnavailable
from tests.browser_harness import Tab, read_history
from tests.builders import agui_body, call, held, live_server, parse_sse, post_agui, release, user

DOCS = Path(__file__).resolve().parents[2] / "docs"
COMBOS = [("ai-sdk", "sse"), ("ai-sdk", "ws"), ("ag-ui", "sse"), ("ag-ui", "ws"), ("managed", "sse")]



async def goto(tab: Tab, server, hash_: str) -> None:
    await tab.command("open", path=f"{server.base_url}/console#{hash_}")


async def wait_text(tab: Tab, selector: str, needle: str, within: float = 15) -> str:
    return await tab.wait_for(
        "([s, n]) => [...document.querySelectorAll(s)].map((e) => e.innerText).find((t) => t.includes(n)) ?? null",
        arg=[selector, needle], within=within)


async def chat_to(tab: Tab, server, protocol: str, transport: str, agent: str) -> str:
    """Open a fresh chat with these choices; the thread id it will use."""
    await goto(tab, server, f"/chat?agent={agent}&protocol={protocol}&transport={transport}")
    await tab.wait_for("() => document.querySelector('#chat-status')?.dataset.status === 'ready'")
    return await tab.command("eval", expression="document.querySelector('#chat-thread').textContent")


async def say(tab: Tab, text: str) -> None:
    await tab.fill("#chat-input", text)
    await tab.click("#chat-send")


async def shown_thread(tab: Tab, thread: str) -> str:
    """The chat's thread once it has one: a Managed Agents chat's is its session, made by its first send."""
    return await tab.wait_for("(before) => { const t = document.querySelector('#chat-thread').textContent;"
                              " return t !== before || !before.startsWith('console-') ? t : null; }", arg=thread)


async def chat_idle(tab: Tab) -> None:
    await tab.wait_for("() => ['ready', 'error'].includes(document.querySelector('#chat-status')?.dataset.status)"
                       " && !document.querySelector('#chat-send').disabled")


async def tool_state(tab: Tab, tool: str, state: str) -> None:
    await tab.wait_for(f"() => document.querySelector('#transcript [data-tool=\"{tool}\"][data-state=\"{state}\"]')")


@pytest.mark.parametrize(("protocol", "transport"), COMBOS)
async def test_chat_over_each_protocol_runs_server_tool_approval_denial_and_client_tool(
        browser, server, protocol, transport):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    # a server tool
    thread = await chat_to(tab, server, protocol, transport, "assistant")
    await say(tab, '/call calculator {"expression": "6*7"}')
    await tool_state(tab, "calculator", "output-available")
    thread = await shown_thread(tab, thread) if protocol == "managed" else thread
    await wait_text(tab, "#transcript .message[data-role=assistant]", "42")
    await chat_idle(tab)
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
    assert [m["role"] for m in history] == ["user", "assistant"]
    # an approval, then a denial with its reason
    thread = await chat_to(tab, server, protocol, transport, "guarded")
    await say(tab, '/call calculator {"expression": "2+3"}')
    await tool_state(tab, "calculator", "approval-requested")
    thread = await shown_thread(tab, thread) if protocol == "managed" else thread
    await chat_idle(tab)
    await tab.click("#transcript .approve")
    await tool_state(tab, "calculator", "output-available")
    await wait_text(tab, "#transcript .message[data-role=assistant]", "5")
    await chat_idle(tab)
    await say(tab, '/call calculator {"expression": "1/1"}')
    await tab.wait_for("() => document.querySelectorAll('#transcript [data-tool=calculator]').length === 2"
                       " && document.querySelector('#transcript [data-state=approval-requested] .deny')")
    await chat_idle(tab)
    await tab.fill("#transcript [data-state=approval-requested] .reason", "not today")
    await tab.click("#transcript [data-state=approval-requested] .deny")
    await chat_idle(tab)
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
        runs = (await client.get(f"/v1/threads/{thread}")).json()["runs"]
    tools = [p for m in history for p in m["parts"] if p["type"] == "tool-calculator"]
    assert [(p["state"], p["approval"]["approved"]) for p in tools] == [("output-available", True), ("output-denied", False)]
    assert [r["status"] for r in runs] == ["completed", "completed"]
    # a client tool answered in the page
    thread = await chat_to(tab, server, protocol, transport, "frontend")
    await say(tab, '/call ask_user {"question": "Which colour?"}')
    await tool_state(tab, "ask_user", "input-available")
    thread = await shown_thread(tab, thread) if protocol == "managed" else thread
    await chat_idle(tab)
    await tab.fill("#transcript .answer-text", "teal")
    await tab.click("#transcript .answer")
    await tool_state(tab, "ask_user", "output-available")
    await wait_text(tab, "#transcript .message[data-role=assistant]", "teal")
    await chat_idle(tab)
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
    (answer,) = [p for m in history for p in m["parts"] if p["type"] == "tool-ask_user"]
    assert answer["output"] == {"answer": "teal"}
    assert await tab.text("#chat-status") == "ready"  # a status, and no error beside it
    assert await tab.page_errors() == []


async def test_sessions_list_shows_a_thread_made_over_each_protocol(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    threads = []
    for protocol, transport in COMBOS:
        thread = await chat_to(tab, server, protocol, transport, "assistant")
        await say(tab, f"hello over {protocol} {transport}")
        await wait_text(tab, "#transcript .message[data-role=assistant]", "You said")
        threads.append(await shown_thread(tab, thread) if protocol == "managed" else thread)
        await chat_idle(tab)
    await goto(tab, server, "/sessions")
    await tab.wait_for("() => document.querySelector('#sessions')?.dataset.loaded === 'true'")
    shown = await tab.command("eval", expression="[...document.querySelectorAll('tr.session')].map((r) => r.dataset.thread)")
    assert shown == list(reversed(threads))  # newest first
    text = await tab.text("#sessions")
    for protocol, transport in COMBOS:
        assert f"hello over {protocol} {transport}" in text
    # search by title, and the status filter never shows a false empty list
    await tab.fill("#search", "ag-ui ws")
    await tab.wait_for("() => document.querySelectorAll('tr.session').length === 1")
    assert await tab.command("eval", expression="document.querySelector('tr.session').dataset.thread") == threads[3]
    await tab.fill("#search", "")
    await tab.wait_for(f"() => document.querySelectorAll('tr.session').length === {len(COMBOS)}")
    await tab.command("eval", expression="document.activeElement.blur()")
    await tab.screenshot("sessions-1280")
    await tab.command("viewport", width=390, height=844)
    await tab.screenshot("sessions-390")


def _visible(items: list[dict]) -> list[dict]:
    """What the session view must show of each history message, from the route's JSON."""
    out = []
    for m in items:
        parts = []
        for p in m["parts"]:
            if p["type"] in ("text", "reasoning"):
                parts.append({"part": p["type"], "text": p["text"]})
            elif p["type"].startswith("tool-"):
                part = {"part": "tool", "tool": p["type"][5:], "call": p["toolCallId"], "state": p["state"],
                        "input": json.dumps(p.get("input"), indent=2)}
                if "output" in p:
                    part["output"] = json.dumps(p["output"], indent=2)
                if "errorText" in p:
                    part["error"] = p["errorText"]
                approval = p.get("approval", {}).get("approved")
                part["decision"] = {True: "approved", False: "denied", None: None}[approval]
                if p["state"] == "approval-requested":
                    part["decision"] = "pending"
                part["reason"] = p.get("approval", {}).get("reason")
                parts.append(part)
        out.append({"id": m["id"], "role": m["role"], "parts": parts})
    return out


READ_VIEW = """[...document.querySelectorAll('#history .message')].map((m) => ({
  id: m.dataset.id, role: m.dataset.role,
  parts: [...m.querySelectorAll('[data-part]')].map((p) => p.dataset.part === 'tool' ? {
      part: 'tool', tool: p.dataset.tool, call: p.dataset.call, state: p.dataset.state,
      input: p.querySelector('.input pre')?.textContent,
      ...(p.querySelector('.output pre') ? {output: p.querySelector('.output pre').textContent} : {}),
      ...(p.querySelector('.error pre') ? {error: p.querySelector('.error pre').textContent} : {}),
      decision: p.querySelector('.gate')?.dataset.decision ?? null,
      reason: p.querySelector('.gate-reason')?.textContent.replace(/^ — /, '') ?? null,
    } : {part: p.dataset.part, text: p.querySelector('pre')?.textContent ?? p.textContent})}))"""


async def test_session_view_matches_the_history_route_field_for_field(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    thread = await chat_to(tab, server, "ai-sdk", "sse", "guarded")
    await say(tab, '/think weighing it\n/call calculator {"expression": "3*3"}\n/call current_time {}')
    await tab.wait_for("() => document.querySelectorAll('#transcript [data-state=approval-requested]').length === 2")
    await chat_idle(tab)
    await goto(tab, server, f"/sessions/{thread}")
    await tab.wait_for("() => document.querySelector('#view')?.dataset.loaded === 'true'")
    # both calls wait on a person: approve one, deny the other with a reason, from the session view
    await tab.click("#pending li:first-child .approve")
    await tab.wait_for("() => document.querySelector('#pending li:first-child[data-decided]')")
    await tab.fill("#pending li:last-child .reason", "no clocks")
    await tab.click("#pending li:last-child .deny")
    await tab.wait_for("() => document.querySelector('#session-status')?.dataset.status === 'completed'")
    async with server.client() as client:
        history = await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
        detail = (await client.get(f"/v1/threads/{thread}")).json()
    await tab.wait_for("(n) => document.querySelectorAll('#history .message').length === n", arg=len(history))
    assert await tab.command("eval", expression=READ_VIEW) == _visible(history)
    decisions = [p["decision"] for m in _visible(history) for p in m["parts"] if p["part"] == "tool"]
    assert sorted(decisions) == ["approved", "denied"]
    runs = await tab.command("eval", expression="[...document.querySelectorAll('tr.run')].map((r) => [r.dataset.run, r.dataset.status])")
    assert runs == [[r["runId"], r["status"]] for r in detail["runs"]]
    await tab.screenshot("session-1280")
    await tab.command("viewport", width=390, height=844)
    await tab.screenshot("session-390")


async def test_agents_and_chat_pages_render_at_both_widths(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    await goto(tab, server, "/agents")
    await tab.wait_for("() => document.querySelectorAll('.agent').length === 3")
    text = await tab.text(".agent[data-agent=guarded]")
    assert "scripted" in text and "calculator" in text and "ask" in text
    await tab.screenshot("agents-1280")
    await chat_to(tab, server, "ag-ui", "sse", "guarded")
    await say(tab, '/think about it\n/call calculator {"expression": "7+8"}')
    await tool_state(tab, "calculator", "approval-requested")
    await chat_idle(tab)
    await tab.screenshot("chat-1280")
    await tab.command("viewport", width=390, height=844)
    await tab.screenshot("chat-390")
    await goto(tab, server, "/agents")
    await tab.wait_for("() => document.querySelectorAll('.agent').length === 3")
    await tab.screenshot("agents-390")


async def test_an_unavailable_ledger_shows_the_banner_not_an_empty_list(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)

    async def unavailable(*args, **kwargs):
        raise StoreUnavailable("the ledger is down")

    server.ctx.ledger.list_thread_summaries = unavailable  # the ledger fails every read of the listing
    await goto(tab, server, "/sessions")
    banner = await tab.wait_for("() => { const b = document.querySelector('#banner'); return b && !b.hidden && b.innerText; }")
    assert banner.startswith("The server is unavailable (503 STORE_UNAVAILABLE)")
    assert await tab.command("eval", expression="document.querySelector('#sessions').dataset.loaded") == "error"
    assert await tab.command("eval", expression="document.querySelectorAll('.empty, tr.session').length") == 0
    await tab.screenshot("banner-1280")


async def test_stop_in_a_session_stops_its_held_run(browser, server):
    """The session's Stop button calls POST /v1/threads/{id}/stop: the run's own stream (held open by a
    /hold gate, read by another client) ends with RUN_ERROR STOPPED, the run is committed interrupted
    with cause stopped, and the word it had streamed stays in the conversation marked "incomplete — stopped"."""
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    streamed: list = []

    async def run() -> None:
        async with server.client() as client:
            response = await client.post("/v1/ag-ui", json=agui_body("t-stop", "r-stop", [
                {"id": "u1", "role": "user", "content": held("console-stop", 40)}]))
            streamed.extend(parse_sse(response.content))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(10):
            while not await server.ctx.ledger.get_thread("t-stop"):
                await trio.sleep(0.02)
        await goto(tab, server, "/sessions/t-stop")
        await tab.wait_for("() => document.querySelector('#session-status')?.dataset.status === 'running'"
                           " && !document.querySelector('#stop').disabled")
        await tab.click("#stop")
        await tab.wait_for("() => document.querySelector('#session-status')?.dataset.status === 'interrupted'")
    run_record = await server.ctx.ledger.get_run("r-stop")
    assert (run_record.status.value, run_record.cause) == ("interrupted", "stopped")
    assert streamed[-1]["type"] == "RUN_ERROR" and streamed[-1]["code"] == "STOPPED"
    assert await tab.command("eval", expression="document.querySelector('#delete').disabled") is False
    # the words streamed before the stop stay in the conversation, marked
    await tab.wait_for("() => document.querySelector('#history .incomplete')?.dataset.incomplete === 'stopped'")
    answer = await tab.command("eval", expression="[...document.querySelectorAll('#history [data-role=assistant]')]"
                                                  ".map(m => m.innerText.split('\\n').filter(Boolean))")
    # the role label is set in capitals; under the answer, its "fork from here"
    assert answer == [["ASSISTANT", "alpha ", "incomplete — stopped", "Fork from here"]]


async def test_a_running_session_streams_live_then_shows_the_committed_history(browser, server):
    """The session page of a running run follows it through the rejoin stream: the first word (written
    before the /hold gate) shows while the run is held, before any poll could have read it from the
    ledger; after the release the view shows the whole answer and equals the history route."""
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)

    async def run() -> None:
        async with server.client(timeout=60) as client:
            await post_agui(client, agui_body("t-live", "r-live", [
                {"id": "u1", "role": "user", "content": held("console-follow", 5)}]))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(10):
            while not await server.ctx.ledger.get_thread("t-live"):
                await trio.sleep(0.02)
        await goto(tab, server, "/sessions/t-live")
        await tab.wait_for("() => document.querySelector('#history')?.dataset.live === 'true'"
                           " && document.querySelector('#history .message[data-role=assistant] [data-part=text]')?.textContent.trim() === 'alpha'")
        assert await tab.command("eval", expression="document.querySelector('#session-status').dataset.status") == "running"
        async with server.client() as client:  # the ledger has no answer yet: the word came from the stream
            history = await read_history(client, "/v1/ai-sdk/threads/t-live/messages")
        assert [m["role"] for m in history] == ["user"]
        await release(server, "console-follow")
    await tab.wait_for("() => document.querySelector('#session-status')?.dataset.status === 'completed'"
                       " && document.querySelector('#history').dataset.live === 'false'")
    async with server.client() as client:
        history = await read_history(client, "/v1/ai-sdk/threads/t-live/messages")
    assert _visible(history)[-1]["parts"] == [{"part": "text", "text": "alpha bravo charlie delta echo"}]
    assert await tab.command("eval", expression=READ_VIEW) == _visible(history)
    assert await tab.page_errors() == []


async def test_delete_in_a_session_asks_first_then_removes_the_thread(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    async with server.client() as client:
        await post_agui(client, agui_body("t-del", "r-del", [{"id": "u1", "role": "user", "content": "remove me"}]))
    await goto(tab, server, "/sessions/t-del")
    await tab.wait_for("() => document.querySelector('#view')?.dataset.loaded === 'true'")
    await tab.click("#delete")
    await tab.wait_for("() => document.querySelector('#confirm-delete')")
    await tab.click("#cancel-delete")  # "Keep it": nothing is deleted
    await tab.wait_for("() => !document.querySelector('#confirm-delete') && document.querySelector('#delete')")
    assert await server.ctx.ledger.get_thread("t-del") is not None
    await tab.click("#delete")
    await tab.click("#confirm-delete")
    await tab.wait_for("() => location.hash === '#/sessions'")
    assert await server.ctx.ledger.get_thread("t-del") is None
    async with server.client() as client:
        assert (await client.get("/v1/ai-sdk/threads/t-del/messages")).status_code == 404


ROWS = "[...document.querySelectorAll('tr.session')].map((r) => r.dataset.thread)"


async def rows_become(tab: Tab, ids: list[str]) -> None:
    await tab.wait_for(f"(ids) => JSON.stringify({ROWS}) === JSON.stringify(ids)"
                       " && document.querySelector('#sessions').dataset.loaded === 'true'", arg=ids)


async def test_sessions_filter_by_status_and_agent_search_by_id_and_title_and_follow_live_status(browser, server):
    """A running, a waiting, a failed and a completed session: each filter shows exactly its own; the
    running one turns completed on the open page (the list re-reads every two seconds) without a reload."""
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)

    def user(content: str) -> list[dict]:
        return [{"id": "u1", "role": "user", "content": content}]

    async with server.client() as client:
        await post_agui(client, agui_body("t-done", "r-done", user("a plain question")))
        await post_agui(client, agui_body("t-fails", "r-fails", user("/fail")))
        await post_agui(client, agui_body("t-waits", "r-waits", user('/call calculator {"expression": "1+1"}')),
                        "/v1/ag-ui/agents/guarded")

    async def run() -> None:
        async with server.client() as client:
            await post_agui(client, agui_body("t-runs", "r-runs", user(held("console-live", 3))))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(run)
        with trio.fail_after(10):
            while not await server.ctx.ledger.get_thread("t-runs"):
                await trio.sleep(0.02)
        await goto(tab, server, "/sessions")
        await rows_become(tab, ["t-runs", "t-waits", "t-fails", "t-done"])
        statuses = await tab.command("eval", expression="Object.fromEntries([...document.querySelectorAll('tr.session')]"
                                                        ".map((r) => [r.dataset.thread, r.dataset.status]))")
        assert statuses == {"t-runs": "running", "t-waits": "waiting", "t-fails": "failed", "t-done": "completed"}
        for status, ids in [("running", ["t-runs"]), ("waiting", ["t-waits"]), ("failed", ["t-fails"]),
                            ("", ["t-runs", "t-waits", "t-fails", "t-done"])]:
            await tab.select("#filter-status", status)
            await rows_become(tab, ids)
        await tab.select("#filter-agent", "guarded")
        await rows_become(tab, ["t-waits"])
        await tab.select("#filter-agent", "")
        for needle, ids in [("t-fa", ["t-fails"]), ("PLAIN", ["t-done"]), ("no such session", [])]:
            await tab.fill("#search", needle)
            await rows_become(tab, ids)
        assert await tab.text("#sessions") == "No sessions match."
        await tab.fill("#search", "t-runs")
        await rows_become(tab, ["t-runs"])
        await tab.command("eval", expression="window.__samePage = true")
        await release(server, "console-live")
    await tab.wait_for("() => document.querySelector('tr.session[data-thread=\"t-runs\"]')?.dataset.status === 'completed'")
    assert await tab.command("eval", expression="window.__samePage") is True  # no reload, no navigation
    assert await tab.page_errors() == []


FOCUSED = """(() => { const e = document.activeElement;
  return e === document.body || !e ? 'body' : e.id || (e.dataset.nav && `nav:${e.dataset.nav}`)
    || (e.closest('tr.session') && 'session-link') || [...e.classList].join('.') || e.tagName.toLowerCase(); })()"""


async def tab_to(tab: Tab, selector: str, limit: int = 40) -> list[str]:
    """Press Tab until ``selector`` has the focus; what had it on the way."""
    seen = []
    for _ in range(limit):
        await tab.press("Tab")
        seen.append(await tab.command("eval", expression=FOCUSED))
        if await tab.command("eval", expression=f"document.activeElement.matches({json.dumps(selector)})"):
            return seen
    raise AssertionError(f"Tab never reached {selector}: {seen}")


async def test_the_main_controls_are_reachable_and_work_from_the_keyboard(browser, server):
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    async with server.client() as client:
        await post_agui(client, agui_body("t-keys", "r-keys", [{"id": "u1", "role": "user", "content": "by keyboard"}]))
    await goto(tab, server, "/sessions")
    await tab.wait_for("() => document.querySelector('#sessions')?.dataset.loaded === 'true'")
    await tab.command("eval", expression="document.activeElement?.blur()")
    seen = await tab_to(tab, "tr.session a")
    assert seen == ["brand", "nav:sessions", "nav:chat", "nav:agents", "filter-agent", "filter-status", "search",
                    "session-link"]
    await tab.press("Enter")  # opens the session
    await tab.wait_for("() => document.querySelector('#view')?.dataset.loaded === 'true'"
                       " && document.querySelector('#view').dataset.thread === 't-keys'")
    await tab.command("eval", expression="document.activeElement?.blur()")
    assert "delete" in await tab_to(tab, "#delete")
    await tab.press("Space")  # asks first; the confirmation has the focus, Tab reaches "Keep it"
    await tab.wait_for("() => document.activeElement?.id === 'confirm-delete'")
    await tab.press("Tab")
    await tab.press("Enter")
    await tab.wait_for("() => document.querySelector('#delete') && !document.querySelector('#confirm-delete')")
    assert await server.ctx.ledger.get_thread("t-keys") is not None

    await tab.command("eval", expression="document.activeElement?.blur()")
    await tab_to(tab, "[data-nav=chat]")
    await tab.press("Enter")
    await tab.wait_for("() => document.querySelector('#chat-status')?.dataset.status === 'ready'")
    await tab.select("#chat-agent", "guarded")
    await tab.command("eval", expression="document.activeElement?.blur()")
    seen = await tab_to(tab, "#chat-input")
    assert seen[-5:] == ["chat-agent", "chat-protocol", "chat-transport", "new-chat", "chat-input"]
    for key in '/call calculator {"expression": "4*4"}':
        await tab.press(key if key != " " else "Space")
    await tab_to(tab, "#chat-send")
    await tab.press("Space")
    await tool_state(tab, "calculator", "approval-requested")
    await chat_idle(tab)
    await tab.command("eval", expression="document.activeElement?.blur()")
    await tab_to(tab, "#transcript .approve")
    await tab.press("Enter")
    await tool_state(tab, "calculator", "output-available")
    await wait_text(tab, "#transcript .message[data-role=assistant]", "16")
    assert await tab.page_errors() == []


FITS = "document.documentElement.scrollWidth <= window.innerWidth"
WIDER = """[...document.querySelectorAll('body *')].filter((e) => e.getBoundingClientRect().right > innerWidth)
  .slice(0, 5).map((e) => `${e.tagName}.${e.className}#${e.id} ${Math.round(e.getBoundingClientRect().right)}`)"""


async def fits(tab: Tab, where: object) -> None:
    if not await tab.command("eval", expression=FITS):
        raise AssertionError(f"{where}: wider than the screen: {await tab.command('eval', expression=WIDER)}")


async def test_every_page_fits_1280_and_390_px_without_horizontal_scroll(browser, server):
    tab = browser.tab("console")
    thread = await chat_to(tab, server, "ai-sdk", "sse", "guarded")
    await say(tab, '/think a long thought ' + "x" * 300 + '\n/call calculator {"expression": "' + "1+" * 60 + '1"}')
    await tool_state(tab, "calculator", "approval-requested")
    await chat_idle(tab)
    pages = {"sessions": "() => document.querySelector('#sessions')?.dataset.loaded === 'true'",
             f"sessions/{thread}": "() => document.querySelector('#view')?.dataset.loaded === 'true'",
             "agents": "() => document.querySelectorAll('.agent').length === 3",
             "chat?agent=guarded": "() => document.querySelector('#chat-status')?.dataset.status === 'ready'"}
    for width, height in [(1280, 900), (390, 844)]:
        await tab.command("viewport", width=width, height=height)
        for path, ready in pages.items():
            await goto(tab, server, f"/{path}")
            await tab.wait_for(ready)
            await fits(tab, (width, path))
        # the chat with its tool call, as it was left
        await chat_to(tab, server, "ai-sdk", "sse", "guarded")
        await say(tab, '/call calculator {"expression": "' + "2*" * 80 + '2"}')
        await tool_state(tab, "calculator", "approval-requested")
        await fits(tab, (width, "chat"))


BOXES = """(() => { const r = (s) => { const b = document.querySelector(s).getBoundingClientRect();
  return [Math.round(b.left), Math.round(b.top), Math.round(b.width), Math.round(b.height)]; };
  return JSON.stringify({transcript: r('#transcript'), input: r('#chat-input'), send: r('#chat-send'),
                         scrollY: window.scrollY}); })()"""


@pytest.mark.parametrize("width", [1280, 390])
async def test_nothing_moves_while_a_stream_renders(browser, server, width):
    """Every animation frame from before the question until the answer is committed, the transcript's
    box, the message box and the send button stay where they were, and the page does not scroll; the
    stream is held open (a /hold gate) while the frames are sampled, then released."""
    tab = browser.tab("console")
    await tab.command("viewport", width=width, height=800)
    await chat_to(tab, server, "ai-sdk", "sse", "assistant")
    await say(tab, "/words 200")  # a transcript taller than the screen
    await chat_idle(tab)
    gate = f"console-steady-{width}"
    await tab.command("eval", expression=f"""(() => {{ window.__boxes = new Set(); window.__sampling = true;
      const f = () => {{ window.__boxes.add({BOXES}); if (window.__sampling) requestAnimationFrame(f); }}; f(); }})()""")
    await say(tab, held(gate, 60))
    await tab.wait_for("() => document.querySelector('#chat-status').dataset.status === 'streaming'"
                       " && document.querySelectorAll('#transcript .message[data-role=assistant]').length === 2")
    async with trio.open_nursery() as nursery:
        nursery.start_soon(release, server, gate)
        await chat_idle(tab)
    boxes = await tab.command("eval", expression="window.__sampling = false, [...window.__boxes]")
    assert len(boxes) == 1, boxes
    # the newest words are in sight: the transcript follows the stream to its end
    assert await tab.command("eval", expression="(() => { const t = document.querySelector('#transcript');"
                                                " return t.scrollHeight - t.scrollTop - t.clientHeight < 4; })()")


async def test_agents_page_shows_mcp_tools_with_their_server_kind_and_permission(browser, tmp_path):
    """Two MCP servers (the suite's demo server over stdio, twice: one allowed, one asking a person);
    the agent's tools on the page are the /v1/agents listing, row for row."""
    from tests.engine.test_mcp import MCP_AGENT, stdio_demo, with_mcp

    config = with_mcp(tmp_path, {"demo": stdio_demo(tmp_path / "demo.log"),
                                 "gated": stdio_demo(tmp_path / "gated.log", permission="ask")},
                      mcp={**MCP_AGENT, "tools": ["calculator", "demo__echo", "gated__pid"]})
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    async with live_server(config) as mcp_server:
        async with mcp_server.client() as client:
            listing = (await client.get("/v1/agents")).json()
        (agent,) = [a for a in listing["agents"] if a["id"] == "mcp"]
        await goto(tab, mcp_server, "/agents")
        await tab.wait_for("() => document.querySelectorAll('.agent[data-agent=mcp] tr[data-tool]').length === 3")
        rows = await tab.command("eval", expression="""[...document.querySelectorAll('.agent[data-agent=mcp] tr[data-tool]')]
          .map((r) => [r.dataset.tool, r.querySelector('.kind').firstChild.textContent,
                       r.querySelector('.mcp-server')?.textContent ?? null, r.querySelector('.permission').innerText])""")
        assert rows == [[t["name"], t["kind"], f"via {t['name'].split('__')[0]}" if t["kind"] == "mcp" else None,
                         t["permission"]] for t in agent["tools"]]
        assert sorted(map(tuple, rows)) == [("calculator", "server", None, "allow"),
                                           ("demo__echo", "mcp", "via demo", "allow"),
                                           ("gated__pid", "mcp", "via gated", "ask")]
        await tab.screenshot("agents-mcp-1280")


#: each alternatives navigator of the conversation shown: the message it sits under, and its count
NAVIGATORS = ("[...document.querySelectorAll('#history .branch-nav')]"
              ".map((n) => [n.closest('[data-id]')?.dataset.id ?? null, n.querySelector('.branch-count').textContent])")


async def shown_branch(tab: Tab, branch: int) -> None:
    await tab.wait_for("(b) => document.querySelector('#history')?.dataset.branch === String(b)"
                       " && document.querySelector('#view')?.dataset.loaded === 'true'", arg=branch)


@pytest.mark.slow
async def test_a_session_that_branched_shows_its_alternatives_and_forks_from_a_message(browser, server):
    """Issue 33 (docs/branches.md): a thread whose answer to "second" was regenerated (branch 1) and whose
    "second" was then edited (branch 2, active). Its session shows a "‹ 2 / 2 ›" navigator under the edited
    message; "previous" reads the branch that went the other way (branch 1, the newest), where the
    regenerated answer has its own navigator, and "previous" there reads branch 0; each view equals the
    history route with ?branch=N. "Fork from here" on a message of branch 1 (not the active one) and on an
    answer with a tool call (all of its turn) each open a new thread holding that path up to there."""
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    thread = "t-branches"
    async with server.client() as client:
        await post_agui(client, agui_body(thread, "r1", [user("u1", call("calculator", expression="6*7"))]))
        await post_agui(client, agui_body(thread, "r2", [user("u2", "second")]))
        before = await read_history(client, f"/v1/ag-ui/threads/{thread}/messages")
        upto = [m["id"] for m in before].index("u2") + 1
        regenerate = {"awaken": {"regenerate": True}}
        await post_agui(client, agui_body(thread, "r3", before[:upto], forwardedProps=regenerate))
        edit = {"awaken": {"edit": True}}
        await post_agui(client, agui_body(thread, "r4", [*before[:upto - 1], user("u2", "second, edited")],
                                          forwardedProps=edit))
        paths = [await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages", branch) for branch in range(3)]
        ag_ui = [await read_history(client, f"/v1/ag-ui/threads/{thread}/messages", branch) for branch in range(3)]
        listing = (await client.get(f"/v1/threads/{thread}/branches")).json()
    assert listing["activeBranch"] == 2
    answer = [m["id"] for m in paths[0]][1]  # the first answer: a tool call, its result and a text
    assert [(b["branch"], b["parent"], b["reason"]) for b in listing["items"]] == [
        (0, None, "root"), (1, 0, "regenerate"), (2, 0, "edit")]
    assert [m["id"] for m in paths[2]][:3] == ["u1", answer, "u2"] and [m["id"] for m in paths[1]][:3] == ["u1", answer, "u2"]
    await goto(tab, server, f"/sessions/{thread}")
    await shown_branch(tab, 2)
    assert await tab.command("eval", expression=READ_VIEW) == _visible(paths[2])
    assert await tab.command("eval", expression=NAVIGATORS) == [["u2", "2 / 2"]]
    assert await tab.text("#session-branch") == "branch 2 of 3"
    assert await tab.command("eval", expression="document.querySelector('#branch-note')") is None
    # previous, under "second, edited": the branch that kept "second" (the newest: the regenerated answer)
    await tab.click("#history li[data-id=u2] .branch-prev")
    await shown_branch(tab, 1)
    assert await tab.command("eval", expression=READ_VIEW) == _visible(paths[1])
    assert await tab.command("eval", expression=NAVIGATORS) == [["u2", "1 / 2"], [paths[1][3]["id"], "2 / 2"]]
    assert (await tab.text("#branch-note")).startswith("You are reading branch 1; the conversation continues on branch 2.")
    assert await tab.command("eval", expression="location.hash") == f"#/sessions/{thread}?branch=1"
    await tab.command("eval", expression="document.activeElement.blur()")
    await tab.screenshot("branches-1280")
    await tab.command("viewport", width=390, height=844)
    await tab.screenshot("branches-390")
    await tab.command("viewport", width=1280, height=900)
    # previous, under the regenerated answer: the first answer, on branch 0
    await tab.click(f"#history li[data-id='{paths[1][3]['id']}'] .branch-prev")
    await shown_branch(tab, 0)
    assert await tab.command("eval", expression=READ_VIEW) == _visible(paths[0])
    assert await tab.command("eval", expression=NAVIGATORS) == [["u2", "1 / 2"], [paths[0][3]["id"], "1 / 2"]]
    await tab.click("#show-active")
    await shown_branch(tab, 2)
    assert await tab.command("eval", expression="location.hash") == f"#/sessions/{thread}"
    # the branch list names each branch and reads it; fork from "second" as branch 1 has it: a new thread of
    # that path up to there
    listed = await tab.command("eval", expression="[...document.querySelectorAll('#branches li')]"
                                                  ".map((li) => [li.dataset.branch, li.dataset.active, li.innerText])")
    assert [(b, active) for b, active, _ in listed] == [("0", "false"), ("1", "false"), ("2", "true")]
    assert "a new answer, after u2" in listed[1][2] and "an edited message, after" in listed[2][2]
    await tab.click("#branches li[data-branch='1'] .show-branch")
    await shown_branch(tab, 1)
    await tab.click("#history li[data-id=u2] .fork")
    forked = await tab.wait_for("(t) => { const v = document.querySelector('#view');"
                                " return v.dataset.thread !== t && v.dataset.loaded === 'true' ? v.dataset.thread : null; }",
                                arg=thread)
    async with server.client() as client:
        assert await read_history(client, f"/v1/ag-ui/threads/{forked}/messages") == ag_ui[1][:[m["id"] for m in ag_ui[1]].index("u2") + 1]
        assert [b["branch"] for b in (await client.get(f"/v1/threads/{forked}/branches")).json()["items"]] == [0]
    assert await tab.command("eval", expression=READ_VIEW) == _visible(paths[1][:3])
    # fork from the first answer on the active branch: its whole turn (call, result, text) comes along
    await goto(tab, server, f"/sessions/{thread}")
    await shown_branch(tab, 2)
    await tab.click(f"#history li[data-id='{answer}'] .fork")
    second_fork = await tab.wait_for("(seen) => { const v = document.querySelector('#view');"
                                     " return !seen.includes(v.dataset.thread) && v.dataset.loaded === 'true'"
                                     " ? v.dataset.thread : null; }", arg=[thread, forked])
    async with server.client() as client:
        assert await read_history(client, f"/v1/ag-ui/threads/{second_fork}/messages") == ag_ui[2][:[m["id"] for m in ag_ui[2]].index("u2")]
    assert await tab.command("eval", expression=READ_VIEW) == _visible(paths[2][:2])
    assert await tab.page_errors() == []
