"""The AG-UI request parser, pure: bytes in, an ``AguiInput`` or an ``InputRejected`` with its code.

CONTRACT §3 ("Fresh input", "Rejected before execution") and ``reference/agui.md`` §3.1/§9.11.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from awaken.core.errors import CODES, InputRejected
from awaken.core.messages import ImagePart, TextPart
from awaken.wires.agui.request import AguiInput, InputMessage, ToolMessage, parse_run_input
from tests.builders import user

JSON = "application/json"


def body(**overrides: Any) -> dict[str, Any]:
    """What ``HttpAgent`` 1.0 sends by default (0.0.59 sends the same without protocolVersion)."""
    data: dict[str, Any] = {"threadId": "t-1", "runId": "r-1", "state": {}, "tools": [], "context": [],
                            "forwardedProps": {}, "messages": [{"id": "u1", "role": "user", "content": "Hi"}]}
    data.update(overrides)
    return data


def parse(data: Any, content_type: str | None = JSON) -> AguiInput:
    raw = data if isinstance(data, bytes) else orjson.dumps(data)
    return parse_run_input(raw, content_type)


def rejected(data: Any, content_type: str | None = JSON) -> InputRejected:
    with pytest.raises(InputRejected) as info:
        parse(data, content_type)
    assert info.value.code in CODES and CODES[info.value.code][0] == "input"
    return info.value


# -- accepted --------------------------------------------------------------------------------------


def test_default_httpagent_body_is_accepted():
    """CONTRACT §3: empty arrays/objects (what HttpAgent sends by default) are accepted."""
    parsed = parse(body(protocolVersion="1.0"))
    assert parsed == AguiInput("t-1", "r-1", "1.0", (InputMessage("u1", "user", (TextPart("Hi"),)),), ("u1",), None)
    assert parsed.modern is True


def test_absent_and_null_optional_fields_are_accepted():
    """reference/agui.md §9.11: tools, context, state, forwardedProps, resume may be absent or null."""
    minimal = {"threadId": "t", "runId": "r", "messages": [user("u1", "x")]}
    assert parse(minimal).messages == (InputMessage("u1", "user", (TextPart("x"),)),)
    nulls = dict(minimal, tools=None, context=None, state=None, forwardedProps=None, resume=None, parentRunId=None)
    assert parse(nulls).state is None


def test_protocol_version_gates_modern_features():
    """reference/agui.md §9.9: absent protocolVersion means the pre-1.0 feature set."""
    assert parse(body()).modern is False
    assert parse(body(protocolVersion="1.0")).modern is True
    assert parse(body(protocolVersion="1.2.3")).modern is True
    assert parse(body(protocolVersion="0.9")).modern is False
    assert parse(body(protocolVersion="latest")).modern is False


def test_content_type_with_charset_is_accepted():
    """CONTRACT §3: application/json with parameters is still JSON."""
    assert parse(body(), "application/json; charset=utf-8").thread_id == "t-1"


def test_system_and_developer_text_are_input():
    """CONTRACT §3: fresh input is user, system and developer text."""
    parsed = parse(body(messages=[{"id": "s", "role": "system", "content": "Be brief"},
                                  {"id": "d", "role": "developer", "content": "Dev note"}, user("u1", "Hi")]))
    assert parsed.messages == (
        InputMessage("s", "system", (TextPart("Be brief"),)),
        InputMessage("d", "developer", (TextPart("Dev note"),)),
        InputMessage("u1", "user", (TextPart("Hi"),)),
    )


def test_image_part_by_url():
    """CONTRACT §3: image parts as URL."""
    parts = [{"type": "text", "text": "What is this?"},
             {"type": "image", "source": {"type": "url", "value": "https://x.test/a.png", "mimeType": "image/png"}},
             {"type": "image", "source": {"type": "url", "value": "https://x.test/b.jpg"}}]
    parsed = parse(body(messages=[user("u1", parts)]))
    assert parsed.messages[0].parts == (TextPart("What is this?"), ImagePart("https://x.test/a.png", "image/png"),
                                       ImagePart("https://x.test/b.jpg", None))


def test_image_part_inline_base64():
    """CONTRACT §3: image parts as inline base64 (kept as a data URL)."""
    parts = [{"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}}]
    parsed = parse(body(messages=[user("u1", parts)]))
    assert parsed.messages[0].parts == (ImagePart("data:image/png;base64,iVBORw0KGgo=", "image/png"),)


def test_history_roles_are_skipped_but_their_ids_kept_for_dedup():
    """CONTRACT §3: assistant/reasoning/activity messages are the client's copy of history."""
    messages = [user("u1", "Hi"),
                {"id": "rs", "role": "reasoning", "content": "hmm"},
                {"id": "a1", "role": "assistant", "content": "Hello",
                 "toolCalls": [{"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}]},
                {"id": "act", "role": "activity", "activityType": "x", "content": {}},
                {"id": "tm", "role": "tool", "toolCallId": "c1", "content": "42"},
                user("u2", "again")]
    parsed = parse(body(messages=messages))
    assert parsed.message_ids == ("u1", "rs", "a1", "act", "tm", "u2")
    assert parsed.messages == (InputMessage("u1", "user", (TextPart("Hi"),)), ToolMessage("tm", "c1", "42"),
                               InputMessage("u2", "user", (TextPart("again"),)))


def test_tool_message_with_error_and_text_parts():
    """CONTRACT §3 (resume): a tool message's ``error`` is kept; text-part content is joined."""
    messages = [{"id": "t1", "role": "tool", "toolCallId": "c1", "content": "no", "error": "user said no"},
                {"id": "t2", "role": "tool", "toolCallId": "c2",
                 "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}]
    parsed = parse(body(messages=messages))
    assert parsed.messages == (ToolMessage("t1", "c1", "no", "user said no"), ToolMessage("t2", "c2", "ab"))


def test_non_empty_state_is_left_to_the_adapter():
    """CONTRACT §3: a non-empty state is refused unless it equals the committed state (checked later)."""
    assert parse(body(state={"a": 1})).state == {"a": 1}
    assert parse(body(state={})).state is None


def test_empty_text_gives_no_parts():
    """CONTRACT §3: an empty user text is no content (the adapter then finds no new input)."""
    assert parse(body(messages=[user("u1", "")])).messages == (InputMessage("u1", "user", ()),)


# -- rejected: transport-level ---------------------------------------------------------------------


def test_invalid_json_is_invalid_json():
    """CONTRACT §3: malformed JSON is rejected with INVALID_JSON."""
    assert rejected(b'{"threadId": "t", ').code == "INVALID_JSON"
    assert rejected(b"").code == "INVALID_JSON"


@pytest.mark.parametrize("content_type", [None, "text/plain", "application/x-www-form-urlencoded", "text/json"])
def test_wrong_content_type_is_unsupported_media_type(content_type):
    """CONTRACT §3: a wrong content type is rejected with UNSUPPORTED_MEDIA_TYPE (before parsing)."""
    assert rejected(body(), content_type).code == "UNSUPPORTED_MEDIA_TYPE"
    assert rejected(b"not json", content_type).code == "UNSUPPORTED_MEDIA_TYPE"


# -- rejected: ill-typed fields --------------------------------------------------------------------


@pytest.mark.parametrize(
    "data",
    [
        [body()],
        "a string",
        {k: v for k, v in body().items() if k != "threadId"},
        body(threadId=""),
        body(threadId=7),
        {k: v for k, v in body().items() if k != "runId"},
        body(runId=None),
        body(protocolVersion=1),
        {k: v for k, v in body().items() if k != "messages"},
        body(messages={"id": "u1"}),
        body(messages=["hi"]),
        body(messages=[{"role": "user", "content": "no id"}]),
        body(messages=[{"id": 5, "role": "user", "content": "x"}]),
        body(messages=[{"id": "u1", "role": "wizard", "content": "x"}]),
        body(messages=[{"id": "u1", "content": "x"}]),
        body(messages=[{"id": "u1", "role": ["assistant"], "content": "x"}]),
        body(messages=[{"id": "u1", "role": {"user": 1}, "content": "x"}]),
        body(messages=[user("u1", 42)]),
        body(messages=[user("u1", None)]),
        body(messages=[{"id": "s", "role": "system", "content": [{"type": "text", "text": "x"}]}]),
        body(messages=[user("u1", ["not a part"])]),
        body(messages=[user("u1", [{"type": "text", "text": 3}])]),
        body(messages=[user("u1", [{"type": "sticker"}])]),
        body(messages=[user("u1", [{"type": "image", "source": "https://x.test/a.png"}])]),
        body(messages=[user("u1", [{"type": "image", "source": {"type": "url", "value": ""}}])]),
        body(messages=[user("u1", [{"type": "image", "source": {"type": "data", "value": "AAAA"}}])]),
        body(messages=[{"id": "t1", "role": "tool", "content": "x"}]),
        body(messages=[{"id": "t1", "role": "tool", "toolCallId": "c1", "content": 5}]),
        body(messages=[{"id": "t1", "role": "tool", "toolCallId": "c1", "content": "x", "error": 1}]),
        body(messages=[user("u1", "a"), user("u1", "b")]),
        body(tools={}),
        body(context="none"),
        body(forwardedProps=[]),
        body(resume={}),
    ],
    ids=lambda d: orjson.dumps(d).decode()[:60],
)
def test_ill_typed_fields_are_invalid_request(data):
    """CONTRACT §3/§9: a field of the wrong type or a missing required field → INVALID_REQUEST."""
    assert rejected(data).code == "INVALID_REQUEST"


# -- rejected: unsupported fields ------------------------------------------------------------------


@pytest.mark.parametrize(
    "overrides",
    [
        {"forwardedProps": {"x": 1}},
        {"parentRunId": "r-0"},
        {"parentRunId": ""},
        {"state": [1]},
        {"state": "s"},
    ],
    ids=lambda d: next(iter(d)) + "=" + orjson.dumps(next(iter(d.values()))).decode()[:30],
)
def test_unsupported_fields_are_unsupported_field(overrides):
    """CONTRACT §3: non-empty forwardedProps, any parentRunId, a state that is not an object →
    UNSUPPORTED_FIELD (tools, context and state are accepted: see test_agui_frontend.py; resume:
    tests/test_agui_interrupts.py)."""
    assert rejected(body(**overrides)).code == "UNSUPPORTED_FIELD"


# -- rejected: unsupported content -----------------------------------------------------------------


@pytest.mark.parametrize(
    "part",
    [
        {"type": "audio", "source": {"type": "url", "value": "https://x.test/a.mp3"}},
        {"type": "video", "source": {"type": "data", "value": "AAAA", "mimeType": "video/mp4"}},
        {"type": "document", "source": {"type": "url", "value": "https://x.test/a.pdf"}},
        {"type": "binary", "mimeType": "image/png", "data": "AAAA"},
        {"type": "image", "source": {"type": "file", "value": "file-123"}},
    ],
    ids=lambda p: p["type"] + ("/" + p["source"]["type"] if "source" in p else ""),
)
def test_media_parts_are_unsupported_content(part):
    """CONTRACT §3: audio/video/document/binary parts (and provider file handles) → UNSUPPORTED_CONTENT."""
    assert rejected(body(messages=[user("u1", [{"type": "text", "text": "look"}, part])])).code == "UNSUPPORTED_CONTENT"


def test_non_text_tool_result_parts_are_unsupported_content():
    """CONTRACT §3: a tool result is a string (or text parts); anything else → UNSUPPORTED_CONTENT."""
    message = {"id": "t1", "role": "tool", "toolCallId": "c1",
               "content": [{"type": "image", "source": {"type": "url", "value": "https://x.test/a.png"}}]}
    assert rejected(body(messages=[message])).code == "UNSUPPORTED_CONTENT"


def test_rejections_name_the_offending_field():
    """CONTRACT §3: a RUN_ERROR message says what to fix."""
    assert "messages[1].content[0]" in rejected(body(messages=[user("u1", "a"), user("u2", [{"type": "audio"}])])).message
    assert "tools[0].parameters" in rejected(body(tools=[{"name": "f", "parameters": []}])).message
