"""Bad tool arguments of any encoding are a tool error the model sees (issue 26, finding 7).

A model may send arguments whose JSON holds a lone surrogate: escaped (``"\\ud800"`` in the arguments
text, which decodes to a string no UTF-8 can carry) or raw (the chunk's own JSON escape decodes to a
surrogate inside the arguments text). Neither may fail the run: the call gets an error result the
model reads, the model answers it, and the run completes. A tool whose result or error text is not valid
Unicode is an error result too.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

from awaken.engine.state import RunStatus
from awaken.tools import Tool, ToolContext, ToolError, ToolRegistry, ToolText
from awaken.tools.builtins import BUILTINS
from tests.builders import agui_body, live_server, openai_config, parse_sse, post_agui, types
from tests.fake_openai import DONE, Send, fake_openai_server, finish, role, stream, text_reply, tool_call

NOT_UNICODE = "invalid arguments: not valid Unicode (a string holds a lone surrogate)"


def raw_call(name: str, arguments_json: str) -> Send:
    """A tool-call chunk whose ``arguments`` string is written into the frame as given (its escapes are
    the chunk's own: ``\\ud800`` here puts a raw surrogate into the arguments text)."""
    return Send(('data: {"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"id":"call_1","type":"function",'
                 f'"function":{{"name":"{name}","arguments":"{arguments_json}"}}}}]}}}}]}}\n\n').encode())


CASES = [
    # (the tool-call frame, the arguments as the wire then shows them, the tool result the model reads)
    (tool_call(0, id="call_1", name="calculator", arguments='{"expression": "\\ud800"}'),
     '{"expression": "\\ud800"}', NOT_UNICODE),
    (tool_call(0, id="call_1", name="set_state", arguments='{"key": "k", "value": "\\ud800"}'),
     '{"key": "k", "value": "\\ud800"}', NOT_UNICODE),
    (tool_call(0, id="call_1", name="set_state", arguments='{"key": "\\udfff", "value": 1}'),
     '{"key": "\\udfff", "value": 1}', NOT_UNICODE),
    (raw_call("calculator", '{\\"expression\\": \\"\\ud800\\"}'), '{"expression": "\\ud800"}', NOT_UNICODE),
    (raw_call("set_state", '{\\"key\\": \\"k\\", \\"value\\": 1\\ud800}'), '{"key": "k", "value": 1\\ud800}',
     None),
]
IDS = ["calculator-escaped", "set_state-value-escaped", "set_state-key-escaped", "calculator-raw", "raw-outside-a-string"]


@pytest.mark.parametrize(("frame", "shown", "result"), CASES, ids=IDS)
async def test_agui_a_lone_surrogate_in_arguments_is_a_tool_error_the_model_answers(tmp_path, nursery, frame, shown,
                                                                                   result):
    first = stream(role(), frame, finish("tool_calls"), DONE)
    async with fake_openai_server(nursery, [first, text_reply("Sorry, bad input.")]) as upstream:
        async with live_server(openai_config(tmp_path, upstream.base_url, tools=("calculator", "set_state"), max_retries=0)) as server, server.client() as client:
            events = await post_agui(client, agui_body("t", "r", [{"id": "u1", "role": "user", "content": "go"}]))
            run = (await server.ctx.ledger.list_runs("t"))[0]
            thread = await server.ctx.ledger.get_thread("t")
    assert types(events) == [
        "RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_RESULT",
        "STEP_FINISHED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
        "STEP_FINISHED", "RUN_FINISHED",
    ]
    assert events[3]["delta"] == shown
    content = events[5]["content"]
    if result is None:
        assert content.startswith("invalid arguments: not JSON (")
    else:
        assert content == result
    assert (run.status, run.error_code) == (RunStatus.COMPLETED, None)
    assert thread is not None and thread.state == {}  # set_state never ran
    sent = upstream.requests[1].json["messages"]
    assert sent[-1] == {"role": "tool", "tool_call_id": "call_1", "content": f"error: {content}"}
    assert sent[-2]["tool_calls"][0]["function"]["arguments"] == shown


async def test_aisdk_a_lone_surrogate_in_arguments_is_a_tool_error_the_model_answers(tmp_path, nursery):
    frame, shown, result = CASES[1]
    first = stream(role(), frame, finish("tool_calls"), DONE)
    async with fake_openai_server(nursery, [first, text_reply("Sorry.")]) as upstream:
        async with live_server(openai_config(tmp_path, upstream.base_url, tools=("calculator", "set_state"), max_retries=0)) as server, server.client() as client:
            response = await client.post("/v1/ai-sdk/chat", json={"id": "c", "messages": [
                {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"}]}]})
            run = (await server.ctx.ledger.list_runs("c"))[0]
    chunks = parse_sse(response.content)
    kinds = [c if isinstance(c, str) else c["type"] for c in chunks]
    assert "error" not in kinds and kinds[-2:] == ["finish", "[DONE]"]
    assert chunks[-2]["finishReason"] == "stop"
    assert next(c for c in chunks if isinstance(c, dict) and c["type"] == "tool-output-error") == {
        "type": "tool-output-error", "toolCallId": "call_1", "errorText": result}
    assert (run.status, run.error_code) == (RunStatus.COMPLETED, None)
    assert json.loads(upstream.requests[1].body)["messages"][-1]["content"] == f"error: {result}"


def _registry(call: Any) -> ToolRegistry:
    schema = {"type": "object"}
    return ToolRegistry([*BUILTINS, Tool("odd", "returns odd text", schema, call)])


@pytest.mark.parametrize(("returns", "expected"), [
    (ToolText("a\ud800b"), "odd failed: its result is not valid Unicode"),
    ({"text": "a\udfffb"}, "odd failed: its result is not valid Unicode"),
])
async def test_a_result_that_is_not_valid_unicode_is_an_error_result(returns: Any, expected: str) -> None:
    async def call(args: dict[str, Any], ctx: ToolContext) -> Any:
        return returns

    outcome = await _registry(call).execute("odd", "{}", ToolContext("t", "r", {}))
    assert (outcome.content, outcome.ok) == (expected, False)


async def test_an_error_text_that_is_not_valid_unicode_is_sent_repaired() -> None:
    async def call(args: dict[str, Any], ctx: ToolContext) -> Any:
        raise ToolError("bad \ud800 input")

    outcome = await _registry(call).execute("odd", "{}", ToolContext("t", "r", {}))
    assert (outcome.content, outcome.ok) == ("bad \ufffd input", False)


async def test_arguments_that_are_not_valid_unicode_never_reach_the_tool() -> None:
    called: list[Any] = []

    async def call(args: dict[str, Any], ctx: ToolContext) -> Any:
        called.append(args)
        return {}

    registry = _registry(call)
    for arguments in ('{"a": "\\ud800"}', '{"\\udc00": 1}', '{"a": ["x", {"b": "\\udbff"}]}', '{"a": "\ud800"}'):
        outcome = await registry.execute("odd", arguments, ToolContext("t", "r", {}))
        assert (outcome.content, outcome.ok) == (NOT_UNICODE, False)
    assert called == []
    with trio.fail_after(1):  # a valid pair is one character, not a lone surrogate
        outcome = await registry.execute("odd", '{"a": "\\ud83d\\ude00"}', ToolContext("t", "r", {}))
    assert outcome.ok and called == [{"a": "\U0001f600"}]


async def test_text_with_a_lone_surrogate_reaches_the_wire_repaired(tmp_path, nursery):
    """The same chunk escape in text or reasoning gets U+FFFD, not a failed run."""
    odd = Send(b'data: {"choices":[{"index":0,"delta":{"reasoning_content":"hm\\udfff"}}]}\n\n'
               b'data: {"choices":[{"index":0,"delta":{"content":"a\\ud800b"}}]}\n\n')
    async with fake_openai_server(nursery, [stream(role(), odd, finish(), DONE)]) as upstream:
        async with live_server(openai_config(tmp_path, upstream.base_url, tools=("calculator", "set_state"), max_retries=0)) as server, server.client() as client:
            events = await post_agui(client, agui_body("t", "r", [{"id": "u1", "role": "user", "content": "go"}]))
            run = (await server.ctx.ledger.list_runs("t"))[0]
            history = (await client.get("/v1/ag-ui/threads/t/messages")).json()["items"]
    assert types(events)[-1] == "RUN_FINISHED"
    assert [e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT"] == ["a\ufffdb"]
    assert [e["delta"] for e in events if e["type"] == "REASONING_MESSAGE_CONTENT"] in ([], ["hm\ufffd"])
    assert (run.status, history[-1]["content"]) == (RunStatus.COMPLETED, "a\ufffdb")
