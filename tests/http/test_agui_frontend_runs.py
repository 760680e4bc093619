"""Per-run frontend tools, context, shared state and the denial grammar over AG-UI, against a live server
(issue 14 §1-§3): what CopilotKit's ``useFrontendTool``, ``useHumanInTheLoop``, ``useAgentContext`` and
shared state send, run as the issue promises."""

from __future__ import annotations

from typing import Any

import pytest

from awaken.engine.state import RunStatus
from awaken.models import ToolSpec
from tests.builders import agui_body, call, call_ids, live_server, post_agui, squeeze, types, user
from tests.builders import agui_text as text_of

GUARDED = "/v1/ag-ui/agents/guarded"
ASK_USER = {"name": "ask_user", "description": "Ask the person a question",
            "parameters": {"type": "object", "properties": {"question": {"type": "string"}}, "required": ["question"]}}
#: how the page renders the gate of a server tool (useHumanInTheLoop with the tool's name)
CALCULATOR_GATE = {"name": "calculator", "description": "Approve a calculation",
                   "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}
SET_STATE_GATE = {"name": "set_state", "description": "Approve a state change", "parameters": {"type": "object"}}


def tool_message(id: str, tool_call_id: str, content: str) -> dict[str, Any]:
    return {"id": id, "role": "tool", "toolCallId": tool_call_id, "content": content}


async def test_a_frontend_tool_call_waits_across_a_restart_and_resumes_with_the_pages_answer(config):
    """§1: a call to a tool declared in ``tools`` makes the run wait (committed, pending ``client``);
    the tools are stored with the run; after a restart the tool message resumes the same run."""
    async with live_server(config) as srv, srv.client() as client:
        events = await post_agui(client, agui_body("t-ask", "r-ask", [user("u1", call("ask_user", question="Name?"))],
                                                   tools=[ASK_USER]))
        assert squeeze(types(events)) == ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
                                          "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
        (cid,) = call_ids(events)
        (pending,) = await srv.ctx.ledger.pending_calls("t-ask")
        assert (pending.tool_call_id, pending.name, pending.kind) == (cid, "ask_user", "client")
    async with live_server(config) as srv, srv.client() as client:
        record = await srv.ctx.ledger.get_run("r-ask")
        assert (record.status, record.tools) == (RunStatus.WAITING, (
            ToolSpec("ask_user", "Ask the person a question", ASK_USER["parameters"]),))
        events = await post_agui(client, agui_body("t-ask", "r-2", [tool_message("tm1", cid, "Ada")]))
        assert text_of(events) == "Here is what the tools said: ask_user returned Ada."
        assert [(r.run_id, r.status) for r in await srv.ctx.ledger.list_runs("t-ask")] == [
            ("r-ask", RunStatus.COMPLETED)]


async def test_a_frontend_tool_naming_a_server_tool_never_replaces_it(client, server):
    """§1: declaring ``calculator`` is accepted; the server's calculator is the one that runs."""
    events = await post_agui(client, agui_body("t-same", "r1", [user("u1", call("calculator", expression="6*7"))],
                                               tools=[CALCULATOR_GATE]))
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == ['{"result":42}']
    assert await server.ctx.ledger.pending_calls("t-same") == []
    assert (await server.ctx.ledger.get_run("r1")).tools == ()


async def gate(client, thread_id: str, text: str) -> str:
    events = await post_agui(client, agui_body(thread_id, "r1", [user("u1", text)],
                                               tools=[CALCULATOR_GATE, SET_STATE_GATE]), GUARDED)
    assert types(events)[-1] == "RUN_FINISHED"
    (cid,) = call_ids(events)
    return cid


async def test_approving_a_gate_rendered_by_the_page_runs_the_tool(client, server):
    cid = await gate(client, "t-yes", call("calculator", expression="2**5"))
    events = await post_agui(client, agui_body("t-yes", "r2", [tool_message("tm1", cid, '{"approved": true}')],
                                               tools=[CALCULATOR_GATE, SET_STATE_GATE]), GUARDED)
    assert text_of(events) == 'Here is what the tools said: calculator returned {"result":32}.'


@pytest.mark.parametrize(("content", "shown"), [
    ('{"approved": false, "reason": "too risky"}', "denied: the user did not allow this call: too risky"),
    ('{"approved": false}', "denied: the user did not allow this call"),
    ("false", "denied: the user did not allow this call"),
    ("Denied", "denied: the user did not allow this call"),
    ("cancel", "denied: the user did not allow this call"),
])
async def test_an_explicit_refusal_denies_and_the_tool_does_not_run(client, server, content, shown):
    """§3: a refusal without ``error`` denies: the tool does not run, the denial and its reason are
    committed, shown in history, and the answer says so."""
    cid = await gate(client, "t-no", call("set_state", key="k", value="v"))
    events = await post_agui(client, agui_body("t-no", "r2", [tool_message("tm1", cid, content)]), GUARDED)
    assert [e["content"] for e in events if e["type"] == "TOOL_CALL_RESULT"] == [shown]
    assert text_of(events) == f"Here is what the tools said: set_state failed: {shown}."
    assert (await server.ctx.ledger.get_thread("t-no")).state == {}
    items = (await client.get("/v1/ag-ui/threads/t-no/messages")).json()["items"]
    assert {"id": f"tr_{cid}", "role": "tool", "toolCallId": cid, "content": shown, "error": shown} in items


async def test_any_other_answer_allows(client, server):
    """§3: "no error allows" keeps holding for every other content."""
    cid = await gate(client, "t-other", call("set_state", key="k", value="v"))
    await post_agui(client, agui_body("t-other", "r2", [tool_message("tm1", cid, "sure, go ahead")]), GUARDED)
    assert (await server.ctx.ledger.get_thread("t-other")).state == {"k": "v"}


async def test_context_reaches_the_model(client):
    """§2: context entries reach the model for that run (``/context`` answers with them)."""
    context = [{"description": "user name", "value": "Ada"}, {"description": "plan", "value": "pro"}]
    events = await post_agui(client, agui_body("t-ctx", "r1", [user("u1", "/context")], context=context))
    assert text_of(events) == "Context: user name = Ada; plan = pro."
    events = await post_agui(client, agui_body("t-ctx", "r2", [user("u2", "/context")]))
    assert text_of(events) == "Context: none."


async def test_client_state_becomes_the_threads_state_and_the_run_starts_from_it(client, server):
    """§2: a non-empty state is committed with the run's input, the stream opens with its snapshot,
    the agent reads it, and a tool's change applies on top of it."""
    state = {"color": "teal", "items": [1, 2]}
    events = await post_agui(client, agui_body("t-state", "r1", [user("u1", "/state")], state=state))
    assert events[1] == {"type": "STATE_SNAPSHOT", "snapshot": state}
    assert text_of(events) == 'State: {"color":"teal","items":[1,2]}.'
    assert (await server.ctx.ledger.get_thread("t-state")).state == state
    events = await post_agui(client, agui_body("t-state", "r2", [user("u2", call("set_state", key="size", value=3))],
                                               state={"color": "red"}))
    assert events[1] == {"type": "STATE_SNAPSHOT", "snapshot": {"color": "red"}}
    assert (await server.ctx.ledger.get_thread("t-state")).state == {"color": "red", "size": 3}
    events = await post_agui(client, agui_body("t-state", "r3", [user("u3", "/state")]))
    assert text_of(events) == 'State: {"color":"red","size":3}.'
