"""useChat in headless Chromium, from another origin (issue 13 item 6, issue 17 item 6): every flow runs
with AI SDK v6 (``usechat``: ai@6, @ai-sdk/react 3) and v7 (``usechat7``: ai@7, @ai-sdk/react 4).

The page (tests/browser/pages/common_usechat.tsx) is served from ``http://localhost:<port>`` and its
``DefaultChatTransport`` posts to ``http://127.0.0.1:<port>/v1/ai-sdk/agents/{agent}/chat``: every
request is cross-origin and passes only through CORS. Each test types into the page, clicks its
buttons, waits for what the page shows, and compares the page's messages with the history route.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_harness import Tab, send, server_history
from tests.builders import default_config_data, live_server, make_config

CALC = '/call calculator {"expression":"6*7"}'


#: the useChat pages, one per AI SDK generation
PAGES = ["usechat", "usechat7"]


async def open_chat(browser, server, thread: str, agent: str = "assistant", page: str = "usechat") -> Tab:  # noqa: ANN001
    tab = browser.tab(page)
    await tab.open(page, server=server.base_url, thread=thread, agent=agent)
    await tab.wait_for_state(f"s => s.page === '{page}' && s.thread === " + repr(thread))
    return tab


async def settled(tab: Tab, messages: int) -> dict[str, Any]:
    """The page's state once it holds ``messages`` messages and the chat is idle again."""
    state = await tab.wait_for_state(f"s => s.messages.length === {messages} && s.status === 'ready'")
    assert state["error"] is None
    return state


def tool_part(message: dict[str, Any]) -> dict[str, Any]:
    (part,) = [p for p in message["parts"] if p["type"].startswith("tool-")]
    return part


@pytest.mark.parametrize("page", PAGES)
async def test_text(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-text-{page}", page=page)
    assert (await tab.state())["historyStatus"] == 404
    await send(tab, "hello from the browser")
    state = await settled(tab, 2)
    shown = await tab.text("#messages")
    assert shown == 'user\nhello from the browser\nassistant\nYou said: "hello from the browser".'
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-text-{page}")
    await tab.screenshot(f"{page}-text")
    assert await tab.page_errors() == []


@pytest.mark.parametrize("page", PAGES)
async def test_server_tool(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-tool-{page}", page=page)
    await send(tab, CALC)
    state = await settled(tab, 2)
    part = tool_part(state["messages"][1])
    assert (part["state"], part["input"], part["output"]) == ("output-available", {"expression": "6*7"}, {"result": 42})
    shown = await tab.text("#messages .message[data-role=assistant]")
    assert shown == ('assistant\ncalculator({"expression":"6*7"}) → {"result":42}\n'
                     'Here is what the tools said: calculator returned {"result":42}.')
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-tool-{page}")
    await tab.screenshot(f"{page}-server-tool")


@pytest.mark.parametrize("page", PAGES)
async def test_approval_runs_the_tool(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-approve-{page}", agent="guarded", page=page)
    await send(tab, CALC)
    await tab.wait_for("() => document.querySelector('.tool[data-state=approval-requested] button.approve')")
    await tab.screenshot(f"{page}-approval-requested")
    await tab.click("button.approve")
    state = await tab.wait_for_state("s => s.status === 'ready' && s.messages[1].parts.at(-1).type === 'text'")
    part = tool_part(state["messages"][1])
    assert (part["state"], part["output"], part["approval"]["approved"]) == ("output-available", {"result": 42}, True)
    assert (await tab.text(".message[data-role=assistant] .part.text")) == (
        'Here is what the tools said: calculator returned {"result":42}.')
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-approve-{page}")
    runs = await cross_origin_server.ctx.ledger.list_runs(f"uc-approve-{page}")
    assert [r.status.value for r in runs] == ["completed"]


@pytest.mark.parametrize("page", PAGES)
async def test_denial_does_not_run_the_tool(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-deny-{page}", agent="guarded", page=page)
    await send(tab, CALC)
    await tab.click(".tool[data-state=approval-requested] button.deny")
    state = await tab.wait_for_state("s => s.status === 'ready' && s.messages[1].parts.at(-1).type === 'text'")
    part = tool_part(state["messages"][1])
    assert (part["state"], part["approval"]["approved"]) == ("output-denied", False)
    assert "output" not in part
    shown = await tab.text(".message[data-role=assistant]")
    assert "denied: the user did not allow this call" in shown and "42" not in shown
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-deny-{page}")
    await tab.screenshot(f"{page}-denied")


@pytest.mark.parametrize("page", PAGES)
async def test_client_tool_answered_by_the_page(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-client-{page}", agent="frontend", page=page)
    await send(tab, '/call ask_user {"question":"Favourite colour?"}')
    await tab.fill(".tool[data-tool=ask_user][data-state=input-available] input.answer-text", "blue")
    await tab.click(".tool[data-tool=ask_user] button.answer")
    state = await tab.wait_for_state("s => s.status === 'ready' && s.messages[1].parts.at(-1).type === 'text'")
    part = tool_part(state["messages"][1])
    assert (part["state"], part["output"]) == ("output-available", {"answer": "blue"})
    assert (await tab.text(".message[data-role=assistant] .part.text")) == (
        'Here is what the tools said: ask_user returned {"answer":"blue"}.')
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-client-{page}")


@pytest.mark.parametrize("page", PAGES)
async def test_history_reload_shows_the_conversation(browser, cross_origin_server, page):
    tab = await open_chat(browser, cross_origin_server, f"uc-reload-{page}", page=page)
    await send(tab, "first")
    await settled(tab, 2)
    await send(tab, CALC)
    await settled(tab, 4)
    before = await tab.text("#messages")
    await tab.reload()
    state = await tab.wait_for_state("s => s.historyStatus === 200 && s.messages.length === 4")
    assert await tab.text("#messages") == before
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-reload-{page}")
    await tab.screenshot(f"{page}-reloaded")
    # the reloaded chat goes on: it resends the history it loaded, the server keeps only the new turn
    await send(tab, "after the reload")
    state = await settled(tab, 6)
    assert state["messages"][-1]["parts"][-1]["text"] == 'You said: "after the reload".'
    assert state["messages"] == await server_history(cross_origin_server, "ai-sdk", f"uc-reload-{page}")
    assert await tab.page_errors() == []


async def answered_again(tab: Tab, count: int, before: str) -> dict[str, Any]:
    """The page's state once it holds ``count`` messages again, the last one no longer ``before``."""
    state = await tab.wait_for_state(f"s => s.status === 'ready' && s.messages.length === {count}"
                                     f" && s.messages.at(-1).id !== {before!r}")
    assert state["error"] is None
    return state


def texts(messages: list[dict[str, Any]]) -> list[str]:
    return ["".join(p["text"] for p in m["parts"] if p["type"] == "text") for m in messages]


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
async def test_regenerate_and_edit_branch_the_thread(browser, cross_origin_server, page):
    """Issue 33 (docs/branches.md), one page: ``regenerate()`` (the last answer), ``regenerate({messageId})``
    (an earlier answer) and ``sendMessage({text, messageId})`` (an earlier user message) each continue on a
    new branch. After each, the history route's active path is what useChat holds, every earlier path
    is still readable with ``?branch=N``, and the thread lists its branches; a reload shows the active path."""
    server, thread = cross_origin_server, f"uc-branches-{page}"
    tab = await open_chat(browser, server, thread, page=page)
    await send(tab, "first")
    await settled(tab, 2)
    await send(tab, "second")
    paths = [(await settled(tab, 4))["messages"]]
    # regenerate() the last answer: a new answer to "second"
    await tab.click("#regenerate-last")
    paths.append((await answered_again(tab, 4, paths[0][3]["id"]))["messages"])
    assert paths[1][:3] == paths[0][:3] and texts(paths[1])[3] == 'You said: "second".'
    # regenerate({messageId}) an earlier answer: the conversation goes on from "first"
    await tab.click(f"#controls li[data-id='{paths[0][1]['id']}'] button.regenerate")
    paths.append((await answered_again(tab, 2, paths[0][1]["id"]))["messages"])
    assert paths[2][0] == paths[0][0] and texts(paths[2]) == ["first", 'You said: "first".']
    await send(tab, "third")
    paths[2] = (await settled(tab, 4))["messages"]
    # sendMessage({text, messageId}) on "third": the same id, new words, a new answer
    edited = paths[2][2]["id"]
    await tab.click(f"#controls li[data-id='{edited}'] button.edit")
    await tab.fill(f"#controls li[data-id='{edited}'] input.edit-text", "third, edited")
    await tab.click(f"#controls li[data-id='{edited}'] button.edit-save")
    paths.append((await answered_again(tab, 4, paths[2][3]["id"]))["messages"])
    assert paths[3][:2] == paths[2][:2] and paths[3][2]["id"] == edited
    assert texts(paths[3])[2:] == ["third, edited", 'You said: "third, edited".']
    assert paths[3] == await server_history(server, "ai-sdk", thread)
    for branch, path in enumerate(paths):
        assert await server_history(server, "ai-sdk", thread, branch=branch) == path, branch
    async with server.client() as client:
        listing = (await client.get(f"/v1/threads/{thread}/branches")).json()
    assert listing["activeBranch"] == 3
    assert [(b["branch"], b["parent"], b["forkSeq"], b["forkMessageId"], b["reason"]) for b in listing["items"]] == [
        (0, None, 0, None, "root"), (1, 0, 3, paths[0][2]["id"], "regenerate"),
        (2, 0, 1, paths[0][0]["id"], "regenerate"), (3, 2, 6, paths[2][1]["id"], "edit")]
    await tab.reload()
    state = await tab.wait_for_state("s => s.historyStatus === 200 && s.messages.length === 4")
    assert state["messages"] == paths[3]
    await tab.screenshot(f"{page}-branches")
    assert await tab.page_errors() == []


async def test_a_page_on_an_origin_not_allowed_is_blocked(browser, tmp_path):
    """The same page against a server whose cors_origins lacks the page's origin: Chromium itself
    refuses to hand the page the answer, so CORS is what the tests above pass through."""
    server = dict(default_config_data()["server"], cors_origins=["http://localhost:1"])
    async with live_server(make_config(tmp_path, server=server)) as srv:
        tab = browser.tab("usechat")
        await tab.open("usechat", server=srv.base_url, thread="uc-blocked", agent="assistant")
        state = await tab.wait_for_state("s => s.fatal")
    assert state["fatal"] == "TypeError: Failed to fetch"
    assert any("has been blocked by CORS policy" in e for e in await tab.console_errors())
