"""The OpenAI-compatible streaming provider against a real local HTTP server speaking the real wire format.

Every test names the promise it checks. The fake endpoint is ``tests/fake_openai.py``.
"""

from __future__ import annotations

import json
import logging
import socket
from typing import Any

import pytest
import trio

from awaken.core.errors import ModelFailure
from awaken.core.messages import (
    ImagePart,
    Message,
    ReasoningPart,
    TextPart,
    ToolCallPart,
    ToolResultPart,
    Usage,
)
from awaken.models import ModelRequest, ToolSpec
from awaken.models.openai import OpenAIConfig, OpenAIModel
from awaken.models.openai.mapping import to_openai_messages
from awaken.models.openai.sanitize import sanitize
from awaken.models.openai.sse import SSEParser
from tests.builders import user_message
from tests.fake_openai import (
    DONE,
    FAKE_API_KEY_ENV,
    Drop,
    Pause,
    chunk,
    error,
    fake_openai_server,
    finish,
    json_reply,
    raw,
    reasoning,
    role,
    stream,
    text,
    text_reply,
    tool_call,
    usage,
)

SECRET = "sk-live-7Hq2ZpX9vLwK4mNcR8tYbE3sJ"


class Recorder:
    """A ``ModelOutput`` that records every call, in order."""

    def __init__(self) -> None:
        self.events: list[tuple[Any, ...]] = []
        self.first = trio.Event()

    def _add(self, *event: Any) -> None:
        self.events.append(event)
        self.first.set()

    def text(self, delta: str) -> None:
        self._add("text", delta)

    def reasoning(self, delta: str) -> None:
        self._add("reasoning", delta)

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        self._add("tool_call", index, call_id, name, arguments)

    def usage(self, usage: Usage) -> None:
        self.events.append(("usage", usage))

    @property
    def text_joined(self) -> str:
        return "".join(e[1] for e in self.events if e[0] == "text")

    @property
    def reasoning_joined(self) -> str:
        return "".join(e[1] for e in self.events if e[0] == "reasoning")

    def calls(self) -> dict[int, dict[str, Any]]:
        out: dict[int, dict[str, Any]] = {}
        for e in self.events:
            if e[0] == "tool_call":
                _, index, call_id, name, arguments = e
                call = out.setdefault(index, {"id": call_id, "name": name, "arguments": ""})
                call["arguments"] += arguments
        return out


def simple_request(prompt: str = "hello") -> ModelRequest:
    return ModelRequest("You are terse.", (user_message(prompt, id="m-user"),))


@pytest.fixture(autouse=True)
def _no_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(FAKE_API_KEY_ENV, raising=False)


def fast(model: OpenAIModel) -> OpenAIModel:
    """No real waiting between retries."""
    model.backoff_base = 0.01
    model.backoff_max = 0.02
    return model


# --- streaming --------------------------------------------------------------------------------------


async def test_text_deltas_stream_in_order_with_usage(nursery: trio.Nursery) -> None:
    """Text deltas reach ``out.text`` one per chunk, in order; the usage chunk becomes ``out.usage``;
    the request streams with ``stream_options.include_usage`` and no Authorization without a key."""
    async with fake_openai_server(nursery, [text_reply("Hel", "lo", " world", usage=(12, 3))]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.events == [("text", "Hel"), ("text", "lo"), ("text", " world"), ("usage", Usage(12, 3))]
    [request] = server.requests
    assert request.method == "POST" and request.path == "/v1/chat/completions"
    body = request.json
    assert body["model"] == "fake-model"
    assert body["stream"] is True
    assert body["stream_options"] == {"include_usage": True}
    assert "tools" not in body
    assert "authorization" not in request.headers


async def test_request_maps_history_images_tools_and_key(nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """The request carries the system prompt first, images as image_url parts, developer input as system,
    assistant text plus tool_calls (never reasoning), tool results, tools in function format,
    temperature/max_tokens, and ``Authorization: Bearer <key>`` when the key's env var is set."""
    monkeypatch.setenv(FAKE_API_KEY_ENV, SECRET)
    data_url = "data:image/png;base64,iVBORw0KGgo="
    history = (
        Message("m1", "developer", (TextPart("Answer in French."),)),
        Message("m2", "user", (TextPart("What is this?"), ImagePart("https://example.com/cat.png"),
                               ImagePart(data_url, "image/png"))),
        Message("m3", "assistant", (ReasoningPart("r1", "PRIVATE THOUGHTS"), TextPart("Let me check."),
                                    ToolCallPart("call_a", "calculator", '{"expression": "1+1"}'),
                                    ToolCallPart("call_b", "current_time", ""))),
        Message("m4", "tool", (ToolResultPart("call_a", "calculator", '{"result": 2}'),)),
        Message("m5", "tool", (ToolResultPart("call_b", "current_time", "clock broken", "error"),)),
    )
    tools = (ToolSpec("calculator", "Evaluate arithmetic.",
                      {"type": "object", "properties": {"expression": {"type": "string"}}}),)
    async with fake_openai_server(nursery, [text_reply("ok")]) as server:
        model = OpenAIModel("vision-model", server.provider_config(temperature=0.2, max_tokens=50))
        await model.stream(ModelRequest("Be nice.", history, tools), Recorder())
        await model.aclose()
    request = server.requests[0]
    assert request.headers["authorization"] == f"Bearer {SECRET}"
    body = request.json
    assert body["temperature"] == 0.2 and body["max_tokens"] == 50
    assert body["tools"] == [{"type": "function", "function": {
        "name": "calculator", "description": "Evaluate arithmetic.",
        "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
    assert body["messages"] == [
        {"role": "system", "content": "Be nice."},
        {"role": "system", "content": "Answer in French."},
        {"role": "user", "content": [
            {"type": "text", "text": "What is this?"},
            {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}},
            {"type": "image_url", "image_url": {"url": data_url}},
        ]},
        {"role": "assistant", "content": "Let me check.", "tool_calls": [
            {"id": "call_a", "type": "function",
             "function": {"name": "calculator", "arguments": '{"expression": "1+1"}'}},
            {"id": "call_b", "type": "function", "function": {"name": "current_time", "arguments": "{}"}},
        ]},
        {"role": "tool", "tool_call_id": "call_a", "content": '{"result": 2}'},
        {"role": "tool", "tool_call_id": "call_b", "content": "error: clock broken"},
    ]
    assert "PRIVATE THOUGHTS" not in request.body.decode()


def test_history_without_matching_results_stays_valid() -> None:
    """A tool call with no recorded result gets a synthetic error result and a stray result is dropped,
    so the endpoint never sees a history it would reject with a 400."""
    history = (
        Message("m1", "user", (TextPart("go"),)),
        Message("m2", "assistant", (ToolCallPart("call_x", "ask_user", '{"question": "?"}'),)),
        Message("m3", "user", (TextPart("never mind"),)),
        Message("m4", "tool", (ToolResultPart("call_zzz", "ask_user", "late"),)),
        Message("m5", "assistant", (ReasoningPart("r", "only thinking"),)),
    )
    wire = to_openai_messages(ModelRequest("", history))
    assert wire == [
        {"role": "user", "content": "go"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_x", "type": "function", "function": {"name": "ask_user", "arguments": '{"question": "?"}'}}]},
        {"role": "tool", "tool_call_id": "call_x", "content": "error: no result was recorded"},
        {"role": "user", "content": "never mind"},
    ]


async def test_parallel_tool_calls_assembled_by_index(nursery: trio.Nursery) -> None:
    """Parallel tool calls with interleaved, fragmented arguments are reported by index: the first
    fragment carries the call's id and name, later ones only argument text, and the pieces join to JSON."""
    scenario = stream(
        role(),
        tool_call(0, id="call_A", name="calculator", arguments=""),
        tool_call(1, id="call_B", name="current_time", arguments=""),
        tool_call(0, arguments='{"expr'),
        tool_call(1, arguments="{}"),
        tool_call(0, arguments='ession": '),
        tool_call(0, arguments='"2*21"}'),
        finish("tool_calls"),
        usage(20, 9),
        DONE,
    )
    async with fake_openai_server(nursery, [scenario]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request("/call"), out)
        await model.aclose()
    calls = out.calls()
    assert calls == {
        0: {"id": "call_A", "name": "calculator", "arguments": '{"expression": "2*21"}'},
        1: {"id": "call_B", "name": "current_time", "arguments": "{}"},
    }
    assert json.loads(calls[0]["arguments"]) == {"expression": "2*21"}
    later = [e for e in out.events if e[0] == "tool_call"][2:]
    assert later and all(e[2] is None and e[3] is None for e in later)
    assert out.events[-1] == ("usage", Usage(20, 9))


async def test_tool_call_name_after_id_is_announced_with_name(nursery: trio.Nursery) -> None:
    """A server that sends a call's id, then its name, then its arguments still produces one call that
    is announced with both its id and its name."""
    scenario = stream(
        tool_call(0, id="call_late"), tool_call(0, name="current_time"), tool_call(0, arguments="{}"),
        finish("tool_calls"), DONE,
    )
    async with fake_openai_server(nursery, [scenario]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.events[0] == ("tool_call", 0, "call_late", "current_time", "")
    assert out.calls() == {0: {"id": "call_late", "name": "current_time", "arguments": "{}"}}


async def test_reasoning_deltas_go_to_reasoning_never_text(nursery: trio.Nursery) -> None:
    """``reasoning_content`` and ``reasoning`` deltas are reported as reasoning and never as text."""
    scenario = stream(
        role(),
        reasoning("Thinking "),
        reasoning("hard.", field="reasoning"),
        text("Answer."),
        finish(),
        DONE,
    )
    async with fake_openai_server(nursery, [scenario]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.reasoning_joined == "Thinking hard."
    assert out.text_joined == "Answer."
    assert [e[0] for e in out.events] == ["reasoning", "reasoning", "text"]


async def test_wire_details_crlf_comments_and_no_done(nursery: trio.Nursery) -> None:
    """CRLF framing, comment lines and a stream that ends after ``finish_reason`` without ``[DONE]``
    are read as a complete answer."""
    body = (
        b": OPENROUTER PROCESSING\r\n\r\n"
        b'data: {"choices":[{"index":0,"delta":{"content":"A"}}]}\r\n\r\n'
        b'data: {"choices":[{"index":0,"delta":{"content":"B"},"finish_reason":"stop"}]}\r\n\r\n'
    )
    async with fake_openai_server(nursery, [stream(raw(body[:40]), raw(body[40:71]), raw(body[71:]))]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.text_joined == "AB"


async def test_tool_calls_without_index_are_told_apart_by_id(nursery: trio.Nursery) -> None:
    """Servers that omit ``index`` (each call whole, told apart by id) still give one call per id."""
    def call(id_: str, name: str, args: str) -> dict[str, Any]:
        return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}

    scenario = stream(
        chunk({"tool_calls": [call("c1", "calculator", '{"expression": "1+2"}')]}),
        chunk({"tool_calls": [call("c2", "current_time", "{}")]}),
        finish("tool_calls"),
        DONE,
    )
    async with fake_openai_server(nursery, [scenario]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.calls() == {0: {"id": "c1", "name": "calculator", "arguments": '{"expression": "1+2"}'},
                           1: {"id": "c2", "name": "current_time", "arguments": "{}"}}


async def test_in_stream_rate_limit_error_event(nursery: trio.Nursery) -> None:
    """An ``event: error`` frame carrying a rate-limit error ends the run with MODEL_RATE_LIMITED."""
    body = 'event: error\ndata: {"message": "Rate limit reached", "code": 429}\n\n'
    async with fake_openai_server(nursery, [stream(role(), raw(body))]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_RATE_LIMITED"
    assert "Rate limit reached" in info.value.message


def test_max_tokens_name_follows_the_host() -> None:
    """``max_tokens`` is sent as ``max_completion_tokens`` to api.openai.com and as ``max_tokens`` elsewhere;
    unset options are not sent."""
    request = simple_request()
    official = OpenAIModel("o4-mini", OpenAIConfig(max_tokens=64)).request_body(request)
    local = OpenAIModel("llama", OpenAIConfig(base_url="http://localhost:8080/v1", max_tokens=64)).request_body(request)
    bare = OpenAIModel("llama", OpenAIConfig(base_url="http://localhost:8080/v1")).request_body(request)
    assert official["max_completion_tokens"] == 64 and "max_tokens" not in official
    assert local["max_tokens"] == 64 and "max_completion_tokens" not in local
    assert "max_tokens" not in bare and "temperature" not in bare


def test_sse_parser_framing() -> None:
    """The SSE parser handles LF, CRLF and lone CR lines, a CRLF split across reads, multi-line data,
    comments, ``event:`` names and a last event without its blank line."""
    parser = SSEParser()
    events = parser.feed(b"data: a\r")
    assert events == []
    events += parser.feed(b"\ndata: b\r\n\r\n: comment\n\nevent: error\ndata: {}\r\rdata: tail")
    events += parser.close()
    assert [(e.event, e.data) for e in events] == [("", "a\nb"), ("error", "{}"), ("", "tail")]


async def test_non_streaming_json_answer_accepted(nursery: trio.Nursery) -> None:
    """An endpoint that ignores ``stream`` and answers with one JSON completion still yields its text,
    tool calls and usage."""
    completion = {
        "id": "chatcmpl-1", "object": "chat.completion",
        "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
            "role": "assistant", "content": "Sure.",
            "tool_calls": [{"id": "call_1", "type": "function",
                            "function": {"name": "current_time", "arguments": "{}"}}]}}],
        "usage": {"prompt_tokens": 4, "completion_tokens": 2, "total_tokens": 6},
    }
    async with fake_openai_server(nursery, [json_reply(completion)]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.events == [("text", "Sure."), ("tool_call", 0, "call_1", "current_time", "{}"), ("usage", Usage(4, 2))]


# --- failures and their classification ----------------------------------------------------------------


async def test_malformed_chunk_is_model_error(nursery: trio.Nursery) -> None:
    """A chunk that is not JSON ends the run with MODEL_ERROR (and is not retried)."""
    scenario = stream(role(), raw("data: {not json\n\n"), DONE)
    async with fake_openai_server(nursery, [scenario, text_reply("never")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_ERROR"
    assert "malformed" in info.value.message
    assert len(server.requests) == 1


async def test_401_is_unavailable_refused_credentials(nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    """A 401 ends the run at once with MODEL_UNAVAILABLE: "the endpoint refused the credentials"."""
    monkeypatch.setenv(FAKE_API_KEY_ENV, SECRET)
    async with fake_openai_server(nursery, [error(401, "Incorrect API key provided", code="invalid_api_key")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert "the endpoint refused the credentials" in info.value.message
    assert FAKE_API_KEY_ENV in info.value.message
    assert len(server.requests) == 1


@pytest.mark.parametrize(
    ("status", "code"),
    [(400, "MODEL_ERROR"), (403, "MODEL_UNAVAILABLE"), (404, "MODEL_UNAVAILABLE"), (422, "MODEL_ERROR")],
)
async def test_client_errors_are_classified_and_not_retried(nursery: trio.Nursery, status: int, code: str) -> None:
    """400/422 are MODEL_ERROR, 403/404 MODEL_UNAVAILABLE; none of them is retried, and the endpoint's
    own error text is kept in the message."""
    async with fake_openai_server(nursery, [error(status, "the model 'x' says no")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == code
    assert f"HTTP {status}" in info.value.message and "says no" in info.value.message
    assert len(server.requests) == 1


async def test_429_retry_after_honoured_then_success(nursery: trio.Nursery) -> None:
    """A 429 with ``Retry-After: 1`` is retried after about one second, and the retry's answer streams
    normally."""
    scenarios = [error(429, "slow down", headers=[("retry-after", "1")], type="rate_limit_exceeded"),
                 text_reply("fine")]
    async with fake_openai_server(nursery, scenarios) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.text_joined == "fine"
    first, second = server.requests
    assert 0.9 <= second.at - first.at < 3.0


async def test_429_exhausted_is_rate_limited(nursery: trio.Nursery) -> None:
    """429s beyond ``max_retries`` end the run with MODEL_RATE_LIMITED after 1 + max_retries attempts;
    a long ``Retry-After`` is capped."""
    slow = error(429, "slow down", headers=[("retry-after", "3600")])
    async with fake_openai_server(nursery, default=slow) as server:
        model = OpenAIModel("fake-model", server.provider_config(max_retries=2))
        model.retry_after_max = 0.05
        with trio.fail_after(5), pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_RATE_LIMITED"
    assert len(server.requests) == 3


async def test_500_is_retried_then_unavailable(nursery: trio.Nursery) -> None:
    """5xx answers are retried with backoff; when retries run out the run ends with MODEL_UNAVAILABLE."""
    async with fake_openai_server(nursery, default=error(500, "boom", type="server_error")) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config(max_retries=1)))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert "HTTP 500" in info.value.message
    assert len(server.requests) == 2


async def test_503_then_success(nursery: trio.Nursery) -> None:
    """A transient 503 before any output is retried and the run succeeds."""
    async with fake_openai_server(nursery, [error(503, "overloaded"), text_reply("back")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.text_joined == "back"
    assert len(server.requests) == 2


async def test_connection_refused_is_unavailable() -> None:
    """An endpoint nobody listens on ends the run with MODEL_UNAVAILABLE after the retries."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    model = fast(OpenAIModel("fake-model", OpenAIConfig(base_url=f"http://127.0.0.1:{port}/v1",
                                                          api_key_env=FAKE_API_KEY_ENV, max_retries=1)))
    with pytest.raises(ModelFailure) as info:
        await model.stream(simple_request(), Recorder())
    await model.aclose()
    assert info.value.code == "MODEL_UNAVAILABLE"
    assert f"127.0.0.1:{port}" in info.value.message


async def test_idle_timeout_after_first_delta_ends_the_run(nursery: trio.Nursery) -> None:
    """A stream that stalls longer than ``idle_timeout`` after a delta ends with MODEL_TIMEOUT, and it is
    not retried because output already reached the run."""
    scenario = stream(role(), text("partial"), Pause(30), text("never"), DONE)
    async with fake_openai_server(nursery, [scenario, text_reply("retried!")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config(idle_timeout=0.3)))
        out = Recorder()
        started = trio.current_time()
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), out)
        elapsed = trio.current_time() - started
        await model.aclose()
    assert info.value.code == "MODEL_TIMEOUT"
    assert "idle_timeout" in info.value.message
    assert out.text_joined == "partial"
    assert len(server.requests) == 1
    assert 0.25 < elapsed < 2.0


async def test_first_byte_timeout(nursery: trio.Nursery) -> None:
    """An endpoint that sends headers but no data within ``first_byte_timeout`` ends with MODEL_TIMEOUT;
    comments do not count as data."""
    scenario = stream(raw(": still here\n\n"), Pause(30), DONE)
    async with fake_openai_server(nursery, [scenario]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config(first_byte_timeout=0.3, idle_timeout=10)))
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert info.value.code == "MODEL_TIMEOUT"
    assert "first_byte_timeout" in info.value.message
    assert len(server.requests) == 1


async def test_mid_stream_drop_is_model_error_without_retry(nursery: trio.Nursery) -> None:
    """A connection dropped after a delta ends the run with MODEL_ERROR; nothing is retried."""
    scenario = stream(role(), text("half an ans"), Drop())
    async with fake_openai_server(nursery, [scenario, text_reply("retried!")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        out = Recorder()
        with pytest.raises(ModelFailure) as info:
            await model.stream(simple_request(), out)
        await model.aclose()
    assert info.value.code == "MODEL_ERROR"
    assert out.text_joined == "half an ans"
    assert len(server.requests) == 1


async def test_drop_before_first_delta_is_retried(nursery: trio.Nursery) -> None:
    """A connection dropped before any delta reached the run is retried, and the retry's answer is used."""
    async with fake_openai_server(nursery, [stream(role(), Drop()), text_reply("second try")]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config()))
        out = Recorder()
        await model.stream(simple_request(), out)
        await model.aclose()
    assert out.text_joined == "second try"
    assert len(server.requests) == 2


async def test_cancel_closes_upstream_request(nursery: trio.Nursery) -> None:
    """Cancelling ``stream()`` mid-stream (a client disconnect) closes the upstream HTTP request at once:
    the endpoint sees the disconnect well within a second."""
    scenario = stream(role(), text("first"), Pause(60), text("never"), DONE)
    async with fake_openai_server(nursery, [scenario]) as server:
        model = OpenAIModel("fake-model", server.provider_config(idle_timeout=120))
        out = Recorder()
        cancelled_at = 0.0
        async with trio.open_nursery() as inner:
            scope = trio.CancelScope()

            async def run() -> None:
                with scope:
                    await model.stream(simple_request(), out)

            inner.start_soon(run)
            with trio.fail_after(5):
                await out.first.wait()
            cancelled_at = trio.current_time()
            scope.cancel()
        assert scope.cancelled_caught
        with trio.fail_after(1):
            disconnect = await server.wait_for_disconnect()
        await model.aclose()
    assert disconnect.request_index == 0
    assert disconnect.at - cancelled_at < 1.0
    assert out.text_joined == "first"
    assert server.completed == []


# --- secrets ------------------------------------------------------------------------------------------


async def test_api_key_never_in_failures_or_logs(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The API key never appears in a ModelFailure message or a log line, even when the endpoint echoes
    it (whole or in part) in its error bodies or in an in-stream error."""
    monkeypatch.setenv(FAKE_API_KEY_ENV, SECRET)
    caplog.set_level(logging.DEBUG)
    echo = f"Incorrect API key provided: {SECRET} (Authorization: Bearer {SECRET}); tail {SECRET[8:]}"
    scenarios = [
        error(401, echo),
        error(400, echo),
        error(500, echo),  # retried: its message goes to the log first
        error(500, echo),
        stream(role(), raw("data: " + json.dumps({"error": {"message": echo, "type": "server_error"}}) + "\n\n")),
        stream(raw(echo), status=418, headers=(("content-type", "text/plain"),)),
    ]
    failures: list[ModelFailure] = []
    async with fake_openai_server(nursery, scenarios) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config(max_retries=1)))
        for _ in range(5):
            with pytest.raises(ModelFailure) as info:
                await model.stream(simple_request(), Recorder())
            failures.append(info.value)
        await model.aclose()
    assert [f.code for f in failures] == ["MODEL_UNAVAILABLE", "MODEL_ERROR", "MODEL_UNAVAILABLE", "MODEL_ERROR",
                                          "MODEL_ERROR"]
    assert len(server.requests) == 6
    assert any("retry" in r.getMessage() for r in caplog.records)
    texts = [f.message for f in failures] + [str(f) for f in failures] + [r.getMessage() for r in caplog.records]
    for t in texts:
        assert SECRET not in t
        assert SECRET[8:20] not in t
        assert "Bearer sk" not in t
    assert all("[redacted]" in f.message for f in failures)


def test_sanitize_strips_key_fragments_and_tokens() -> None:
    """``sanitize`` removes the key, 8-character pieces of it, bearer tokens and key-like strings, and
    keeps ordinary text."""
    cleaned = sanitize(f"key {SECRET}, piece {SECRET[5:17]}, Bearer abc.def, model gpt-4o-mini not found",
                       SECRET)
    assert SECRET not in cleaned and SECRET[5:17] not in cleaned and "abc.def" not in cleaned
    assert "model gpt-4o-mini not found" in cleaned
    assert "sk-proj-" not in sanitize("Incorrect API key provided: sk-proj-abcd1234efgh")


async def test_aclose_closes_client_and_model_is_reusable(nursery: trio.Nursery) -> None:
    """``aclose`` releases the HTTP client; a later ``stream`` opens a new one."""
    async with fake_openai_server(nursery, [text_reply("one"), text_reply("two")]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        first, second = Recorder(), Recorder()
        await model.stream(simple_request(), first)
        await model.aclose()
        await model.aclose()
        await model.stream(simple_request(), second)
        await model.aclose()
    assert (first.text_joined, second.text_joined) == ("one", "two")


async def test_unset_key_sends_no_authorization_and_empty_key_too(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A missing or empty key env var is allowed (local servers): no Authorization header is sent."""
    monkeypatch.setenv(FAKE_API_KEY_ENV, "")
    async with fake_openai_server(nursery, [text_reply("a")]) as server:
        model = OpenAIModel("fake-model", server.provider_config())
        await model.stream(simple_request(), Recorder())
        await model.aclose()
    assert "authorization" not in server.requests[0].headers
