"""Model calls have deadlines that hold (issue 26, item 3).

``idle_timeout`` counts complete SSE data events, not bytes: an upstream that trickles ``:`` bytes (or whole
comment lines) after its first chunk ends with ``MODEL_TIMEOUT`` within the idle timeout. ``total_timeout``
bounds one model call from the request to its last event, retries included: a stream whose events keep
arriving in time still ends when it is spent. Both are checked on the provider and on both wires, with the
committed outcome.
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

from awaken.config import parse_config
from awaken.core.errors import ConfigError, ModelFailure
from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.models import ModelRequest
from awaken.models.openai import OpenAIConfig, OpenAIModel
from tests.builders import (
    agui_body,
    default_config_data,
    live_server,
    make_config,
    parse_sse,
    post_agui,
    types,
)
from tests.engine.test_openai_provider import Recorder
from tests.fake_openai import (
    DONE,
    FakeOpenAI,
    Pause,
    Scenario,
    Step,
    error,
    fake_openai_server,
    finish,
    raw,
    role,
)
from tests.fake_openai import stream as sse_stream
from tests.fake_openai import text as text_chunk

IDLE = 0.5
TOTAL = 0.5


def request() -> ModelRequest:
    return ModelRequest("You are terse.", (Message("m-user", "user", (TextPart("hello"),)),))


def trickle(unit: bytes, *, seconds: float = 20.0, every: float = 0.1) -> Scenario:
    """A first chunk, then ``unit`` every ``every`` seconds for ``seconds``, then a normal ending."""
    steps: list[Step] = [role(), text_chunk("partial")]
    for _ in range(int(seconds / every)):
        steps += [raw(unit), Pause(every)]
    steps += [raw(b"\n\n"), text_chunk(" late"), finish(), DONE]
    return sse_stream(*steps)


def slow_events(*, count: int = 100, every: float = 0.1) -> Scenario:
    """Real text events, each well inside the idle timeout, for ``count * every`` seconds in all."""
    steps: list[Step] = [role()]
    for i in range(count):
        steps += [text_chunk(f"w{i} "), Pause(every)]
    return sse_stream(*steps, finish(), DONE)


def fast(model: OpenAIModel) -> OpenAIModel:
    model.backoff_base = 0.01
    model.backoff_max = 0.02
    return model


# -- the provider ----------------------------------------------------------------------------------


@pytest.mark.parametrize("unit", [b":", b": keep-alive\n\n"], ids=["colon-bytes", "comment-lines"])
async def test_a_trickle_of_comment_bytes_ends_within_the_idle_timeout(nursery: trio.Nursery, unit: bytes) -> None:
    async with fake_openai_server(nursery, [trickle(unit)]) as server:
        model = fast(OpenAIModel("fake-model", server.provider_config(idle_timeout=IDLE, first_byte_timeout=5)))
        out = Recorder()
        started = trio.current_time()
        with trio.fail_after(10), pytest.raises(ModelFailure) as info:
            await model.stream(request(), out)
        elapsed = trio.current_time() - started
        await model.aclose()
    assert info.value.code == "MODEL_TIMEOUT"
    assert "idle_timeout" in info.value.message
    assert out.text_joined == "partial"
    assert IDLE * 0.8 < elapsed < IDLE + 1.0
    assert len(server.requests) == 1  # output had reached the run: no retry


async def test_events_that_keep_coming_end_at_the_total_timeout(nursery: trio.Nursery) -> None:
    async with fake_openai_server(nursery, [slow_events()]) as server:
        config = server.provider_config(idle_timeout=5, first_byte_timeout=5, total_timeout=TOTAL)
        model = fast(OpenAIModel("fake-model", config))
        out = Recorder()
        started = trio.current_time()
        with trio.fail_after(10), pytest.raises(ModelFailure) as info:
            await model.stream(request(), out)
        elapsed = trio.current_time() - started
        await model.aclose()
    assert info.value.code == "MODEL_TIMEOUT"
    assert "total_timeout" in info.value.message
    assert out.text_joined.startswith("w0 ") and "w10 " not in out.text_joined
    assert TOTAL * 0.8 < elapsed < TOTAL + 1.0


async def test_the_total_timeout_bounds_retries_too(nursery: trio.Nursery) -> None:
    """Retries and their Retry-After waits happen inside the one deadline."""
    busy = error(503, "busy", headers=[("retry-after", "2")], type="server_error")
    async with fake_openai_server(nursery, default=busy) as server:
        model = OpenAIModel("fake-model", server.provider_config(max_retries=5, total_timeout=TOTAL))
        started = trio.current_time()
        with trio.fail_after(10), pytest.raises(ModelFailure) as info:
            await model.stream(request(), Recorder())
        elapsed = trio.current_time() - started
        await model.aclose()
    assert info.value.code == "MODEL_TIMEOUT"
    assert "total_timeout" in info.value.message and "HTTP 503" in info.value.message
    assert elapsed < TOTAL + 1.0
    assert len(server.requests) == 1


async def test_a_fast_answer_is_untouched_by_the_total_timeout(nursery: trio.Nursery) -> None:
    async with fake_openai_server(nursery, [slow_events(count=3, every=0.01)]) as server:
        model = OpenAIModel("fake-model", server.provider_config(total_timeout=TOTAL))
        out = Recorder()
        await model.stream(request(), out)
        await model.aclose()
    assert out.text_joined == "w0 w1 w2 "


def test_total_timeout_is_a_provider_setting_documented_beside_the_others() -> None:
    assert OpenAIConfig().total_timeout > 0
    data = default_config_data()
    assert "total_timeout" in data["providers"]["openai"]
    data["providers"]["openai"]["total_timeout"] = 1.5
    data["agents"]["assistant"]["model"] = "openai:m"
    data["agents"]["assistant"]["provider"] = {"total_timeout": 3}
    config = parse_config(data, source="test")
    assert config.provider_for(config.agents["assistant"]).total_timeout == 3.0
    data["agents"]["assistant"]["provider"] = {"total_timeout": "3"}
    with pytest.raises(ConfigError, match="total_timeout"):
        parse_config(data, source="test")


# -- on the wire -----------------------------------------------------------------------------------


def _config(tmp_path: Any, upstream: FakeOpenAI, **provider: Any) -> Any:
    settings = {"base_url": upstream.base_url, "api_key_env": "FAKE_OPENAI_API_KEY", "first_byte_timeout": 5.0,
                "idle_timeout": 5.0, "max_retries": 0, **provider}
    return make_config(tmp_path, providers={"openai": settings},
                       agents={"assistant": {"model": "openai:fake-model", "tools": ["calculator"]}},
                       default_agent="assistant")


CASES = [
    ("trickle", {"idle_timeout": IDLE}, "idle_timeout"),
    ("slow", {"total_timeout": TOTAL}, "total_timeout"),
]


def _scenario(kind: str) -> Scenario:
    return trickle(b":") if kind == "trickle" else slow_events()


@pytest.mark.parametrize(("kind", "settings", "named"), CASES, ids=[c[0] for c in CASES])
async def test_agui_run_ends_with_model_timeout_and_commits_failed(tmp_path, nursery, kind, settings, named):
    async with fake_openai_server(nursery, [_scenario(kind)]) as upstream:
        async with live_server(_config(tmp_path, upstream, **settings)) as server, server.client() as client:
            started = trio.current_time()
            with trio.fail_after(10):
                events = await post_agui(client, agui_body("t", "r1", [
                    {"id": "u1", "role": "user", "content": "hi"}]))
            elapsed = trio.current_time() - started
            run = (await server.ctx.ledger.list_runs("t"))[0]
            again = await post_agui(client, agui_body("t", "r2", [{"id": "u2", "role": "user", "content": "x"}]))
    assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_ERROR"
    assert events[-1]["code"] == "MODEL_TIMEOUT" and named in events[-1]["message"]
    assert elapsed < 0.5 + 1.5
    assert (run.status, run.error_code) == (RunStatus.FAILED, "MODEL_TIMEOUT")
    assert types(again)[0] == "RUN_STARTED"  # the thread was released, not left busy


@pytest.mark.parametrize(("kind", "settings", "named"), CASES, ids=[c[0] for c in CASES])
async def test_aisdk_run_ends_with_model_timeout_and_commits_failed(tmp_path, nursery, kind, settings, named):
    async with fake_openai_server(nursery, [_scenario(kind)]) as upstream:
        async with live_server(_config(tmp_path, upstream, **settings)) as server, server.client() as client:
            started = trio.current_time()
            with trio.fail_after(10):
                response = await client.post("/v1/ai-sdk/chat", json={"id": "c", "messages": [
                    {"id": "u1", "role": "user", "parts": [{"type": "text", "text": "hi"}]}]})
            elapsed = trio.current_time() - started
            run = (await server.ctx.ledger.list_runs("c"))[0]
    chunks = parse_sse(response.content)
    assert [c if isinstance(c, str) else c["type"] for c in chunks[-3:]] == ["error", "finish", "[DONE]"]
    assert chunks[-3]["errorText"].startswith("MODEL_TIMEOUT: ") and named in chunks[-3]["errorText"]
    assert chunks[-2] == {"type": "finish", "finishReason": "error"}
    assert elapsed < 0.5 + 1.5
    assert (run.status, run.error_code) == (RunStatus.FAILED, "MODEL_TIMEOUT")
