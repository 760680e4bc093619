"""Engine limits that only show with a real provider: reused call ids and the run-wide step limit."""

from __future__ import annotations

from tests.builders import agui_body, live_server, make_config, post_agui, types
from tests.fake_openai import DONE, fake_openai_server, finish, role, stream, text_reply, tool_call


def _calls_calculator_as_call_0():
    return stream(role(), tool_call(0, id="call_0", name="calculator", arguments='{"expression": "1+1"}'),
                  finish("tool_calls"), DONE)


async def test_a_provider_that_reuses_call_ids_every_turn_keeps_working(tmp_path, nursery, monkeypatch):
    """Issue 6.1 / CONTRACT §5: ids like `call_0` on every response must not collide with the
    thread's earlier calls: the second turn gets a fresh id and commits like the first."""
    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "k")
    script = [_calls_calculator_as_call_0(), text_reply("two"), _calls_calculator_as_call_0(), text_reply("two")]
    async with fake_openai_server(nursery, script) as upstream:
        config = make_config(tmp_path, providers={"openai": {"base_url": upstream.base_url,
                                                             "api_key_env": "FAKE_OPENAI_API_KEY"}},
                             agents={"assistant": {"model": "openai:m", "tools": ["calculator"]}})
        async with live_server(config) as server, server.client() as client:
            first = await post_agui(client, agui_body("t", "r1", [{"id": "u1", "role": "user", "content": "a"}]))
            second = await post_agui(client, agui_body("t", "r2", [{"id": "u2", "role": "user", "content": "b"}]))
            runs = await server.ctx.ledger.list_runs("t")
    assert types(first)[-1] == types(second)[-1] == "RUN_FINISHED"
    first_id = next(e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START")
    second_id = next(e["toolCallId"] for e in second if e["type"] == "TOOL_CALL_START")
    assert first_id == "call_0" and second_id != "call_0" and second_id.startswith("call_")
    assert [r.status for r in runs] == ["completed", "completed"]
    # the provider is shown the ids the ledger holds, consistently
    ids_sent = [m["tool_calls"][0]["id"] for m in upstream.requests[3].json["messages"] if m.get("tool_calls")]
    assert ids_sent == ["call_0", second_id]


async def test_the_step_limit_counts_steps_across_resumes(tmp_path, nursery, monkeypatch):
    """CONTRACT §2: a step limit. A model that asks for a client tool again after every answer is
    stopped after max_steps steps of the run in all, not max_steps per resume."""
    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "k")
    asks = lambda _request: stream(role(), tool_call(0, name="ask_user", arguments='{"question": "?"}'),  # noqa: E731
                                   finish("tool_calls"), DONE)
    async with fake_openai_server(nursery, default=asks) as upstream:
        config = make_config(tmp_path, providers={"openai": {"base_url": upstream.base_url,
                                                             "api_key_env": "FAKE_OPENAI_API_KEY"}},
                             agents={"frontend": {"model": "openai:m", "max_steps": 3,
                                                  "client_tools": [{"name": "ask_user"}]}},
                             default_agent="frontend")
        async with live_server(config) as server, server.client() as client:
            endings = []
            messages = [{"id": "u1", "role": "user", "content": "go"}]
            for turn in range(4):
                events = await post_agui(client, agui_body("t", f"r{turn}", messages))
                endings.append(events[-1].get("code", events[-1]["type"]))
                if events[-1]["type"] != "RUN_FINISHED":
                    break
                call = next(e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START")
                messages = messages + [{"id": f"t{turn}", "role": "tool", "toolCallId": call, "content": "yes"}]
            runs = await server.ctx.ledger.list_runs("t")
    assert endings == ["RUN_FINISHED", "RUN_FINISHED", "RUN_FINISHED", "STEP_LIMIT"]
    assert [(r.status, r.steps, r.error_code) for r in runs] == [("failed", 3, "STEP_LIMIT")]


async def test_a_call_id_reused_from_beyond_the_history_budget_gets_a_fresh_id(tmp_path, nursery, monkeypatch):
    """The run reads only its history budget, so it cannot see a ``call_0`` committed long ago; the
    step still commits with a fresh id (the thread never holds two calls with one id) and the run
    completes, turn after turn."""
    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "k")
    turns = 3
    script = [step for _ in range(turns) for step in (_calls_calculator_as_call_0(), text_reply("two"))]
    async with fake_openai_server(nursery, script) as upstream:
        config = make_config(tmp_path, providers={"openai": {"base_url": upstream.base_url,
                                                             "api_key_env": "FAKE_OPENAI_API_KEY"}},
                             agents={"assistant": {"model": "openai:m", "tools": ["calculator"],
                                                   "history_messages": 1}})
        async with live_server(config) as server, server.client() as client:
            replies = [await post_agui(client, agui_body("t", f"r{n}", [{"id": f"u{n}", "role": "user",
                                                                          "content": "a"}]))
                       for n in range(turns)]
            runs = await server.ctx.ledger.list_runs("t")
            view = await server.ctx.ledger.thread_view("t")
    assert [types(r)[-1] for r in replies] == ["RUN_FINISHED"] * turns
    assert [r.status for r in runs] == ["completed"] * turns
    committed = [c.tool_call_id for m in view.messages for c in m.tool_calls]
    assert committed[0] == "call_0" and len(set(committed)) == turns
    results = [m.tool_result.tool_call_id for m in view.messages if m.tool_result is not None]
    assert results == committed
