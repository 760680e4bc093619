"""AG-UI ``HttpAgent`` (``@ag-ui/client``) in headless Chromium, from another origin (issue 13 item 6).

The page (tests/browser/pages/httpagent.ts) is served from ``http://localhost:<port>`` and posts to
``http://127.0.0.1:<port>/v1/ag-ui/agents/{agent}``: every request is cross-origin. Gate decisions
(tool messages with ids ``decision-…``) are the client's answers to a gate and are not history; the
server's tool result is. Everything else the page holds equals the history route.
"""

from __future__ import annotations

from typing import Any

from tests.browser_harness import Tab, send, server_history, settled

CALC = '/call calculator {"expression":"6*7"}'


async def open_agent(browser, server, thread: str, agent: str = "assistant") -> Tab:  # noqa: ANN001
    tab = browser.tab("httpagent")
    await tab.open("httpagent", server=server.base_url, thread=thread, agent=agent)
    await tab.wait_for_state("s => s.page === 'httpagent' && s.thread === " + repr(thread))
    return tab


def last_text(state: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(state["messages"]) if m["role"] == "assistant" and m.get("content"))


def without_decisions(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [m for m in messages if not m["id"].startswith("decision-")]


async def test_text(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-text")
    assert (await tab.state())["historyStatus"] == 404
    await send(tab, "hello from the browser")
    state = await settled(tab, "s => s.messages.length === 2")
    assert await tab.text("#messages") == 'user\nhello from the browser\nassistant\nYou said: "hello from the browser".'
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", "ha-text")
    await tab.screenshot("httpagent-text")
    assert await tab.page_errors() == []


async def test_server_tool(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-tool")
    await send(tab, CALC)
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content")
    assert await tab.text(".tool[data-tool=calculator][data-state=done]") == (
        'calculator({"expression":"6*7"}) → {"result":42}')
    assert last_text(state) == 'Here is what the tools said: calculator returned {"result":42}.'
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", "ha-tool")
    await tab.screenshot("httpagent-server-tool")


async def test_approval_runs_the_tool(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-approve", agent="guarded")
    await send(tab, CALC)
    await tab.click(".tool[data-tool=calculator][data-state=pending] button.approve")
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content")
    assert last_text(state) == 'Here is what the tools said: calculator returned {"result":42}.'
    # the server's result follows the page's decision and is what the page shows
    assert await tab.text(".tool[data-tool=calculator]") == 'calculator({"expression":"6*7"}) → {"result":42}'
    assert without_decisions(state["messages"]) == await server_history(cross_origin_server, "ag-ui", "ha-approve")
    runs = await cross_origin_server.ctx.ledger.list_runs("ha-approve")
    assert [(r.status.value, r.steps) for r in runs] == [("completed", 2)]
    await tab.screenshot("httpagent-approved")


async def test_denial_does_not_run_the_tool(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-deny", agent="guarded")
    await send(tab, CALC)
    await tab.click(".tool[data-tool=calculator][data-state=pending] button.deny")
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content")
    assert last_text(state) == ("Here is what the tools said: calculator failed: denied: the user did not allow "
                                "this call: the user said no.")
    items = await server_history(cross_origin_server, "ag-ui", "ha-deny")
    (result,) = [m for m in items if m["role"] == "tool"]
    assert result["error"] == result["content"] and "42" not in result["content"]
    # live, TOOL_CALL_RESULT carries the denial as content (AG-UI events have no error field);
    # history marks the same message with ``error``
    assert await tab.text(".tool[data-tool=calculator]") == (
        'calculator({"expression":"6*7"}) → denied: the user did not allow this call: the user said no')
    assert [m["id"] for m in without_decisions(state["messages"])] == [m["id"] for m in items]
    await tab.screenshot("httpagent-denied")


async def test_client_tool_answered_by_the_page(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-client", agent="frontend")
    await send(tab, '/call ask_user {"question":"Favourite colour?"}')
    await tab.fill(".tool[data-tool=ask_user][data-state=pending] input.answer-text", "blue")
    await tab.click(".tool[data-tool=ask_user] button.answer")
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content")
    assert last_text(state) == 'Here is what the tools said: ask_user returned {"answer":"blue"}.'
    assert await tab.text(".tool[data-tool=ask_user]") == (
        'ask_user({"question":"Favourite colour?"}) → {"answer":"blue"}')
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", "ha-client")


async def test_history_reload_shows_the_conversation(browser, cross_origin_server):
    tab = await open_agent(browser, cross_origin_server, "ha-reload")
    await send(tab, "first")
    await settled(tab, "s => s.messages.length === 2")
    await send(tab, CALC)
    await settled(tab, "s => s.messages.length === 6")
    before = await tab.text("#messages")
    await tab.reload()
    state = await tab.wait_for_state("s => s.historyStatus === 200 && s.messages.length === 6")
    assert await tab.text("#messages") == before
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", "ha-reload")
    await tab.screenshot("httpagent-reloaded")
    # the reloaded agent goes on: it resends the history it loaded, the server keeps only the new turn
    await send(tab, "after the reload")
    state = await settled(tab, "s => s.messages.length === 8")
    assert last_text(state) == 'You said: "after the reload".'
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", "ha-reload")
    assert await tab.page_errors() == []
