"""Per-user threads in headless Chromium (issue 13 items 3 and 6), ``[auth] mode = "tokens"``.

The useChat and HttpAgent pages (tests/browser/pages/) run on another origin than the server and hold
alice's token: ``DefaultChatTransport`` and ``HttpAgent`` carry it in their ``headers`` option, and the
pages read history and list ``GET /v1/threads`` with it. They see alice's threads and never bob's:
bob's thread is not in the list, its history is 404 and a run on it is refused as not found.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_harness import Tab, server_history
from tests.builders import agui_body, bearer, default_config_data, live_server, make_config, parse_sse

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef"}


@pytest.fixture
async def auth_server(browser, tmp_path, monkeypatch):
    tokens = []
    for name, key in KEYS.items():
        monkeypatch.setenv(f"AWAKEN_TEST_{name.upper()}_KEY", key)
        tokens.append({"name": name, "env": f"AWAKEN_TEST_{name.upper()}_KEY", "role": "user", "subject": name})
    server = dict(default_config_data()["server"], cors_origins=[browser.pages_origin])
    async with live_server(make_config(tmp_path, server=server, auth={"mode": "tokens", "tokens": tokens})) as srv:
        async with srv.client() as client:  # bob's thread, which alice's pages must never see
            response = await client.post("/v1/ag-ui", headers=bearer(KEYS["bob"]), json=agui_body(
                "bob-secret", "r-bob", [{"id": "b1", "role": "user", "content": "bob's secret"}]))
            assert parse_sse(response.content)[-1]["type"] == "RUN_FINISHED"
        yield srv


async def open_page(browser, server, page: str, thread: str) -> Tab:  # noqa: ANN001
    tab = browser.tab(page)
    await tab.open(page, server=server.base_url, thread=thread, agent="assistant", token=KEYS["alice"])
    await tab.wait_for_state(f"s => s.page === '{page}' && s.thread === {thread!r}")
    return tab


async def listed(tab: Tab) -> dict[str, Any]:
    return await tab.command("eval", expression="window.__listThreads()")


async def test_a_page_with_a_users_token_sees_only_that_users_threads(browser, auth_server):
    chat = await open_page(browser, auth_server, "usechat", "alice-chat")
    assert await listed(chat) == {"status": 200, "ids": []}
    await chat.fill("#input", "hello as alice")
    await chat.click("#send")
    state = await chat.wait_for_state("s => s.messages.length === 2 && s.status === 'ready'")
    assert state["error"] is None
    assert state["messages"] == await server_history(auth_server, "ai-sdk", "alice-chat", bearer(KEYS["alice"]))
    assert await listed(chat) == {"status": 200, "ids": ["alice-chat"]}

    agent = await open_page(browser, auth_server, "httpagent", "alice-agent")
    await agent.fill("#input", "hello again")
    await agent.click("#send")
    state = await agent.wait_for_state("s => s.status === 'ready' && s.messages.length === 2")
    assert state["errors"] == []
    assert state["messages"] == await server_history(auth_server, "ag-ui", "alice-agent", bearer(KEYS["alice"]))
    assert await listed(agent) == {"status": 200, "ids": ["alice-agent", "alice-chat"]}
    assert await chat.page_errors() == [] and await agent.page_errors() == []


async def test_another_users_thread_is_not_found_from_the_page(browser, auth_server):
    chat = await open_page(browser, auth_server, "usechat", "bob-secret")
    assert (await chat.state())["historyStatus"] == 404  # bob's history is not there for alice
    await chat.fill("#input", "let me in")
    await chat.click("#send")
    state = await chat.wait_for_state("s => s.status === 'error'")
    assert "UNKNOWN_THREAD" in state["error"]  # useChat shows the 404 body
    agent = await open_page(browser, auth_server, "httpagent", "bob-secret")
    assert (await agent.state())["historyStatus"] == 404
    assert "bob-secret" not in (await listed(agent))["ids"]
    async with auth_server.client(headers=bearer(KEYS["bob"])) as client:
        items = (await client.get("/v1/ag-ui/threads/bob-secret/messages")).json()["items"]
    assert [m["content"] for m in items if m["role"] == "user"] == ["bob's secret"]
