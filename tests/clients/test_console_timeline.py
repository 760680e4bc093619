"""A run's trace in the console (issue 30 item 4), in headless Chromium: the session page shows each run
as a timeline (admission, each step, each model call, each tool call, each wait at a gate, each commit)
with durations, tokens and errors, from the timings the server keeps with no collector configured.
Screenshots at 1280 px and 390 px (``timeline-1280``, ``timeline-390``)."""

from __future__ import annotations

import pytest

from tests.builders import agui_body, call, call_ids, post_agui, user

pytestmark = pytest.mark.slow  # a real browser

GUARDED = "/v1/ag-ui/agents/guarded"

READ = """[...document.querySelectorAll('#timeline .timeline')].map((t) => ({
  run: t.dataset.run,
  rows: [...t.querySelectorAll('li.span')].map((r) => [Number(r.dataset.depth), r.querySelector('.span-name').textContent,
                                                       r.dataset.error ?? null]),
}))"""

FIGURES = """[...document.querySelectorAll('#timeline li.span')].map((r) => [r.dataset.kind,
  r.querySelector('.figures').textContent, r.querySelector('.bar').getBoundingClientRect().width > 0])"""


async def test_the_session_page_shows_each_run_as_a_timeline(browser, server):
    async with server.client() as client:
        first = await post_agui(client, agui_body("t-tl", "r-gate", [user("u1", call("calculator", expression="6*7"))]),
                                GUARDED)
        (cid,) = call_ids(first)
        await post_agui(client, agui_body("t-tl", "r-gate2", [
            user("u1", call("calculator", expression="6*7")),
            {"id": "d1", "role": "tool", "toolCallId": cid, "content": "approved"}]), GUARDED)
        await post_agui(client, agui_body("t-tl", "r-fail", [user("u2", "/fail\nagain")]), GUARDED)
        detail = (await client.get("/v1/threads/t-tl")).json()
    assert [(r["runId"], r["status"]) for r in detail["runs"]] == [("r-gate", "completed"), ("r-fail", "failed")]
    tab = browser.tab("console")
    await tab.command("viewport", width=1280, height=900)
    await tab.command("open", path=f"{server.base_url}/console#/sessions/t-tl")
    await tab.wait_for("() => document.querySelectorAll('#timeline .timeline').length === 2")
    assert await tab.command("eval", expression=READ) == [
        {"run": "r-gate", "rows": [
            [0, "Run · guarded", None],
            [1, "Admission", None],
            [1, "Step 1", None],
            [2, "Model scripted", None],
            [2, "Commit waiting", None],
            [1, "Commit start", None],  # the run's first write, beside its first step
            [0, "Resumed run · guarded", None],
            [1, "Gate calculator", None],
            [1, "Admission", None],
            [1, "Tool calculator (server)", None],
            [1, "Commit running", None],
            [1, "Step 2", None],
            [2, "Model scripted", None],
            [2, "Commit completed", None],
        ]},
        {"run": "r-fail", "rows": [
            [0, "Run · guarded", "MODEL_ERROR"],
            [1, "Admission", None],
            [1, "Step 1", "MODEL_ERROR"],
            [2, "Model scripted", "MODEL_ERROR"],
            [1, "Commit start", None],
            [1, "Commit failed", None],
        ]},
    ]
    figures = await tab.command("eval", expression=FIGURES)
    assert all(drawn for _, _, drawn in figures)  # every span has its bar
    by_kind = {}
    for kind, text, _ in figures:
        by_kind.setdefault(kind, []).append(text)
    assert all(" ms" in text or " s" in text for text in sum(by_kind.values(), []))  # a duration on every row
    assert any("in / " in t and "out tokens" in t and "finish: tool_calls" in t for t in by_kind["model"])
    assert any("finish: stop" in t for t in by_kind["model"])
    assert any("approve by anonymous" in t for t in by_kind["gate"])
    assert any("approve by anonymous" in t for t in by_kind["tool"])
    assert [t.split(" · ")[1] for t in by_kind["run"]] == ["waiting", "completed", "failed"]
    assert "error MODEL_ERROR" in await tab.text("#timeline [data-run=r-fail] li.span.kind-model")
    await tab.screenshot("timeline-1280")
    await tab.command("viewport", width=390, height=844)
    assert await tab.command("eval", expression="document.documentElement.scrollWidth <= 390")
    await tab.screenshot("timeline-390")
