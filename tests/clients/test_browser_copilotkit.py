"""A CopilotKit app (``@copilotkit/react-core`` 1.74, its v2 provider) in headless Chromium, from another
origin (issue 14 item 5): through ``runtimeUrl`` (``/v1/copilotkit``) and through a direct ``HttpAgent``
for ``/v1/ag-ui/agents/{id}`` (``agents__unsafe_dev_only``), tools declared the documented way.

The page (tests/browser/pages/copilotkit.tsx) renders the conversation with ``CopilotChat``, declares
``pick_color`` with ``useFrontendTool`` (answered by the page), ``calculator`` with
``useHumanInTheLoop`` (Approve / Deny), the favorite color with ``useAgentContext``, and writes the
agent's shared state with ``agent.setState``. Each test runs in both modes.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.browser_harness import Tab, server_history, settled
from tests.builders import default_config_data, live_server, make_config, release

CALC = '/call calculator {"expression":"6*7"}'
MODES = pytest.mark.parametrize("mode", ["runtime", "direct"])


async def open_app(browser, server, thread: str, mode: str, agent: str = "assistant") -> Tab:  # noqa: ANN001
    tab = browser.tab(f"ck-{mode}")
    await tab.open("copilotkit", server=server.base_url, thread=thread, agent=agent, mode=mode)
    await tab.wait_for_state(f"s => s.page === 'copilotkit' && s.ready && s.thread === {thread!r}")
    return tab


async def send(tab: Tab, text: str) -> None:
    await tab.fill("[data-testid=copilot-chat-textarea]", text)
    await tab.click("[data-testid=copilot-send-button]")


def answered(n: int) -> str:
    """A predicate: the conversation has ``n`` messages and ends with an assistant's text."""
    return (f"s => s.messages.length === {n} && s.messages.at(-1).role === 'assistant' "
            "&& s.messages.at(-1).content")


def last_text(state: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(state["messages"]) if m["role"] == "assistant" and m.get("content"))


@MODES
async def test_text_streams_in(browser, cross_origin_server, mode):
    """The run is held after its first word (scripted ``/hold``): the page shows it while the run goes on."""
    thread = f"ck-text-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await send(tab, f"hello from CopilotKit\n/hold {thread}")
    partial = await tab.wait_for_state("s => s.running && s.messages.length === 2 && s.messages[1].content")
    assert partial["messages"][1]["content"].strip() == "You"
    await tab.screenshot(f"copilotkit-{mode}-streaming")
    await release(cross_origin_server, thread)
    state = await settled(tab, answered(2), idle="!s.running")
    assert last_text(state) == 'You said: "hello from CopilotKit".'
    assert await tab.text("[data-testid=copilot-assistant-message]") == 'You said: "hello from CopilotKit".'
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", thread)
    await tab.screenshot(f"copilotkit-{mode}-text")
    assert await tab.page_errors() == []


@MODES
async def test_server_tool(browser, cross_origin_server, mode):
    thread = f"ck-tool-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await send(tab, CALC)
    state = await settled(tab, answered(4), idle="!s.running")
    assert last_text(state) == 'Here is what the tools said: calculator returned {"result":42}.'
    assert await tab.text(".ck-tool[data-tool=calculator][data-status=complete]") == (
        'calculator({"expression":"6*7"}) → {"result":42}')
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", thread)
    await tab.screenshot(f"copilotkit-{mode}-server-tool")


@MODES
async def test_approval_runs_the_tool(browser, cross_origin_server, mode):
    thread = f"ck-approve-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode, agent="guarded")
    await send(tab, CALC)
    await tab.wait_for("() => document.querySelector('.ck-tool[data-tool=calculator] button.approve')")
    await tab.screenshot(f"copilotkit-{mode}-gate")
    await tab.click(".ck-tool[data-tool=calculator] button.approve")
    state = await settled(tab, "s => last(s) && last(s).includes('returned')".replace(
        "last(s)", "(s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content)"), idle="!s.running")
    assert last_text(state) == 'Here is what the tools said: calculator returned {"result":42}.'
    items = await server_history(cross_origin_server, "ag-ui", thread)
    (result,) = [m for m in items if m["role"] == "tool"]
    assert result["content"] == '{"result":42}' and "error" not in result
    runs = await cross_origin_server.ctx.ledger.list_runs(thread)
    assert [r.status.value for r in runs][-1] == "completed"
    await tab.screenshot(f"copilotkit-{mode}-approved")


@MODES
async def test_denial_does_not_run_the_tool(browser, cross_origin_server, mode):
    thread = f"ck-deny-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode, agent="guarded")
    await send(tab, CALC)
    await tab.click(".ck-tool[data-tool=calculator] button.deny")
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content "
                               "&& s.messages.at(-1).content.includes('denied')", idle="!s.running")
    assert last_text(state) == ("Here is what the tools said: calculator failed: denied: the user did not allow "
                                "this call: the user said no.")
    items = await server_history(cross_origin_server, "ag-ui", thread)
    (result,) = [m for m in items if m["role"] == "tool"]
    assert result["error"] == result["content"] and "42" not in result["content"]
    await tab.screenshot(f"copilotkit-{mode}-denied")


@MODES
async def test_frontend_tool_answered_by_the_page(browser, cross_origin_server, mode):
    thread = f"ck-front-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await tab.fill("#color", "blue")
    await send(tab, '/call pick_color {"question":"Which color?"}')
    state = await settled(tab, "s => s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content", idle="!s.running")
    assert last_text(state) == (
        'Here is what the tools said: pick_color returned {"question":"Which color?","color":"blue"}.')
    items = await server_history(cross_origin_server, "ag-ui", thread)
    (result,) = [m for m in items if m["role"] == "tool"]
    assert result["content"] == '{"question":"Which color?","color":"blue"}'
    await tab.screenshot(f"copilotkit-{mode}-frontend-tool")


@MODES
async def test_shared_state_and_context_written_by_the_page_reach_the_agent(browser, cross_origin_server, mode):
    thread = f"ck-state-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await tab.fill("#color", "orange")
    await tab.click("#set-state")
    await send(tab, "/state")
    state = await settled(tab, answered(2), idle="!s.running")
    assert last_text(state) == 'State: {"color":"orange"}.'
    await send(tab, "/context")
    state = await settled(tab, answered(4), idle="!s.running")
    assert last_text(state) == 'Context: favorite color = orange.'
    thread_state = (await cross_origin_server.ctx.ledger.get_thread(thread)).state
    assert thread_state == {"color": "orange"}
    await tab.screenshot(f"copilotkit-{mode}-state")


@MODES
async def test_reload_shows_the_thread_and_a_next_turn_works(browser, cross_origin_server, mode):
    thread = f"ck-reload-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await send(tab, "first")
    await settled(tab, answered(2), idle="!s.running")
    await send(tab, CALC)
    await settled(tab, answered(6), idle="!s.running")
    before = await tab.text("[data-testid=copilot-message-list]")
    await tab.reload()
    state = await settled(tab, answered(6), idle="!s.running")
    await tab.screenshot(f"copilotkit-{mode}-reloaded")
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", thread)
    assert await tab.text("[data-testid=copilot-message-list]") == before
    await send(tab, "after the reload")
    state = await settled(tab, answered(8), idle="!s.running")
    assert last_text(state) == 'You said: "after the reload".'
    assert state["messages"] == await server_history(cross_origin_server, "ag-ui", thread)
    assert await tab.page_errors() == []


@pytest.fixture
async def continue_server(browser, tmp_path):
    """A cross-origin server with agent ``detached``, whose runs outlive the page that started them."""
    data = default_config_data()
    agents = dict(data["agents"], detached={"model": "scripted", "tools": ["calculator"], "on_disconnect": "continue"})
    server = dict(data["server"], cors_origins=[browser.pages_origin])
    async with live_server(make_config(tmp_path, server=server, agents=agents)) as srv:
        yield srv


async def test_a_page_reloaded_mid_run_joins_the_run_through_the_runtime(browser, continue_server):
    """The run is held after its first word; the page reloads; CopilotKit's connect replays the
    finished turn and joins the held run, which the page then sees to its end."""
    thread = "ck-join-runtime"
    tab = await open_app(browser, continue_server, thread, "runtime", agent="detached")
    await send(tab, "first")
    await settled(tab, answered(2), idle="!s.running")
    await send(tab, f"second\n/hold {thread}")
    await tab.wait_for_state("s => s.running && s.messages.length === 4 && s.messages[3].content")
    await tab.reload()
    joined = await tab.wait_for_state("s => s.ready && s.running && s.messages.length === 4 "
                                      "&& s.messages[3].content")
    assert [m["role"] for m in joined["messages"]] == ["user", "assistant", "user", "assistant"]
    assert joined["messages"][3]["content"].strip() == "You"
    assert continue_server.ctx.app.active(thread) is not None  # still the held run
    await tab.screenshot("copilotkit-runtime-joined")
    await release(continue_server, thread)
    state = await settled(tab, answered(4), idle="!s.running")
    assert last_text(state) == 'You said: "second".'
    assert state["messages"] == await server_history(continue_server, "ag-ui", thread)
    await send(tab, "third")
    state = await settled(tab, answered(6), idle="!s.running")
    assert last_text(state) == 'You said: "third".'
    assert state["messages"] == await server_history(continue_server, "ag-ui", thread)
    assert await tab.page_errors() == []
