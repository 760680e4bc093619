"""The CopilotKit runtime endpoint over HTTP (issue 14 §4): info, run, connect and stop in the REST form
and the single-endpoint form, over the same engine and ledger as AG-UI."""

from __future__ import annotations

from typing import Any

import orjson

from awaken.engine.state import RunStatus
from tests.builders import (
    Frames,
    agui_body,
    is_type,
    live_server,
    make_config,
    parse_sse,
    release,
    types,
    user,
)
from tests.builders import agui_text as text_of

CK = "/v1/copilotkit"


async def sse(response) -> list[dict[str, Any]]:
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.content)


async def test_info_lists_the_configs_agents_with_their_descriptions(client, server):
    rest = await client.get(f"{CK}/info")
    single = await client.post(CK, json={"method": "info"})
    assert rest.status_code == single.status_code == 200
    assert rest.json() == single.json()
    agents = rest.json()["agents"]
    assert {k: v["description"] for k, v in agents.items()} == {
        a.id: a.config.description for a in server.ctx.agents.all()}
    # the discovery route reuses the AG-UI capabilities document, agent by agent
    for agent_id, entry in agents.items():
        served = await client.get(f"/v1/ag-ui/agents/{agent_id}/capabilities")
        assert entry["capabilities"] == served.json()
    assert rest.json()["mode"] == "sse"


async def test_run_streams_an_agui_run_and_commits_it(client, server):
    body = agui_body("t-ck", "r1", [user("u1", "hello")])
    events = await sse(await client.post(f"{CK}/agent/assistant/run", json=body))
    assert text_of(events) == 'You said: "hello".'
    assert events[0]["type"] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    body = agui_body("t-ck", "r2", [user("u1", "hello"), user("u2", "again")])
    events = await sse(await client.post(CK, json={"method": "agent/run", "params": {"agentId": "assistant"},
                                                   "body": body}))
    assert text_of(events) == 'You said: "again".'
    assert [(r.run_id, r.status) for r in await server.ctx.ledger.list_runs("t-ck")] == [
        ("r1", RunStatus.COMPLETED), ("r2", RunStatus.COMPLETED)]


async def test_run_refusals_are_agui_run_errors_and_unknown_agents_404(client):
    events = await sse(await client.post(f"{CK}/agent/assistant/run",
                                         json=agui_body("t-bad", "r1", [user("u1", "x")], state=[1])))
    assert types(events) == ["RUN_ERROR"] and events[0]["code"] == "UNSUPPORTED_FIELD"
    missing = await client.post(f"{CK}/agent/nobody/run", json=agui_body("t-bad", "r1", [user("u1", "x")]))
    assert missing.status_code == 404
    assert missing.json()["error"] == "not_found"


async def test_connect_replays_the_threads_committed_history_and_state(client):
    await client.post(f"{CK}/agent/assistant/run", json=agui_body(
        "t-reload", "r1", [user("u1", '/call calculator {"expression": "6*7"}')], state={"color": "teal"}))
    connect_body = agui_body("t-reload", "r-connect", [])
    rest = await sse(await client.post(f"{CK}/agent/assistant/connect", json=connect_body))
    single = await sse(await client.post(CK, json={"method": "agent/connect", "params": {"agentId": "assistant"},
                                                   "body": connect_body}))
    assert rest == single
    assert types(rest) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert rest[0]["threadId"] == "t-reload" and rest[0]["runId"] == "r1"
    history = (await client.get("/v1/ag-ui/threads/t-reload/messages")).json()["items"]
    assert rest[1]["messages"] == history
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert rest[2]["snapshot"] == {"color": "teal"}


async def test_connect_joins_the_active_run_after_the_finished_runs_history(client, server):
    """The second run commits a tool step, then is held (scripted ``/hold``) after its answer's first
    word; a reloaded page's ``connect`` gets the finished history, then that run from its start to its
    end, without the events of what the history already holds (the committed tool step)."""
    await client.post(f"{CK}/agent/assistant/run", json=agui_body("t-join", "r1", [user("u1", "hello")]))
    ask = '/call calculator {"expression": "6*7"}\n/hold ck-join'
    body = agui_body("t-join", "r2", [user("u1", "hello"), user("u2", ask)])
    async with client.stream("POST", f"{CK}/agent/assistant/run", json=body) as running:
        streamed = Frames(running)
        await streamed.until(is_type("TEXT_MESSAGE_CONTENT"))
        connect = agui_body("t-join", "r-connect", [])
        async with client.stream("POST", f"{CK}/agent/assistant/connect", json=connect) as joined:
            assert joined.status_code == 200
            assert joined.headers["content-type"].startswith("text/event-stream")
            replay = Frames(joined)
            before = [p for _, p in await replay.until(is_type("TEXT_MESSAGE_CONTENT"))]
            assert server.ctx.app.active("t-join").run_id == "r2"  # joined while the run is held
            await release(server, "ck-join")
            after = [p for _, p in await replay.rest()]
        await streamed.rest()
    events = before + after
    history = (await client.get("/v1/ag-ui/threads/t-join/messages")).json()["items"]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant", "tool", "assistant"]
    assert types(events[:3]) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
    assert events[0]["runId"] == events[2]["runId"] == "r1"
    assert events[1]["messages"] == history[:5]  # the finished run, the held run's input and committed tool step
    live = events[3:]
    assert types(live) == ["RUN_STARTED", "STEP_STARTED", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START"] + \
        ["TEXT_MESSAGE_CONTENT"] * (len(live) - 8) + ["TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert live[0]["runId"] == live[-1]["runId"] == "r2"
    assert live[4]["messageId"] == history[5]["id"]
    assert text_of(live) == history[5]["content"] == 'Here is what the tools said: calculator returned {"result":42}.'


async def test_connect_to_an_empty_thread_replays_nothing(client):
    assert await sse(await client.post(f"{CK}/agent/assistant/connect", json=agui_body("t-new", "r", []))) == []


async def test_stop_stops_the_threads_active_run_in_both_forms(client, server):
    """The run is held open by the scripted ``/hold`` (never released); stop is sent once it streams."""
    for form in ("rest", "single"):
        thread = f"t-stop-{form}"
        async with client.stream("POST", f"{CK}/agent/assistant/run",
                                 json=agui_body(thread, f"r-{form}", [user("u1", f"/hold never-{form}")])) as live:
            chunks = live.aiter_text()  # kept referenced: a collected iterator would close the response
            async for chunk in chunks:
                if "TEXT_MESSAGE_CONTENT" in chunk:
                    break
            assert server.ctx.app.active(thread).run_id == f"r-{form}", server.ctx.app.active(thread).run_id
            wrong = await client.post(f"{CK}/agent/assistant/stop/{thread}", json={"runId": "not-it"})
            assert wrong.json() == {"stopped": False,
                                    "message": f"Run 'not-it' is not the active run for thread '{thread}'."}
            if form == "rest":
                answer = await client.post(f"{CK}/agent/assistant/stop/{thread}", json={"runId": f"r-{form}"})
            else:
                answer = await client.post(CK, json={"method": "agent/stop",
                                                     "params": {"agentId": "assistant", "threadId": thread}})
            assert answer.status_code == 200
            assert answer.json()["stopped"] is True, (form, answer.json())
        run = await server.ctx.ledger.get_run(f"r-{form}")
        assert (run.status, run.cause) == (RunStatus.INTERRUPTED, "stopped"), form
    nothing = await client.post(f"{CK}/agent/assistant/stop/t-idle")
    assert nothing.json() == {"stopped": False, "message": "No active run for thread 't-idle'."}


async def test_bad_calls_get_the_runtimes_error_shape(client):
    assert (await client.get(f"{CK}/agent/assistant/run")).status_code == 404
    bad = await client.post(CK, content=orjson.dumps({"method": "agent/run", "params": {"agentId": "assistant"}}),
                            headers={"content-type": "application/json"})
    assert (bad.status_code, bad.json()) == (400, {"error": "invalid_request",
                                                   "message": "Missing request body for JSON handler"})
    bad = await client.post(f"{CK}/agent/assistant/connect", json={"threadId": 3})
    assert (bad.status_code, bad.json()["message"]) == (400, "threadId must be a non-empty string")


async def test_with_auth_on_connect_replays_a_thread_only_to_its_owner_or_an_admin(tmp_path, monkeypatch):
    """No credentials get 401; a user who does not own the thread gets the empty replay of an unknown
    thread; an admin gets the replay."""
    keys = {"AWAKEN_TEST_BOB_KEY": "bob-key-0123456789abcdef", "AWAKEN_TEST_OPS_KEY": "ops-key-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    tokens = [{"name": n, "env": f"AWAKEN_TEST_{n.upper()}_KEY", "role": "admin" if n == "ops" else "user",
               "subject": n} for n in ("bob", "ops")]
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})

    def bearer(name: str) -> dict[str, str]:
        return {"authorization": f"Bearer {keys[f'AWAKEN_TEST_{name.upper()}_KEY']}"}

    async with live_server(config) as srv, srv.client() as client:
        assert (await client.get(f"{CK}/info")).status_code == 401
        await sse(await client.post(f"{CK}/agent/assistant/run", headers=bearer("ops"),
                                    json=agui_body("t-ops", "r1", [user("u1", "mine")])))
        owner = (await srv.ctx.ledger.get_thread("t-ops")).owner
        connect = agui_body("t-ops", "r-c", [])
        admin = await sse(await client.post(f"{CK}/agent/assistant/connect", headers=bearer("ops"), json=connect))
        assert types(admin) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        assert owner != "bob"
        assert await sse(await client.post(f"{CK}/agent/assistant/connect", headers=bearer("bob"), json=connect)) == []


async def test_with_auth_on_the_owner_replays_its_thread_and_another_user_cannot_stop_its_run(tmp_path, monkeypatch):
    """A user's own thread replays to it (the owner is stored at the run's first write); another user's
    stop finds no run of its own there and stops nothing; the owner's stop does."""
    keys = {"AWAKEN_TEST_ALICE_KEY": "alice-key-0123456789abcdef", "AWAKEN_TEST_BOB_KEY": "bob-key-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)
    tokens = [{"name": n, "env": f"AWAKEN_TEST_{n.upper()}_KEY", "role": "user", "subject": n} for n in ("alice", "bob")]
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})

    def bearer(name: str) -> dict[str, str]:
        return {"authorization": f"Bearer {keys[f'AWAKEN_TEST_{name.upper()}_KEY']}"}

    async with live_server(config) as srv, srv.client() as client:
        await sse(await client.post(f"{CK}/agent/assistant/run", headers=bearer("alice"),
                                    json=agui_body("t-alice", "r1", [user("u1", "mine")])))
        connect = agui_body("t-alice", "r-c", [])
        own = await sse(await client.post(f"{CK}/agent/assistant/connect", headers=bearer("alice"), json=connect))
        assert types(own) == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]
        async with client.stream("POST", f"{CK}/agent/assistant/run", headers=bearer("alice"),
                                 json=agui_body("t-alice", "r2", [user("u2", "/hold never-ck-auth")])) as live:
            chunks = live.aiter_text()
            async for chunk in chunks:
                if "TEXT_MESSAGE_CONTENT" in chunk:
                    break
            foreign = await client.post(f"{CK}/agent/assistant/stop/t-alice", headers=bearer("bob"))
            assert foreign.json() == {"stopped": False, "message": "No active run for thread 't-alice'."}
            assert srv.ctx.app.active("t-alice") is not None
            mine = await client.post(f"{CK}/agent/assistant/stop/t-alice", headers=bearer("alice"))
            assert mine.json()["stopped"] is True
        run = await srv.ctx.ledger.get_run("r2")
        assert (run.status, run.cause) == (RunStatus.INTERRUPTED, "stopped")
