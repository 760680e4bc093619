"""The AI SDK encoder, pure: AgentEvents in, exact UI Message Stream chunks out (CONTRACT §4).

Every emitted chunk is also checked against the ai@6.0.0 strict field set (``wire.check_chunk``).
"""

from __future__ import annotations

import pytest

from awaken.core import events as ev
from awaken.core.messages import Usage
from awaken.wires.aisdk.encoder import AiSdkEncoder
from awaken.wires.aisdk.wire import approval_id, check_chunk
from awaken.wires.encoding import EncoderClosed, EncoderMisuse

USAGE = {"runId": "r", "usage": {"inputTokens": 3, "outputTokens": 4, "totalTokens": 7}}
#: ``start`` carries the run id as message metadata (docs/clients.md: AI SDK state and message metadata)
RUN = {"runId": "r"}


def feed_all(encoder: AiSdkEncoder, events: list) -> list[dict]:
    out: list[dict] = []
    for event in events:
        out += encoder.feed(event)
    for chunk in out:
        check_chunk(chunk)
    return out


def test_text_run_is_start_step_triad_finish():
    """§4: start{messageId} → start-step … finish-step → finish{stop, usage}; empty deltas are dropped."""
    chunks = feed_all(AiSdkEncoder(), [
        ev.RunStarted("t", "r", "m1"),
        ev.StepStarted(1),
        ev.ReasoningStart("rs1"), ev.ReasoningDelta("rs1", "hmm"), ev.ReasoningEnd("rs1"),
        ev.TextStart("m1"), ev.TextDelta("m1", "Hel"), ev.TextDelta("m1", ""), ev.TextDelta("m1", "lo"),
        ev.TextEnd("m1"),
        ev.StepFinished(1, Usage(3, 4)),
        ev.RunFinished("t", "r", "completed", Usage(3, 4)),
    ])
    assert chunks == [
        {"type": "start", "messageId": "m1", "messageMetadata": RUN},
        {"type": "start-step"},
        {"type": "reasoning-start", "id": "rs1"},
        {"type": "reasoning-delta", "id": "rs1", "delta": "hmm"},
        {"type": "reasoning-end", "id": "rs1"},
        {"type": "text-start", "id": "m1"},
        {"type": "text-delta", "id": "m1", "delta": "Hel"},
        {"type": "text-delta", "id": "m1", "delta": "lo"},
        {"type": "text-end", "id": "m1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop", "messageMetadata": USAGE},
    ]


def test_frames_are_compact_json_lines():
    encoder = AiSdkEncoder()
    assert encoder.encode(ev.RunStarted("t", "r", "m1")) == (
        b'data: {"type":"start","messageId":"m1","messageMetadata":{"runId":"r"}}\n\n')


def test_continuation_reuses_the_clients_assistant_message_id():
    """§4: a continuation reuses the last assistant message id in ``start``."""
    assert AiSdkEncoder("a1").feed(ev.RunStarted("t", "r", "m9", resumed=True)) == [
        {"type": "start", "messageId": "a1", "messageMetadata": RUN}
    ]


def test_approval_gate_waits_with_tool_calls_reason():
    """A permission gate: tool-input-* → tool-approval-request{approvalId} → finish{tool-calls}."""
    chunks = feed_all(AiSdkEncoder(), [
        ev.RunStarted("t", "r", "m1"),
        ev.StepStarted(1),
        ev.ToolCallStart("c1", "calculator", "m1"),
        ev.ToolCallArgs("c1", '{"expression"'), ev.ToolCallArgs("c1", ""), ev.ToolCallArgs("c1", ':"2+3"}'),
        ev.ToolCallEnd("c1", "calculator", '{"expression":"2+3"}'),
        ev.ToolApprovalRequested("c1"),
        ev.StepFinished(1),
        ev.RunFinished("t", "r", "waiting", Usage(1, 2), ("c1",)),
    ])
    assert chunks == [
        {"type": "start", "messageId": "m1", "messageMetadata": RUN},
        {"type": "start-step"},
        {"type": "tool-input-start", "toolCallId": "c1", "toolName": "calculator"},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": '{"expression"'},
        {"type": "tool-input-delta", "toolCallId": "c1", "inputTextDelta": ':"2+3"}'},
        {"type": "tool-input-available", "toolCallId": "c1", "toolName": "calculator",
         "input": {"expression": "2+3"}},
        {"type": "tool-approval-request", "approvalId": "apr_c1", "toolCallId": "c1"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "tool-calls",
         "messageMetadata": {"runId": "r", "usage": {"inputTokens": 1, "outputTokens": 2, "totalTokens": 3}}},
    ]
    assert approval_id("c1") == "apr_c1"


def test_server_tool_outputs_inside_the_step():
    """Backend results: output = the JSON value of the content, else the text; errors as errorText."""
    chunks = feed_all(AiSdkEncoder(), [
        ev.RunStarted("t", "r", "m1"),
        ev.StepStarted(1),
        ev.ToolCallStart("c1", "calculator", "m1"), ev.ToolCallEnd("c1", "calculator", "{}"),
        ev.ToolCallStart("c2", "echo", "m1"), ev.ToolCallEnd("c2", "echo", "{}"),
        ev.ToolCallStart("c3", "boom", "m1"), ev.ToolCallEnd("c3", "boom", "{}"),
        ev.ToolCallStart("c4", "nope", "m1"), ev.ToolCallEnd("c4", "nope", "{}"),
        ev.ToolResult("c1", "tr_c1", "calculator", '{"result":5}'),
        ev.ToolResult("c2", "tr_c2", "echo", "plain words"),
        ev.ToolResult("c3", "tr_c3", "boom", "division by zero", "error"),
        ev.ToolResult("c4", "tr_c4", "nope", "denied: the policy does not allow nope", "denied"),
        ev.StepFinished(1),
    ])
    assert chunks[-5:] == [
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"result": 5}},
        {"type": "tool-output-available", "toolCallId": "c2", "output": "plain words"},
        {"type": "tool-output-error", "toolCallId": "c3", "errorText": "division by zero"},
        {"type": "tool-output-error", "toolCallId": "c4", "errorText": "denied: the policy does not allow nope"},
        {"type": "finish-step"},
    ]


def test_null_tool_output_keeps_the_output_key():
    """zod 4 needs the ``output`` key even when the value is null (aisdk.md §2.2)."""
    encoder = AiSdkEncoder()
    feed_all(encoder, [ev.RunStarted("t", "r", "m1"), ev.StepStarted(1), ev.ToolCallStart("c1", "x", "m1"),
                       ev.ToolCallEnd("c1", "x", "{}")])
    assert encoder.feed(ev.ToolResult("c1", "tr_c1", "x", "null")) == [
        {"type": "tool-output-available", "toolCallId": "c1", "output": None}
    ]


def test_unparsable_arguments_are_a_tool_input_error():
    chunks = feed_all(AiSdkEncoder(), [
        ev.RunStarted("t", "r", "m1"), ev.StepStarted(1),
        ev.ToolCallStart("c1", "calculator", "m1"), ev.ToolCallEnd("c1", "calculator", "{not json"),
    ])
    assert chunks[-1] == {"type": "tool-input-error", "toolCallId": "c1", "toolName": "calculator",
                          "input": "{not json", "errorText": "the model's arguments for this call are not valid JSON"}


def test_resumed_run_emits_results_outside_any_step_then_opens_a_step():
    """§4 / aisdk.md §3.3: results of the waited-on calls come before ``start-step``; the continuation
    text is in a new step (otherwise useChat re-posts forever)."""
    chunks = feed_all(AiSdkEncoder("a1"), [
        ev.RunStarted("t", "r", "a1", resumed=True),
        ev.ToolResult("c1", "tr_c1", "calculator", '{"result":5}', "ok", "approved"),
        ev.ToolResult("c2", "tr_c2", "calculator", "denied: the user did not allow this call", "denied", "denied"),
        ev.StepStarted(2),
        ev.TextStart("m2"), ev.TextDelta("m2", "done"), ev.TextEnd("m2"),
        ev.StepFinished(2),
        ev.RunFinished("t", "r", "completed", Usage(3, 4)),
    ])
    assert chunks == [
        {"type": "start", "messageId": "a1", "messageMetadata": RUN},
        {"type": "tool-output-available", "toolCallId": "c1", "output": {"result": 5}},
        {"type": "tool-output-denied", "toolCallId": "c2"},
        {"type": "start-step"},
        {"type": "text-start", "id": "m2"},
        {"type": "text-delta", "id": "m2", "delta": "done"},
        {"type": "text-end", "id": "m2"},
        {"type": "finish-step"},
        {"type": "finish", "finishReason": "stop", "messageMetadata": USAGE},
    ]


def test_resumed_run_without_a_continued_message_is_refused():
    with pytest.raises(EncoderMisuse, match="continued assistant message"):
        AiSdkEncoder().feed(ev.RunStarted("t", "r", "a1", resumed=True))


def test_failure_closes_open_blocks_then_error_then_finish():
    """§4: an ``error`` part after closing what is open, then ``finish{error}``; nothing after."""
    encoder = AiSdkEncoder()
    feed_all(encoder, [ev.RunStarted("t", "r", "m1"), ev.StepStarted(1), ev.TextStart("m1"),
                       ev.TextDelta("m1", "You ")])
    chunks = feed_all(encoder, [ev.RunFailed("MODEL_ERROR", "the model failed")])
    assert chunks == [
        {"type": "text-end", "id": "m1"},
        {"type": "error", "errorText": "MODEL_ERROR: the model failed"},
        {"type": "finish", "finishReason": "error"},
    ]
    with pytest.raises(EncoderClosed):
        encoder.feed(ev.StepFinished(1))


def test_failure_closes_reasoning_and_streaming_tool_input():
    encoder = AiSdkEncoder()
    feed_all(encoder, [ev.RunStarted("t", "r", "m1"), ev.StepStarted(1), ev.ReasoningStart("rs"),
                       ev.ReasoningDelta("rs", "x")])
    assert encoder.feed(ev.RunFailed("MODEL_TIMEOUT", "slow"))[:1] == [{"type": "reasoning-end", "id": "rs"}]
    encoder = AiSdkEncoder()
    feed_all(encoder, [ev.RunStarted("t", "r", "m1"), ev.StepStarted(1), ev.ToolCallStart("c1", "calc", "m1"),
                       ev.ToolCallArgs("c1", '{"a"')])
    chunks = feed_all(encoder, [ev.RunFailed("MODEL_ERROR", "gone")])
    assert chunks == [
        {"type": "tool-input-error", "toolCallId": "c1", "toolName": "calc", "input": None,
         "errorText": "the run failed before this call was complete"},
        {"type": "error", "errorText": "MODEL_ERROR: gone"},
        {"type": "finish", "finishReason": "error"},
    ]


def test_rejection_before_the_run_is_error_and_finish():
    chunks = feed_all(AiSdkEncoder(), [ev.RunFailed("INVALID_JSON", "the body is not valid JSON")])
    assert chunks == [
        {"type": "error", "errorText": "INVALID_JSON: the body is not valid JSON"},
        {"type": "finish", "finishReason": "error"},
    ]


@pytest.mark.parametrize(
    ("events", "match"),
    [
        ([ev.StepStarted(1)], "before RunStarted"),
        ([ev.RunStarted("t", "r", "m"), ev.TextStart("m")], "outside a step"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.TextDelta("m", "x")], "without an open text"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.TextStart("m"), ev.ToolCallStart("c", "x", "m")],
         "text or reasoning block is open"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.TextStart("m"), ev.StepFinished(1)],
         "text or reasoning block is open"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.RunFinished("t", "r", "completed")],
         "inside an open step"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.StepStarted(2)], "inside an open step"),
        ([ev.RunStarted("t", "r", "m"), ev.ToolResult("ghost", "tr_ghost", "x", "1")], "not in this message"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.ToolApprovalRequested("ghost")],
         "before its input is complete"),
        ([ev.RunStarted("t", "r", "m"), ev.StepStarted(1), ev.ToolCallStart("c", "x", "m"),
          ev.ToolResult("c", "tr_c", "x", "1")], "before its input is complete"),
    ],
)
def test_out_of_order_events_raise_and_the_encoder_refuses_more(events, match):
    """STYLE §1: misuse raises and moves the encoder to its error state; it never patches the stream."""
    encoder = AiSdkEncoder()
    with pytest.raises(EncoderMisuse, match=match):
        for event in events:
            encoder.feed(event)
    with pytest.raises(EncoderMisuse):
        encoder.feed(ev.RunFinished("t", "r", "completed"))


@pytest.mark.parametrize(
    "chunk",
    [
        {"type": "start", "messageId": None},
        {"type": "finish", "finishReason": "unknown"},
        {"type": "text-start", "id": "t", "x_custom": 1},
        {"type": "tool-output-available", "toolCallId": "c"},
        {"type": "tool-input-available", "toolCallId": "c", "toolName": "x"},
        {"type": "text-start", "id": 1},
        {"type": "abort", "reason": "user"},
    ],
)
def test_check_chunk_rejects_what_ai_6_0_0_rejects(chunk):
    """The failure matrix of aisdk.md §5, as the Python checker sees it."""
    with pytest.raises(ValueError):
        check_chunk(chunk)


def test_state_changes_are_data_state_parts_with_one_id_per_run():
    """Each committed state is a whole ``data-state`` part under the run's id (the client replaces it)."""
    chunks = feed_all(AiSdkEncoder(), [
        ev.RunStarted("t", "r", "m1", state={"a": 1}),
        ev.StepStarted(1),
        ev.StateChanged({"a": 2}, [{"op": "replace", "path": "/a", "value": 2}]),
        ev.StateChanged({"a": 2, "b": [1]}, [{"op": "add", "path": "/b", "value": [1]}]),
        ev.StepFinished(1),
        ev.RunFinished("t", "r", "completed"),
    ])
    assert chunks[2:4] == [{"type": "data-state", "id": "state_r", "data": {"a": 2}},
                           {"type": "data-state", "id": "state_r", "data": {"a": 2, "b": [1]}}]
    for chunk in chunks:
        check_chunk(chunk)
