"""End to end: an agent bound to an OpenAI-compatible endpoint, over AG-UI (issue 6.5)."""

from __future__ import annotations

import json

import trio

from tests.builders import agui_body, live_server, openai_config, post_agui, types
from tests.fake_openai import (
    DONE,
    fake_openai_server,
    finish,
    role,
    stream,
    text,
    text_reply,
    tool_call,
    usage,
)


async def test_a_full_tool_round_trip_over_agui_with_the_openai_provider(tmp_path, nursery, monkeypatch):
    """The model calls calculator (arguments in fragments), the server runs it, the model answers."""
    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "sk-test-secret-value")
    first = stream(role(), tool_call(0, id="call_1", name="calculator", arguments='{"expr'),
                   tool_call(0, arguments='ession": "6*7"}'), finish("tool_calls"), usage(11, 7), DONE)
    second = text_reply("The answer ", "is 42.", usage=(20, 5))
    async with fake_openai_server(nursery, [first, second]) as upstream:
        async with live_server(openai_config(tmp_path, upstream.base_url, first_byte_timeout=5.0, idle_timeout=5.0)) as server, server.client() as client:
            events = await post_agui(client, agui_body("t", "r", [
                {"id": "u1", "role": "user", "content": "What is 6*7?"}]), )
            history = (await client.get("/v1/ag-ui/threads/t/messages")).json()["items"]
            run = (await server.ctx.ledger.list_runs("t"))[0]
    assert types(events) == [
        "RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_ARGS", "TOOL_CALL_END",
        "TOOL_CALL_RESULT", "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT",
        "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED",
    ]
    assert next(e for e in events if e["type"] == "TOOL_CALL_RESULT")["content"] == '{"result":42}'
    assert [m["role"] for m in history] == ["user", "assistant", "tool", "assistant"]
    assert history[-1]["content"] == "The answer is 42."
    assert run.status == "completed" and (run.usage.input_tokens, run.usage.output_tokens) == (31, 12)
    # The second model request carried the tool call and its result back, in OpenAI's shape.
    sent = upstream.requests[1].json["messages"]
    assert sent[-2]["tool_calls"][0]["function"] == {"name": "calculator", "arguments": '{"expression": "6*7"}'}
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": '{"result":42}'}
    assert upstream.requests[0].headers["authorization"] == "Bearer sk-test-secret-value"
    assert "sk-test-secret-value" not in json.dumps(history) + json.dumps(events)


async def test_a_client_disconnect_closes_the_upstream_request(tmp_path, nursery, monkeypatch):
    """CONTRACT §5: a disconnect closes the model request; the run is committed interrupted."""
    from tests.fake_openai import Pause

    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "k")
    slow = stream(role(), text("Hello"), Pause(30), text(" never"), finish(), DONE)
    async with fake_openai_server(nursery, [slow]) as upstream:
        async with live_server(openai_config(tmp_path, upstream.base_url, first_byte_timeout=5.0, idle_timeout=5.0)) as server, server.client() as client:
            body = agui_body("t", "r", [{"id": "u1", "role": "user", "content": "hi"}])
            async with client.stream("POST", "/v1/ag-ui", json=body) as response:
                async for line in response.aiter_lines():
                    if "TEXT_MESSAGE_CONTENT" in line:
                        break
            with trio.fail_after(1):
                await upstream.wait_for_disconnect()
                while (await server.ctx.ledger.list_runs("t"))[0].status != "interrupted":
                    await trio.sleep(0.01)
