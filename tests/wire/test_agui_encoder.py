"""The AG-UI encoder, pure: AgentEvents in, exact AG-UI wire events (and SSE bytes) out.

CONTRACT §1 (encoders are pure state machines), §3 (stream rules), and ``reference/agui.md`` §4/§9
(what both client generations accept).
"""

from __future__ import annotations

import jsonpatch
import orjson
import pytest

from awaken.core import events as ev
from awaken.core.messages import Message, TextPart, ToolCallPart, Usage
from awaken.streams.broadcast import Channel
from awaken.wires.agui.encoder import AguiEncoder
from awaken.wires.encoding import EncoderClosed, EncoderMisuse
from tests.builders import parse_sse

T, R = "thread-1", "run-1"
STARTED = {"type": "RUN_STARTED", "threadId": T, "runId": R, "protocolVersion": "1.0"}
FINISHED = {"type": "RUN_FINISHED", "threadId": T, "runId": R}


def feed_all(encoder: AguiEncoder, events: list) -> list[dict]:
    return [wire for event in events for wire in encoder.feed(event)]


def no_nulls(value) -> bool:
    if value is None:
        return False
    if isinstance(value, dict):
        return all(no_nulls(v) for v in value.values())
    if isinstance(value, list):
        return all(no_nulls(v) for v in value)
    return True


def test_text_run_wire_events():
    """CONTRACT §3: RUN_STARTED first (protocolVersion 1.0), a text triad inside a step, RUN_FINISHED last."""
    encoder = AguiEncoder(T, R)
    wire = feed_all(encoder, [
        ev.RunStarted(T, "engine-run", "m1"),
        ev.StepStarted(1),
        ev.TextStart("m1"),
        ev.TextDelta("m1", "Hello "),
        ev.TextDelta("m1", ""),
        ev.TextDelta("m1", "world"),
        ev.TextEnd("m1"),
        ev.StepFinished(1, Usage(3, 2)),
        ev.RunFinished(T, "engine-run", "completed", Usage(3, 2)),
    ])
    assert wire == [
        STARTED,
        {"type": "STEP_STARTED", "stepName": "step-1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "Hello "},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "world"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        {"type": "STEP_FINISHED", "stepName": "step-1"},
        FINISHED,
    ]
    assert all(no_nulls(w) for w in wire)


def test_sse_frames_are_compact_json_with_lf_only():
    """CONTRACT §3: frames are ``data: <compact JSON>\\n\\n`` (LF only)."""
    encoder = AguiEncoder(T, R)
    raw = encoder.encode(ev.RunStarted(T, R, "m1"))
    assert raw == b'data: {"type":"RUN_STARTED","threadId":"thread-1","runId":"run-1","protocolVersion":"1.0"}\n\n'
    assert parse_sse(raw) == [STARTED]


def test_reasoning_wire_events():
    """reference/agui.md §9.7: REASONING_START → MESSAGE_START{role: reasoning} → CONTENT → END → END."""
    wire = feed_all(AguiEncoder(T, R), [
        ev.RunStarted(T, R, "m1"),
        ev.ReasoningStart("rs1"),
        ev.ReasoningDelta("rs1", "thinking"),
        ev.ReasoningDelta("rs1", ""),
        ev.ReasoningEnd("rs1"),
        ev.TextStart("m1"),
        ev.TextDelta("m1", "ok"),
        ev.TextEnd("m1"),
        ev.RunFinished(T, R, "completed"),
    ])
    assert wire == [
        STARTED,
        {"type": "REASONING_START", "messageId": "rs1"},
        {"type": "REASONING_MESSAGE_START", "messageId": "rs1", "role": "reasoning"},
        {"type": "REASONING_MESSAGE_CONTENT", "messageId": "rs1", "delta": "thinking"},
        {"type": "REASONING_MESSAGE_END", "messageId": "rs1"},
        {"type": "REASONING_END", "messageId": "rs1"},
        {"type": "TEXT_MESSAGE_START", "messageId": "m1", "role": "assistant"},
        {"type": "TEXT_MESSAGE_CONTENT", "messageId": "m1", "delta": "ok"},
        {"type": "TEXT_MESSAGE_END", "messageId": "m1"},
        FINISHED,
    ]


def test_tool_call_triad_and_result():
    """reference/agui.md §9.6: START{parentMessageId} → ARGS → END, then TOOL_CALL_RESULT with a string."""
    wire = feed_all(AguiEncoder(T, R), [
        ev.RunStarted(T, R, "m1"),
        ev.ToolCallStart("c1", "calculator", "m1"),
        ev.ToolCallArgs("c1", '{"expr'),
        ev.ToolCallArgs("c1", ""),
        ev.ToolCallArgs("c1", 'ession": "1+1"}'),
        ev.ToolCallEnd("c1", "calculator", '{"expression": "1+1"}'),
        ev.ToolResult("c1", "tr_c1", "calculator", '{"result":2}'),
        ev.RunFinished(T, R, "completed"),
    ])
    assert wire == [
        STARTED,
        {"type": "TOOL_CALL_START", "toolCallId": "c1", "toolCallName": "calculator", "parentMessageId": "m1"},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": '{"expr'},
        {"type": "TOOL_CALL_ARGS", "toolCallId": "c1", "delta": 'ession": "1+1"}'},
        {"type": "TOOL_CALL_END", "toolCallId": "c1"},
        {"type": "TOOL_CALL_RESULT", "messageId": "tr_c1", "toolCallId": "c1", "content": '{"result":2}',
         "role": "tool"},
        FINISHED,
    ]


def test_tool_result_the_client_sent_is_not_echoed():
    """reference/agui.md §2.3: the client already holds its own tool message; echoing it would duplicate it."""
    encoder = AguiEncoder(T, R, client_held=frozenset({"tool-1"}))
    wire = feed_all(encoder, [
        ev.RunStarted(T, R, "m1", resumed=True),
        ev.ToolResult("c1", "tool-1", "ask_user", "Ada"),
        ev.ToolResult("c2", "tr_c2", "calculator", "2"),
        ev.RunFinished(T, R, "completed"),
    ])
    assert wire == [STARTED, {"type": "TOOL_CALL_RESULT", "messageId": "tr_c2", "toolCallId": "c2", "content": "2",
                              "role": "tool"}, FINISHED]


def test_state_snapshot_then_valid_delta():
    """reference/agui.md §9.8: STATE_SNAPSHOT first, then RFC 6902 STATE_DELTA against it."""
    encoder = AguiEncoder(T, R)
    patch = jsonpatch.make_patch({"a": 1}, {"a": 2, "b": [1]}).patch
    wire = feed_all(encoder, [
        ev.RunStarted(T, R, "m1"),
        ev.StateChanged({"a": 1}, [{"op": "add", "path": "/a", "value": 1}]),
        ev.StateChanged({"a": 2, "b": [1]}, patch),
        ev.StateChanged({"a": 2, "b": [1]}, []),
        ev.RunFinished(T, R, "completed"),
    ])
    assert wire == [STARTED, {"type": "STATE_SNAPSHOT", "snapshot": {"a": 1}},
                    {"type": "STATE_DELTA", "delta": patch}, FINISHED]
    assert jsonpatch.apply_patch(wire[1]["snapshot"], wire[2]["delta"]) == {"a": 2, "b": [1]}


def test_run_started_with_state_sends_the_snapshot_so_changes_are_deltas():
    """reference/agui.md §9.8: the thread's state opens the stream as a snapshot; changes follow as deltas."""
    wire = feed_all(AguiEncoder(T, R), [
        ev.RunStarted(T, R, "m1", state={"k": "v"}),
        ev.StateChanged({"k": "w"}, [{"op": "replace", "path": "/k", "value": "w"}]),
        ev.RunFinished(T, R, "completed"),
    ])
    assert wire == [STARTED, {"type": "STATE_SNAPSHOT", "snapshot": {"k": "v"}},
                    {"type": "STATE_DELTA", "delta": [{"op": "replace", "path": "/k", "value": "w"}]}, FINISHED]


def waiting_run(encoder: AguiEncoder) -> list[dict]:
    return feed_all(encoder, [
        ev.RunStarted(T, R, "m1"),
        ev.StepStarted(1),
        ev.ToolCallStart("c1", "ask_user", "m1"),
        ev.ToolCallArgs("c1", "{}"),
        ev.ToolCallEnd("c1", "ask_user", "{}"),
        ev.ToolApprovalRequested("c1"),
        ev.StepFinished(1),
        ev.RunFinished(T, R, "waiting", Usage(4, 1), ("c1",)),
    ])


def test_waiting_outcome_for_a_1_0_client():
    """reference/agui.md §9.9: a 1.0 client gets outcome {type: success, pendingToolCallIds} and usage."""
    wire = waiting_run(AguiEncoder(T, R, modern=True))
    assert wire[-1] == {"type": "RUN_FINISHED", "threadId": T, "runId": R,
                        "outcome": {"type": "success", "pendingToolCallIds": ["c1"]},
                        "usage": [{"inputTokens": 4, "outputTokens": 1, "totalTokens": 5}]}


def test_waiting_run_for_a_pre_1_0_client_has_no_outcome():
    """reference/agui.md §9.9: without protocolVersion, no outcome (0.0.59's success outcome is strict)."""
    wire = waiting_run(AguiEncoder(T, R))
    assert [w["type"] for w in wire] == ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS",
                                         "TOOL_CALL_END", "STEP_FINISHED", "RUN_FINISHED"]
    assert wire[-1] == FINISHED


def test_completed_run_for_a_1_0_client_has_no_outcome():
    """reference/agui.md §2.1: an absent outcome means success."""
    wire = feed_all(AguiEncoder(T, R, modern=True), [ev.RunStarted(T, R, "m1"), ev.RunFinished(T, R, "completed")])
    assert wire == [STARTED, FINISHED]


def test_run_error_carries_code_and_message():
    """CONTRACT §3: RUN_ERROR always carries a catalogue code; legal with items still open."""
    encoder = AguiEncoder(T, R)
    wire = feed_all(encoder, [ev.RunStarted(T, R, "m1"), ev.TextStart("m1"), ev.TextDelta("m1", "x"),
                              ev.RunFailed("MODEL_ERROR", "the model failed")])
    assert wire[-1] == {"type": "RUN_ERROR", "message": "the model failed", "code": "MODEL_ERROR"}


def test_rejection_is_a_single_run_error():
    """CONTRACT §3: a refused request is one RUN_ERROR (the first event; no RUN_STARTED)."""
    assert AguiEncoder("", "").rejection("INVALID_JSON", "bad") == [
        {"type": "RUN_ERROR", "message": "bad", "code": "INVALID_JSON"}]


@pytest.mark.parametrize(
    "events",
    [
        [ev.TextStart("m1")],
        [ev.RunStarted(T, R, "m1"), ev.RunStarted(T, R, "m1")],
        [ev.RunStarted(T, R, "m1"), ev.TextDelta("m1", "x")],
        [ev.RunStarted(T, R, "m1"), ev.TextStart("m1"), ev.TextStart("m2")],
        [ev.RunStarted(T, R, "m1"), ev.TextStart("m1"), ev.TextEnd("m2")],
        [ev.RunStarted(T, R, "m1"), ev.ReasoningDelta("r", "x")],
        [ev.RunStarted(T, R, "m1"), ev.ToolCallArgs("c1", "{}")],
        [ev.RunStarted(T, R, "m1"), ev.ToolCallStart("c1", "f", "m1"), ev.ToolCallStart("c1", "f", "m1")],
        [ev.RunStarted(T, R, "m1"), ev.StepFinished(1)],
        [ev.RunStarted(T, R, "m1"), ev.TextStart("m1"), ev.RunFinished(T, R, "completed")],
        [ev.RunStarted(T, R, "m1"), ev.ToolCallStart("c1", "f", "m1"), ev.RunFinished(T, R, "completed")],
        [ev.RunStarted(T, R, "m1"), ev.StepStarted(1), ev.RunFinished(T, R, "completed")],
    ],
    ids=lambda events: "-".join(type(e).__name__ for e in events),
)
def test_misuse_raises_and_refuses_further_input(events):
    """STYLE §1: an out-of-order AgentEvent raises EncoderMisuse and the encoder refuses further input."""
    encoder = AguiEncoder(T, R)
    *ok, bad = events
    feed_all(encoder, ok)
    with pytest.raises(EncoderMisuse):
        encoder.feed(bad)
    with pytest.raises(EncoderMisuse, match="already refused"):
        encoder.feed(ev.RunFailed("INTERNAL_ERROR", "x"))


@pytest.mark.parametrize("terminal", [ev.RunFinished(T, R, "completed"), ev.RunFailed("MODEL_ERROR", "x")])
def test_nothing_after_the_terminal_event(terminal):
    """CONTRACT §3: exactly one terminal event, nothing after it."""
    encoder = AguiEncoder(T, R)
    feed_all(encoder, [ev.RunStarted(T, R, "m1"), terminal])
    for late in (ev.TextStart("m2"), ev.RunFailed("INTERNAL_ERROR", "late"), ev.RunFinished(T, R, "completed")):
        with pytest.raises(EncoderClosed):
            encoder.feed(late)


def test_the_sink_turns_misuse_into_one_run_error_and_then_drops_everything():
    """CONTRACT §3: the wire still ends with exactly one terminal event when the server misbehaves."""
    emitted: list[dict] = []
    channel = Channel(b"r", AguiEncoder(T, R), [], 1 << 20)
    channel.watch(lambda position, payload: emitted.append(orjson.loads(payload)))
    sink = channel.feed
    sink(ev.RunStarted(T, R, "m1"))
    sink(ev.TextDelta("m1", "orphan"))
    sink(ev.TextStart("m1"))
    sink(ev.RunFinished(T, R, "completed"))
    assert emitted == [STARTED, {"type": "RUN_ERROR", "message": "the server produced an invalid stream",
                                 "code": "INTERNAL_ERROR"}]


# -- 1.0 interrupts and usage (docs/clients.md, "AG-UI interrupts") ---------------------------------------------

GATE = ev.Gate("c1", "calculator", '{"expression": "1"}', {"type": "object"})
GATED_HISTORY = (Message("u1", "user", (TextPart("go"),)),
                 Message("m1", "assistant", (ToolCallPart("c1", "calculator", '{"expression": "1"}'),)))


def gated_run(encoder: AguiEncoder) -> list[dict]:
    return feed_all(encoder, [
        ev.RunStarted(T, R, "m1"),
        ev.RunFinished(T, R, "waiting", Usage(4, 1), ("c1",), (GATE,), GATED_HISTORY, {"k": 1}),
    ])


def test_a_gated_run_ends_with_snapshots_and_an_interrupt_for_a_1_0_client():
    wire = gated_run(AguiEncoder(T, R, modern=True))
    assert wire[1:] == [
        {"type": "STATE_SNAPSHOT", "snapshot": {"k": 1}},
        {"type": "MESSAGES_SNAPSHOT", "messages": [
            {"id": "u1", "role": "user", "content": "go"},
            {"id": "m1", "role": "assistant", "toolCalls": [
                {"id": "c1", "type": "function", "function": {"name": "calculator",
                                                              "arguments": '{"expression": "1"}'}}]}]},
        {"type": "RUN_FINISHED", "threadId": T, "runId": R, "outcome": {"type": "interrupt", "interrupts": [
            {"id": "int_c1", "reason": "tool_call", "message": 'Allow calculator with arguments {"expression": "1"}?',
             "toolCallId": "c1", "responseSchema": {
                 "type": "object", "required": ["approved"], "properties": {
                     "approved": {"type": "boolean"}, "reason": {"type": "string"},
                     "editedArgs": {"type": "object",
                                    "description": "Full replacement of the tool's arguments (not merged)."}}}}]},
         "usage": [{"inputTokens": 4, "outputTokens": 1, "totalTokens": 5}]},
    ]


def test_a_gated_run_for_a_pre_1_0_client_is_a_plain_run_finished():
    assert gated_run(AguiEncoder(T, R)) == [STARTED, FINISHED]


def test_run_error_carries_usage_for_a_1_0_client_only():
    failed = ev.RunFailed("MODEL_ERROR", "boom", Usage(2, 3))
    modern = feed_all(AguiEncoder(T, R, modern=True), [ev.RunStarted(T, R, "m1"), failed])
    assert modern[-1] == {"type": "RUN_ERROR", "message": "boom", "code": "MODEL_ERROR",
                          "usage": [{"inputTokens": 2, "outputTokens": 3, "totalTokens": 5}]}
    old = feed_all(AguiEncoder(T, R), [ev.RunStarted(T, R, "m1"), failed])
    assert old[-1] == {"type": "RUN_ERROR", "message": "boom", "code": "MODEL_ERROR"}


def test_a_gated_run_holding_only_a_tail_of_the_thread_sends_no_messages_snapshot():
    """A MESSAGES_SNAPSHOT replaces the client's messages: never sent from a history budget's tail."""
    wire = feed_all(AguiEncoder(T, R, modern=True), [
        ev.RunStarted(T, R, "m1"),
        ev.RunFinished(T, R, "waiting", Usage(), ("c1",), (GATE,), GATED_HISTORY, {}, history_whole=False),
    ])
    assert [w["type"] for w in wire] == ["RUN_STARTED", "STATE_SNAPSHOT", "RUN_FINISHED"]
    assert wire[-1]["outcome"]["interrupts"][0]["id"] == "int_c1"
