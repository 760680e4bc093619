"""The console cannot be framed, and runs under its Content-Security-Policy (issue 26 item 4).

Every HTML answer carries ``X-Frame-Options: DENY`` and a CSP with ``frame-ancestors 'none'`` and
``script-src 'self'`` (``awaken.http.framing``). In headless Chromium (tests/browser harness, a ``csp:`` tab
that enforces the page's policy) the console chats over SSE and WebSocket, lists sessions and agents,
and no CSP violation is reported (``securitypolicyviolation`` events and Chromium's console errors).
"""

from __future__ import annotations

import pytest

from tests.browser_harness import BrowserError
from tests.builders import edge_around

CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: http: https:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")


async def test_the_console_page_says_it_may_not_be_framed(client):
    for path in ("/console", "/console/"):
        response = await client.get(path)
        assert response.status_code == 200
        assert response.headers["content-type"] == "text/html; charset=utf-8"
        assert response.headers["x-frame-options"] == "DENY"
        assert response.headers["content-security-policy"] == CSP
        assert response.headers["x-content-type-options"] == "nosniff"


async def test_every_html_answer_gets_the_headers_and_others_do_not():
    sent: list[dict] = []

    async def send(message: dict) -> None:
        sent.append(message)

    def app_answering(content_type: bytes):  # noqa: ANN202
        async def app(scope: dict, receive, send) -> None:  # noqa: ANN001
            await send({"type": "http.response.start", "status": 200, "headers": [(b"Content-Type", content_type)]})
            await send({"type": "http.response.body", "body": b"<p>x</p>"})
        return app

    for content_type, framed in ((b"text/html", True), (b"TEXT/HTML; charset=utf-8", True),
                                 (b"application/xhtml+xml", True), (b"application/json", False),
                                 (b"text/event-stream", False), (b"text/plain", False)):
        sent.clear()
        await edge_around(app_answering(content_type))(
            {"type": "http", "path": "/x", "headers": [(b"host", b"127.0.0.1:1")]}, None, send)
        headers = dict(sent[0]["headers"])
        if framed:
            assert headers == {b"Content-Type": content_type, b"x-frame-options": b"DENY",
                               b"content-security-policy": CSP.encode(), b"x-content-type-options": b"nosniff"}
        else:
            assert headers == {b"Content-Type": content_type}


# -- in Chromium, under the policy --------------------------------------------------------------------------


def csp_problems(problems: list[str]) -> list[str]:
    return [p for p in problems if "securitypolicyviolation" in p or "Content Security Policy" in p]


@pytest.mark.parametrize(("protocol", "transport"), [("ai-sdk", "sse"), ("ag-ui", "ws")])
async def test_the_console_works_under_its_policy_in_chromium(browser, server, protocol, transport):
    tab = browser.tab(f"csp:console-{protocol}-{transport}")
    await tab.command("open", path=f"{server.base_url}/console#/chat?agent=assistant&protocol={protocol}"
                                   f"&transport={transport}")
    await tab.text('#chat-status[data-status="ready"]')  # the bundle ran (text waits for the element)
    await tab.fill("#chat-input", '/call calculator {"expression": "6*7"}')
    await tab.click("#chat-send")
    await tab.text('#transcript [data-tool="calculator"][data-state="output-available"]')
    assert "42" in await tab.text("#transcript")
    assert csp_problems(await tab.command("problems")) == []
    for page in ("sessions", "agents"):
        await tab.command("open", path=f"{server.base_url}/console#/{page}")
        await tab.text("main")
        assert csp_problems(await tab.command("problems")) == []
    await tab.command("open", path=f"{server.base_url}/console#/chat")
    await tab.text('#chat-status[data-status="ready"]')
    assert csp_problems(await tab.command("problems")) == []


async def test_the_policy_is_enforced_and_a_violation_would_be_seen(browser, server):
    """The control: in a ``csp:`` tab, code from a string (what the policy forbids: the harness's ``waitFor``
    polls its predicate with ``eval``) is refused and reported."""
    tab = browser.tab("csp:control")
    await tab.command("open", path=f"{server.base_url}/console#/agents")
    await tab.text("main")
    assert csp_problems(await tab.command("problems")) == []
    with pytest.raises(BrowserError, match="unsafe-eval"):
        await tab.wait_for("() => false", within=5)
    assert csp_problems(await tab.command("problems")) != []
