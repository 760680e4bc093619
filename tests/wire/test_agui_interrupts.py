"""AG-UI 1.0 interrupts and resume against a live server, one test per rule (docs/clients.md, "AG-UI interrupts").

A client that declared ``protocolVersion`` 1.0 sees a run waiting at permission gates end with
``STATE_SNAPSHOT``, ``MESSAGES_SNAPSHOT`` and ``RUN_FINISHED.outcome = {type: "interrupt"}``; it answers
with ``resume[]``. Older clients keep the stream they had (test_agui_tools.py proves it byte for byte).
"""

from __future__ import annotations

import json
from typing import Any

from awaken.engine.state import RunStatus
from tests.builders import agui_body, call_ids, ledger_view, post_agui, squeeze, types, user
from tests.builders import agui_text as text_of

GUARDED = "/v1/ag-ui/agents/guarded"
FRONTEND = "/v1/ag-ui/agents/frontend"
CALL = ["TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"]
ANSWER = ["STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED"]
INTERRUPTED = ["RUN_STARTED", "STEP_STARTED", *CALL, "STEP_FINISHED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT",
               "RUN_FINISHED"]


def calc(expression: str) -> str:
    return f"/call calculator {json.dumps({'expression': expression})}"


def v1(thread_id: str, run_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return agui_body(thread_id, run_id, messages, protocolVersion="1.0", **extra)


def approve(interrupt_id: str, **payload: Any) -> dict[str, Any]:
    return {"interruptId": interrupt_id, "status": "resolved", "payload": {"approved": True, **payload}}


def deny(interrupt_id: str, reason: str | None = None) -> dict[str, Any]:
    payload: dict[str, Any] = {"approved": False}
    if reason is not None:
        payload["reason"] = reason
    return {"interruptId": interrupt_id, "status": "resolved", "payload": payload}


async def interrupted(client, thread_id: str, text: str, path: str = GUARDED) -> list[dict[str, Any]]:
    events = await post_agui(client, v1(thread_id, "r1", [user("u1", text)]), path)
    assert types(events)[-1] == "RUN_FINISHED" and events[-1]["outcome"]["type"] == "interrupt"
    return events


def refusal(events: list[dict[str, Any]]) -> str:
    assert types(events) == ["RUN_ERROR"], events
    return events[0]["code"]


# -- the interrupt ---------------------------------------------------------------------------------


async def test_a_gate_ends_a_1_0_run_with_snapshots_and_one_interrupt_per_pending_call(client, server):
    """Rule 1: one interrupt per call at a gate (reason tool_call, toolCallId, responseSchema), after a
    STATE_SNAPSHOT and a MESSAGES_SNAPSHOT holding the whole thread."""
    events = await interrupted(client, "t-int", calc("6 * 7") + "\n/call current_time {}")
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
                                      "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_END",
                                      "STEP_FINISHED", "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    first, second = call_ids(events)
    parent = events[2]["parentMessageId"]
    assert events[-3] == {"type": "STATE_SNAPSHOT", "snapshot": {}}
    assert events[-2] == {"type": "MESSAGES_SNAPSHOT", "messages": [
        {"id": "u1", "role": "user", "content": calc("6 * 7") + "\n/call current_time {}"},
        {"id": parent, "role": "assistant", "toolCalls": [
            {"id": first, "type": "function", "function": {"name": "calculator",
                                                           "arguments": '{"expression": "6 * 7"}'}},
            {"id": second, "type": "function", "function": {"name": "current_time", "arguments": "{}"}}]}]}
    time_parameters = server.ctx.app.tools.get("current_time").parameters
    calculator_parameters = server.ctx.app.tools.get("calculator").parameters
    (usage,) = events[-1].pop("usage")
    assert set(usage) == {"inputTokens", "outputTokens", "totalTokens"} and usage["totalTokens"] > 0
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t-int", "runId": "r1", "outcome": {
        "type": "interrupt", "interrupts": [
            {"id": f"int_{first}", "reason": "tool_call", "toolCallId": first,
             "message": 'Allow calculator with arguments {"expression": "6 * 7"}?',
             "responseSchema": {"type": "object", "properties": {
                 "approved": {"type": "boolean"}, "reason": {"type": "string"},
                 "editedArgs": {**calculator_parameters,
                                "description": "Full replacement of the tool's arguments (not merged)."}},
                 "required": ["approved"]}},
            {"id": f"int_{second}", "reason": "tool_call", "toolCallId": second,
             "message": "Allow current_time with arguments {}?",
             "responseSchema": {"type": "object", "properties": {
                 "approved": {"type": "boolean"}, "reason": {"type": "string"},
                 "editedArgs": {**time_parameters,
                                "description": "Full replacement of the tool's arguments (not merged)."}},
                 "required": ["approved"]}}]}}


async def test_an_older_client_keeps_the_plain_run_finished(client):
    """Rule 1: no protocolVersion, no interrupt, no snapshots: today's stream."""
    events = await post_agui(client, agui_body("t-old", "r1", [user("u1", calc("1 + 1"))]), GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", *CALL, "STEP_FINISHED", "RUN_FINISHED"]
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t-old", "runId": "r1"}


async def test_a_client_tool_ends_with_success_and_pending_call_ids_not_an_interrupt(client):
    """Rule 1 (1.0 frontend-tools rule): success with pendingToolCallIds; the tool message continues it."""
    events = await post_agui(client, v1("t-ft", "r1", [user("u1", '/call ask_user {"question": "name?"}')]),
                             FRONTEND)
    assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", *CALL, "STEP_FINISHED", "RUN_FINISHED"]
    (cid,) = call_ids(events)
    assert events[-1]["outcome"] == {"type": "success", "pendingToolCallIds": [cid]}
    answer = {"id": "tool-1", "role": "tool", "toolCallId": cid, "content": "Ada"}
    resumed = await post_agui(client, v1("t-ft", "r2", [user("u1", "x"), answer]), FRONTEND)
    assert squeeze(types(resumed)) == ["RUN_STARTED", *ANSWER, "RUN_FINISHED"]
    assert text_of(resumed) == "Here is what the tools said: ask_user returned Ada."


# -- resume ----------------------------------------------------------------------------------------


async def test_an_approving_resume_runs_the_call_and_streams_only_its_result(client, server):
    """Rule 2: resolved + approved runs the call; the resumed stream has the result for the original
    call id, never a second TOOL_CALL_START; the same run continues and completes."""
    (cid,) = call_ids(await interrupted(client, "t-ok", calc("2 ** 10")))
    events = await post_agui(client, v1("t-ok", "r2", [user("u1", calc("2 ** 10"))],
                                        resume=[approve(f"int_{cid}")]), GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]
    assert events[1] == {"type": "TOOL_CALL_RESULT", "messageId": f"tr_{cid}", "toolCallId": cid,
                         "content": '{"result":1024}', "role": "tool"}
    run = (await server.ctx.ledger.list_runs("t-ok"))[0]
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t-ok", "runId": "r2", "usage": [
        {"inputTokens": run.usage.input_tokens, "outputTokens": run.usage.output_tokens,
         "totalTokens": run.usage.total_tokens}]}
    _, runs, messages, pending = await ledger_view(server.ctx.ledger, "t-ok")
    assert [(r.run_id, r.status) for r in runs] == [("r1", RunStatus.COMPLETED)]
    assert pending == [] and messages[2].tool_result.approval == "approved"


async def test_a_denying_resume_commits_the_reason(client, server):
    """Rule 2: approved false denies the call with its reason; the model sees the denial."""
    (cid,) = call_ids(await interrupted(client, "t-no", calc("1 + 1")))
    events = await post_agui(client, v1("t-no", "r2", [], resume=[deny(f"int_{cid}", "too risky")]), GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]
    assert events[1]["content"] == "denied: the user did not allow this call: too risky"
    _, _, messages, _ = await ledger_view(server.ctx.ledger, "t-no")
    result = messages[2].tool_result
    assert (result.status, result.approval, result.content) == (
        "denied", "denied", "denied: the user did not allow this call: too risky")


async def test_a_cancelled_entry_denies_the_call(client, server):
    """Rule 2: status cancelled denies the call (reason "cancelled")."""
    (cid,) = call_ids(await interrupted(client, "t-cx", calc("1 + 1")))
    events = await post_agui(client, v1("t-cx", "r2", [], resume=[{"interruptId": f"int_{cid}",
                                                                    "status": "cancelled"}]), GUARDED)
    assert events[1] == {"type": "TOOL_CALL_RESULT", "messageId": f"tr_{cid}", "toolCallId": cid,
                         "content": "denied: the user did not allow this call: cancelled", "role": "tool"}


async def test_edited_args_replace_the_arguments_and_the_committed_call_shows_what_ran(client, server):
    """Rule 2: editedArgs (valid against the tool's schema) run instead of the model's arguments; the
    committed result records them and history shows the call with them."""
    (cid,) = call_ids(await interrupted(client, "t-ed", calc("1 + 1")))
    events = await post_agui(client, v1("t-ed", "r2", [], resume=[
        approve(f"int_{cid}", editedArgs={"expression": "5 * 5"})]), GUARDED)
    assert events[1]["content"] == '{"result":25}'
    _, _, messages, _ = await ledger_view(server.ctx.ledger, "t-ed")
    assert messages[2].tool_result.arguments == '{"expression":"5 * 5"}'
    items = (await client.get("/v1/ag-ui/threads/t-ed/messages")).json()["items"]
    assert items[1]["toolCalls"][0]["function"]["arguments"] == '{"expression":"5 * 5"}'


async def test_edited_args_outside_the_tool_schema_are_refused_and_change_nothing(client, server):
    (cid,) = call_ids(await interrupted(client, "t-bad", calc("1 + 1")))
    before = await ledger_view(server.ctx.ledger, "t-bad")
    events = await post_agui(client, v1("t-bad", "r2", [], resume=[
        approve(f"int_{cid}", editedArgs={"expression": 5})]), GUARDED)
    assert refusal(events) == "INVALID_RESUME"
    assert "expression: 5 is not of type 'string'" in events[0]["message"]
    assert await ledger_view(server.ctx.ledger, "t-bad") == before


async def test_a_payload_outside_the_response_schema_is_refused(client, server):
    (cid,) = call_ids(await interrupted(client, "t-pay", calc("1 + 1")))
    before = await ledger_view(server.ctx.ledger, "t-pay")
    for payload in ({"approved": "yes"}, None, {"approved": False, "editedArgs": {"expression": "1"}}):
        entry = {"interruptId": f"int_{cid}", "status": "resolved"}
        if payload is not None:
            entry["payload"] = payload
        assert refusal(await post_agui(client, v1("t-pay", "r2", [], resume=[entry]), GUARDED)) == "INVALID_RESUME"
    assert await ledger_view(server.ctx.ledger, "t-pay") == before


async def test_an_unknown_interrupt_id_is_refused_and_changes_nothing(client, server):
    (cid,) = call_ids(await interrupted(client, "t-unk", calc("1 + 1")))
    before = await ledger_view(server.ctx.ledger, "t-unk")
    events = await post_agui(client, v1("t-unk", "r2", [], resume=[approve(f"int_{cid}"), approve("int_nope")]),
                             GUARDED)
    assert refusal(events) == "INTERRUPT_UNKNOWN"
    assert await ledger_view(server.ctx.ledger, "t-unk") == before


async def test_a_resume_missing_an_open_interrupt_is_refused(client, server):
    first, _ = call_ids(await interrupted(client, "t-miss", calc("1 + 1") + "\n" + calc("2 + 2")))
    before = await ledger_view(server.ctx.ledger, "t-miss")
    events = await post_agui(client, v1("t-miss", "r2", [], resume=[approve(f"int_{first}")]), GUARDED)
    assert refusal(events) == "INTERRUPT_MISSING"
    assert await ledger_view(server.ctx.ledger, "t-miss") == before


async def test_new_input_while_interrupts_are_open_is_refused(client, server):
    """Rule 2 (interrupts.mdx rule 4): a 1.0 client's new user input without a resume is refused."""
    (cid,) = call_ids(await interrupted(client, "t-open", calc("1 + 1")))
    before = await ledger_view(server.ctx.ledger, "t-open")
    events = await post_agui(client, v1("t-open", "r2", [user("u1", calc("1 + 1")), user("u2", "never mind")]),
                             GUARDED)
    assert refusal(events) == "INTERRUPTS_OPEN"
    assert f"int_{cid}" in events[0]["message"]
    assert await ledger_view(server.ctx.ledger, "t-open") == before


async def test_repeating_a_resume_with_the_same_payload_is_idempotent(client, server):
    """Rule 2: the same resume again starts and finishes a stream and changes nothing."""
    (cid,) = call_ids(await interrupted(client, "t-idem", calc("3 * 3")))
    resume = [approve(f"int_{cid}", editedArgs={"expression": "4 * 4"})]
    await post_agui(client, v1("t-idem", "r2", [], resume=resume), GUARDED)
    after = await ledger_view(server.ctx.ledger, "t-idem")
    events = await post_agui(client, v1("t-idem", "r3", [], resume=resume), GUARDED)
    assert events == [{"type": "RUN_STARTED", "threadId": "t-idem", "runId": "r3", "protocolVersion": "1.0"},
                      {"type": "RUN_FINISHED", "threadId": "t-idem", "runId": "r3"}]
    assert await ledger_view(server.ctx.ledger, "t-idem") == after


async def test_a_second_resume_with_another_answer_is_refused(client, server):
    (cid,) = call_ids(await interrupted(client, "t-2nd", calc("3 * 3")))
    await post_agui(client, v1("t-2nd", "r2", [], resume=[approve(f"int_{cid}")]), GUARDED)
    after = await ledger_view(server.ctx.ledger, "t-2nd")
    events = await post_agui(client, v1("t-2nd", "r3", [], resume=[deny(f"int_{cid}")]), GUARDED)
    assert refusal(events) == "INTERRUPT_ANSWERED"
    assert await ledger_view(server.ctx.ledger, "t-2nd") == after


async def test_the_tool_message_path_still_decides_a_gate_for_a_1_0_client(client):
    """Rule 2: a role "tool" message still approves (clients that use it keep working)."""
    (cid,) = call_ids(await interrupted(client, "t-msg", calc("2 + 2")))
    answer = {"id": "tool-1", "role": "tool", "toolCallId": cid, "content": "approved"}
    events = await post_agui(client, v1("t-msg", "r2", [user("u1", calc("2 + 2")), answer]), GUARDED)
    assert squeeze(types(events)) == ["RUN_STARTED", "TOOL_CALL_RESULT", *ANSWER, "RUN_FINISHED"]


async def test_a_second_gate_after_a_resume_interrupts_again(client):
    """A resumed run that reaches another gate ends with a fresh interrupt for the new call only."""
    (cid,) = call_ids(await interrupted(client, "t-again", calc("1 + 1")))
    events = await post_agui(client, v1("t-again", "r2", [], resume=[approve(f"int_{cid}")]), GUARDED)
    assert types(events)[-1] == "RUN_FINISHED" and "outcome" not in events[-1]
    nxt = await post_agui(client, v1("t-again", "r3", [user("u2", calc("3 + 3"))]), GUARDED)
    assert squeeze(types(nxt)) == INTERRUPTED[:3] + ["TOOL_CALL_ARGS", "TOOL_CALL_END"] + INTERRUPTED[5:]
    (new,) = call_ids(nxt)
    assert [i["id"] for i in nxt[-1]["outcome"]["interrupts"]] == [f"int_{new}"]
