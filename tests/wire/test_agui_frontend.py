"""What a page declares for one run, parsed (issue 14): ``tools``, ``context`` and ``state`` of an AG-UI
``RunAgentInput`` become value types, or a classified refusal naming the field."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from awaken.core.errors import InputRejected
from awaken.models import ContextEntry, ToolSpec
from awaken.wires.agui.frontend import MAX_CONTEXT, MAX_STATE_BYTES, MAX_TOOLS
from awaken.wires.agui.request import parse_run_input

JSON = "application/json"


def body(**overrides: Any) -> bytes:
    data: dict[str, Any] = {"threadId": "t-1", "runId": "r-1", "state": {}, "tools": [], "context": [],
                            "forwardedProps": {}, "messages": [{"id": "u1", "role": "user", "content": "Hi"}]}
    data.update(overrides)
    return orjson.dumps(data)


def refusal(**overrides: Any) -> InputRejected:
    with pytest.raises(InputRejected) as info:
        parse_run_input(body(**overrides), JSON)
    return info.value


ASK_USER = {"name": "ask_user", "description": "Ask the person a question",
            "parameters": {"type": "object", "properties": {"question": {"type": "string"}},
                           "required": ["question"]}}


def test_tools_are_parsed_as_specs_in_order():
    parsed = parse_run_input(body(tools=[ASK_USER, {"name": "calculator", "description": "gate"}]), JSON)
    assert parsed.tools == (
        ToolSpec("ask_user", "Ask the person a question", ASK_USER["parameters"]),
        ToolSpec("calculator", "gate", {"type": "object", "properties": {}}),
    )


@pytest.mark.parametrize(("tool", "message"), [
    ({"description": "no name"}, "tools[0].name must be 1-64 letters, digits, '_' or '-'"),
    ({"name": "has space"}, "tools[0].name must be 1-64 letters, digits, '_' or '-'"),
    ({"name": "x" * 65}, "tools[0].name must be 1-64 letters, digits, '_' or '-'"),
    ({"name": "f", "description": 3}, "tools[0].description must be a string"),
    ({"name": "f", "parameters": "object"}, "tools[0].parameters must be a JSON Schema object"),
    ({"name": "f", "parameters": {"type": "nope"}}, "tools[0].parameters is not a valid JSON Schema: "),
    ({"name": "f", "parameters": {"type": "object", "required": "q"}},
     "tools[0].parameters is not a valid JSON Schema: "),
    ("f", "tools[0] must be an object"),
])
def test_a_bad_tool_is_invalid_request_naming_it(tool, message):
    exc = refusal(tools=[tool])
    assert exc.code == "INVALID_REQUEST"
    assert exc.message.startswith(message)


def test_tools_are_bounded_in_count_and_size_and_names_are_unique():
    many = [{"name": f"t{i}"} for i in range(MAX_TOOLS + 1)]
    assert refusal(tools=many).message == f"tools: at most {MAX_TOOLS} tools per run, not {MAX_TOOLS + 1}"
    huge = [{"name": "f", "description": "x" * 300_000}]
    assert refusal(tools=huge).message == "tools: at most 262144 bytes of tool declarations per run"
    twice = refusal(tools=[{"name": "f"}, {"name": "f"}])
    assert (twice.code, twice.message) == ("INVALID_REQUEST", "tools[1].name 'f' is declared twice")
    assert refusal(tools={"name": "f"}).message == "tools must be an array"


def test_context_entries_are_parsed_in_order():
    parsed = parse_run_input(body(context=[{"description": "user name", "value": "Ada"},
                                           {"description": "plan", "value": "{\"tier\":\"pro\"}"}]), JSON)
    assert parsed.context == (ContextEntry("user name", "Ada"), ContextEntry("plan", '{"tier":"pro"}'))


@pytest.mark.parametrize(("context", "message"), [
    ([{"value": "v"}], "context[0].description must be a string"),
    ([{"description": "d", "value": 3}], "context[0].value must be a string"),
    (["v"], "context[0] must be an object"),
    ({"description": "d", "value": "v"}, "context must be an array"),
    ([{"description": "d", "value": "v"}] * (MAX_CONTEXT + 1), f"context: at most {MAX_CONTEXT} entries per run, not 65"),
    ([{"description": "d", "value": "v" * 300_000}], "context: at most 262144 bytes of context per run"),
])
def test_bad_context_is_invalid_request_naming_it(context, message):
    exc = refusal(context=context)
    assert (exc.code, exc.message) == ("INVALID_REQUEST", message)


def test_a_non_empty_state_object_is_carried_and_an_empty_one_is_none():
    assert parse_run_input(body(state={"color": "blue"}), JSON).state == {"color": "blue"}
    assert parse_run_input(body(state={}), JSON).state is None


def test_state_must_be_an_object_of_bounded_size():
    assert refusal(state=[1]).code == "UNSUPPORTED_FIELD"
    big = refusal(state={"k": "x" * MAX_STATE_BYTES})
    assert (big.code, big.message) == ("INVALID_REQUEST", f"state: at most {MAX_STATE_BYTES} bytes of JSON")
