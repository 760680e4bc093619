"""The real AI SDK client against a live server (CONTRACT §4, brief item 8).

Each test runs ``node tests/node/aisdk_client.mjs <baseUrl> <scenario> <lib> <chatId>``: an
``AbstractChat`` subclass (what ``useChat`` is) with ``DefaultChatTransport``, whose strict zod schema
(ai@6.0.0) or loose one (newest ai@6) parses every chunk. It prints the final ``chat.messages``, every
POST it made (body and raw SSE) and the whole GET history (paged with ``limit=2``). We assert the
final UIMessages, the exact number of requests (the ``start-step`` / infinite-resend trap), and that
history projects exactly what the client built.
"""

from __future__ import annotations

import copy
import shutil
from typing import Any

import orjson
import pytest
import trio

from awaken.wires.aisdk.wire import check_chunk
from tests.builders import ROOT, live_server, make_config, parse_sse, record_dedup

NODE_DIR = ROOT / "tests" / "node"
SCRIPT = NODE_DIR / "aisdk_client.mjs"
LIBS = ["ai-6-0-0", "ai-6"]

pytestmark = [
    pytest.mark.skipif(
        shutil.which("node") is None or not (NODE_DIR / "node_modules" / "ai-6").is_dir(),
        reason="node and tests/node/node_modules (npm ci in tests/node) are needed for the real-client tests",
    ),
    pytest.mark.slow,  # real client libraries in Node
    pytest.mark.timeout(120),
]


async def run_client(base_url: str, scenario: str, lib: str) -> dict[str, Any]:
    chat_id = f"{scenario}-{lib}"
    with trio.fail_after(30):
        done = await trio.run_process(["node", str(SCRIPT), base_url, scenario, lib, chat_id], cwd=NODE_DIR,
                                      capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    result = orjson.loads(done.stdout)
    for request in result["requests"]:
        chunks = parse_sse(request["sse"])
        assert chunks[-1] == "[DONE]"
        for chunk in chunks[:-1]:
            check_chunk(chunk)
        request["chunks"] = chunks
    return result


def assert_history_matches(result: dict[str, Any]) -> None:
    """GET history == what the client folded (ai@6.0.0 has no reasoning ``id`` on its parts)."""
    assert result["history"]["status"] == 200
    items = copy.deepcopy(result["history"]["items"])
    if result["lib"] == "ai-6-0-0":
        for item in items:
            for part in item["parts"]:
                if part["type"] == "reasoning":
                    part.pop("id")
    assert items == result["messages"]


def parts(message: dict[str, Any]) -> list[str]:
    return [p["type"] for p in message["parts"]]


def assert_ready(result: dict[str, Any], requests: int) -> None:
    assert (result["status"], result["error"]) == ("ready", None)
    assert len(result["requests"]) == requests


def assert_continuation(result: dict[str, Any]) -> None:
    """The automatic resend continues the assistant message: same id in ``start`` and the same run id in
    its metadata (the same run continues); results before the new ``start-step``."""
    first, second = result["requests"]
    message_id = first["chunks"][0]["messageId"]
    assert second["body"]["trigger"] == "submit-message"
    assert second["body"]["messageId"] == message_id == second["body"]["messages"][-1]["id"]
    assert second["chunks"][0] == {"type": "start", "messageId": message_id,
                                   "messageMetadata": first["chunks"][0]["messageMetadata"]}
    kinds = [c if isinstance(c, str) else c["type"] for c in second["chunks"]]
    assert kinds[1].startswith("tool-output-") and kinds[2] == "start-step"
    assert result["messages"][-1]["id"] == message_id


@pytest.mark.parametrize("lib", LIBS)
async def test_text(server, lib):
    result = await run_client(server.base_url, "text", lib)
    assert_ready(result, 1)
    user, assistant = result["messages"]
    assert user["parts"] == [{"type": "text", "text": "/think pondering\nhello there"}]
    assert assistant["id"] == result["requests"][0]["chunks"][0]["messageId"]
    assert parts(assistant) == ["step-start", "reasoning", "text"]
    assert assistant["parts"][1]["text"] == "pondering"
    assert assistant["parts"][2] == {"type": "text", "text": 'You said: "hello there".', "state": "done"}
    assert assistant["metadata"]["usage"]["totalTokens"] > 0
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_server_tool(server, lib):
    result = await run_client(server.base_url, "server-tool", lib)
    assert_ready(result, 1)
    assistant = result["messages"][-1]
    assert parts(assistant) == ["step-start", "tool-calculator", "step-start", "text"]
    tool = assistant["parts"][1]
    assert (tool["state"], tool["input"], tool["output"]) == ("output-available", {"expression": "2+3"},
                                                              {"result": 5})
    assert assistant["parts"][3]["text"] == 'Here is what the tools said: calculator returned {"result":5}.'
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_approve(server, lib):
    result = await run_client(server.base_url, "approve", lib)
    assert_ready(result, 2)
    assert_continuation(result)
    assert len(result["messages"]) == 2
    assistant = result["messages"][-1]
    assert parts(assistant) == ["step-start", "tool-calculator", "step-start", "text"]
    tool = assistant["parts"][1]
    assert tool["state"] == "output-available" and tool["output"] == {"result": 5}
    assert tool["approval"] == {"id": f"apr_{tool['toolCallId']}", "approved": True}
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_deny(server, lib):
    result = await run_client(server.base_url, "deny", lib)
    assert_ready(result, 2)
    assert_continuation(result)
    assistant = result["messages"][-1]
    tool = assistant["parts"][1]
    assert tool["state"] == "output-denied"
    assert tool["approval"] == {"id": f"apr_{tool['toolCallId']}", "approved": False, "reason": "not now"}
    assert "output" not in tool
    assert "denied: the user did not allow this call: not now" in assistant["parts"][3]["text"]
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_client_tool(server, lib):
    result = await run_client(server.base_url, "client-tool", lib)
    assert_ready(result, 2)
    assert_continuation(result)
    assistant = result["messages"][-1]
    assert parts(assistant) == ["step-start", "tool-ask_user", "step-start", "text"]
    tool = assistant["parts"][1]
    assert (tool["state"], tool["input"], tool["output"]) == ("output-available", {"question": "?"},
                                                              {"answer": "blue"})
    assert assistant["parts"][3]["text"] == 'Here is what the tools said: ask_user returned {"answer":"blue"}.'
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_multi_turn(server, lib):
    result = await run_client(server.base_url, "multi-turn", lib)
    assert_ready(result, 2)
    assert [m["role"] for m in result["messages"]] == ["user", "assistant", "user", "assistant"]
    assert [len(r["body"]["messages"]) for r in result["requests"]] == [1, 3]
    assert [m["parts"][-1]["text"] for m in result["messages"][1::2]] == ['You said: "first".',
                                                                          'You said: "second".']
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_a_long_history_resent_every_turn_is_parsed_only_past_what_the_server_parsed_before(server, lib,
                                                                                                    monkeypatch):
    """Issue 18: useChat resends every UIMessage each turn. From the second turn the bodies are long
    enough for the replay memo, so turns 3 to 5 each start with the very bytes of the turn before (the
    assistant messages as the client folded them included): the server splits them there and parses
    only the new messages (3 splits), and the chat and the history are the same as ever. Its dedup reads
    nothing from the store: the assistant messages the client folded carry the ids the server
    committed, so the thread's hot entry finds every replayed id committed and only the new message not."""
    splits = server.memo("ai-sdk").hits
    dedup = record_dedup(monkeypatch)
    result = await run_client(server.base_url, "long-history", lib)
    assert_ready(result, 5)
    assert [len(r["body"]["messages"]) for r in result["requests"]] == [1, 3, 5, 7, 9]
    assert [m["parts"][-1]["text"] for m in result["messages"][1::2]] == [
        f'You said: "turn {n}: {("lorem ipsum dolor " * 800).strip()}".' for n in range(1, 6)]
    assert server.memo("ai-sdk").hits - splits == 3
    assert dedup[-3:] == [(True, 1)] * 3
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_history_round_trip(server, lib):
    """Three turns (reasoning, two server tools in one step, text); history paged by 2 == chat.messages."""
    result = await run_client(server.base_url, "history", lib)
    assert_ready(result, 3)
    assert len(result["messages"]) == 6
    assert parts(result["messages"][3]) == ["step-start", "tool-calculator", "tool-current_time", "step-start",
                                            "text"]
    assert_history_matches(result)


@pytest.mark.parametrize("lib", LIBS)
async def test_model_failure_is_a_chat_error(server, lib):
    result = await run_client(server.base_url, "fail", lib)
    assert result["status"] == "error" and len(result["requests"]) == 1
    assert result["error"].startswith("MODEL_ERROR: ")
    assert [c if isinstance(c, str) else c["type"] for c in result["requests"][0]["chunks"]][-4:] == [
        "text-end", "error", "finish", "[DONE]"]


async def test_ai_7_smoke(server):
    """A v6-conformant stream is also accepted by ai@7 (aisdk.md §0)."""
    result = await run_client(server.base_url, "text", "ai-7")
    assert_ready(result, 1)
    assert result["messages"][-1]["parts"][-1]["text"] == 'You said: "hello there".'
    assert result["history"]["items"] == result["messages"]


@pytest.mark.parametrize("lib", LIBS)
async def test_a_tools_progress_is_preliminary_output_the_result_replaces(tmp_path, lib):
    """docs/tools.md: ``ctx.progress`` reaches useChat as preliminary ``tool-output-available`` chunks, which
    the strict ai@6.0.0 schema accepts; the committed result replaces them in the tool part."""
    config = make_config(tmp_path, tools={"plugins": ["tests.plugins.toolkit:count_up"]},
                         agents={"assistant": {"tools": ["count_up"]}})
    async with live_server(config) as server:
        with trio.fail_after(30):
            done = await trio.run_process(
                ["node", str(SCRIPT), server.base_url, "say", lib, f"progress-{lib}", "{}",
                 orjson.dumps({"agent": "assistant", "text": '/call count_up {"to": 2}'}).decode()],
                cwd=NODE_DIR, capture_stdout=True, capture_stderr=True, check=False)
    assert done.returncode == 0, done.stderr.decode()
    result = orjson.loads(done.stdout)
    assert (result["status"], result["error"]) == ("ready", None)
    chunks = parse_sse(result["requests"][0]["sse"])
    for chunk in chunks[:-1]:
        check_chunk(chunk)
    assert [c["output"] for c in chunks if isinstance(c, dict) and c.get("preliminary")] == [{"counted": 1},
                                                                                             {"counted": 2}]
    tool = result["messages"][-1]["parts"][1]
    assert (tool["type"], tool["state"], tool["output"], "preliminary" in tool) == (
        "tool-count_up", "output-available", {"done": 2}, False)
