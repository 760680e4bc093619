"""Tools and human in the loop over AG-UI, against a live server: server tools, policies, permission
gates, client tools, resume (also across a restart), state, and how history projects it all.

CONTRACT §2/§2.1 (agents, tools, policies), §3 (resume, stream rules, history) and §5 (waiting runs).
"""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from awaken.engine.state import RunStatus
from tests.builders import (
    agui_body,
    call,
    call_ids,
    default_config_data,
    ledger_view,
    live_server,
    make_config,
    post_agui,
    squeeze,
    types,
    user,
)
from tests.builders import agui_text as text_of

GUARDED = "/v1/ag-ui/agents/guarded"
FRONTEND = "/v1/ag-ui/agents/frontend"


def tool_message(id: str, tool_call_id: str, content: str, error: str | None = None) -> dict[str, Any]:
    message = {"id": id, "role": "tool", "toolCallId": tool_call_id, "content": content}
    if error is not None:
        message["error"] = error
    return message


ANSWER = ["STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED"]
CALL = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
#: two calls of one step: both are open while the model streams them, and both end when the step does
TWO_CALLS = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
             "TOOL_CALL_END"]


async def history(client, thread_id: str) -> list[dict[str, Any]]:
    response = await client.get(f"/v1/ag-ui/threads/{thread_id}/messages")
    assert response.status_code == 200
    return response.json()["items"]


async def suspend(client, thread_id: str, text: str, path: str = GUARDED, run_id: str = "r1",
                  message_id: str = "u1") -> list[dict]:
    events = await post_agui(client, agui_body(thread_id, run_id, [user(message_id, text)]), path)
    assert types(events)[-1] == "RUN_FINISHED"
    return events


# -- server tools ----------------------------------------------------------------------------------


async def test_an_allowed_server_tool_streams_its_call_and_result_and_the_answer_includes_it(client, server):
    """CONTRACT §3: tool calls as START/ARGS/END (arguments in fragments), backend results as
    TOOL_CALL_RESULT, then the model's answer quoting the result."""
    args = '{"expression": "6 * 7"}'
    events = await post_agui(client, agui_body("t-calc", "r1", [user("u1", f"/call calculator {args}")]))
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", *CALL, "TOOL_CALL_RESULT", "STEP_FINISHED",
                                      *ANSWER, "RUN_FINISHED"]
    fragments = [e["delta"] for e in events if e["type"] == "TOOL_CALL_ARGS"]
    assert len(fragments) >= 3 and "".join(fragments) == args
    start = next(e for e in events if e["type"] == "TOOL_CALL_START")
    assert start["toolCallName"] == "calculator" and start["parentMessageId"].startswith("msg_")
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result == {"type": "TOOL_CALL_RESULT", "messageId": f"tr_{start['toolCallId']}",
                      "toolCallId": start["toolCallId"], "content": '{"result":42}', "role": "tool"}
    assert text_of(events) == 'Here is what the tools said: calculator returned {"result":42}.'
    run = await server.ctx.ledger.get_run("r1")
    assert (run.status, run.steps) == (RunStatus.COMPLETED, 2)


async def test_several_allowed_calls_in_one_step_each_get_a_result(client):
    """CONTRACT §2.1: several /call lines = several calls in one step; each result reaches the model."""
    text = call("calculator", expression="1 + 2") + "\n" + call("calculator", expression="2 ** 5")
    events = await post_agui(client, agui_body("t-two", "r1", [user("u1", text)]))
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", *TWO_CALLS, "TOOL_CALL_RESULT",
                                      "TOOL_CALL_RESULT", "STEP_FINISHED", *ANSWER, "RUN_FINISHED"]
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ['{"result":3}', '{"result":32}']
    assert text_of(events) == ('Here is what the tools said: calculator returned {"result":3}; '
                               'calculator returned {"result":32}.')


@pytest.mark.parametrize(
    ("arguments", "error"),
    [('{"expr": "1"}', "invalid arguments: arguments: 'expression' is a required property"),
     ('{"expression": "__import__(1)"}', "unsupported element in expression: Call"),
     ('{"expression": "(10 ** 1000) ** 1000"}', "the result is too large")],
)
async def test_bad_arguments_become_an_error_result_the_model_sees(client, server, arguments, error):
    """CONTRACT §2.1: bad arguments are an error result the model reads and answers; the run completes."""
    events = await post_agui(client, agui_body("t-bad-args", "r1", [user("u1", f"/call calculator {arguments}")]))
    result = next(e for e in events if e["type"] == "TOOL_CALL_RESULT")
    assert result["content"] == error
    assert text_of(events) == f"Here is what the tools said: calculator failed: {error}."
    assert (await server.ctx.ledger.get_run("r1")).status is RunStatus.COMPLETED
    tool_item = next(m for m in await history(client, "t-bad-args") if m["role"] == "tool")
    assert tool_item["error"] == error


async def test_a_deny_policy_refuses_the_call_and_the_model_sees_the_denial(tmp_path):
    """CONTRACT §2: a permission policy per tool; ``deny`` refuses the call without running it."""
    agents = default_config_data()["agents"]
    agents["assistant"]["permissions"] = {"set_state": "deny"}
    async with live_server(make_config(tmp_path, agents=agents)) as srv, srv.client() as client:
        events = await post_agui(client, agui_body("t-deny", "r1", [user("u1", call("set_state", key="k", value=1))]))
        denial = "denied: the policy does not allow set_state"
        assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == [denial]
        assert "STATE_SNAPSHOT" not in types(events)
        assert text_of(events) == f"Here is what the tools said: set_state failed: {denial}."
        assert (await srv.ctx.ledger.get_thread("t-deny")).state == {}
        assert (await srv.ctx.ledger.get_run("r1")).status is RunStatus.COMPLETED


# -- permission gates ------------------------------------------------------------------------------


async def test_ask_ends_the_stream_after_the_call_and_commits_waiting_with_no_task(client, server):
    """CONTRACT §3/§5: a run waiting for a permission ends with RUN_FINISHED after the tool-call events;
    it is a committed ``waiting`` state and holds no task."""
    events = await suspend(client, "t-ask", call("calculator", expression="2 + 2"))
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", *CALL, "STEP_FINISHED", "RUN_FINISHED"]
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t-ask", "runId": "r1"}
    ledger = server.ctx.ledger
    assert (await ledger.get_run("r1")).status is RunStatus.WAITING
    pending = await ledger.pending_calls("t-ask")
    assert [(p.tool_call_id, p.name, p.kind, p.run_id) for p in pending] == [
        (call_ids(events)[0], "calculator", "approval", "r1")]
    assert server.ctx.app._active == {}


async def test_a_1_0_client_learns_the_pending_call_ids(client):
    """reference/agui.md §9.9: a client that declared protocolVersion 1.0 gets pendingToolCallIds for a
    client tool; a permission gate is an interrupt (tests/test_agui_interrupts.py)."""
    body = agui_body("t-v1", "r1", [user("u1", call("ask_user", question="?"))], protocolVersion="1.0")
    events = await post_agui(client, body, FRONTEND)
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": call_ids(events)}


async def test_approving_continues_the_same_run_and_the_tool_runs(client, server):
    """CONTRACT §3: a tool message without ``error`` allows the call; the same run continues and answers."""
    first = await suspend(client, "t-ok", call("calculator", expression="2 ** 10"))
    (cid,) = call_ids(first)
    body = agui_body("t-ok", "r-resume", [user("u1", "x"), tool_message("tool-1", cid, "approved")])
    events = await post_agui(client, body, GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]
    assert events[0]["runId"] == events[-1]["runId"] == "r-resume"
    assert events[1] == {"type": "TOOL_CALL_RESULT", "messageId": f"tr_{cid}", "toolCallId": cid,
                         "content": '{"result":1024}', "role": "tool"}
    assert events[2]["stepName"] == "step-2"
    assert text_of(events) == 'Here is what the tools said: calculator returned {"result":1024}.'
    runs = await server.ctx.ledger.list_runs("t-ok")
    assert [(r.run_id, r.status, r.steps) for r in runs] == [("r1", RunStatus.COMPLETED, 2)]
    assert await server.ctx.ledger.pending_calls("t-ok") == []


async def test_denying_with_error_lets_the_model_see_the_denial(client, server):
    """CONTRACT §3: a tool message with ``error`` denies the call; the tool does not run."""
    first = await suspend(client, "t-no", call("set_state", key="k", value="v"))
    (cid,) = call_ids(first)
    body = agui_body("t-no", "r2", [tool_message("tool-1", cid, "", error="not now")])
    events = await post_agui(client, body, GUARDED)
    denial = "denied: the user did not allow this call: not now"
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == [denial]
    assert text_of(events) == f"Here is what the tools said: set_state failed: {denial}."
    assert (await server.ctx.ledger.get_thread("t-no")).state == {}
    assert (await server.ctx.ledger.get_run("r1")).status is RunStatus.COMPLETED


async def test_several_pending_calls_answered_in_one_request(client, server):
    """CONTRACT §3: each pending call of the step is answered; the run continues once all are decided."""
    text = call("calculator", expression="3 * 3") + "\n" + call("set_state", key="n", value=9)
    first = await suspend(client, "t-both", text)
    c1, c2 = call_ids(first)
    assert len(await server.ctx.ledger.pending_calls("t-both")) == 2
    body = agui_body("t-both", "r2", [tool_message("d1", c1, "ok"), tool_message("d2", c2, "", error="no")])
    events = await post_agui(client, body, GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "TOOL_CALL_RESULT", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]
    assert text_of(events) == ('Here is what the tools said: calculator returned {"result":9}; '
                               "set_state failed: denied: the user did not allow this call: no.")
    assert [(r.run_id, r.status) for r in await server.ctx.ledger.list_runs("t-both")] == [
        ("r1", RunStatus.COMPLETED)]


async def test_several_pending_calls_answered_one_at_a_time(client, server):
    """CONTRACT §3: a partial answer keeps the run waiting (RUN_FINISHED again); the last one continues it."""
    text = call("calculator", expression="1 + 1") + "\n" + call("current_time")
    first = await suspend(client, "t-each", text)
    c1, c2 = call_ids(first)
    history1 = [user("u1", text), tool_message("d1", c1, "ok")]
    partial = await post_agui(client, agui_body("t-each", "r2", history1), GUARDED)
    assert types(partial) == ["RUN_STARTED", "TOOL_CALL_RESULT", "RUN_FINISHED"]
    assert partial[1]["content"] == '{"result":2}'
    assert (await server.ctx.ledger.get_run("r1")).status is RunStatus.WAITING
    assert [p.tool_call_id for p in await server.ctx.ledger.pending_calls("t-each")] == [c2]
    assert server.ctx.app._active == {}
    # the client resends its first decision (now replayed history) with the second one
    done = await post_agui(client, agui_body("t-each", "r3", [*history1, tool_message("d2", c2, "ok")]), GUARDED)
    assert squeeze(types(done)) == ["RUN_STARTED", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]
    assert text_of(done).startswith('Here is what the tools said: calculator returned {"result":2}; '
                                    'current_time returned {"iso":"')
    assert [(r.run_id, r.status) for r in await server.ctx.ledger.list_runs("t-each")] == [
        ("r1", RunStatus.COMPLETED)]


async def test_the_next_turn_after_a_decision_treats_it_as_replayed_history(client, server):
    """CONTRACT §3: everything a client holds after a resume is dropped as replayed history next turn
    (its own decision message included), so the conversation simply continues."""
    first = await suspend(client, "t-next", call("calculator", expression="5 - 3"))
    (cid,) = call_ids(first)
    held = [user("u1", "x"), {"id": first[2]["parentMessageId"], "role": "assistant", "toolCalls": [
        {"id": cid, "type": "function", "function": {"name": "calculator", "arguments": "{}"}}]},
        tool_message("decision", cid, "approved")]
    resumed = await post_agui(client, agui_body("t-next", "r2", held), GUARDED)
    result = next(e for e in resumed if e["type"] == "TOOL_CALL_RESULT")
    held += [{"id": result["messageId"], "role": "tool", "toolCallId": cid, "content": result["content"]},
             {"id": resumed[3]["messageId"], "role": "assistant", "content": text_of(resumed)}]
    events = await post_agui(client, agui_body("t-next", "r3", [*held, user("u2", "thanks")]), GUARDED)
    assert text_of(events) == 'You said: "thanks".'
    assert [(r.run_id, r.status) for r in await server.ctx.ledger.list_runs("t-next")] == [
        ("r1", RunStatus.COMPLETED), ("r3", RunStatus.COMPLETED)]


async def test_new_input_while_waiting_supersedes_the_waiting_run(client, server):
    """CONTRACT §5: one active run per thread; new user input closes the waiting call as cancelled."""
    first = await suspend(client, "t-sup", call("current_time"))
    (cid,) = call_ids(first)
    events = await post_agui(client, agui_body("t-sup", "r2", [user("u2", "never mind")]), GUARDED)
    assert text_of(events) == 'You said: "never mind".'
    runs = await server.ctx.ledger.list_runs("t-sup")
    assert [(r.run_id, r.status) for r in runs] == [("r1", RunStatus.INTERRUPTED), ("r2", RunStatus.COMPLETED)]
    tool = next(m for m in await history(client, "t-sup") if m["role"] == "tool")
    assert tool["toolCallId"] == cid and tool["content"].startswith("cancelled:")
    late = await post_agui(client, agui_body("t-sup", "r3", [tool_message("late", cid, "ok")]), GUARDED)
    assert [(e["type"], e["code"]) for e in late] == [("RUN_ERROR", "NO_NEW_INPUT")]


# -- client tools ----------------------------------------------------------------------------------


async def test_a_client_tool_result_continues_the_same_run(client, server):
    """CONTRACT §3: for a client-executed tool the tool message's content is the result; the same run
    continues (one run record, its id unchanged). The client's own message is not echoed back."""
    first = await suspend(client, "t-fe", call("ask_user", question="Your name?"), FRONTEND, run_id="r-fe")
    assert squeeze(types(first)) == ["RUN_STARTED", "STEP_STARTED", *CALL, "STEP_FINISHED", "RUN_FINISHED"]
    (cid,) = call_ids(first)
    assert [(p.kind, p.name) for p in await server.ctx.ledger.pending_calls("t-fe")] == [("client", "ask_user")]
    events = await post_agui(client, agui_body("t-fe", "r-other", [tool_message("answer-1", cid, "Ada")]), FRONTEND)
    assert squeeze(types(events)) == ["RUN_STARTED", *ANSWER, "RUN_FINISHED"]
    assert text_of(events) == "Here is what the tools said: ask_user returned Ada."
    runs = await server.ctx.ledger.list_runs("t-fe")
    assert [(r.run_id, r.status) for r in runs] == [("r-fe", RunStatus.COMPLETED)]
    tool = next(m for m in await history(client, "t-fe") if m["role"] == "tool")
    assert tool == {"id": "answer-1", "role": "tool", "toolCallId": cid, "content": "Ada"}


async def test_a_client_tool_error_is_the_result(client):
    """CONTRACT §3: a client tool's ``error`` reaches the model as a failed result."""
    first = await suspend(client, "t-fe-err", call("ask_user", question="?"), FRONTEND)
    (cid,) = call_ids(first)
    body = agui_body("t-fe-err", "r2", [tool_message("a1", cid, "", error="user closed the dialog")])
    events = await post_agui(client, body, FRONTEND)
    assert text_of(events) == "Here is what the tools said: ask_user failed: user closed the dialog."


# -- fail closed -----------------------------------------------------------------------------------


async def test_a_result_for_a_call_that_is_not_pending_fails_closed(client, server):
    """CONTRACT §3: a result for any other call → RUN_ERROR TOOL_CALL_NOT_PENDING; nothing changes."""
    first = await suspend(client, "t-wrong", call("calculator", expression="1"))
    (cid,) = call_ids(first)
    before = await ledger_view(server.ctx.ledger, "t-wrong")
    for messages in ([tool_message("x1", "call_other", "ok")],
                     [tool_message("x1", cid, "ok"), tool_message("x2", "call_other", "ok")]):
        events = await post_agui(client, agui_body("t-wrong", "r2", messages), GUARDED)
        assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "TOOL_CALL_NOT_PENDING")]
        assert await ledger_view(server.ctx.ledger, "t-wrong") == before
    # the right answer still works afterwards
    events = await post_agui(client, agui_body("t-wrong", "r3", [tool_message("x3", cid, "ok")]), GUARDED)
    assert text_of(events) == 'Here is what the tools said: calculator returned {"result":1}.'


async def test_a_result_when_nothing_is_pending_is_no_pending_run(client, server):
    """CONTRACT §3: a result when nothing on the thread waits → RUN_ERROR NO_PENDING_RUN; nothing changes."""
    await post_agui(client, agui_body("t-idle", "r1", [user("u1", "hello")]))
    before = await ledger_view(server.ctx.ledger, "t-idle")
    events = await post_agui(client, agui_body("t-idle", "r2", [tool_message("x1", "call_x", "ok")]))
    assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "NO_PENDING_RUN")]
    assert await ledger_view(server.ctx.ledger, "t-idle") == before


# -- state -----------------------------------------------------------------------------------------


async def test_set_state_sends_a_snapshot_then_valid_rfc6902_deltas(client, server):
    """CONTRACT §2.1/§3 and reference/agui.md §9.8: STATE_SNAPSHOT, then STATE_DELTA patches that apply
    to it and give exactly the ledger's thread state."""
    ledger = server.ctx.ledger
    first = await post_agui(client, agui_body("t-st", "r1", [user("u1", call("set_state", key="color", value="blue"))]))
    snapshots = [e for e in first if e["type"] == "STATE_SNAPSHOT"]
    assert snapshots == [{"type": "STATE_SNAPSHOT", "snapshot": {"color": "blue"}}]
    assert "STATE_DELTA" not in types(first)
    assert types(first).index("STATE_SNAPSHOT") > types(first).index("TOOL_CALL_RESULT")

    text = call("set_state", key="size", value={"w": 2, "h": [1, 2]}) + "\n" + call("set_state", key="color",
                                                                                    value=None)
    # HttpAgent sends its state back: a state equal to the committed one is accepted
    second = await post_agui(client, agui_body("t-st", "r2", [user("u2", text)], state={"color": "blue"}))
    assert squeeze(types(second)) == ["RUN_STARTED", "STATE_SNAPSHOT", "STEP_STARTED", *TWO_CALLS,
                                      "TOOL_CALL_RESULT", "TOOL_CALL_RESULT", "STATE_DELTA", "STEP_FINISHED",
                                      *ANSWER, "RUN_FINISHED"]
    baseline = second[1]["snapshot"]
    assert baseline == {"color": "blue"}
    state = baseline
    for event in second:
        if event["type"] == "STATE_DELTA":
            assert all(op["op"] in {"add", "remove", "replace", "move", "copy", "test"} for op in event["delta"])
            state = jsonpatch.apply_patch(state, event["delta"])
    committed = (await ledger.get_thread("t-st")).state
    assert state == committed == {"color": None, "size": {"w": 2, "h": [1, 2]}}


# -- restart ---------------------------------------------------------------------------------------


async def test_a_waiting_run_survives_a_restart(config):
    """CONTRACT §5: a waiting run is committed state; resuming it works after a server restart."""
    async with live_server(config) as srv, srv.client() as client:
        first = await suspend(client, "t-restart", call("calculator", expression="7 * 6"), run_id="r-wait")
        (cid,) = call_ids(first)
        assert srv.ctx.app._active == {}
    async with live_server(config) as srv, srv.client() as client:
        assert (await srv.ctx.ledger.get_run("r-wait")).status is RunStatus.WAITING
        items = await history(client, "t-restart")
        body = agui_body("t-restart", "r-new", [*items, tool_message("ok-1", cid, "approved")])
        events = await post_agui(client, body, GUARDED)
        assert text_of(events) == 'Here is what the tools said: calculator returned {"result":42}.'
        assert [(r.run_id, r.status) for r in await srv.ctx.ledger.list_runs("t-restart")] == [
            ("r-wait", RunStatus.COMPLETED)]


# -- history projection ----------------------------------------------------------------------------


async def test_history_projects_tool_calls_and_tool_messages(client):
    """CONTRACT §3: history items are AG-UI messages: assistant ``toolCalls``, ``tool`` messages (with
    ``error`` when the call failed or was denied), reasoning, and the final answer; no nulls."""
    text = "/think checking\n" + call("calculator", expression="2 + 2") + "\n" + call("current_time", bad=1)
    first = await suspend(client, "t-proj", text)
    c1, c2 = call_ids(first)
    reasoning_id = next(e["messageId"] for e in first if e["type"] == "REASONING_MESSAGE_START")
    step1 = next(e["parentMessageId"] for e in first if e["type"] == "TOOL_CALL_START")
    resumed = await post_agui(client, agui_body("t-proj", "r2", [tool_message("d1", c1, "yes"),
                                                                  tool_message("d2", c2, "yes")]), GUARDED)
    answer_id = next(e["messageId"] for e in resumed if e["type"] == "TEXT_MESSAGE_START")
    time_error = "invalid arguments: arguments: Additional properties are not allowed ('bad' was unexpected)"
    assert await history(client, "t-proj") == [
        {"id": "u1", "role": "user", "content": text},
        {"id": reasoning_id, "role": "reasoning", "content": "checking"},
        {"id": step1, "role": "assistant", "toolCalls": [
            {"id": c1, "type": "function", "function": {"name": "calculator", "arguments": '{"expression": "2 + 2"}'}},
            {"id": c2, "type": "function", "function": {"name": "current_time", "arguments": '{"bad": 1}'}}]},
        {"id": f"tr_{c1}", "role": "tool", "toolCallId": c1, "content": '{"result":4}'},
        {"id": f"tr_{c2}", "role": "tool", "toolCallId": c2, "content": time_error, "error": time_error},
        {"id": answer_id, "role": "assistant", "content": text_of(resumed)},
    ]


async def test_state_changed_by_an_approved_call_is_a_delta_against_the_opening_snapshot(client, server):
    """reference/agui.md §9.8: a resumed stream opens with the state *before* the approved call ran, so
    its STATE_DELTA applies to that snapshot and gives the committed state."""
    for n, value in enumerate(([1, 2, 3], [1, 2], {"moved": [1, 2]})):
        first = await suspend(client, "t-gate-state", call("set_state", key="k", value=value), run_id=f"r{n}a",
                              message_id=f"u{n}")
        (cid,) = call_ids(first)
        body = agui_body("t-gate-state", f"r{n}b", [tool_message(f"ok{n}", cid, "approved")])
        events = await post_agui(client, body, GUARDED)
        state = None
        for event in events:
            if event["type"] == "STATE_SNAPSHOT":
                state = event["snapshot"]
            elif event["type"] == "STATE_DELTA":
                state = jsonpatch.apply_patch(state, event["delta"])
        committed = (await server.ctx.ledger.get_thread("t-gate-state")).state
        assert state == committed == {"k": value}
