"""Nothing a person read is lost (docs/clients.md, "Interrupted answers"): when a run ends early (a stop,
a disconnect with ``on_disconnect = "cancel"``, a model failure mid-stream, a shutdown) the text and
reasoning it had streamed are committed with its outcome as the assistant's message, marked incomplete
with the reason; both history routes show it (AG-UI ``metadata.incomplete``, AI SDK
``metadata.incomplete``), a rejoin finds nothing running and the same history, and the next turn's model
reads it (unless the agent says ``keep_partial_answers = false``).

Runs are held by the scripted model's ``/hold`` (it streams its first word, then waits): what was streamed
when the run ended is exactly that word.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio

from awaken.core.messages import IncompletePart, Message, TextPart
from awaken.engine.state import Cause, RunStatus
from tests.builders import (
    agui_body,
    aisdk_user,
    default_config_data,
    held,
    history_page,
    live_server,
    make_config,
    parse_sse,
    post_agui,
    user,
)

NO_USAGE = {"inputTokens": 0, "outputTokens": 0, "totalTokens": 0}


@pytest.fixture
async def server(tmp_path):
    agents = default_config_data()["agents"]
    agents["detached"] = {"model": "scripted", "on_disconnect": "continue"}
    agents["forgetful"] = {"model": "scripted", "keep_partial_answers": False}
    server = dict(default_config_data()["server"], drain_seconds=0.1)
    async with live_server(make_config(tmp_path, agents=agents, server=server)) as srv:
        yield srv


@pytest.fixture
async def client(server):
    async with server.client() as c:
        yield c


class ModelInputs:
    """The messages each model step of the server was given (a spy on the one scripted model)."""

    def __init__(self, server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
        model = server.ctx.app.agents.get(None).model
        stream = model.stream
        self.seen: list[tuple[Message, ...]] = []

        async def recording(request: Any, out: Any) -> None:
            self.seen.append(request.messages)
            await stream(request, out)

        monkeypatch.setattr(model, "stream", recording)


async def read_until(chunks: AsyncIterator[bytes], marker: bytes, into: list[bytes]) -> None:
    """Read ``chunks`` (a response's) until ``marker`` arrived (the held run's first delta is on the wire)."""
    async for chunk in chunks:
        into.append(chunk)
        if marker in b"".join(into):
            return
    raise AssertionError(f"the stream ended before {marker!r}: {b''.join(into)!r}")


async def outcome_committed(server: Any, thread_id: str) -> None:
    run = server.ctx.app.active(thread_id)
    if run is not None:
        with trio.fail_after(10):
            await run.settled()


async def histories(client: httpx.AsyncClient, thread_id: str) -> tuple[list[Any], list[Any]]:
    return ((await history_page(client, "ag-ui", thread_id))["items"],
            (await history_page(client, "ai-sdk", thread_id))["items"])


def aisdk_answer(message_id: str, run_id: str, reason: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant",
            "metadata": {"runId": run_id, "usage": NO_USAGE, "incomplete": reason},
            "parts": [{"type": "step-start"}, *parts]}


async def next_turn_reads(client: httpx.AsyncClient, inputs: ModelInputs, thread_id: str,
                          agent: str = "assistant") -> tuple[Message, ...]:
    """Run one more turn on ``thread_id``; the messages its model step was given."""
    inputs.seen.clear()
    events = await post_agui(client, agui_body(thread_id, f"next-{thread_id}", [user(f"n-{thread_id}", "go on")]),
                             f"/v1/ag-ui/agents/{agent}")
    assert events[-1]["type"] == "RUN_FINISHED", events
    assert len(inputs.seen) == 1
    return inputs.seen[0]


# -- a stop ----------------------------------------------------------------------------------------------


async def test_a_stopped_answer_is_committed_as_streamed_and_shown_on_both_routes(server, client, monkeypatch):
    inputs = ModelInputs(server, monkeypatch)
    body = agui_body("t-stop", "r-stop", [user("u1", held("stop-1"))])
    raw: list[bytes] = []
    async with client.stream("POST", "/v1/ag-ui", json=body) as response:
        chunks = response.aiter_bytes()
        await read_until(chunks, b"TEXT_MESSAGE_CONTENT", raw)
        stopped = await client.post("/v1/threads/t-stop/stop")
        assert stopped.json() == {"runId": "r-stop", "status": "interrupted"}
        raw.extend([chunk async for chunk in chunks])
    events = parse_sse(b"".join(raw))
    answer_id = next(e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START")
    assert "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT") == "alpha "

    agui, aisdk = await histories(client, "t-stop")
    assert agui == [{"id": "u1", "role": "user", "content": held("stop-1")},
                    {"id": answer_id, "role": "assistant", "content": "alpha ", "metadata": {"incomplete": "stopped"}}]
    assert aisdk == [{"id": "u1", "role": "user", "parts": [{"type": "text", "text": held("stop-1")}]},
                     aisdk_answer(answer_id, "r-stop", "stopped", {"type": "text", "text": "alpha ", "state": "done"})]
    # one whole commit: the run's outcome and its cut-off answer
    run = await server.ctx.ledger.get_run("r-stop")
    assert (run.status, run.cause, run.steps) == (RunStatus.INTERRUPTED, Cause.STOPPED.value, 0)

    seen = await next_turn_reads(client, inputs, "t-stop")
    assert [(m.role, m.text, m.incomplete) for m in seen] == [
        ("user", held("stop-1"), None), ("assistant", "alpha ", "stopped"), ("user", "go on", None)]


# -- a disconnect ----------------------------------------------------------------------------------------


async def test_a_disconnect_keeps_the_answer_and_a_rejoin_finds_the_same_history(server, client, monkeypatch):
    inputs = ModelInputs(server, monkeypatch)
    raw: list[bytes] = []
    body = {"id": "t-gone", "messages": [aisdk_user("u1", held("gone-1"))]}
    async with server.client() as leaving, leaving.stream("POST", "/v1/ai-sdk/chat", json=body) as response:
        await read_until(response.aiter_bytes(), b'"text-delta"', raw)
        run = server.ctx.app.active("t-gone")
        assert run is not None
    with trio.fail_after(10):
        assert await run.settled() is RunStatus.INTERRUPTED
    answer_id = parse_sse(b"".join(raw))[0]["messageId"]

    assert (await client.get("/v1/ai-sdk/chat/t-gone/stream")).status_code == 204  # the rejoin: nothing runs
    assert (await client.get("/v1/ag-ui/threads/t-gone/stream")).status_code == 204
    agui, aisdk = await histories(client, "t-gone")
    assert agui[1:] == [{"id": answer_id, "role": "assistant", "content": "alpha ",
                         "metadata": {"incomplete": "client_gone"}}]
    assert aisdk[1:] == [aisdk_answer(answer_id, run.run_id, "client_gone",
                                      {"type": "text", "text": "alpha ", "state": "done"})]

    seen = await next_turn_reads(client, inputs, "t-gone")
    assert [(m.role, m.text) for m in seen][1:] == [("assistant", "alpha "), ("user", "go on")]


# -- a model failure mid-stream --------------------------------------------------------------------------


async def test_a_model_failure_keeps_the_reasoning_streamed_before_it(server, client, monkeypatch):
    inputs = ModelInputs(server, monkeypatch)
    events = await post_agui(client, agui_body("t-fail", "r-fail", [user("u1", "/think weighing options\n/fail")]))
    assert events[-1] == {"type": "RUN_ERROR", "message": "the scripted model failed as asked by /fail",
                          "code": "MODEL_ERROR"}
    reasoning_id = next(e["messageId"] for e in events if e["type"] == "REASONING_MESSAGE_START")
    answer_id = (await server.ctx.ledger.read_messages("t-fail", 1, 1))[0].id

    agui, aisdk = await histories(client, "t-fail")
    assert agui[1:] == [{"id": reasoning_id, "role": "reasoning", "content": "weighing "},
                        {"id": answer_id, "role": "assistant", "metadata": {"incomplete": "failed"}}]
    assert aisdk[1:] == [aisdk_answer(answer_id, "r-fail", "failed",
                                      {"type": "reasoning", "id": reasoning_id, "text": "weighing ", "state": "done"})]
    run = await server.ctx.ledger.get_run("r-fail")
    assert (run.status, run.error_code) == (RunStatus.FAILED, "MODEL_ERROR")

    seen = await next_turn_reads(client, inputs, "t-fail")
    assert seen[1].parts[-1] == IncompletePart("failed") and seen[1].role == "assistant"


# -- a shutdown ------------------------------------------------------------------------------------------


async def test_a_shutdown_keeps_the_answer_of_a_run_it_interrupts(server, client, monkeypatch):
    body = agui_body("t-down", "r-down", [user("u1", held("down-1"))])
    raw: list[bytes] = []
    async with client.stream("POST", "/v1/ag-ui/agents/detached", json=body) as response:
        await read_until(response.aiter_bytes(), b"TEXT_MESSAGE_CONTENT", raw)
    assert server.ctx.app.is_active("t-down")  # it runs on without its client
    await server.ctx.app.drain(server.ctx.config.server.drain_seconds)  # held beyond drain_seconds
    await outcome_committed(server, "t-down")
    run = await server.ctx.ledger.get_run("r-down")
    assert (run.status, run.cause) == (RunStatus.INTERRUPTED, Cause.SHUTDOWN.value)
    messages = await server.ctx.ledger.read_messages("t-down", 1, 10)
    assert [(m.role, m.parts) for m in messages] == [("assistant", (TextPart("alpha "), IncompletePart("shutdown")))]
    agui, aisdk = await histories(client, "t-down")
    assert agui[1]["metadata"] == {"incomplete": "shutdown"}
    assert aisdk[1]["metadata"]["incomplete"] == "shutdown"


# -- the agent's setting ---------------------------------------------------------------------------------


async def test_an_agent_may_keep_cut_off_answers_from_its_model(server, client, monkeypatch):
    """``keep_partial_answers = false``: history still shows the answer; the model does not read it."""
    inputs = ModelInputs(server, monkeypatch)
    events = await post_agui(client, agui_body("t-forget", "r-forget", [user("u1", "/fail")]),
                             "/v1/ag-ui/agents/forgetful")
    assert events[-1]["code"] == "MODEL_ERROR"
    agui, _ = await histories(client, "t-forget")
    assert agui[1]["content"] == "You " and agui[1]["metadata"] == {"incomplete": "failed"}
    seen = await next_turn_reads(client, inputs, "t-forget", agent="forgetful")
    assert [(m.role, m.text) for m in seen] == [("user", "/fail"), ("user", "go on")]
