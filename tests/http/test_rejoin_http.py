"""Detached runs and rejoin over HTTP (issue 16): ``on_disconnect``, positions, the rejoin routes,
several watchers, snapshots for lost positions, owner-only watching.

The routes are exercised on each built-in ledger backend. Runs are held open by the ``gate`` tool (tests/plugins/gate.py), which the test opens: no timing windows.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio

from awaken.core.principal import ANONYMOUS, PRINCIPAL_KEY
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit
from awaken.ledger.testkit.harness import assistant, run_record, user
from tests.builders import (
    Frames,
    LiveServer,
    agui_body,
    default_config_data,
    frames_of,
    held,
    is_type,
    live_server,
    make_config,
    read_frames_until,
    release,
    wait_for_status,
    watchers_gone,
)
from tests.plugins import gate

GATE = '/call gate {"name": "%s"}'


def rejoin_config(tmp_path, backend: str = "sqlite", **top: Any):
    agents = default_config_data()["agents"]
    agents["held"] = {"model": "scripted", "tools": ["gate"]}
    agents["detached"] = {"model": "scripted", "tools": ["gate"], "on_disconnect": "continue"}
    return make_config(tmp_path, backend=backend, agents=agents, tools={"plugins": ["tests.plugins.gate:gate"]},
                       **top)


@pytest.fixture(autouse=True)
def fresh_gates():
    gate.reset()
    yield
    gate.reset()


@pytest.fixture(params=["sqlite", "files"])
async def srv(tmp_path, request):
    """A live server on each built-in ledger backend: detach and rejoin work on every one."""
    async with live_server(rejoin_config(tmp_path, request.param)) as server:
        yield server


async def start_held(client: httpx.AsyncClient, agent: str, thread_id: str, name: str):  # noqa: ANN201
    """POST a run that calls the gate ``name``; read until its tool call is out; return the frames
    and the open response context (the run is now held at the gate)."""
    body = agui_body(thread_id, f"run-{thread_id}", [{"id": "u1", "role": "user", "content": GATE % name}])
    context = client.stream("POST", f"/v1/ag-ui/agents/{agent}", json=body)
    response = await context.__aenter__()
    context.frames = Frames(response)
    seen = await context.frames.until(is_type("TOOL_CALL_END"))
    return seen, context


# -- on_disconnect -----------------------------------------------------------------------------------


async def test_a_cancel_agents_run_is_interrupted_when_its_connection_goes(srv):
    async with srv.client() as client:
        _, context = await start_held(client, "held", "t-cancel", "c1")
        await context.__aexit__(None, None, None)
    run = await wait_for_status(srv.ctx.ledger, "t-cancel", RunStatus.INTERRUPTED)
    assert run.error_message == "the client disconnected"


async def test_a_continue_agents_run_outlives_its_connection_and_commits_its_outcome(srv):
    async with srv.client() as client:
        _, context = await start_held(client, "detached", "t-cont", "d1")
        await context.__aexit__(None, None, None)
    await watchers_gone(srv, "t-cont")  # the server has seen the disconnect; the run goes on
    assert srv.ctx.app.is_active("t-cont")
    gate.open_gate("d1")
    await wait_for_status(srv.ctx.ledger, "t-cont", RunStatus.COMPLETED)


async def test_a_stop_interrupts_a_detached_run_that_nobody_watches_with_cause_stopped(srv):
    async with srv.client() as client:
        _, context = await start_held(client, "detached", "t-dstop", "ds1")
        await context.__aexit__(None, None, None)
        await watchers_gone(srv, "t-dstop")  # detached: the run goes on at its gate with nobody watching
        stopped = await client.post("/v1/threads/t-dstop/stop")
    assert (stopped.status_code, stopped.json()) == (200, {"runId": "run-t-dstop", "status": "interrupted"})
    [run] = await srv.ctx.ledger.list_runs("t-dstop")
    assert (run.status, run.cause) == (RunStatus.INTERRUPTED, "stopped")
    assert not srv.ctx.app.is_active("t-dstop")


# -- the rejoin routes -------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/v1/ag-ui/threads/nothing/stream", "/v1/ai-sdk/chat/nothing/stream",
                                  "/v1/ai-sdk/agents/assistant/chat/nothing/stream"])
async def test_rejoin_answers_204_when_nothing_runs_on_the_thread(srv, path):
    async with srv.client() as client:
        response = await client.get(path)
    assert (response.status_code, response.content) == (204, b"")


async def test_agui_rejoin_after_last_event_id_has_no_gap_and_no_duplicate(srv):
    async with srv.client() as client:
        first, context = await start_held(client, "detached", "t-agui", "a1")
        await context.__aexit__(None, None, None)
        last_id = first[-1][0]
        async with client.stream("GET", "/v1/ag-ui/threads/t-agui/stream",
                                 headers={"last-event-id": last_id}) as rejoined:
            assert rejoined.status_code == 200
            gate.open_gate("a1")
            rest = frames_of(await rejoined.aread())
    positions = [p for p, _ in first + rest]
    key = positions[0].rpartition(":")[0]
    assert positions == [f"{key}:{n}" for n in range(1, len(positions) + 1)]
    assert rest[0][1]["type"] == "TOOL_CALL_RESULT" or rest[0][1]["type"] == "STEP_FINISHED"
    assert rest[-1][1]["type"] == "RUN_FINISHED"


async def test_two_watchers_see_the_same_run_and_a_late_one_gets_it_from_the_start(srv):
    async with srv.client() as client:
        first, context = await start_held(client, "held", "t-two", "w1")
        async with client.stream("GET", "/v1/ag-ui/threads/t-two/stream") as second:
            gate.open_gate("w1")
            rest = await context.frames.rest()
            watched = frames_of(await second.aread())
        await context.__aexit__(None, None, None)
    assert watched[-1][1]["type"] == "RUN_FINISHED"
    assert first + rest == watched  # the late watcher is replayed what the first saw, then both go live


async def test_a_watcher_too_slow_to_keep_up_is_dropped_alone_and_the_run_and_the_other_watcher_go_on(tmp_path):
    """A rejoined watcher whose client reads nothing is dropped at the transport's byte bound (as for any
    stream), while the run streams on to its committed outcome and the run's own stream, read as it
    comes, gets every event."""
    from awaken.streams.rejoin import rejoin_route
    from awaken.wires.agui.adapter import PROTOCOL

    server_table = {**default_config_data().get("server", {}), "max_buffered_bytes": 64 * 1024}
    words = 3000  # well over 64 KiB of frames
    async with live_server(rejoin_config(tmp_path, server=server_table)) as server, server.client() as client:
        body = agui_body("t-slow", "run-slow", [{"id": "u1", "role": "user", "content": held("slow1", words)}])
        async with client.stream("POST", "/v1/ag-ui/agents/detached", json=body) as response:
            frames = Frames(response)
            first = await frames.until(is_type("TEXT_MESSAGE_CONTENT"))  # the run is held after this delta
            stuck, dropped = trio.Event(), trio.Event()

            async def send(message: dict) -> None:  # the slow client: its first body write never completes
                if message["type"] == "http.response.body":
                    stuck.set()
                    await trio.sleep_forever()

            async def receive() -> dict:  # and it never disconnects: only the byte bound can drop it
                await trio.sleep_forever()

            async def slow_watcher() -> None:
                scope = {"type": "http", "headers": [], PRINCIPAL_KEY: ANONYMOUS}  # as the auth middleware leaves it
                await rejoin_route(PROTOCOL)(server.ctx, scope, receive, send, {"thread": "t-slow"})
                dropped.set()

            rest: list[tuple[str | None, Any]] = []

            async def fast_watcher() -> None:  # the run's own stream, read as it comes
                rest.extend(await frames.rest())

            async with trio.open_nursery() as nursery:
                nursery.start_soon(slow_watcher)
                with trio.fail_after(5):
                    await stuck.wait()
                nursery.start_soon(fast_watcher)
                await release(server, "slow1")
                with trio.fail_after(5):
                    await dropped.wait()
        run = await wait_for_status(server.ctx.ledger, "t-slow", RunStatus.COMPLETED)
    seen = first + rest
    assert [p["type"] for _, p in seen].count("TEXT_MESSAGE_CONTENT") == words
    assert seen[-1][1]["type"] == "RUN_FINISHED"
    key = seen[0][0].rpartition(":")[0]
    assert [p for p, _ in seen] == [f"{key}:{n}" for n in range(1, len(seen) + 1)]
    assert run.error_code is None


async def rejoin_from_a_lost_position(server: LiveServer, thread_id: str, name: str) -> list[tuple[str | None, Any]]:
    """Start a ``detached`` run held at gate ``name``, leave it, rejoin from a position the server
    never held, open the gate, and read the rejoined stream to its end."""
    async with server.client() as client:
        _, context = await start_held(client, "detached", thread_id, name)
        await context.__aexit__(None, None, None)
        async with client.stream("GET", f"/v1/ag-ui/threads/{thread_id}/stream",
                                 headers={"last-event-id": "run_gone:7"}) as rejoined:
            gate.open_gate(name)
            return frames_of(await rejoined.aread())


async def test_a_position_the_server_no_longer_holds_gets_a_snapshot_then_the_live_tail(srv):
    frames = await rejoin_from_a_lost_position(srv, "t-snap", "s1")
    kinds = [payload["type"] for _, payload in frames]
    assert kinds[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STEP_STARTED"]
    assert kinds[-1] == "RUN_FINISHED"
    snapshot = frames[1][1]["messages"]
    # the snapshot holds the committed first step: the user's message, the call and its result
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool"]
    assert snapshot[2]["content"] == '{"opened":"s1"}' or "s1" in snapshot[2]["content"]
    # positions stay contiguous from the snapshot on: a later reconnect resumes exactly
    tail = [int(p.rpartition(":")[2]) for p, _ in frames[1:]]
    assert tail == list(range(tail[0], tail[0] + len(tail)))


async def test_a_snapshot_read_late_holds_only_what_was_committed_at_its_boundary(srv, monkeypatch):
    """A slow ledger may answer the snapshot's read after the run committed more steps: those steps are
    in the live tail, so the snapshot stops at the boundary it joined at (nothing is shown twice)."""
    ledger = srv.ctx.ledger
    plain_view = ledger.thread_view

    async def late_view(thread_id: str):  # noqa: ANN202 - answers only once the whole run is committed
        run = srv.ctx.app.active(thread_id)
        if run is not None:
            await run.settled()
        return await plain_view(thread_id)

    monkeypatch.setattr(ledger, "thread_view", late_view)
    frames = await rejoin_from_a_lost_position(srv, "t-late", "l1")
    kinds = [payload["type"] for _, payload in frames]
    assert kinds[:3] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "STEP_STARTED"] and kinds[-1] == "RUN_FINISHED"
    snapshot = frames[1][1]["messages"]
    assert [m["role"] for m in snapshot] == ["user", "assistant", "tool"]  # the first step, not the answer
    streamed = {p["messageId"] for _, p in frames if p["type"] == "TEXT_MESSAGE_START"}
    assert streamed and not streamed & {m["id"] for m in snapshot}
    committed = (await ledger.thread_view("t-late")).messages
    assert [m.role for m in committed] == ["user", "assistant", "tool", "assistant"]  # the answer was in


async def test_a_snapshot_rejoin_of_a_run_stopped_before_its_next_step_ends_with_the_stop(srv):
    """A rejoin from a lost position waits for the run's next step boundary; a stop is one (the run's
    terminal event), so the stream ends: head, the committed messages, RUN_ERROR STOPPED."""
    async with srv.client() as client:
        _, context = await start_held(client, "detached", "t-snapstop", "ss1")
        await context.__aexit__(None, None, None)
        async with client.stream("GET", "/v1/ag-ui/threads/t-snapstop/stream",
                                 headers={"last-event-id": "run_gone:7"}) as rejoined:
            assert rejoined.status_code == 200
            assert (await client.post("/v1/threads/t-snapstop/stop")).status_code == 200
            with trio.fail_after(5):
                frames = frames_of(await rejoined.aread())
    assert [payload["type"] for _, payload in frames] == ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_ERROR"]
    assert frames[1][1]["messages"][0]["role"] == "user" and frames[-1][1]["code"] == "STOPPED"


async def test_a_snapshot_rejoin_of_a_run_that_ends_without_a_terminal_event_ends_too(srv):
    """A cancel agent's run whose connection goes is interrupted with no terminal event for anyone; a
    rejoin from a lost position waiting for the next step gets the head and the committed messages,
    and its stream ends with the run (never left open)."""
    async with srv.client() as client:
        _, context = await start_held(client, "held", "t-snapgone", "sg1")
        async with client.stream("GET", "/v1/ag-ui/threads/t-snapgone/stream",
                                 headers={"last-event-id": "run_gone:7"}) as rejoined:
            assert rejoined.status_code == 200
            await context.__aexit__(None, None, None)  # the run's own connection goes: client_gone
            with trio.fail_after(5):
                frames = frames_of(await rejoined.aread())
    assert [payload["type"] for _, payload in frames] == ["RUN_STARTED", "MESSAGES_SNAPSHOT"]
    run = await wait_for_status(srv.ctx.ledger, "t-snapgone", RunStatus.INTERRUPTED)
    assert run.cause == "client_gone"


async def test_a_last_event_id_that_is_no_position_is_refused_400(srv):
    async with srv.client() as client:
        _, context = await start_held(client, "detached", "t-bad", "b1")
        response = await client.get("/v1/ag-ui/threads/t-bad/stream", headers={"last-event-id": "nonsense"})
        gate.open_gate("b1")
        await context.__aexit__(None, None, None)
    assert response.status_code == 400
    assert response.json()["error"]["code"] == "INVALID_POSITION"


@pytest.mark.parametrize("resume", ["/v1/ai-sdk/chat/c-ai/stream", "/v1/ai-sdk/agents/detached/chat/c-ai/stream"])
async def test_aisdk_resume_streams_the_whole_answer_to_done(srv, resume):
    async with srv.client() as client:
        body = {"id": "c-ai", "messages": [{"id": "u1", "role": "user",
                                            "parts": [{"type": "text", "text": GATE % "r1"}]}]}
        async with client.stream("POST", "/v1/ai-sdk/agents/detached/chat", json=body) as response:
            original = await read_frames_until(response, lambda p: isinstance(p, dict)
                                               and p.get("type") == "tool-input-available")
        async with client.stream("GET", resume) as resumed:
            assert resumed.status_code == 200
            gate.open_gate("r1")
            frames = frames_of(await resumed.aread())
        history = (await client.get("/v1/ai-sdk/threads/c-ai/messages")).json()["items"]
    assert frames[: len(original)] == original  # from the first chunk of the assistant message
    assert frames[-1][1] == "[DONE]" and frames[-2][1]["type"] == "finish"
    answer = "".join(p["delta"] for _, p in frames if isinstance(p, dict) and p.get("type") == "text-delta")
    assert history[-1]["role"] == "assistant"
    assert answer == "".join(part.get("text", "") for part in history[-1]["parts"] if part["type"] == "text")


# -- auth ----------------------------------------------------------------------------------------------

TOKENS = [
    {"name": "alice", "env": "AWAKEN_TEST_ALICE_KEY", "role": "user", "subject": "alice"},
    {"name": "bob", "env": "AWAKEN_TEST_BOB_KEY", "role": "user", "subject": "bob"},
    {"name": "ops", "env": "AWAKEN_TEST_OPS_KEY", "role": "admin", "subject": "ops"},
]


async def test_only_the_owner_or_an_admin_may_rejoin(tmp_path, monkeypatch):
    """Another user's running thread answers as an idle one (204): ids leak nothing."""
    keys = {"AWAKEN_TEST_ALICE_KEY": "alice-key-0123456789abcdef", "AWAKEN_TEST_BOB_KEY": "bob-key-0123456789abcdef",
            "AWAKEN_TEST_OPS_KEY": "ops-key-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)

    def auth(env: str) -> dict[str, str]:
        return {"authorization": f"Bearer {keys[env]}"}

    async with live_server(rejoin_config(tmp_path, auth={"mode": "tokens", "tokens": TOKENS})) as server:
        async with server.client(headers=auth("AWAKEN_TEST_ALICE_KEY")) as alice:
            _, context = await start_held(alice, "detached", "t-auth", "o1")
            async with server.client() as anonymous:
                assert (await anonymous.get("/v1/ag-ui/threads/t-auth/stream")).status_code == 401
            async with server.client(headers=auth("AWAKEN_TEST_BOB_KEY")) as bob:
                refused = await bob.get("/v1/ag-ui/threads/t-auth/stream")
            assert refused.status_code == 204 and refused.content == b""
            async with server.client(headers=auth("AWAKEN_TEST_OPS_KEY")) as ops, \
                    ops.stream("GET", "/v1/ag-ui/threads/t-auth/stream") as watched:
                assert watched.status_code == 200
                async with alice.stream("GET", "/v1/ag-ui/threads/t-auth/stream") as own:
                    assert own.status_code == 200
                    gate.open_gate("o1")
                    assert frames_of(await own.aread())[-1][1]["type"] == "RUN_FINISHED"
                assert frames_of(await watched.aread())[-1][1]["type"] == "RUN_FINISHED"
            await context.__aexit__(None, None, None)


async def test_the_threads_stored_owner_may_rejoin_a_run_an_admin_started_on_it(tmp_path, monkeypatch):
    keys = {"AWAKEN_TEST_ALICE_KEY": "alice-key-0123456789abcdef", "AWAKEN_TEST_BOB_KEY": "bob-key-0123456789abcdef",
            "AWAKEN_TEST_OPS_KEY": "ops-key-0123456789abcdef"}
    for name, value in keys.items():
        monkeypatch.setenv(name, value)

    def auth(env: str) -> dict[str, str]:
        return {"authorization": f"Bearer {keys[env]}"}

    async with live_server(rejoin_config(tmp_path, auth={"mode": "tokens", "tokens": TOKENS})) as server:
        async with server.client(headers=auth("AWAKEN_TEST_ALICE_KEY")) as alice:
            # alice's thread, as the ledger stores it at its first run's first write
            ledger = server.ctx.ledger
            await ledger.start_run(run_record("run-first", "t-stored"), [user("u0", run_id="run-first")], owner="alice")
            await ledger.commit("t-stored", "run-first",
                                Commit(status=RunStatus.COMPLETED, messages=(assistant("a0", run_id="run-first"),)))
            assert (await ledger.get_thread("t-stored")).owner == "alice"
            async with server.client(headers=auth("AWAKEN_TEST_OPS_KEY")) as ops:
                _, context = await start_held(ops, "detached", "t-stored", "so1")
                assert server.ctx.app.active("t-stored").broadcast.owner == "alice"
                async with server.client(headers=auth("AWAKEN_TEST_BOB_KEY")) as bob:
                    assert (await bob.get("/v1/ag-ui/threads/t-stored/stream")).status_code == 204
                async with alice.stream("GET", "/v1/ag-ui/threads/t-stored/stream") as own:
                    assert own.status_code == 200
                    gate.open_gate("so1")
                    assert frames_of(await own.aread())[-1][1]["type"] == "RUN_FINISHED"
                await context.__aexit__(None, None, None)
