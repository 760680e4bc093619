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

from .browser_harness import Tab, read_history

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


async def settled(tab: Tab, predicate: str) -> dict[str, Any]:
    """The page's state once ``predicate(state)`` holds and no run is going."""
    state = await tab.wait_for_state(f"s => !s.running && ({predicate})(s)")
    assert state["errors"] == []
    return state


def answered(n: int) -> str:
    """A predicate: the conversation has ``n`` messages and ends with an assistant's text."""
    return (f"s => s.messages.length === {n} && s.messages.at(-1).role === 'assistant' "
            "&& s.messages.at(-1).content")


def last_text(state: dict[str, Any]) -> str:
    return next(m["content"] for m in reversed(state["messages"]) if m["role"] == "assistant" and m.get("content"))


async def history(server, thread: str) -> list[dict[str, Any]]:  # noqa: ANN001
    async with server.client() as client:
        return await read_history(client, f"/v1/ag-ui/threads/{thread}/messages")


@MODES
async def test_text_streams_in(browser, cross_origin_server, mode):
    thread = f"ck-text-{mode}"
    tab = await open_app(browser, cross_origin_server, thread, mode)
    await send(tab, "hello from CopilotKit")
    state = await settled(tab, answered(2))
    assert last_text(state) == 'You said: "hello from CopilotKit".'
    assert await tab.text("[data-testid=copilot-assistant-message]") == 'You said: "hello from CopilotKit".'
    assert state["messages"] == await history(cross_origin_server, thread)
    await tab.screenshot(f"copilotkit-{mode}-text")
    assert await tab.page_errors() == []
