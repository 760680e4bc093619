"""Threads that branch over HTTP (issue 33), in process against SQLite: regenerate and edit on both wires,
history of any branch, the branches API, a waiting run left behind, and fork.

The AI SDK bodies are the ones ``useChat`` sends (ai 6.0.x and 7.0.x ``dist``, read in tests/node):
``regenerate({messageId?})`` slices its messages before the assistant message it regenerates (keeping a
user message it names) and posts ``trigger: "regenerate-message"`` with ``messageId`` (absent when not
given: ``JSON.stringify`` drops it); ``sendMessage({text, messageId})`` slices after the user message it
replaces, replaces it (same id) and posts ``trigger: "submit-message"`` with that ``messageId``. A tool
continuation also posts ``submit-message`` with a ``messageId``, naming the assistant message.

The scripted model answers ``You said: "<text>".`` and reports as its input tokens the words of the
history it was given: that number shows which path the model saw.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from awaken.engine.state import RunStatus
from awaken.wires.aisdk.wire import check_chunk
from tests.builders import (
    Frames,
    agui_body,
    agui_text,
    aisdk_kinds,
    aisdk_text,
    aisdk_user,
    bearer,
    call,
    default_config_data,
    frames_of,
    in_process,
    is_type,
    live_server,
    make_config,
    parse_sse,
    types,
    user,
    wait_for_status,
)
from tests.plugins import gate

CHAT = "/v1/ai-sdk/chat"
REGENERATE = {"forwardedProps": {"awaken": {"regenerate": True}}}
PLAIN = ["start", "start-step", "text-start", "text-delta", "text-end", "finish-step", "finish", "[DONE]"]


def squeezed(chunks: list[Any]) -> list[str]:
    out: list[str] = []
    for kind in aisdk_kinds(chunks):
        if not (out and kind == out[-1] == "text-delta"):
            out.append(kind)
    return out


@pytest.fixture
async def served(tmp_path):
    async with in_process(make_config(tmp_path)) as (client, ctx):
        yield client, ctx


async def send_chat(client: httpx.AsyncClient, body: dict[str, Any], path: str = CHAT, **kw: Any) -> list[Any]:
    response = await client.post(path, json=body, **kw)
    assert response.status_code == 200, response.text
    chunks = parse_sse(response.content)
    assert chunks[-1] == "[DONE]"
    for chunk in chunks[:-1]:
        check_chunk(chunk)
    return chunks


async def path_items(client: httpx.AsyncClient, protocol: str, thread: str, **params: Any) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/{protocol}/threads/{thread}/messages", params=params)
    assert response.status_code == 200, response.text
    return response.json()["items"]


def usage_in(chunks: list[Any]) -> int:
    return chunks[-2]["messageMetadata"]["usage"]["inputTokens"]


async def two_turns(client: httpx.AsyncClient, thread: str) -> list[dict[str, Any]]:
    """u1 "one" → a1, u2 "two" → a2 (as useChat posts them); returns the history UIMessages."""
    await send_chat(client, {"id": thread, "messages": [aisdk_user("u1", "one")], "trigger": "submit-message"})
    first = await path_items(client, "ai-sdk", thread)
    await send_chat(client, {"id": thread, "messages": [*first, aisdk_user("u2", "two")], "trigger": "submit-message"})
    return await path_items(client, "ai-sdk", thread)


def said(item: dict[str, Any]) -> str:
    return "".join(p["text"] for p in item["parts"] if p["type"] == "text")


# -- AI SDK: regenerate ---------------------------------------------------------------------------


async def test_use_chat_regenerate_makes_the_last_answer_again_on_a_new_branch(served):
    """``regenerate()``: a new run from the user message before the last answer, on branch 1; the model sees
    that path only (u1 + a1 + u2: 1 + 3 + 1 words, not a2's 3 more); branch 0 keeps the old answer."""
    client, ctx = served
    before = await two_turns(client, "t-regen")
    u1, a1, u2, a2 = before
    chunks = await send_chat(client, {"id": "t-regen", "messages": [u1, a1, u2], "trigger": "regenerate-message"})
    assert squeezed(chunks) == PLAIN
    assert aisdk_text(chunks) == 'You said: "two".'
    assert usage_in(chunks) == 5
    answer = chunks[0]["messageId"]
    assert answer != a2["id"]
    after = await path_items(client, "ai-sdk", "t-regen")
    assert [m["id"] for m in after] == ["u1", a1["id"], "u2", answer]
    assert after[:3] == before[:3] and said(after[3]) == 'You said: "two".'
    assert await path_items(client, "ai-sdk", "t-regen", branch=0) == before
    assert await path_items(client, "ai-sdk", "t-regen", branch=1) == after
    runs = await ctx.ledger.list_runs("t-regen")
    assert [(r.branch, r.status) for r in runs] == [(0, RunStatus.COMPLETED)] * 2 + [(1, RunStatus.COMPLETED)]
    listed = (await client.get("/v1/threads/t-regen/branches")).json()
    assert listed == {"activeBranch": 1, "items": [
        {"branch": 0, "parent": None, "forkSeq": 0, "forkMessageId": None,
         "createdAt": (await ctx.ledger.get_thread("t-regen")).created_at, "runId": None, "reason": "root"},
        {"branch": 1, "parent": 0, "forkSeq": 3, "forkMessageId": "u2", "createdAt": runs[2].created_at,
         "runId": runs[2].run_id, "reason": "regenerate"}]}


async def test_use_chat_regenerate_of_an_earlier_answer_and_of_a_named_user_message(served):
    """``regenerate({messageId: a1})`` posts [u1] with that id: branch 1 keeps u1 only (parent 0, forkSeq 1);
    ``regenerate({messageId: "u1"})`` keeps the user message it names: the same fork point again, branch 2."""
    client, _ = served
    u1, a1, _u2, _a2 = await two_turns(client, "t-early")
    chunks = await send_chat(client, {"id": "t-early", "messages": [u1], "trigger": "regenerate-message",
                                 "messageId": a1["id"]})
    assert aisdk_text(chunks) == 'You said: "one".' and usage_in(chunks) == 1
    assert [m["id"] for m in await path_items(client, "ai-sdk", "t-early")] == ["u1", chunks[0]["messageId"]]
    again = await send_chat(client, {"id": "t-early", "messages": [u1], "trigger": "regenerate-message", "messageId": "u1"})
    assert aisdk_text(again) == 'You said: "one".'
    listed = (await client.get("/v1/threads/t-early/branches")).json()
    assert listed["activeBranch"] == 2
    assert [(b["branch"], b["parent"], b["forkSeq"], b["forkMessageId"], b["reason"]) for b in listed["items"]] == [
        (0, None, 0, None, "root"), (1, 0, 1, "u1", "regenerate"), (2, 0, 1, "u1", "regenerate")]
    assert [m["id"] for m in await path_items(client, "ai-sdk", "t-early", branch=1)] == ["u1", chunks[0]["messageId"]]


async def test_regenerate_with_nothing_committed_to_regenerate_is_refused(served):
    """A regenerate whose last user message the thread does not hold, with no new input either, is
    ``NO_NEW_INPUT`` (nothing committed); one that carries a message never sent is an ordinary turn."""
    client, ctx = served
    refused = await send_chat(client, {"id": "t-none", "messages": [], "trigger": "regenerate-message"})
    assert aisdk_kinds(refused) == ["error", "finish", "[DONE]"]
    assert refused[0]["errorText"].startswith("NO_NEW_INPUT: ")
    assert await ctx.ledger.get_thread("t-none") is None
    fresh = await send_chat(client, {"id": "t-none", "messages": [aisdk_user("u1", "lost")], "trigger": "regenerate-message"})
    assert aisdk_text(fresh) == 'You said: "lost".'
    assert [b.branch for b in await ctx.ledger.list_branches("t-none")] == [0]


# -- AI SDK: edit ----------------------------------------------------------------------------------


async def test_use_chat_edit_continues_from_the_edited_message_on_a_new_branch(served):
    """``sendMessage({text: "three", messageId: "u2"})``: branch 1 keeps u1 and a1 (forkSeq: a1's last
    message), holds u2 with its new text under the same id, and the answer to it; branch 0 keeps u2 "two"."""
    client, ctx = served
    before = await two_turns(client, "t-edit")
    u1, a1, _u2, _a2 = before
    chunks = await send_chat(client, {"id": "t-edit", "messages": [u1, a1, aisdk_user("u2", "three")],
                                 "trigger": "submit-message", "messageId": "u2"})
    assert aisdk_text(chunks) == 'You said: "three".' and usage_in(chunks) == 5
    after = await path_items(client, "ai-sdk", "t-edit")
    assert after == [u1, a1, aisdk_user("u2", "three"), after[3]] and said(after[3]) == 'You said: "three".'
    assert await path_items(client, "ai-sdk", "t-edit", branch=0) == before
    (root, edit) = (await client.get("/v1/threads/t-edit/branches")).json()["items"]
    assert (edit["parent"], edit["forkSeq"], edit["forkMessageId"], edit["reason"]) == (0, 2, a1["id"], "edit")
    assert root["reason"] == "root"
    # the next turn continues the edited branch: its history is the client's array
    turn = await send_chat(client, {"id": "t-edit", "messages": [*after, aisdk_user("u3", "four")]})
    assert aisdk_text(turn) == 'You said: "four".'
    assert [m["id"] for m in await path_items(client, "ai-sdk", "t-edit")] == ["u1", a1["id"], "u2", after[3]["id"], "u3",
                                                                          turn[0]["messageId"]]
    assert (await ctx.ledger.get_thread("t-edit")).active_branch == 1


async def test_a_tool_continuation_naming_its_assistant_message_is_not_an_edit(served):
    """``submit-message`` whose ``messageId`` names an assistant message (what ``addToolOutput`` and
    ``sendAutomaticallyWhen`` send) continues the thread as before: no branch."""
    client, ctx = served
    u1, a1, u2, a2 = await two_turns(client, "t-cont")
    chunks = await send_chat(client, {"id": "t-cont", "messages": [u1, a1, u2, a2, aisdk_user("u3", "more")],
                                 "trigger": "submit-message", "messageId": a2["id"]})
    assert aisdk_text(chunks) == 'You said: "more".'
    assert [b.branch for b in await ctx.ledger.list_branches("t-cont")] == [0]


# -- AG-UI: the documented forwardedProps -------------------------------------------------------------


async def run_agui(client: httpx.AsyncClient, body: dict[str, Any], path: str = "/v1/ag-ui", **kw: Any) -> list[Any]:
    response = await client.post(path, json=body, **kw)
    assert response.status_code == 200, response.text
    return parse_sse(response.content)


async def test_agui_regenerate_through_forwarded_props(served):
    """``forwardedProps: {"awaken": {"regenerate": true}}`` with the history up to the last user message and
    a new run id: that answer is made again on branch 1; the stream is an ordinary run's."""
    client, _ = served
    await run_agui(client, agui_body("t-ag", "r1", [user("u1", "one")]))
    first = await path_items(client, "ag-ui", "t-ag")
    await run_agui(client, agui_body("t-ag", "r2", [*first, user("u2", "two")]))
    before = await path_items(client, "ag-ui", "t-ag")
    events = await run_agui(client, agui_body("t-ag", "r3", before[:3], forwardedProps={"awaken": {"regenerate": True}}))
    assert types(events)[0] == "RUN_STARTED" and events[0]["runId"] == "r3"
    assert types(events)[-1] == "RUN_FINISHED" and agui_text(events) == 'You said: "two".'
    after = await path_items(client, "ag-ui", "t-ag")
    assert after[:3] == before[:3] and after[3]["id"] != before[3]["id"] and after[3]["content"] == 'You said: "two".'
    assert await path_items(client, "ag-ui", "t-ag", branch=0) == before
    assert (await client.get("/v1/threads/t-ag")).json()["activeBranch"] == 1


async def test_agui_edit_needs_the_opt_in(served):
    """An earlier user message with other content: without ``{"awaken": {"edit": true}}`` the committed
    message wins (nothing new: ``NO_NEW_INPUT``); with it the run continues from it on a new branch."""
    client, _ = served
    await run_agui(client, agui_body("t-agedit", "r1", [user("u1", "one")]))
    first = await path_items(client, "ag-ui", "t-agedit")
    await run_agui(client, agui_body("t-agedit", "r2", [*first, user("u2", "two")]))
    before = await path_items(client, "ag-ui", "t-agedit")
    edited = [*before[:2], user("u2", "three")]
    refused = await run_agui(client, agui_body("t-agedit", "r3", edited))
    assert types(refused) == ["RUN_ERROR"] and refused[0]["code"] == "NO_NEW_INPUT"
    events = await run_agui(client, agui_body("t-agedit", "r4", edited, forwardedProps={"awaken": {"edit": True}}))
    assert agui_text(events) == 'You said: "three".'
    after = await path_items(client, "ag-ui", "t-agedit")
    assert after[:3] == [*before[:2], user("u2", "three")] and after[3]["content"] == 'You said: "three".'
    assert await path_items(client, "ag-ui", "t-agedit", branch=0) == before


async def test_other_forwarded_props_are_still_refused(served):
    client, ctx = served
    for props, code in (({"x": 1}, "UNSUPPORTED_FIELD"), ({"awaken": {"fork": True}}, "UNSUPPORTED_FIELD"),
                        ({"awaken": {"regenerate": "yes"}}, "INVALID_REQUEST")):
        events = await run_agui(client, agui_body("t-props", "r1", [user("u1", "one")], forwardedProps=props))
        assert types(events) == ["RUN_ERROR"] and events[0]["code"] == code, props
    assert await ctx.ledger.get_thread("t-props") is None


# -- a waiting run on the path left behind --------------------------------------------------------------


async def test_regenerate_supersedes_a_waiting_client_tool_whose_call_is_never_answered_later(tmp_path):
    """A run waiting on ``ask_user``: a regenerate closes it first (``interrupted``, cause ``superseded``,
    its call resolved on branch 0) and runs on branch 1, which waits on a call of its own; the old call's
    result is refused later (``TOOL_CALL_NOT_PENDING``) and nothing of it reaches the new path."""
    async with in_process(make_config(tmp_path, default_agent="frontend")) as (client, ctx):
        asked = await send_chat(client, {"id": "t-wait", "messages": [aisdk_user("u1", call("ask_user", question="q?"))]})
        assert squeezed(asked)[-3:] == ["finish-step", "finish", "[DONE]"] and asked[-2]["finishReason"] == "tool-calls"
        old = next(c["toolCallId"] for c in asked if c["type"] == "tool-input-available")
        before = await path_items(client, "ai-sdk", "t-wait")
        again = await send_chat(client, {"id": "t-wait", "messages": before[:1], "trigger": "regenerate-message"})
        new = next(c["toolCallId"] for c in again if c["type"] == "tool-input-available")
        assert new != old and again[-2]["finishReason"] == "tool-calls"
        runs = await ctx.ledger.list_runs("t-wait")
        assert [(r.branch, r.status, r.cause) for r in runs] == [(0, RunStatus.INTERRUPTED, "superseded"),
                                                                 (1, RunStatus.WAITING, None)]
        assert [p.tool_call_id for p in await ctx.ledger.pending_calls("t-wait")] == [new]
        closed = await path_items(client, "ai-sdk", "t-wait", branch=0)
        assert closed[1]["parts"][-1]["state"] == "output-error"  # the superseded call, closed on branch 0
        late = {**before[1], "parts": [{**p, "state": "output-available", "output": "late"} if p.get("toolCallId") == old
                                       else p for p in before[1]["parts"]]}
        refused = await send_chat(client, {"id": "t-wait", "messages": [before[0], late]})
        assert aisdk_kinds(refused) == ["error", "finish", "[DONE]"]
        assert refused[0]["errorText"].startswith(f"TOOL_CALL_NOT_PENDING: tool call {old!r} is not pending")
        path = await ctx.ledger.read_messages("t-wait", 0, 100)
        assert not any(m.tool_result and m.tool_result.tool_call_id == old for m in path)
        assert [p.tool_call_id for p in await ctx.ledger.pending_calls("t-wait")] == [new]


async def test_an_edit_supersedes_a_waiting_gate_which_never_runs(tmp_path):
    """A run waiting at a permission gate (``guarded``): an edit of its user message closes it (superseded)
    before the edited run; approving the old call afterwards is refused and the tool never ran."""
    async with in_process(make_config(tmp_path, default_agent="guarded")) as (client, ctx):
        await run_agui(client, agui_body("t-gate", "r1", [user("u1", call("calculator", expression="2+3"))]))
        old = (await ctx.ledger.pending_calls("t-gate"))[0].tool_call_id
        events = await run_agui(client, agui_body("t-gate", "r2", [user("u1", "no tools")],
                                              forwardedProps={"awaken": {"edit": True}}))
        assert agui_text(events) == 'You said: "no tools".'
        assert await ctx.ledger.pending_calls("t-gate") == []
        assert [(r.branch, r.status, r.cause) for r in await ctx.ledger.list_runs("t-gate")] == [
            (0, RunStatus.INTERRUPTED, "superseded"), (1, RunStatus.COMPLETED, None)]
        approve = await run_agui(client, agui_body("t-gate", "r3", [
            user("u1", "no tools"), {"id": "tm", "role": "tool", "toolCallId": old, "content": "yes"}]))
        assert types(approve) == ["RUN_ERROR"] and approve[0]["code"] == "NO_PENDING_RUN"
        for branch in (0, 1):
            messages = await ctx.ledger.read_messages("t-gate", 0, 100, branch=branch)
            assert not any(m.tool_result and m.tool_result.status == "ok" for m in messages)


# -- history of a branch, errors -------------------------------------------------------------------


async def test_history_of_an_unknown_branch_is_a_coded_400(served):
    client, _ = served
    await two_turns(client, "t-hist")
    for protocol in ("ag-ui", "ai-sdk"):
        for branch in ("1", "x", "-1"):
            response = await client.get(f"/v1/{protocol}/threads/t-hist/messages", params={"branch": branch})
            assert response.status_code == 400, (protocol, branch)
            assert response.json()["error"]["code"] == "UNKNOWN_BRANCH"
        assert await path_items(client, protocol, "t-hist", branch=0) == await path_items(client, protocol, "t-hist")


async def test_thread_detail_lists_branches(served):
    client, _ = served
    u1, a1, u2, _ = await two_turns(client, "t-detail")
    detail = (await client.get("/v1/threads/t-detail")).json()
    assert detail["activeBranch"] == 0 and [b["branch"] for b in detail["branches"]] == [0]
    await send_chat(client, {"id": "t-detail", "messages": [u1, a1, u2], "trigger": "regenerate-message"})
    detail = (await client.get("/v1/threads/t-detail")).json()
    assert detail["activeBranch"] == 1
    assert detail["branches"] == (await client.get("/v1/threads/t-detail/branches")).json()["items"]
    assert detail["messageCount"] == 4


# -- fork -----------------------------------------------------------------------------------------


async def test_fork_makes_a_new_thread_of_the_path_up_to_a_message(served):
    """``POST /v1/threads/{id}/fork {"messageId"}`` → 201 ``{threadId}``: the path up to and including that
    message (same ids, seqs 1..k, one branch), titled by its first user text; the source is unchanged."""
    client, ctx = served
    before = await two_turns(client, "t-src")
    response = await client.post("/v1/threads/t-src/fork", json={"messageId": "u2"})
    assert response.status_code == 201
    forked = response.json()["threadId"]
    assert list(response.json()) == ["threadId"] and forked != "t-src"
    items = await path_items(client, "ai-sdk", forked)
    assert [m["id"] for m in items] == ["u1", before[1]["id"], "u2"] and items[2] == before[2]
    assert [m.seq for m in await ctx.ledger.read_messages(forked, 0, 100)] == [1, 2, 3]
    detail = (await client.get(f"/v1/threads/{forked}")).json()
    assert detail["title"] == "one" and detail["activeBranch"] == 0 and detail["messageCount"] == 3
    assert await path_items(client, "ai-sdk", "t-src") == before
    # the fork is a thread like any other: the next turn continues it
    turn = await send_chat(client, {"id": forked, "messages": [*items, aisdk_user("u9", "nine")]})
    assert aisdk_text(turn) == 'You said: "nine".'


async def test_fork_from_another_branch_and_its_refusals(served):
    client, _ = served
    u1, a1, u2, a2 = await two_turns(client, "t-fb")
    await send_chat(client, {"id": "t-fb", "messages": [u1, a1, u2], "trigger": "regenerate-message"})
    response = await client.post("/v1/threads/t-fb/fork", json={"messageId": a2["id"], "branch": 0})
    assert response.status_code == 201
    copied = await path_items(client, "ai-sdk", response.json()["threadId"])
    # the same messages; the answers' runs are the fork's own copies (new run ids, the same usage)
    assert [{**m, "metadata": {**m["metadata"], "runId": None}} if "metadata" in m else m for m in copied] == [
        {**m, "metadata": {**m["metadata"], "runId": None}} if "metadata" in m else m for m in (u1, a1, u2, a2)]
    assert {m["metadata"]["runId"] for m in copied if "metadata" in m}.isdisjoint(
        {a1["metadata"]["runId"], a2["metadata"]["runId"]})
    for body, status, code in (({"messageId": a2["id"]}, 400, "UNKNOWN_MESSAGE"),  # not on the active path
                               ({"messageId": "nope"}, 400, "UNKNOWN_MESSAGE"),
                               ({"messageId": "u1", "branch": 7}, 400, "UNKNOWN_BRANCH"),
                               ({"messageId": 3}, 400, "INVALID_REQUEST"),
                               ({"messageId": "u1", "branch": "0"}, 400, "INVALID_REQUEST")):
        refused = await client.post("/v1/threads/t-fb/fork", json=body)
        assert (refused.status_code, refused.json()["error"]["code"]) == (status, code), body
    missing = await client.post("/v1/threads/t-nothing/fork", json={"messageId": "u1"})
    assert (missing.status_code, missing.json()["error"]["code"]) == (404, "UNKNOWN_THREAD")
    foreign = await client.post("/v1/threads/t-fb/fork", json={"messageId": "u1"},
                                headers={"Origin": "https://elsewhere.example"})
    assert (foreign.status_code, foreign.json()["error"]["code"]) == (403, "ORIGIN_NOT_ALLOWED")


# -- per-user visibility ------------------------------------------------------------------------------

KEYS = {"alice": "alice-key-0123456789abcdef", "bob": "bob-key-0123456789abcdef", "ops": "ops-key-0123456789abcdef"}


async def test_branches_and_fork_keep_per_user_visibility(tmp_path, monkeypatch):
    """Bob gets 404 for Alice's branches, her branch history, a regenerate and a fork of her thread; a fork
    belongs to whoever made it (Alice's is hers, an admin's fork of her thread is the admin's)."""
    tokens = []
    for name, role in (("alice", "user"), ("bob", "user"), ("ops", "admin")):
        monkeypatch.setenv(f"AWAKEN_TEST_{name.upper()}_KEY", KEYS[name])
        tokens.append({"name": name, "env": f"AWAKEN_TEST_{name.upper()}_KEY", "role": role, "subject": name})
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})
    async with in_process(config) as (client, _ctx):
        alice, bob, ops = (bearer(KEYS[n]) for n in ("alice", "bob", "ops"))
        await send_chat(client, {"id": "t-a", "messages": [aisdk_user("u1", "one")]}, headers=alice)
        items = (await client.get("/v1/ai-sdk/threads/t-a/messages", headers=alice)).json()["items"]
        for method, path, kw in (("GET", "/v1/threads/t-a/branches", {}),
                                 ("GET", "/v1/ai-sdk/threads/t-a/messages?branch=0", {}),
                                 ("POST", "/v1/threads/t-a/fork", {"json": {"messageId": "u1"}})):
            response = await client.request(method, path, headers=bob, **kw)
            assert (response.status_code, response.json()["error"]["code"]) == (404, "UNKNOWN_THREAD"), path
        refused = await client.post(CHAT, json={"id": "t-a", "messages": items[:1], "trigger": "regenerate-message"},
                                    headers=bob)
        assert (refused.status_code, refused.json()) == (404, {"error": {"code": "UNKNOWN_THREAD",
                                                                          "message": "no thread 't-a'"}})
        mine = (await client.post("/v1/threads/t-a/fork", json={"messageId": "u1"}, headers=alice)).json()["threadId"]
        theirs = (await client.post("/v1/threads/t-a/fork", json={"messageId": "u1"}, headers=ops)).json()["threadId"]
        assert (await client.get(f"/v1/threads/{mine}", headers=alice)).status_code == 200
        assert (await client.get(f"/v1/threads/{mine}", headers=bob)).status_code == 404
        assert (await client.get(f"/v1/threads/{theirs}", headers=alice)).status_code == 404
        listed = (await client.get("/v1/threads", headers=alice)).json()["items"]
        assert sorted(t["threadId"] for t in listed) == sorted(["t-a", mine])


# -- interrupts and rejoin on a branch ------------------------------------------------------------------


async def test_agui_interrupts_on_a_branch(tmp_path):
    """AG-UI 1.0 on ``guarded``: a regenerate closes the open interrupt (superseded) and its run reaches the
    gate again on branch 1: a new interrupt, a snapshot of branch 1's path; resuming it runs the tool on
    branch 1; the old interrupt is no longer one of the thread's."""
    async with in_process(make_config(tmp_path, default_agent="guarded")) as (client, ctx):
        ask = [user("u1", call("calculator", expression="2+3"))]
        first = await run_agui(client, agui_body("t-int", "r1", ask, protocolVersion="1.0"))
        (old,) = [i["toolCallId"] for i in first[-1]["outcome"]["interrupts"]]
        again = await run_agui(client, agui_body("t-int", "r2", ask, protocolVersion="1.0", **REGENERATE))
        (new,) = [i["toolCallId"] for i in again[-1]["outcome"]["interrupts"]]
        assert new != old and again[-1]["runId"] == "r2"
        snapshot = next(e for e in again if e["type"] == "MESSAGES_SNAPSHOT")["messages"]
        assert [m["id"] for m in snapshot] == ["u1", snapshot[1]["id"]]
        assert [c["id"] for c in snapshot[1]["toolCalls"]] == [new]
        stale = await run_agui(client, agui_body("t-int", "r3", ask, protocolVersion="1.0", resume=[
            {"interruptId": f"int_{old}", "status": "resolved", "payload": {"approved": True}}]))
        assert types(stale) == ["RUN_ERROR"] and stale[0]["code"] == "INTERRUPT_UNKNOWN"
        done = await run_agui(client, agui_body("t-int", "r4", ask, protocolVersion="1.0", resume=[
            {"interruptId": f"int_{new}", "status": "resolved", "payload": {"approved": True}}]))
        assert agui_text(done) == 'Here is what the tools said: calculator returned {"result":5}.'
        assert [(r.branch, r.status, r.cause) for r in await ctx.ledger.list_runs("t-int")] == [
            (0, RunStatus.INTERRUPTED, "superseded"), (1, RunStatus.COMPLETED, None)]
        results = [m.tool_result for m in await ctx.ledger.read_messages("t-int", 0, 100) if m.tool_result]
        assert [(r.tool_call_id, r.status) for r in results] == [(new, "ok")]



async def test_rejoin_positions_of_a_run_on_a_branch(tmp_path):
    """An edit whose run waits at the gate tool on branch 1, detached: a rejoin after its last position gets
    the rest with no gap and no duplicate, and the run commits on branch 1."""
    gate.reset()
    agents = default_config_data()["agents"]
    agents["detached"] = {"model": "scripted", "tools": ["gate"], "on_disconnect": "continue"}
    config = make_config(tmp_path, agents=agents, tools={"plugins": ["tests.plugins.gate:gate"]})
    try:
        async with live_server(config) as server, server.client() as client:
            await run_agui(client, agui_body("t-rj", "r1", [user("u1", "one")]), "/v1/ag-ui/agents/detached")
            body = agui_body("t-rj", "r2", [user("u1", '/call gate {"name": "rj"}')],
                             forwardedProps={"awaken": {"edit": True}})
            context = client.stream("POST", "/v1/ag-ui/agents/detached", json=body)
            response = await context.__aenter__()
            first = await Frames(response).until(is_type("TOOL_CALL_END"))
            await context.__aexit__(None, None, None)
            async with client.stream("GET", "/v1/ag-ui/threads/t-rj/stream",
                                     headers={"last-event-id": first[-1][0]}) as rejoined:
                assert rejoined.status_code == 200
                gate.open_gate("rj")
                rest = frames_of(await rejoined.aread())
            positions = [p for p, _ in first + rest]
            key = positions[0].rpartition(":")[0]
            assert positions == [f"{key}:{n}" for n in range(1, len(positions) + 1)]
            assert rest[-1][1]["type"] == "RUN_FINISHED" and rest[-1][1]["runId"] == "r2"
            await wait_for_status(server.ctx.ledger, "t-rj", RunStatus.COMPLETED)
            runs = await server.ctx.ledger.list_runs("t-rj")
            assert [(r.branch, r.status) for r in runs] == [(0, RunStatus.COMPLETED), (1, RunStatus.COMPLETED)]
            assert [m["content"] for m in await path_items(client, "ag-ui", "t-rj", branch=0)][0] == "one"
    finally:
        gate.reset()
