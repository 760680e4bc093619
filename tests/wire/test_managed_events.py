"""The Managed Agents wire, sans-IO (issue 32): a committed thread projected as session events, positions
and ids, where a stream starts, paging, the parse of what a client sends, the live previews, the error
envelope. The same projection serves the history route and the stream (tests/clients/test_managed_sdk.py
drives both with the official SDK)."""

from __future__ import annotations

import pytest

from awaken.core import events as ev
from awaken.core.errors import InputRejected
from awaken.core.messages import Message, ReasoningPart, TextPart, ToolCallPart, ToolResultPart
from awaken.engine.state import RunStatus
from awaken.wires.managed import events as mev
from awaken.wires.managed.protocol import LiveEncoder, error_envelope, frame
from awaken.wires.managed.request import decisions, parse_create, parse_events
from awaken.wires.protocol import SUPERSEDED, ToolDecision, denial


def msg(seq: int, role: str, *parts, run: str = "r1", id: str | None = None) -> Message:  # noqa: ANN002
    return Message(id or f"m{seq}", role, tuple(parts), run_id=run, seq=seq, created_at=1_700_000_000_000 + seq)


GATED = [
    msg(1, "user", TextPart("add")),
    msg(2, "assistant", ReasoningPart("rsn_1", "thinking"), TextPart("Let me add."),
        ToolCallPart("c1", "calculator", '{"expression": "1+1"}')),
    msg(3, "tool", ToolResultPart("c1", "calculator", '{"result":2}', approval="approved"), id="tr_c1"),
    msg(4, "assistant", TextPart("It is 2.")),
]


def kinds(events: list[mev.Positioned]) -> list[tuple[str, str]]:
    return [(e.id, e.event["type"]) for e in events]


def test_a_gated_turn_projects_as_the_api_events_in_position_order():
    events = mev.project(GATED, {"r1": mev.RunFacts(RunStatus.COMPLETED)}, {}, ())
    assert kinds(events) == [
        ("sevt_1_0", "user.message"), ("sevt_1_1", "session.status_running"),
        ("sevt_r_rsn_1", "agent.thinking"), ("sevt_m_m2", "agent.message"), ("sevt_2_2", "agent.tool_use"),
        ("sevt_2_1002", "session.status_idle"),
        ("sevt_3_0", "user.tool_confirmation"), ("sevt_3_1", "session.status_running"),
        ("sevt_3_2", "agent.tool_result"),
        ("sevt_m_m4", "agent.message"), ("sevt_4_1002", "session.status_idle"),
    ]
    assert [e.position for e in events] == sorted(e.position for e in events)
    by_type = {e.event["type"]: e.event for e in events}
    assert by_type["agent.tool_use"] == {"id": "sevt_2_2", "type": "agent.tool_use", "name": "calculator",
                                         "input": {"expression": "1+1"}, "evaluated_permission": "ask",
                                         "processed_at": "2023-11-14T22:13:20.002Z"}
    waited = events[5].event
    assert waited["stop_reason"] == {"type": "requires_action", "event_ids": ["sevt_2_2"]}
    assert by_type["user.tool_confirmation"]["tool_use_id"] == "sevt_2_2"
    assert by_type["user.tool_confirmation"]["result"] == "allow"
    assert by_type["agent.tool_result"]["content"] == [{"type": "text", "text": '{"result":2}'}]
    assert events[-1].event["stop_reason"] == {"type": "end_turn"}


def test_a_waiting_turn_ends_with_requires_action_naming_its_pending_calls():
    events = mev.project(GATED[:2], {"r1": mev.RunFacts(RunStatus.WAITING)}, {"c1": "approval"}, ())
    assert kinds(events)[-1] == ("sevt_2_1002", "session.status_idle")
    assert events[-1].event["stop_reason"] == {"type": "requires_action", "event_ids": ["sevt_2_2"]}
    # the history while the turn waits is a prefix of the history after it resumed: positions only grow
    after = mev.project(GATED, {"r1": mev.RunFacts(RunStatus.COMPLETED)}, {}, ())
    assert kinds(after)[:len(events)] == kinds(events)
    assert mev.waiting_calls(GATED[:2], ["c1"]) == {"c1": "c1", "sevt_2_2": "c1"}


def test_a_client_tool_a_denial_a_superseded_call_and_a_failure():
    messages = [
        msg(1, "user", TextPart("ask")),
        msg(2, "assistant", ToolCallPart("c1", "ask_user", '{"question": "?"}')),
        msg(3, "tool", ToolResultPart("c1", "ask_user", "Ada"), id="client-result"),
        msg(4, "assistant", ToolCallPart("c2", "calculator", "{}")),
        msg(5, "tool", ToolResultPart("c2", "calculator", denial("no"), "denied", approval="denied")),
        msg(6, "user", TextPart("again"), run="r2"),
        msg(7, "assistant", ToolCallPart("c3", "ask_user", "{}"), run="r2"),
        msg(8, "tool", ToolResultPart("c3", "ask_user", SUPERSEDED, "error"), run="r2"),
        msg(9, "user", TextPart("fail"), run="r3"),
    ]
    runs = {"r1": mev.RunFacts(RunStatus.COMPLETED), "r2": mev.RunFacts(RunStatus.INTERRUPTED),
            "r3": mev.RunFacts(RunStatus.FAILED, "MODEL_ERROR", "the model failed")}
    events = mev.project(messages, runs, {}, ["ask_user"])
    assert [t for _, t in kinds(events)] == [
        "user.message", "session.status_running", "agent.custom_tool_use", "session.status_idle",
        "user.custom_tool_result", "session.status_running",
        "agent.tool_use", "session.status_idle", "user.tool_confirmation", "session.status_running",
        "agent.tool_result", "session.status_idle",
        "user.message", "session.status_running", "agent.custom_tool_use", "session.status_idle",
        "session.status_idle",
        "user.message", "session.status_running", "session.error", "session.status_idle",
    ]
    custom = [e.event for e in events if e.event["type"] == "user.custom_tool_result"][0]
    assert custom["custom_tool_use_id"] == "sevt_2_2" and custom["content"] == [{"type": "text", "text": "Ada"}]
    confirmation = [e.event for e in events if e.event["type"] == "user.tool_confirmation"][0]
    assert (confirmation["result"], confirmation["deny_message"]) == ("deny", "no")
    result = [e.event for e in events if e.event["type"] == "agent.tool_result"][0]
    assert result["is_error"] is True
    stops = [e.event["stop_reason"]["type"] for e in events if e.event["type"] == "session.status_idle"]
    assert stops == ["requires_action", "requires_action", "end_turn", "requires_action", "end_turn",
                     "retries_exhausted"]
    error = [e.event for e in events if e.event["type"] == "session.error"][0]["error"]
    assert error == {"type": "unknown_error", "message": "MODEL_ERROR: the model failed",
                     "retry_status": {"type": "exhausted"}}


def test_where_a_stream_starts_and_what_an_id_resolves_to():
    events = mev.project(GATED, {"r1": mev.RunFacts(RunStatus.COMPLETED)}, {}, ())
    # idle, never streamed: the latest turn (here the whole history since the requires_action idle)
    assert mev.stream_start(events, False, None) == (2, 1002)
    # its end delivered already: only what comes next
    assert mev.stream_start(events, False, (4, 1002)) == (4, 1002)
    # running: after the last idle
    assert mev.stream_start(events, True, None) == (4, 1002)
    assert mev.stream_start([], False, None) == (0, 0)
    assert mev.resolve("sevt_3_1", events) == (3, 1)
    assert mev.resolve("sevt_m_m4", events) == (4, 1)
    with pytest.raises(ValueError):
        mev.resolve("nope", events)


def test_pages_in_both_orders_with_next_page():
    events = mev.project(GATED, {"r1": mev.RunFacts(RunStatus.COMPLETED)}, {}, ())
    first, token = mev.page(events, 4, "asc", None)
    rest, end = mev.page(events, 100, "asc", token)
    assert [e["id"] for e in first + rest] == [e.id for e in events] and token == "sevt_m_m2" and end is None
    newest, _ = mev.page(events, 1, "desc", None)
    assert newest[0]["id"] == "sevt_4_1002"
    with pytest.raises(ValueError):
        mev.page(events, 1, "asc", "sevt_9_9")


def test_what_a_client_sends_is_parsed_or_refused():
    sent = parse_events(b'{"events": [{"type": "user.message", "content": [{"type": "text", "text": "hi"}]}]}')
    assert sent.kind == "message" and sent.events[0]["id"].startswith("msg_")
    both = parse_events(b'{"events": [{"type": "user.interrupt"}, {"type": "user.message", "content": "go"}]}')
    assert (both.kind, both.interrupt_first, len(both.events)) == ("message", True, 1)
    answers = parse_events(b'{"events": [{"type": "user.tool_confirmation", "tool_use_id": "sevt_2_2", '
                           b'"result": "deny", "deny_message": "no"}, {"type": "user.custom_tool_result", '
                           b'"custom_tool_use_id": "c9", "content": [{"type": "text", "text": "Ada"}]}]}')
    assert decisions(answers, {"sevt_2_2": "c1", "c9": "c9"}) == (ToolDecision("c1", "deny", "no"),
                                                                   ToolDecision("c9", "ok", "Ada"))
    with pytest.raises(InputRejected) as stale:
        decisions(answers, {"c9": "c9"})  # an answer to a call nothing waits on: refused, nothing changes
    assert stale.value.code == "TOOL_CALL_NOT_PENDING"
    for body in (b"[]", b"{", b'{"events": []}', b'{"events": [{"type": "user.define_outcome"}]}',
                 b'{"events": [{"type": "user.tool_confirmation", "tool_use_id": "x", "result": "maybe"}]}',
                 b'{"events": [{"type": "user.message", "content": "a"}, {"type": "user.tool_confirmation", '
                 b'"tool_use_id": "x", "result": "allow"}]}'):
        with pytest.raises(InputRejected):
            parse_events(body)
    created = parse_create(b'{"agent": {"type": "agent", "id": "guarded", "version": 3}, "environment_id": "env",'
                           b' "title": "T", "metadata": {"k": "v"}, "vault_ids": [], "unknown": 1}')
    assert (created.agent_id, created.environment_id, created.title, created.metadata) == ("guarded", "env", "T",
                                                                                        {"k": "v"})
    with pytest.raises(InputRejected):
        parse_create(b'{"agent": 7}')


def test_live_previews_and_commit_marks_in_the_sdk_shapes():
    encoder = LiveEncoder()
    out = []
    for event in (ev.RunStarted("t", "r", "m1"), ev.ReasoningStart("rsn_1"), ev.TextStart("m1"),
                  ev.TextDelta("m1", "Hel"), ev.TextDelta("m1", "lo"), ev.TextEnd("m1"), ev.StepFinished(1),
                  ev.RunFinished("t", "r", "completed")):
        out += encoder.feed(event)
    assert out == [
        {"t": "commit"},
        {"t": "preview", "event": {"type": "event_start", "event": {"type": "agent.thinking", "id": "sevt_r_rsn_1"}}},
        {"t": "preview", "event": {"type": "event_start", "event": {"type": "agent.message", "id": "sevt_m_m1"}}},
        {"t": "preview", "event": {"type": "event_delta", "event_id": "sevt_m_m1", "delta": {
            "type": "content_delta", "index": 0, "content": {"type": "text", "text": "Hel"}}}},
        {"t": "preview", "event": {"type": "event_delta", "event_id": "sevt_m_m1", "delta": {
            "type": "content_delta", "index": 0, "content": {"type": "text", "text": "lo"}}}},
        {"t": "commit"}, {"t": "commit"},
    ]
    assert frame({"type": "session.status_running", "id": "sevt_1_1"}, "sevt_1_1") == (
        b'event: session.status_running\nid: sevt_1_1\ndata: {"type":"session.status_running","id":"sevt_1_1"}\n\n')


def test_errors_are_the_api_envelope_with_the_codes_status_type():
    assert error_envelope("UNKNOWN_THREAD", "no session 'x'") == {
        "type": "error", "error": {"type": "not_found_error", "message": "UNKNOWN_THREAD: no session 'x'"}}
    assert error_envelope("INVALID_REQUEST", "bad")["error"]["type"] == "invalid_request_error"
    assert error_envelope("RATE_LIMITED", "slow down")["error"]["type"] == "rate_limit_error"
