"""New input for a thread whose run is streaming is the agent's choice (``[agents.<id>] on_new_input``,
docs/clients.md): ``reject`` (the default) refuses it with ``THREAD_BUSY``; ``interrupt`` stops the running
turn (its stream ends as a stop, its answer so far committed, marked ``superseded``) and runs the new one;
``enqueue`` runs the new one once the running turn has ended. Each mode on both wires (AG-UI, AI SDK) and
both transports (SSE, WebSocket).

The first run is held by the scripted model's ``/hold`` (it streams its first word, then waits); a queued
request is known to wait once admission is making way for it (a spy on ``RunApplication._make_way``).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
import trio
from trio_websocket import open_websocket_url

from awaken.engine.state import Cause, RunStatus
from tests.builders import (
    agui_body,
    aisdk_user,
    default_config_data,
    held,
    history_page,
    live_server,
    make_config,
    open_gate,
    parse_sse,
    user,
    ws_url,
)

WIRES = ["ag-ui", "ai-sdk"]
TRANSPORTS = ["sse", "ws"]
AGENT_OF = {"reject": "assistant", "interrupt": "impatient", "enqueue": "patient"}


@pytest.fixture
async def server(tmp_path):
    agents = default_config_data()["agents"]
    agents["impatient"] = {"model": "scripted", "on_new_input": "interrupt"}
    agents["patient"] = {"model": "scripted", "on_new_input": "enqueue"}
    async with live_server(make_config(tmp_path, agents=agents)) as srv:
        yield srv


def request_for(wire: str, thread_id: str, run_id: str, texts: list[str], agent: str) -> dict[str, Any]:
    """The request a client sends for the newest of ``texts`` (the earlier ones as its history)."""
    ids = [f"u{i}-{thread_id}" for i in range(1, len(texts) + 1)]
    if wire == "ag-ui":
        return agui_body(thread_id, run_id, [user(i, t) for i, t in zip(ids, texts, strict=True)])
    return {"id": thread_id, "messages": [aisdk_user(i, t) for i, t in zip(ids, texts, strict=True)]}


def path(wire: str, transport: str, agent: str) -> str:
    route = f"/v1/{wire}/agents/{agent}"
    if transport == "ws":
        return f"{route}/ws"
    return route if wire == "ag-ui" else f"{route}/chat"


def ended(wire: str, event: Any) -> bool:
    return event == "[DONE]" if wire == "ai-sdk" else event["type"] in ("RUN_FINISHED", "RUN_ERROR")


class Stream:
    """One request's stream over SSE or a WebSocket of its own: its events as they arrive."""

    def __init__(self, server: Any, wire: str, transport: str, agent: str) -> None:
        self.server, self.wire, self.transport, self.agent = server, wire, transport, agent
        self.events: list[Any] = []
        self.first_delta = trio.Event()
        self.done = trio.Event()

    def _seen(self, event: Any) -> None:
        self.events.append(event)
        if not isinstance(event, str) and event["type"] in ("TEXT_MESSAGE_CONTENT", "text-delta"):
            self.first_delta.set()

    async def run(self, request: dict[str, Any]) -> None:
        try:
            if self.transport == "sse":
                async with self.server.client() as client, client.stream(
                        "POST", path(self.wire, "sse", self.agent), json=request) as response:
                    buffer = b""
                    async for chunk in response.aiter_bytes():
                        buffer += chunk
                        frames, _, buffer = buffer.rpartition(b"\n\n")
                        for event in parse_sse(frames + b"\n\n") if frames else []:
                            self._seen(event)
            else:
                url = ws_url(self.server.base_url, path(self.wire, "ws", self.agent))
                async with open_websocket_url(url) as ws:
                    await ws.send_message(json.dumps(request))
                    while not self.events or not ended(self.wire, self.events[-1]):
                        text = await ws.get_message()
                        self._seen(text if text == "[DONE]" else orjson.loads(text))
        finally:
            self.done.set()


@asynccontextmanager
async def streams(server: Any) -> AsyncIterator[Callable[[str, str, str, dict[str, Any]], Awaitable[Stream]]]:
    async with trio.open_nursery() as nursery:
        async def start(wire: str, transport: str, agent: str, request: dict[str, Any]) -> Stream:
            stream = Stream(server, wire, transport, agent)
            nursery.start_soon(stream.run, request)
            return stream

        yield start


def making_way(server: Any, monkeypatch: pytest.MonkeyPatch) -> trio.Event:
    """Set once admission makes way for a request on a busy thread (it then waits there)."""
    app = server.ctx.app
    entered = trio.Event()
    make_way = app._make_way

    async def spy(holder: Any, on_new_input: str) -> None:
        entered.set()
        await make_way(holder, on_new_input)

    monkeypatch.setattr(app, "_make_way", spy)
    return entered


def text_of(wire: str, events: list[Any]) -> str:
    kind = "TEXT_MESSAGE_CONTENT" if wire == "ag-ui" else "text-delta"
    return "".join(e["delta"] for e in events if not isinstance(e, str) and e["type"] == kind)


async def thread_history(server: Any, thread_id: str) -> list[tuple[str, str, str | None]]:
    """The thread's AG-UI history as (role, content, incomplete reason)."""
    async with server.client() as client:
        items = (await history_page(client, "ag-ui", thread_id))["items"]
    return [(m["role"], m.get("content", ""), m.get("metadata", {}).get("incomplete")) for m in items]


FIRST = held("first", 3)
FIRST_WORDS = "alpha bravo charlie"


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_reject_refuses_new_input_while_a_turn_streams(server, wire, transport):
    thread = f"rej-{wire}-{transport}"
    gate = f"gate-{thread}"
    async with streams(server) as start:
        first = await start(wire, transport, "assistant", request_for(wire, thread, "r1", [held(gate, 3)], "assistant"))
        with trio.fail_after(10):
            await first.first_delta.wait()
        second = await start(wire, transport, "assistant", request_for(wire, thread, "r2", [held(gate, 3), "next"], "assistant"))
        with trio.fail_after(10):
            await second.done.wait()
        open_gate(server.ctx, gate)
    busy = f"thread {thread!r} already has an active run; send the next input when it ends"
    if wire == "ag-ui":
        assert second.events == [{"type": "RUN_ERROR", "message": busy, "code": "THREAD_BUSY"}]
    else:
        assert second.events[0] == {"type": "error", "errorText": f"THREAD_BUSY: {busy}"}
        assert second.events[-1] == "[DONE]"
    assert text_of(wire, first.events) == FIRST_WORDS


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_interrupt_stops_the_running_turn_keeps_its_words_and_runs_the_new_input(server, wire, transport):
    thread = f"int-{wire}-{transport}"
    gate = f"gate-{thread}"  # never opened: only the interruption ends the first turn
    async with streams(server) as start:
        first = await start(wire, transport, "impatient", request_for(wire, thread, "r1", [held(gate, 3)], "impatient"))
        with trio.fail_after(10):
            await first.first_delta.wait()
        second = await start(wire, transport, "impatient",
                             request_for(wire, thread, "r2", [held(gate, 3), "next"], "impatient"))
        with trio.fail_after(10):
            await first.done.wait()
            await second.done.wait()
    if wire == "ag-ui":
        assert first.events[-1] == {"type": "RUN_ERROR", "message": "superseded by new input", "code": "STOPPED"}
        assert second.events[-1]["type"] == "RUN_FINISHED"
    else:
        assert first.events[-2:] == [{"type": "abort"}, "[DONE]"]
        assert second.events[-2] == {"type": "finish", "finishReason": "stop", "messageMetadata":
                                     second.events[-2]["messageMetadata"]}
    assert text_of(wire, first.events) == "alpha "
    assert text_of(wire, second.events) == 'You said: "next".'
    assert await thread_history(server, thread) == [("user", held(gate, 3), None), ("assistant", "alpha ", "superseded"),
                                             ("user", "next", None), ("assistant", 'You said: "next".', None)]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [(r.status, r.cause) for r in runs] == [(RunStatus.INTERRUPTED, Cause.SUPERSEDED.value),
                                                   (RunStatus.COMPLETED, None)]


@pytest.mark.parametrize("transport", TRANSPORTS)
@pytest.mark.parametrize("wire", WIRES)
async def test_enqueue_runs_the_new_input_after_the_running_turn(server, wire, transport, monkeypatch):
    thread = f"enq-{wire}-{transport}"
    gate = f"gate-{thread}"
    queued = making_way(server, monkeypatch)
    async with streams(server) as start:
        first = await start(wire, transport, "patient", request_for(wire, thread, "r1", [held(gate, 3)], "patient"))
        with trio.fail_after(10):
            await first.first_delta.wait()
        second = await start(wire, transport, "patient", request_for(wire, thread, "r2", [held(gate, 3), "next"], "patient"))
        with trio.fail_after(10):
            await queued.wait()  # the second request waits for the thread
        assert second.events == [] and not first.done.is_set()
        open_gate(server.ctx, gate)
        with trio.fail_after(10):
            await first.done.wait()
            await second.done.wait()
    assert text_of(wire, first.events) == FIRST_WORDS
    assert text_of(wire, second.events) == 'You said: "next".'
    assert await thread_history(server, thread) == [("user", held(gate, 3), None), ("assistant", FIRST_WORDS, None),
                                             ("user", "next", None), ("assistant", 'You said: "next".', None)]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]


def test_on_new_input_is_validated(tmp_path):
    from awaken.core.errors import ConfigError

    with pytest.raises(ConfigError, match="agents.a.on_new_input: later not in literal"):
        make_config(tmp_path, agents={"a": {"on_new_input": "later"}}, default_agent="a")
    assert make_config(tmp_path).agents["assistant"].on_new_input == "reject"


async def test_a_queued_request_whose_client_leaves_never_starts_its_run(server, monkeypatch):
    """``enqueue``: a request waiting for the thread is abandoned with its socket; once the running turn
    ends, nothing of it is committed and the thread takes the next request."""
    thread, gate = "enq-left", "gate-enq-left"
    queued = making_way(server, monkeypatch)
    async with streams(server) as start:
        first = await start("ag-ui", "sse", "patient", request_for("ag-ui", thread, "r1", [held(gate, 3)], "patient"))
        with trio.fail_after(10):
            await first.first_delta.wait()
        url = ws_url(server.base_url, path("ag-ui", "ws", "patient"))
        async with open_websocket_url(url) as ws:
            await ws.send_message(json.dumps(request_for("ag-ui", thread, "r2", [held(gate, 3), "gone"], "patient")))
            with trio.fail_after(10):
                await queued.wait()
        # the socket is closed while its request waits for the thread
        open_gate(server.ctx, gate)
        with trio.fail_after(10):
            await first.done.wait()
            while server.ctx.app.is_active(thread):
                await trio.sleep(0.01)
        third = await start("ag-ui", "sse", "patient", request_for("ag-ui", thread, "r3", [held(gate, 3), "next"], "patient"))
        with trio.fail_after(10):
            await third.done.wait()
    assert text_of("ag-ui", third.events) == 'You said: "next".'
    assert await thread_history(server, thread) == [("user", held(gate, 3), None), ("assistant", FIRST_WORDS, None),
                                                    ("user", "next", None), ("assistant", 'You said: "next".', None)]
    assert [r.run_id for r in await server.ctx.ledger.list_runs(thread)] == ["r1", "r3"]
