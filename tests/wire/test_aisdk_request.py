"""The AI SDK request parser and history projection, pure (CONTRACT §4).

Parser: bytes in, ``AiSdkInput`` or ``InputRejected`` with its code. Projection: committed
``Message``s in, ``UIMessage`` dicts out, exactly.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from awaken.core.errors import InputRejected
from awaken.core.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from awaken.ledger.interface import PendingCall
from awaken.wires.aisdk.adapter import decision_of
from awaken.wires.aisdk.history import project_history
from awaken.wires.aisdk.request import AiSdkInput, InputUIMessage, ToolPartAnswer, parse_chat_request
from awaken.wires.protocol import DENIED, ToolDecision
from tests.builders import aisdk_user

JSON = "application/json"
PNG = "data:image/png;base64,iVBORw0KGgo="


def parse(body: Any, content_type: str = JSON) -> AiSdkInput:
    return parse_chat_request(body if isinstance(body, bytes) else orjson.dumps(body), content_type)


# -- parser ----------------------------------------------------------------------------------------


def test_default_chat_transport_body():
    """The body DefaultChatTransport sends (aisdk.md §3.1): the chat ``id`` is the thread id."""
    parsed = parse({"id": "chat-1", "messages": [aisdk_user("u1")], "trigger": "submit-message", "scenario": "x"})
    assert parsed == AiSdkInput("chat-1", None, "submit-message", (InputUIMessage("u1", "user", (TextPart("hi"),)),),
                                (), None)


def test_thread_id_and_agent_id_from_the_body():
    parsed = parse({"id": "chat-1", "threadId": "th", "agentId": "guarded", "messages": [aisdk_user("u1")]})
    assert (parsed.thread_id, parsed.agent_id) == ("th", "guarded")
    assert parse({"messages": [aisdk_user("u1")]}).thread_id is None


def test_only_images_and_text_reach_the_model():
    """§4: image ``file`` parts (http(s)/data URL) are input; other media and UI-only parts are dropped
    (an image part with another URL is refused: test_image_checks.py)."""
    parsed = parse({"messages": [aisdk_user(
        "u1",
        {"type": "step-start"},
        {"type": "file", "mediaType": "image/png", "url": PNG, "filename": "a.png"},
        {"type": "file", "mediaType": "image/jpeg", "url": "https://example.com/a.jpg"},
        {"type": "file", "mediaType": "application/pdf", "url": "data:application/pdf;base64,JVBE"},
        {"type": "file", "mediaType": "text/html", "url": "data:text/html;base64,PGI+"},
        {"type": "data-progress", "data": {"pct": 1}},
        {"type": "source-url", "sourceId": "s", "url": "https://x"},
        {"type": "reasoning", "text": "hmm"},
        {"type": "text", "text": ""},
        {"type": "text", "text": "look"},
        {"type": "future-part", "whatever": True},
    )]})
    assert parsed.inputs[0].parts == (ImagePart(PNG, "image/png"), ImagePart("https://example.com/a.jpg", "image/jpeg"),
                                      TextPart("look"))


def test_system_messages_are_input_and_assistant_messages_are_not():
    parsed = parse({"messages": [
        {"id": "s1", "role": "system", "parts": [{"type": "text", "text": "be brief"}]},
        aisdk_user("u1"),
        {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": "old", "state": "done"}]},
        aisdk_user("u2"),
    ]})
    assert [m.id for m in parsed.inputs] == ["s1", "u1", "u2"]
    assert parsed.continued_id is None and parsed.answers == ()


def _assistant(mid: str, *parts: dict[str, Any]) -> dict[str, Any]:
    return {"id": mid, "role": "assistant", "parts": [{"type": "step-start"}, *parts]}


def test_answers_come_from_the_last_message_when_it_is_an_assistant_message():
    """§4: the continuation ``useChat`` posts carries the decisions in its last (assistant) message."""
    old = _assistant("a0", {"type": "tool-x", "toolCallId": "old", "state": "output-available", "input": {},
                            "output": 1})
    last = _assistant(
        "a1",
        {"type": "tool-calculator", "toolCallId": "c1", "state": "approval-responded", "input": {},
         "approval": {"id": "apr_c1", "approved": False, "reason": "no"}},
        {"type": "tool-ask_user", "toolCallId": "c2", "state": "output-available", "input": {}, "output": {"a": 1}},
        {"type": "dynamic-tool", "toolName": "mcp", "toolCallId": "c3", "state": "output-error", "input": {},
         "errorText": "boom"},
        {"type": "tool-ask_user", "toolCallId": "c4", "state": "input-available", "input": {}},
        {"type": "tool-calculator", "toolCallId": "c5", "state": "approval-requested", "input": {},
         "approval": {"id": "apr_c5"}},
    )
    parsed = parse({"messages": [aisdk_user("u1"), old, aisdk_user("u2"), last], "trigger": "submit-message", "messageId": "a1"})
    assert parsed.continued_id == "a1"
    assert parsed.answers == (
        ToolPartAnswer("c1", "calculator", "approval-responded", approval_id="apr_c1", approved=False, reason="no"),
        ToolPartAnswer("c2", "ask_user", "output-available", output={"a": 1}),
        ToolPartAnswer("c3", "mcp", "output-error", error_text="boom"),
    )
    assert [decision_of(a) for a in parsed.answers] == [
        ToolDecision("c1", "deny", "no"),
        ToolDecision("c2", "ok", '{"a":1}'),
        ToolDecision("c3", "error", "boom"),
    ]
    approved = ToolPartAnswer("c1", "calculator", "approval-responded", approval_id="apr_c1", approved=True)
    assert decision_of(approved) == ToolDecision("c1", "approve")
    assert decision_of(ToolPartAnswer("c9", "x", "output-available")) == ToolDecision("c9", "ok", "null")


@pytest.mark.parametrize(
    ("body", "content_type", "code"),
    [
        (b"{not json", JSON, "INVALID_JSON"),
        (b'{"messages": []}', "text/plain", "UNSUPPORTED_MEDIA_TYPE"),
        (b'{"messages": []}', None, "UNSUPPORTED_MEDIA_TYPE"),
        (b"[]", JSON, "INVALID_REQUEST"),
        ({"id": "c"}, JSON, "INVALID_REQUEST"),
        ({"messages": {}}, JSON, "INVALID_REQUEST"),
        ({"messages": ["x"]}, JSON, "INVALID_REQUEST"),
        ({"messages": [{"id": 1, "role": "user", "parts": []}]}, JSON, "INVALID_REQUEST"),
        ({"messages": [{"id": "u", "role": "tool", "parts": []}]}, JSON, "INVALID_REQUEST"),
        ({"messages": [{"id": "u", "role": "user", "parts": "hi"}]}, JSON, "INVALID_REQUEST"),
        ({"messages": [{"id": "u", "role": "user", "parts": [{"type": 3}]}]}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u", {"type": "text", "text": 5})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u", {"type": "file", "url": PNG})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u"), aisdk_user("u")]}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u")], "threadId": 7}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u")], "agentId": ""}, JSON, "INVALID_REQUEST"),
        ({"messages": [aisdk_user("u")], "trigger": 1}, JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "tool-x", "state": "output-available"})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "tool-x", "toolCallId": "c"})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "dynamic-tool", "toolCallId": "c", "state": "output-available"})]},
         JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "tool-x", "toolCallId": "c", "state": "approval-responded",
                                        "approval": {"id": "apr_c"}})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "tool-x", "toolCallId": "c", "state": "approval-responded",
                                        "approval": {"id": "apr_c", "approved": "yes"}})]}, JSON, "INVALID_REQUEST"),
        ({"messages": [_assistant("a", {"type": "tool-x", "toolCallId": "c", "state": "output-available",
                                        "approval": "ok"})]}, JSON, "INVALID_REQUEST"),
    ],
)
def test_bad_requests_are_classified(body, content_type, code):
    """§4: malformed JSON, wrong content type and ill-typed UIMessage fields are coded rejections."""
    with pytest.raises(InputRejected) as info:
        parse(body, content_type)
    assert info.value.code == code


# -- history projection ----------------------------------------------------------------------------


def test_projection_of_a_run_is_one_assistant_message_with_final_tool_states():
    """§4 / brief 6: every assistant+tool message of a run → ONE UIMessage, id = first assistant id."""
    r = "run1"
    calls = [
        ToolCallPart("ok1", "calculator", '{"expression":"2+3"}'),
        ToolCallPart("err1", "calculator", '{"expression":"1/0"}'),
        ToolCallPart("den1", "calculator", "{}"),
        ToolCallPart("pol1", "set_state", "{}"),
        ToolCallPart("bad1", "calculator", "{nope"),
    ]
    messages = [
        Message("u1", "user", (TextPart("go"), ImagePart(PNG, "image/png")), r),
        Message("a1", "assistant", (ReasoningPart("rs1", "think"), TextPart("calling"), *calls), r),
        Message("tr_ok1", "tool", (ToolResultPart("ok1", "calculator", '{"result":5}', "ok", "approved"),), r),
        Message("tr_err1", "tool", (ToolResultPart("err1", "calculator", "division by zero", "error"),), r),
        Message("tr_den1", "tool", (ToolResultPart("den1", "calculator", f"{DENIED}: not now", "denied",
                                                   "denied"),), r),
        Message("tr_pol1", "tool", (ToolResultPart("pol1", "set_state", "denied: the policy", "denied"),), r),
        Message("tr_bad1", "tool", (ToolResultPart("bad1", "calculator", "invalid arguments", "error"),), r),
        Message("a2", "assistant", (ToolCallPart("ask", "ask_user", '{"question":"?"}'),
                                    ToolCallPart("gate", "calculator", "{}"),
                                    ToolCallPart("lost", "calculator", "{}")), r),
    ]
    pending = [PendingCall("ask", r, "t", "ask_user", "{}", "client", "a2"),
               PendingCall("gate", r, "t", "calculator", "{}", "approval", "a2")]
    items = project_history(messages, pending, {r: Usage(5, 6)})
    assert items == [
        {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "go"},
                                               {"type": "file", "mediaType": "image/png", "url": PNG}]},
        {"id": "a1", "role": "assistant",
         "metadata": {"runId": "run1", "usage": {"inputTokens": 5, "outputTokens": 6, "totalTokens": 11}},
         "parts": [
             {"type": "step-start"},
             {"type": "reasoning", "id": "rs1", "text": "think", "state": "done"},
             {"type": "text", "text": "calling", "state": "done"},
             {"type": "tool-calculator", "toolCallId": "ok1", "state": "output-available",
              "input": {"expression": "2+3"}, "output": {"result": 5}, "approval": {"id": "apr_ok1", "approved": True}},
             {"type": "tool-calculator", "toolCallId": "err1", "state": "output-error",
              "input": {"expression": "1/0"}, "errorText": "division by zero"},
             {"type": "tool-calculator", "toolCallId": "den1", "state": "output-denied", "input": {},
              "approval": {"id": "apr_den1", "approved": False, "reason": "not now"}},
             {"type": "tool-set_state", "toolCallId": "pol1", "state": "output-error", "input": {},
              "errorText": "denied: the policy"},
             {"type": "tool-calculator", "toolCallId": "bad1", "state": "output-error", "rawInput": "{nope",
              "errorText": "invalid arguments"},
             {"type": "step-start"},
             {"type": "tool-ask_user", "toolCallId": "ask", "state": "input-available", "input": {"question": "?"}},
             {"type": "tool-calculator", "toolCallId": "gate", "state": "approval-requested", "input": {},
              "approval": {"id": "apr_gate"}},
             {"type": "tool-calculator", "toolCallId": "lost", "state": "output-error", "input": {},
              "errorText": "this call was never answered"},
         ]},
    ]


def test_input_inside_a_run_splits_its_assistant_message_and_roles_map():
    """A resumed run that also took new input shows as two assistant UIMessages around it; AG-UI
    ``developer`` input shows as ``system``; an AG-UI image without a media type keeps a usable one."""
    r = "run1"
    messages = [
        Message("d1", "developer", (TextPart("rules"),), r),
        Message("u1", "user", (ImagePart("https://x/a.png"),), r),
        Message("a1", "assistant", (TextPart("one"),), r),
        Message("u2", "user", (TextPart("more"),), r),
        Message("a2", "assistant", (TextPart("two"),), r),
        Message("a3", "assistant", (TextPart("three"),), "run2"),
    ]
    items = project_history(messages)
    assert [(i["id"], i["role"]) for i in items] == [("d1", "system"), ("u1", "user"), ("a1", "assistant"),
                                                     ("u2", "user"), ("a2", "assistant"), ("a3", "assistant")]
    assert items[1]["parts"] == [{"type": "file", "mediaType": "image/*", "url": "https://x/a.png"}]
    assert "metadata" not in items[2]
