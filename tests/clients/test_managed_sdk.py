"""The official ``anthropic`` Python SDK (``client.beta.sessions``) drives the Managed Agents wire (issue 32):
pointed at a live server by ``base_url``, it creates sessions, sends events, streams them and lists them.

One test per flow: the quickstart in both orders (send then stream, stream then send), a gate allowed and
one denied (with a repeated answer refused), a client tool answered by the SDK's own session tool runner,
an interrupt mid-turn, a reconnect mid-turn with ``Last-Event-ID``, the error envelope, and both ways the
SDK carries a key (``x-api-key``, ``Authorization: Bearer``). Runs are held open with the scripted model's
``/hold`` (``tests.builders.held``), never by timing.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anthropic
import attrs
import pytest
import trio
from anthropic.lib.sessions import accumulate_managed_agents_event
from anthropic.lib.tools import beta_async_tool

from tests.builders import (
    agui_body,
    agui_text,
    default_config_data,
    held,
    history_page,
    live_server,
    make_config,
    post_agui,
    release,
    user,
)

BRIDGE = Path(__file__).with_name("managed_bridge.py")

KEY = "sk-managed-test-key-0123456789"
#: the SDK's stream leaves its async generators to the garbage collector when its reader stops at an
#: event (how every example reads until ``session.status_idle``); trio reports each one
pytestmark = pytest.mark.filterwarnings(
    "ignore:Async generator 'anthropic._streaming.*was garbage collected:ResourceWarning",
    "ignore:Exception ignored in. <async_generator object (AsyncStream|SSEDecoder):pytest.PytestUnraisableExceptionWarning")


@pytest.fixture
async def server(tmp_path):
    async with live_server(make_config(tmp_path)) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with sdk(server) as made:
        yield made


def sdk(server: Any, **kw: Any) -> anthropic.AsyncAnthropic:
    kw.setdefault("api_key", "unused")
    return anthropic.AsyncAnthropic(base_url=server.base_url, max_retries=0, timeout=20, **kw)


def text(content: str) -> list[dict[str, Any]]:
    return [{"type": "user.message", "content": [{"type": "text", "text": content}]}]


async def read_until_idle(stream: Any, out: list[Any], *, stop_on_action: bool = False) -> Any:
    """Read ``stream`` into ``out`` until a ``session.status_idle`` that ends the turn (or, with
    ``stop_on_action``, any idle); returns that idle."""
    while True:
        event = await stream.__anext__()  # not ``async for``: leaving it early would strand its generator
        out.append(event)
        if event.type == "session.status_idle" and (stop_on_action or event.stop_reason.type != "requires_action"):
            return event


async def read_to(stream: Any, out: list[Any], kind: str) -> None:
    """Read ``stream`` into ``out`` up to the first event of type ``kind``."""
    while True:
        event = await stream.__anext__()
        out.append(event)
        if event.type == kind:
            return


def committed(events: list[Any]) -> list[tuple[str, str]]:
    """(id, type) of the committed events among streamed ones (previews are not committed)."""
    return [(e.id, e.type) for e in events if e.type not in ("event_start", "event_delta")]


async def listed_events(client: anthropic.AsyncAnthropic, session_id: str) -> list[tuple[str, str]]:
    return [(e.id, e.type) async for e in client.beta.sessions.events.list(session_id, limit=3)]


async def wait_idle(client: anthropic.AsyncAnthropic, session_id: str) -> None:
    """Until the session's turn has ended (a condition read from the server, not a time)."""
    with trio.fail_after(20):
        while (await client.beta.sessions.retrieve(session_id)).status != "idle":
            await trio.sleep(0.02)


async def test_quickstart_send_then_stream_then_stream_then_send(server, client):
    session = await client.beta.sessions.create(agent="assistant", environment_id="env_local", title="Quickstart",
                                                metadata={"team": "docs"})
    assert (session.type, session.status, session.title, session.environment_id, session.metadata) == \
        ("session", "idle", "Quickstart", "env_local", {"team": "docs"})
    assert session.agent.id == "assistant"

    sent = await client.beta.sessions.events.send(session.id, events=text("hello there"))
    assert [(e.type, e.content[0].text) for e in sent.data] == [("user.message", "hello there")]
    await wait_idle(client, session.id)  # the turn ends before the stream opens: the stream still has it all
    first: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"]) as stream:
        await read_until_idle(stream, first)
    assert [t for _, t in committed(first)] == ["user.message", "session.status_running", "agent.message",
                                                "session.status_idle"]
    assert committed(first)[0][0] == sent.data[0].id  # the receipt's id is the committed event's

    # the stream first, then the send (the order of the SDK's tool runner): only the new turn, whole
    second: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"]) as stream:
        await client.beta.sessions.events.send(session.id, events=text("/words 5"))
        await read_until_idle(stream, second)
    assert [t for _, t in committed(second)] == ["user.message", "session.status_running", "agent.message",
                                                 "session.status_idle"]
    # previews: event_start, then deltas, folded by the SDK's accumulator into the final agent.message
    snapshot = None
    for event in second:
        snapshot = accumulate_managed_agents_event(snapshot, event)
    final = next(e for e in second if e.type == "agent.message")
    starts = [e for e in second if e.type == "event_start"]
    assert [s.event.id for s in starts] == [final.id]
    assert len([e for e in second if e.type == "event_delta"]) == 5
    assert snapshot is not None and snapshot.content[0].text == final.content[0].text == \
        "alpha bravo charlie delta echo"

    # history and stream agree event for event, paged three at a time
    assert await listed_events(client, session.id) == committed(first) + committed(second)
    newest = await client.beta.sessions.events.list(session.id, order="desc", limit=1)
    assert [(e.id, e.type) for e in newest.data] == [committed(second)[-1]] and newest.next_page
    sessions = await client.beta.sessions.list()
    assert [s.id for s in sessions.data] == [session.id]
    assert sessions.data[0].title == "Quickstart"

    # one engine, one ledger: the session is a thread on the other wires and the threads API
    async with server.client() as http:
        agui = await history_page(http, "ag-ui", session.id)
        assert [m["role"] for m in agui["items"]] == ["user", "assistant", "user", "assistant"]
        thread = (await http.get(f"/v1/threads/{session.id}")).json()
        assert [r["status"] for r in thread["runs"]] == ["completed", "completed"]
        wire = (await http.get("/v1/agents")).json()["wires"]["managed-agents"]
        assert wire["beta"] == "managed-agents-2026-04-01" and wire["routes"] == [
            "GET /v1/sessions{rest}", "POST /v1/sessions{rest}", "DELETE /v1/sessions{rest}"]

    # a thread started on another wire is a session here, and goes on here
    async with server.client() as http:
        await post_agui(http, agui_body("agui-first", "agui-run", [user("agui-u1", "from AG-UI")]))
    await client.beta.sessions.events.send("agui-first", events=text("and from the SDK"))
    await wait_idle(client, "agui-first")
    kinds = [t for _, t in await listed_events(client, "agui-first")]
    assert kinds == ["user.message", "session.status_running", "agent.message", "session.status_idle"] * 2

    updated = await client.beta.sessions.update(session.id, title="Renamed", metadata={"team": None, "k": "v"})
    assert (updated.title, updated.metadata) == ("Renamed", {"k": "v"})
    deleted = await client.beta.sessions.delete(session.id)
    assert (deleted.id, deleted.type) == (session.id, "session_deleted")
    with pytest.raises(anthropic.NotFoundError):
        await client.beta.sessions.retrieve(session.id)


async def a_gate_allowed_and_one_denied_and_a_repeated_answer_refused(client: anthropic.AsyncAnthropic) -> None:
    session = await client.beta.sessions.create(agent="guarded", environment_id="env_local")
    events: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id) as stream:
        await client.beta.sessions.events.send(session.id, events=text('/call calculator {"expression": "6*7"}'))
        idle = await read_until_idle(stream, events, stop_on_action=True)
        use = next(e for e in events if e.type == "agent.tool_use")
        assert (use.name, use.input, use.evaluated_permission) == ("calculator", {"expression": "6*7"}, "ask")
        assert idle.stop_reason.type == "requires_action" and idle.stop_reason.event_ids == [use.id]
        receipt = await client.beta.sessions.events.send(session.id, events=[
            {"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}])
        assert receipt.data[0].type == "user.tool_confirmation"
        idle = await read_until_idle(stream, events)
    assert idle.stop_reason.type == "end_turn"
    result = next(e for e in events if e.type == "agent.tool_result")
    assert (result.tool_use_id, result.is_error, result.content[0].text) == (use.id, False, '{"result":42}')
    before = await listed_events(client, session.id)
    assert before == committed(events)

    # the same answer again: refused, nothing changes
    with pytest.raises(anthropic.APIStatusError) as refused:
        await client.beta.sessions.events.send(session.id, events=[
            {"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "allow"}])
    assert refused.value.status_code == 409
    assert refused.value.body["type"] == "error"
    assert refused.value.body["error"]["type"] == "invalid_request_error"
    assert await listed_events(client, session.id) == before

    denied: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id) as stream:
        await client.beta.sessions.events.send(session.id, events=text('/call calculator {"expression": "1+1"}'))
        await read_until_idle(stream, denied, stop_on_action=True)
        use = next(e for e in denied if e.type == "agent.tool_use")
        await client.beta.sessions.events.send(session.id, events=[
            {"type": "user.tool_confirmation", "tool_use_id": use.id, "result": "deny", "deny_message": "not now"}])
        await read_until_idle(stream, denied)
    confirmation = next(e for e in denied if e.type == "user.tool_confirmation")
    assert (confirmation.tool_use_id, confirmation.result, confirmation.deny_message) == (use.id, "deny", "not now")
    result = next(e for e in denied if e.type == "agent.tool_result")
    assert result.is_error and "not now" in result.content[0].text
    assert await listed_events(client, session.id) == before + committed(denied)


async def a_client_tool_answered_by_the_sdk_session_tool_runner(client: anthropic.AsyncAnthropic) -> None:
    session = await client.beta.sessions.create(agent="frontend", environment_id="env_local")
    asked: list[str] = []

    @beta_async_tool
    async def ask_user(question: str) -> str:
        """Ask the user a question and return their answer."""
        asked.append(question)
        return "Ada"

    calls = []
    runner = client.beta.sessions.events.tool_runner(session.id, tools=[ask_user], max_idle=None)
    async with trio.open_nursery() as nursery:
        async def run_tools() -> None:
            async for call in runner:
                calls.append(call)
                nursery.cancel_scope.cancel()  # one call is the whole test: stop the runner there

        nursery.start_soon(run_tools)
        await client.beta.sessions.events.send(session.id, events=text('/call ask_user {"question": "Your name?"}'))
    assert asked == ["Your name?"]
    assert [(c.name, c.posted, c.is_error, c.confirmation) for c in calls] == [("ask_user", True, False, None)]
    assert calls[0].event.type == "agent.custom_tool_use"
    await wait_idle(client, session.id)
    events = await listed_events(client, session.id)
    kinds = [t for _, t in events]
    assert kinds == ["user.message", "session.status_running", "agent.custom_tool_use", "session.status_idle",
                     "user.custom_tool_result", "session.status_running", "agent.message", "session.status_idle"]
    listed = [e async for e in client.beta.sessions.events.list(session.id)]
    assert listed[3].stop_reason.event_ids == [listed[2].id]
    assert listed[4].custom_tool_use_id == listed[2].id
    assert "Ada" in listed[6].content[0].text


async def an_interrupt_stops_the_turn_mid_stream(server: Any, client: anthropic.AsyncAnthropic) -> None:
    session = await client.beta.sessions.create(agent="assistant", environment_id="env_local")
    events: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"]) as stream:
        await client.beta.sessions.events.send(session.id, events=text(held("interrupt-1")))
        await read_to(stream, events, "event_delta")  # the first word streamed; the run holds
        receipt = await client.beta.sessions.events.send(session.id, events=[{"type": "user.interrupt"}])
        assert receipt.data[0].type == "user.interrupt"
        idle = await read_until_idle(stream, events)
    assert idle.stop_reason.type == "end_turn"
    assert (await client.beta.sessions.retrieve(session.id)).status == "idle"
    async with server.client() as http:
        run = (await http.get(f"/v1/threads/{session.id}")).json()["runs"][-1]
    assert (run["status"], run["cause"]) == ("interrupted", "stopped")
    assert await listed_events(client, session.id) == committed(events)


async def a_reconnect_with_last_event_id_sees_every_event_once(server: Any, client: anthropic.AsyncAnthropic) -> None:
    session = await client.beta.sessions.create(agent="assistant", environment_id="env_local")
    await client.beta.sessions.events.send(session.id, events=text(held("reconnect-1", words=6)))
    before: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id, event_deltas=["agent.message"]) as stream:
        await read_to(stream, before, "event_delta")  # the first word streamed; the run holds
    last = committed(before)[-1][0]
    await release(server, "reconnect-1")
    after: list[Any] = []
    async with await client.beta.sessions.events.stream(session.id, extra_headers={"Last-Event-ID": last}) as stream:
        await read_until_idle(stream, after)
    assert committed(before) + committed(after) == await listed_events(client, session.id)
    assert [t for _, t in committed(after)] == ["agent.message", "session.status_idle"]
    assert after[0].content[0].text.split() == ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot"]

    with pytest.raises(anthropic.BadRequestError) as bad:
        async with await client.beta.sessions.events.stream(session.id, extra_headers={"Last-Event-ID": "nope"}):
            pass
    assert bad.value.body["error"]["type"] == "invalid_request_error"


async def errors_use_the_api_envelope(client: anthropic.AsyncAnthropic) -> None:
    with pytest.raises(anthropic.NotFoundError) as missing:
        await client.beta.sessions.retrieve("sesn_missing")
    assert missing.value.body["type"] == "error"
    assert missing.value.body["error"]["type"] == "not_found_error"
    session = await client.beta.sessions.create(agent="assistant", environment_id="env_local")
    with pytest.raises(anthropic.BadRequestError) as bad:
        await client.beta.sessions.events.send(session.id, events=[{"type": "user.define_outcome"}])
    assert bad.value.body["error"]["type"] == "invalid_request_error"
    with pytest.raises(anthropic.NotFoundError):
        await client.beta.sessions.create(agent={"type": "agent", "id": "nobody", "version": 1},
                                          environment_id="env_local")
    assert await listed_events(client, session.id) == []


async def test_gates_a_client_tool_and_the_error_envelope(client):
    """A gate allowed and one denied (a repeated answer refused), the SDK's session tool runner answering a
    client tool, the API's error envelope: one server."""
    await a_gate_allowed_and_one_denied_and_a_repeated_answer_refused(client)
    await a_client_tool_answered_by_the_sdk_session_tool_runner(client)
    await errors_use_the_api_envelope(client)


async def test_an_interrupt_and_a_reconnect_mid_turn(server, client):
    await an_interrupt_stops_the_turn_mid_stream(server, client)
    await a_reconnect_with_last_event_id_sees_every_event_once(server, client)


async def test_x_api_key_and_bearer_both_carry_the_token(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_MANAGED_KEY", KEY)
    data = default_config_data()
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": [
        {"name": "sdk", "env": "AWAKEN_TEST_MANAGED_KEY", "role": "user", "subject": "alice"}]}, agents=data["agents"])
    config = attrs.evolve(config, server=attrs.evolve(config.server, keepalive_seconds=0.05))
    async with live_server(config) as srv, sdk(srv, api_key=KEY) as by_key, \
            sdk(srv, api_key=None, auth_token=KEY) as by_bearer, sdk(srv, api_key="wrong") as wrong:
        session = await by_key.beta.sessions.create(agent="assistant", environment_id="e")
        assert (await by_bearer.beta.sessions.retrieve(session.id)).id == session.id
        with pytest.raises(anthropic.AuthenticationError):
            await wrong.beta.sessions.list()
        # an idle stream is kept open by pings (which the SDKs skip), with the beta header and query
        async with srv.client(headers={"x-api-key": KEY, "anthropic-beta": "managed-agents-2026-04-01",
                                       "anthropic-version": "2023-06-01"}) as http, \
                http.stream("GET", f"/v1/sessions/{session.id}/events/stream", params={"beta": "true"}) as stream:
            assert stream.status_code == 200
            async for line in stream.aiter_lines():
                if line.startswith("event: "):
                    assert line == "event: ping"
                    break


@pytest.mark.slow
async def test_an_agui_conversation_through_the_managed_agents_bridge(server):
    """``ag-ui-claude-managed-agents`` (PyPI), a second client of the wire: AG-UI runs in, sessions out."""
    with trio.fail_after(60):
        done = await trio.run_process([sys.executable, str(BRIDGE), server.base_url, "assistant", "hello bridge",
                                       "/words 3"], capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()[-2000:]
    events = json.loads(done.stdout)
    assert [e["type"] for e in events if e["type"].startswith("RUN_")] == ["RUN_STARTED", "RUN_FINISHED"] * 2
    session_id = next(e["value"]["sessionId"] for e in events if e["type"] == "CUSTOM")
    first = events[:[e["type"] for e in events].index("RUN_FINISHED")]
    assert agui_text(first) == 'You said: "hello bridge".'
    async with server.client() as http:  # the bridge's session is a thread: its history on the AG-UI wire
        page = await history_page(http, "ag-ui", session_id)
    assert [(m["role"], m["content"]) for m in page["items"]] == [
        ("user", "hello bridge"), ("assistant", 'You said: "hello bridge".'), ("user", "/words 3"),
        ("assistant", "alpha bravo charlie")]


NODE_DIR = Path(__file__).resolve().parents[1] / "node"


@pytest.mark.slow
async def test_the_node_sdk_quickstart_gate_reconnect_and_tool_runner(server, tmp_path):
    """``@anthropic-ai/sdk`` (tests/node/managed_client.mjs): the quickstart, a gate allowed at
    ``requires_action``, a reconnect with ``Last-Event-ID``, and the SDK's session tool runner."""
    steps = tmp_path / "steps.log"  # the script's steps as they start: a run that never ends says where it waits
    with steps.open("wb") as stderr:
        with trio.move_on_after(50) as waited:  # within the test's own 60 s deadline
            done = await trio.run_process(["node", "managed_client.mjs", server.base_url], cwd=NODE_DIR,
                                          capture_stdout=True, stderr=stderr, check=False)
    assert not waited.cancelled_caught, "the script did not end in 50 s; its steps:\n" + steps.read_text()[-3000:]
    assert done.returncode == 0, steps.read_text()[-2000:]
    out = json.loads(done.stdout)
    assert "failure" not in out, out["failure"]
    quick = out["quickstart"]
    assert (quick["session"]["status"], quick["session"]["title"], quick["session"]["environment_id"]) == \
        ("idle", "Node", "env_node")
    committed_events = [e for e in quick["streamed"] if e[1] not in ("event_start", "event_delta")]
    assert [t for _, t in committed_events] == ["user.message", "session.status_running", "agent.message",
                                                "session.status_idle"]
    assert quick["history"] == committed_events and quick["receipt"] == [committed_events[0]]
    assert quick["resumed"] == committed_events[1:]  # after the receipt's id: every later event once
    assert quick["text"] == "alpha bravo charlie delta" and quick["sessions"] == [quick["session"]["id"]]
    gate = out["gate"]
    assert [t for _, t in gate["streamed"]] == [
        "user.message", "session.status_running", "agent.tool_use", "session.status_idle", "user.tool_confirmation",
        "session.status_running", "agent.tool_result", "agent.message", "session.status_idle"]
    assert (gate["permission"], gate["result"]) == ("ask", '{"result":42}')
    runner = out["runner"]
    assert runner["asked"] == ["Name?"] and runner["calls"] == [{"name": "ask_user", "posted": True, "isError": False}]
    assert runner["history"] == ["user.message", "session.status_running", "agent.custom_tool_use",
                                 "session.status_idle", "user.custom_tool_result", "session.status_running",
                                 "agent.message", "session.status_idle"]
    assert "Grace" in runner["answer"]


async def test_a_turn_that_ends_while_its_events_are_read_reads_as_ended_not_waiting(server, client, monkeypatch):
    """The session's events are projected from its runs and its messages, two reads: a status read just
    before the commit that resumed and ended a waiting turn, beside the messages read after it, would show
    that turn's answer followed by ``requires_action`` (at the position of its ``end_turn``, which a
    stream then never sends). The runs are read again after the messages, and all of it again while they
    differ."""
    session = await client.beta.sessions.create(agent="frontend", environment_id="env_local")
    await client.beta.sessions.events.send(session.id, events=text('/call ask_user {"question": "Name?"}'))
    await wait_idle(client, session.id)
    ledger = server.ctx.ledger
    stale = await ledger.list_runs(session.id)  # the turn waits for its client tool
    use = [e async for e in client.beta.sessions.events.list(session.id)][2]
    await client.beta.sessions.events.send(session.id, events=[{
        "type": "user.custom_tool_result", "custom_tool_use_id": use.id,
        "content": [{"type": "text", "text": "Grace"}]}])
    await wait_idle(client, session.id)
    real = ledger.list_runs
    reads = []

    async def list_runs(thread_id: str) -> Any:  # the first read is the one from before the answer
        reads.append(thread_id)
        return stale if len(reads) == 1 else await real(thread_id)

    monkeypatch.setattr(ledger, "list_runs", list_runs)
    listed = [e async for e in client.beta.sessions.events.list(session.id)]
    assert [e.type for e in listed] == [
        "user.message", "session.status_running", "agent.custom_tool_use", "session.status_idle",
        "user.custom_tool_result", "session.status_running", "agent.message", "session.status_idle"]
    assert (listed[3].stop_reason.type, listed[7].stop_reason.type) == ("requires_action", "end_turn")
    assert len(reads) == 3  # stale; after the messages, real (they differ: read again); real again: done
