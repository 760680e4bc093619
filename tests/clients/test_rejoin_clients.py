"""Real client libraries parse the rejoin routes' streams (issue 16 item 2): ``@ag-ui/client`` 0.0.59
and 1.x on ``GET /v1/ag-ui/threads/{id}/stream`` (``id:`` positions on every frame), ``ai@6.0.0`` and
the newest ``ai@6`` ``DefaultChatTransport.reconnectToStream`` on ``GET …/chat/{chatId}/stream``.

Each test starts a run on a ``continue`` agent held by the scripted model's ``/hold``, drops the
connection, starts the Node client (tests/node/rejoin_client.mjs), waits until the server has it as a
watcher of the run (a condition, not a timing window), releases the run and compares what the client
built with the committed history.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import trio

from awaken.engine.state import RunStatus
from tests.builders import agui_body, default_config_data, held, live_server, make_config, release

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "rejoin_client.mjs"
WORDS = 12

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


@pytest.fixture
async def server(tmp_path):
    agents = default_config_data()["agents"]
    agents["detached"] = dict(agents["assistant"], on_disconnect="continue")
    async with live_server(make_config(tmp_path, agents=agents)) as srv:
        yield srv


async def held_then_dropped(server, path: str, body: dict[str, Any], first: str) -> None:  # noqa: ANN001
    """POST a held run, read until the line holding ``first`` arrives, drop the connection."""
    async with server.client() as client, client.stream("POST", path, json=body) as response:
        async for line in response.aiter_lines():
            if first in line:
                break


async def watchers_are(server, thread_id: str, present: bool, within: float = 20.0) -> None:  # noqa: ANN001
    """Wait until the thread's run has a watcher (``present``) or none (a condition, not a time)."""
    run = server.ctx.app.active(thread_id)
    assert run is not None
    with trio.fail_after(within):
        while any(channel.watchers for channel in run.broadcast.channels.values()) != present:
            await trio.sleep(0.02)


async def rejoin_with(server, gate: str, thread_id: str, *args: str) -> dict[str, Any]:  # noqa: ANN001
    out: dict[str, Any] = {}

    async def client() -> None:
        result = await trio.run_process(["node", str(SCRIPT), *args], capture_stdout=True, capture_stderr=True,
                                        check=False, cwd=NODE_DIR)
        assert result.returncode == 0, result.stderr.decode()
        out.update(json.loads(result.stdout))

    await watchers_are(server, thread_id, False)  # the dropped connection has left
    async with trio.open_nursery() as nursery:
        nursery.start_soon(client)
        await watchers_are(server, thread_id, True)  # the Node client has rejoined
        await release(server, gate)
    assert out["logs"] == [], out["logs"]
    assert "failed" not in out, out["failed"]
    return out


@pytest.mark.parametrize("package", ["agui-client-0059", "agui-client-1"])
async def test_agui_clients_parse_a_rejoined_stream(server, package):
    thread = f"rj-{package}"
    body = agui_body(thread, f"run-{thread}", [{"id": "u1", "role": "user", "content": held(thread, WORDS)}])
    await held_then_dropped(server, "/v1/ag-ui/agents/detached", body, "TEXT_MESSAGE_CONTENT")
    out = await rejoin_with(server, thread, thread, "agui", package, server.base_url, thread)
    assert out["errors"] == []
    assert out["types"][0] == "RUN_STARTED" and out["types"][-1] == "RUN_FINISHED"
    async with server.client() as client:
        history = (await client.get(f"/v1/ag-ui/threads/{thread}/messages", params={"limit": 100})).json()["items"]
    (answer,) = [m for m in out["messages"] if m["role"] == "assistant"]
    assert answer["content"] == history[-1]["content"]
    assert len(answer["content"].split()) == WORDS
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED]


@pytest.mark.parametrize("package", ["ai-6-0-0", "ai-6"])
@pytest.mark.parametrize("agent", ["", "detached"])
async def test_aisdk_reconnect_to_stream_parses_a_rejoined_stream(server, package, agent):
    thread = f"rj-{package}-{agent or 'plain'}"
    body = {"id": thread, "messages": [{"id": "u1", "role": "user",
                                        "parts": [{"type": "text", "text": held(thread, WORDS)}]}]}
    await held_then_dropped(server, "/v1/ai-sdk/agents/detached/chat", body, "text-delta")
    out = await rejoin_with(server, thread, thread, "aisdk", package, server.base_url, thread, agent)
    assert out["chunks"][0] == "start" and out["chunks"][-1] == "finish"
    async with server.client() as client:
        history = (await client.get(f"/v1/ai-sdk/threads/{thread}/messages", params={"limit": 100})).json()["items"]
    assert out["message"]["parts"] == history[-1]["parts"]
    assert out["message"]["id"] == history[-1]["id"]


async def test_aisdk_reconnect_to_stream_with_nothing_running_is_null(server):
    out = await trio.run_process(["node", str(SCRIPT), "aisdk", "ai-6", server.base_url, "rj-nothing"],
                                 capture_stdout=True, check=True, cwd=NODE_DIR)
    assert json.loads(out.stdout) == {"chunks": [], "message": None, "stream": None, "logs": []}
