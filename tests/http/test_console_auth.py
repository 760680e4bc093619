"""The console with ``[auth] mode = "tokens"``, in headless Chromium (issue 15 item 1).

The console asks for a token before it shows anything; a user's token shows only that user's
sessions, an admin's shows everyone's, a refused token says so, and no page ever shows an empty
list it was not given by the server.
"""

from __future__ import annotations

import pytest

from tests.browser_harness import Tab
from tests.builders import agui_body, live_server, make_config, parse_sse

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef",
        "root": "root-key-0123456789abcdef"}
ROLES = {"alice": "user", "bob": "user", "root": "admin"}


@pytest.fixture
async def auth_server(tmp_path, monkeypatch):
    tokens = []
    for name, key in KEYS.items():
        monkeypatch.setenv(f"AWAKEN_TEST_{name.upper()}_KEY", key)
        tokens.append({"name": name, "env": f"AWAKEN_TEST_{name.upper()}_KEY", "role": ROLES[name], "subject": name})
    async with live_server(make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})) as srv:
        async with srv.client() as client:
            for who in ("alice", "bob"):
                response = await client.post("/v1/ag-ui", headers={"Authorization": f"Bearer {KEYS[who]}"},
                                             json=agui_body(f"{who}-thread", f"r-{who}", [
                                                 {"id": f"{who}-1", "role": "user", "content": f"{who}'s question"}]))
                assert parse_sse(response.content)[-1]["type"] == "RUN_FINISHED"
        yield srv


NOTHING_LISTED = "document.querySelectorAll('#sessions, tr.session, .empty').length"


async def sign_in(tab: Tab, key: str) -> None:
    await tab.fill("#token", key)
    await tab.click("#token-form button[type=submit]")


async def listed(tab: Tab) -> list[str]:
    await tab.wait_for("() => document.querySelector('#sessions')?.dataset.loaded === 'true'")
    return await tab.command("eval", expression="[...document.querySelectorAll('tr.session')].map((r) => r.dataset.thread)")


async def test_the_console_asks_for_a_token_and_shows_each_subject_what_it_may_see(browser, auth_server):
    tab = browser.tab("console-auth")
    await tab.command("viewport", width=1280, height=900)
    await tab.command("open", path=f"{auth_server.base_url}/console#/sessions")
    prompt = await tab.wait_for("() => document.querySelector('#token-form')?.innerText")
    assert "This server needs a token" in prompt
    assert await tab.command("eval", expression=NOTHING_LISTED) == 0  # no list before a token, not an empty one
    await tab.screenshot("signin-1280")

    await sign_in(tab, "not-a-key-of-this-server")
    refused = await tab.wait_for("() => document.querySelector('#token-refused')?.innerText")
    assert refused.startswith("The server refused that token (401 ")
    assert await tab.command("eval", expression=NOTHING_LISTED) == 0

    await sign_in(tab, KEYS["alice"])
    assert await listed(tab) == ["alice-thread"]
    assert await tab.text("#who") == "alice (user)"
    await tab.command("open", path=f"{auth_server.base_url}/console#/sessions/bob-thread")
    await tab.wait_for("() => document.querySelector('#view')?.dataset.loaded === 'missing'")

    await tab.click("#sign-out")  # forget alice's token: the prompt again, then an admin sees everyone's
    await tab.wait_for("() => document.querySelector('#token-form') && !document.querySelector('#token-refused')")
    await sign_in(tab, KEYS["root"])
    await tab.command("open", path=f"{auth_server.base_url}/console#/sessions")
    assert await listed(tab) == ["bob-thread", "alice-thread"]
    assert await tab.text("#who") == "root (admin)"
    assert await tab.page_errors() == []
