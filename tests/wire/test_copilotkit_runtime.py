"""The CopilotKit runtime protocol, sans-IO (issue 14 §4): the REST routes and the single-endpoint
envelope as calls, the info document, the stop answer, and connect's replay of committed history."""

from __future__ import annotations

import orjson
import pytest

from awaken import __version__
from awaken.core.errors import InputRejected, StoreUnavailable
from awaken.core.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from awaken.ledger.interface import ThreadRecord, ThreadView
from awaken.wires.copilotkit.replay import Joined, replay_events
from awaken.wires.copilotkit.runtime import (
    RuntimeCall,
    error_answer,
    info_document,
    parse_envelope,
    route,
    stop_answer,
    stop_scope,
)

JSON = "application/json"


@pytest.mark.parametrize(("method", "tail", "call"), [
    ("GET", "/info", RuntimeCall("info")),
    ("GET", "/info/", RuntimeCall("info")),
    ("POST", "/agent/assistant/run", RuntimeCall("run", "assistant")),
    ("POST", "/agent/guarded/connect", RuntimeCall("connect", "guarded")),
    ("POST", "/agent/assistant/stop/t-1", RuntimeCall("stop", "assistant", "t-1")),
    ("POST", "", "envelope"),
    ("POST", "/", "envelope"),
    ("GET", "", None),
    ("POST", "/info", None),
    ("GET", "/agent/assistant/run", None),
    ("POST", "/agent/assistant/suggest", None),
    ("POST", "/agent//run", None),
])
def test_rest_routes_name_their_call(method, tail, call):
    assert route(method, tail) == call


def envelope(**data) -> bytes:
    return orjson.dumps(data)


def test_envelopes_name_the_same_calls():
    run_input = {"threadId": "t-1", "runId": "r-1", "messages": []}
    assert parse_envelope(envelope(method="info"), JSON) == RuntimeCall("info")
    assert parse_envelope(envelope(method="agent/run", params={"agentId": "a"}, body=run_input), JSON) == \
        RuntimeCall("run", "a", body=orjson.dumps(run_input))
    assert parse_envelope(envelope(method="agent/connect", params={"agentId": "a"}, body=run_input),
                          "application/json; charset=utf-8") == RuntimeCall("connect", "a", body=orjson.dumps(run_input))
    assert parse_envelope(envelope(method="agent/stop", params={"agentId": "a", "threadId": "t"}), JSON) == \
        RuntimeCall("stop", "a", "t")
    assert parse_envelope(envelope(method="agent/stop", params={"agentId": "a", "threadId": "t"},
                                   body={"runId": "r"}), JSON) == RuntimeCall("stop", "a", "t", b'{"runId":"r"}')


@pytest.mark.parametrize(("raw", "content_type", "status", "message"), [
    (envelope(method="info"), "text/plain", 415, "Single-route endpoint expects JSON payloads"),
    (b"{", JSON, 400, "Invalid JSON payload"),
    (b"[]", JSON, 400, "Invalid JSON payload"),
    (envelope(params={}), JSON, 400, "Missing method field"),
    (envelope(method="agent/dance"), JSON, 400, "Unsupported method 'agent/dance'"),
    (envelope(method="transcribe"), JSON, 404, "Method 'transcribe' is not served by this runtime"),
    (envelope(method="agent/run", body={}), JSON, 400, "Missing or invalid parameter 'agentId'"),
    (envelope(method="agent/run", params={"agentId": " "}, body={}), JSON, 400,
     "Missing or invalid parameter 'agentId'"),
    (envelope(method="agent/run", params={"agentId": "a"}), JSON, 400, "Missing request body for JSON handler"),
    (envelope(method="agent/stop", params={"agentId": "a"}), JSON, 400, "Missing or invalid parameter 'threadId'"),
])
def test_bad_envelopes_are_refused_with_the_runtimes_shape(raw, content_type, status, message):
    with pytest.raises(InputRejected) as info:
        parse_envelope(raw, content_type)
    answered_status, answer = error_answer(info.value)
    assert answered_status == info.value.status == status
    assert answer["message"] == message
    assert set(answer) == {"error", "message"}


def test_stop_scope_is_an_optional_run_id():
    assert stop_scope(b"") is None
    assert stop_scope(b"{}") is None
    assert stop_scope(b'{"runId": "r-1"}') == "r-1"
    for bad, message in [(b'{"runId": ""}', "Invalid runId"), (b'{"other": 1}', "Invalid stop request"),
                         (b"[1]", "Invalid stop request"), (b"{", "Invalid stop request")]:
        with pytest.raises(InputRejected) as info:
            stop_scope(bad)
        status, answer = error_answer(info.value)
        assert (status, answer["message"]) == (400, message)


def test_info_lists_the_agents_with_their_descriptions_over_sse():
    caps = {"streaming": True}
    doc = info_document([("assistant", "General helper", caps), ("guarded", "Asks first", {})])
    assert doc["version"] == __version__
    assert doc["mode"] == "sse"
    assert doc["agents"] == {"assistant": {"name": "assistant", "description": "General helper", "capabilities": caps},
                             "guarded": {"name": "guarded", "description": "Asks first", "capabilities": {}}}
    assert doc["audioFileTranscriptionEnabled"] is False


def test_refusals_are_named_in_the_runtimes_shape():
    """The catalogue's errors, answered as the Node runtime names them (every other input code is
    ``invalid_request``; a failure on the server's side names its own code)."""
    assert error_answer(InputRejected("m", code="UNSUPPORTED_MEDIA_TYPE")) == (
        415, {"error": "unsupported_media_type", "message": "m"})
    assert error_answer(InputRejected("m", code="NOT_FOUND")) == (404, {"error": "not_found", "message": "m"})
    assert error_answer(InputRejected("m", code="UNKNOWN_AGENT")) == (404, {"error": "not_found", "message": "m"})
    assert error_answer(InputRejected("m", code="BODY_TOO_LARGE")) == (413, {"error": "invalid_request", "message": "m"})
    assert error_answer(StoreUnavailable("m")) == (503, {"error": "STORE_UNAVAILABLE", "message": "m"})


def test_stop_answers():
    assert stop_answer(True, "t", None) == {"stopped": True, "interrupt": {
        "type": "RUN_ERROR", "message": "Run stopped by user", "code": "STOPPED"}}
    assert stop_answer(False, "t", None) == {"stopped": False, "message": "No active run for thread 't'."}
    assert stop_answer(False, "t", "r") == {"stopped": False,
                                            "message": "Run 'r' is not the active run for thread 't'."}


def test_connect_replays_nothing_for_an_empty_thread():
    assert replay_events(ThreadView(None, (), ())) == []


def test_connect_replays_committed_history_and_state():
    messages = (
        Message("u1", "user", (TextPart("2+2?"),), "r1", 1),
        Message("m1", "assistant", (ToolCallPart("c1", "calculator", '{"expression":"2+2"}'),), "r1", 2),
        Message("tr_c1", "tool", (ToolResultPart("c1", "calculator", '{"result": 4}', "ok"),), "r1", 3),
        Message("m2", "assistant", (TextPart("4"),), "r2", 4),
    )
    view = ThreadView(ThreadRecord("t-1", 1, {"color": "teal"}, 4), messages, ())
    assert replay_events(view) == [
        {"type": "RUN_STARTED", "threadId": "t-1", "runId": "r2", "protocolVersion": "1.0"},
        {"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": "u1", "role": "user", "content": "2+2?"},
            {"id": "m1", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "calculator", "arguments": '{"expression":"2+2"}'}}]},
            {"id": "tr_c1", "role": "tool", "toolCallId": "c1", "content": '{"result": 4}'},
            {"id": "m2", "role": "assistant", "content": "4"},
        ]},
        {"type": "STATE_SNAPSHOT", "snapshot": {"color": "teal"}},
        {"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r2"},
    ]


def test_connect_names_the_newest_finished_run_when_a_run_is_active():
    messages = (
        Message("u1", "user", (TextPart("hi"),), "r1", 1),
        Message("m1", "assistant", (TextPart("hello"),), "r1", 2),
        Message("u2", "user", (TextPart("again"),), "r2", 3),
    )
    view = ThreadView(ThreadRecord("t-1", 1, {}, 3), messages, ())
    events = replay_events(view, active_run_id="r2")
    assert (events[0]["runId"], events[-1]["runId"]) == ("r1", "r1")
    first = replay_events(ThreadView(ThreadRecord("t-1", 1, {}, 1), messages[2:], ()), active_run_id="r2")
    assert (first[0]["runId"], first[-1]["runId"]) == ("r2", "r2")  # nothing finished yet: the active run's input


def test_a_joined_run_leaves_out_the_events_of_what_the_history_holds():
    joined = Joined.of([
        Message("u2", "user", (TextPart("go"),), "r2", 1),
        Message("m1", "assistant", (ReasoningPart("rs1", "hmm"), ToolCallPart("c1", "calculator", "{}")), "r2", 2),
    ])
    assert not joined.keeps({"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs1", "delta": "hmm"})
    assert not joined.keeps({"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "calculator",
                             "parentMessageId": "m1"})
    assert not joined.keeps({"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": "{}"})
    assert not joined.keeps({"type": "TOOL_CALL_END", "toolCallId": "c1"})
    # the call's result is not committed yet: it is new, although its call is not
    assert joined.keeps({"type": "TOOL_CALL_RESULT", "messageId": "tr_c1", "toolCallId": "c1", "content": "42"})
    assert joined.keeps({"type": "TEXT_MESSAGE_START", "messageId": "m2", "role": "assistant"})
    assert joined.keeps({"type": "RUN_STARTED", "threadId": "t-1", "runId": "r2"})
    assert joined.keeps({"type": "RUN_FINISHED", "threadId": "t-1", "runId": "r2"})
