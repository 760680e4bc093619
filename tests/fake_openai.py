"""A fake OpenAI-compatible chat-completions endpoint for tests: real HTTP, real SSE wire format.

Hypercorn (trio worker) serves a small raw ASGI app on ``127.0.0.1`` port 0. Each request to
``POST …/chat/completions`` is recorded, then answered by the next queued *scenario*:

```python
from tests.fake_openai import DONE, fake_openai_server, finish, stream, text, text_reply, tool_call, usage

async def test_something(nursery):
    async with fake_openai_server(nursery, [text_reply("Hel", "lo", usage=(3, 2))]) as server:
        model = OpenAIModel("fake-model", server.provider_config(idle_timeout=1.0))
        await model.stream(request, out)
        await model.aclose()
    server.requests[0].json["messages"]        # what the client sent
    server.requests[0].headers["authorization"]
```

The API:

* ``fake_openai_server(nursery, scenarios=(), *, default=None)`` is an async context manager that
  yields a ``FakeOpenAI``. The server runs as a task in ``nursery`` and stops when the block exits.
* ``FakeOpenAI`` has these members:
  - ``base_url`` is ``http://127.0.0.1:<port>/v1``;
  - ``provider_config(**overrides)`` returns an ``OpenAIConfig`` aimed at the server. Its
    ``api_key_env`` defaults to ``FAKE_OPENAI_API_KEY``;
  - ``add(*scenarios)`` queues more scenarios;
  - ``requests`` is a list of ``RecordedRequest`` (``method``, ``path``, ``headers``, a dict with
    lower-case keys, ``body`` and ``.json``);
  - ``disconnects`` is a list of ``Disconnect(request_index, at)``. An entry is recorded when a
    client closed the connection before its response was complete;
    ``await server.wait_for_disconnect()`` waits for the next one;
  - ``completed`` lists the indexes of requests whose response was sent in full.
* A scenario is a ``Scenario(status, headers, steps)``, or a callable
  ``(RecordedRequest) -> Scenario`` that answers according to the request. When the queue is empty,
  ``default`` answers; without a default, the server answers 500 ``no scenario left``.
* A step is one of these:
  - ``Send(bytes)`` writes one body chunk. The helpers ``chunk``, ``text``, ``reasoning``,
    ``tool_call``, ``finish``, ``usage``, ``DONE`` and ``raw`` build the usual frames;
  - ``Pause(seconds)`` stalls the stream;
  - ``Drop()`` aborts the connection mid-body.
* Scenario factories:
  - ``stream(*steps)`` streams the steps as an SSE response;
  - ``text_reply(*deltas, usage=(p, c))`` is a role chunk, the text deltas, ``finish``, a usage chunk
    and ``[DONE]``;
  - ``error(status, message, headers=...)`` is an OpenAI-style JSON error body;
  - ``json_reply(obj)`` is a plain JSON body.
"""

from __future__ import annotations

import json
import time
from collections import deque
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from functools import partial
from typing import Any

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from awaken.models.openai import OpenAIConfig

FAKE_API_KEY_ENV = "FAKE_OPENAI_API_KEY"
SSE_HEADERS = (("content-type", "text/event-stream"), ("cache-control", "no-cache"))


# --- scenarios ---------------------------------------------------------------------------------------


@attrs.frozen
class Send:
    """Write ``data`` as one body chunk."""

    data: bytes


@attrs.frozen
class Pause:
    """Stall for ``seconds`` (interrupted at once if the client disconnects)."""

    seconds: float


@attrs.frozen
class Drop:
    """Abort the connection without finishing the body (the client sees an incomplete chunked read)."""


Step = Send | Pause | Drop


@attrs.frozen
class Scenario:
    status: int = 200
    headers: tuple[tuple[str, str], ...] = SSE_HEADERS
    steps: tuple[Step, ...] = ()


ScenarioLike = Scenario | Callable[["RecordedRequest"], Scenario]


def frame(obj: Any) -> Send:
    """One SSE event ``data: <json>\\n\\n``."""
    return Send(b"data: " + json.dumps(obj, separators=(",", ":")).encode() + b"\n\n")


def raw(data: bytes | str) -> Send:
    """Bytes on the wire exactly as given (malformed chunks, comments, odd line endings)."""
    return Send(data.encode() if isinstance(data, str) else data)


DONE = raw("data: [DONE]\n\n")


def chunk(
    delta: dict[str, Any] | None = None,
    *,
    finish_reason: str | None = None,
    usage: dict[str, int] | None = None,
    choices: list[dict[str, Any]] | None = None,
    model: str = "fake-model",
) -> Send:
    """A ``chat.completion.chunk`` frame. ``choices`` overrides the single choice built from ``delta``."""
    if choices is None:
        choices = [] if delta is None and finish_reason is None else [
            {"index": 0, "delta": delta or {}, "logprobs": None, "finish_reason": finish_reason}
        ]
    obj: dict[str, Any] = {
        "id": "chatcmpl-fake",
        "object": "chat.completion.chunk",
        "created": 1_700_000_000,
        "model": model,
        "system_fingerprint": "fp_fake",
        "choices": choices,
    }
    if usage is not None:
        obj["usage"] = usage
    return frame(obj)


def role() -> Send:
    return chunk({"role": "assistant", "content": ""})


def text(delta: str) -> Send:
    return chunk({"content": delta})


def reasoning(delta: str, *, field: str = "reasoning_content") -> Send:
    """A reasoning delta; ``field`` is ``reasoning_content`` (DeepSeek, vLLM) or ``reasoning`` (OpenRouter)."""
    return chunk({"content": None, field: delta})


def tool_call(index: int, *, id: str | None = None, name: str | None = None, arguments: str | None = None) -> Send:
    """One fragment of tool call ``index`` (the first fragment carries ``id`` and ``name``)."""
    call: dict[str, Any] = {"index": index}
    if id is not None:
        call["id"] = id
        call["type"] = "function"
    function: dict[str, Any] = {}
    if name is not None:
        function["name"] = name
    if arguments is not None:
        function["arguments"] = arguments
    call["function"] = function
    return chunk({"tool_calls": [call]})


def finish(reason: str = "stop") -> Send:
    return chunk({}, finish_reason=reason)


def usage(prompt_tokens: int, completion_tokens: int) -> Send:
    """The ``stream_options.include_usage`` chunk: empty ``choices`` and a ``usage`` object."""
    return chunk(usage={"prompt_tokens": prompt_tokens, "completion_tokens": completion_tokens,
                        "total_tokens": prompt_tokens + completion_tokens})


def stream(*steps: Step, status: int = 200, headers: tuple[tuple[str, str], ...] = SSE_HEADERS) -> Scenario:
    return Scenario(status, headers, steps)


def text_reply(*deltas: str, usage: tuple[int, int] | None = (1, 1)) -> Scenario:
    steps: list[Step] = [role(), *(text(d) for d in deltas), finish()]
    if usage is not None:
        steps.append(_usage_step(*usage))
    steps.append(DONE)
    return stream(*steps)


_usage_step = usage


def json_reply(obj: Any, *, status: int = 200, headers: Iterable[tuple[str, str]] = ()) -> Scenario:
    body = json.dumps(obj).encode()
    return Scenario(status, (("content-type", "application/json"), *headers), (Send(body),))


def error(status: int, message: str = "fake failure", *, headers: Iterable[tuple[str, str]] = (),
          type: str = "invalid_request_error", code: str | None = None) -> Scenario:
    """An OpenAI-style error: ``{"error": {"message", "type", "code"}}`` with ``status``."""
    return json_reply({"error": {"message": message, "type": type, "param": None, "code": code}},
                      status=status, headers=headers)


# --- the server --------------------------------------------------------------------------------------


@attrs.define
class RecordedRequest:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes
    at: float

    @property
    def json(self) -> Any:
        return json.loads(self.body)


@attrs.frozen
class Disconnect:
    """The client closed request ``request_index``'s connection before its response was complete."""

    request_index: int
    #: ``trio.current_time()`` when the server noticed
    at: float


class _Dropped(Exception):
    pass


class FakeOpenAI:
    def __init__(self, scenarios: Iterable[ScenarioLike] = (), *, default: ScenarioLike | None = None) -> None:
        self.queue: deque[ScenarioLike] = deque(scenarios)
        self.default = default
        self.base_url = ""
        self.requests: list[RecordedRequest] = []
        self.disconnects: list[Disconnect] = []
        self.completed: list[int] = []
        self._disconnected = trio.Event()
        self._scope: trio.CancelScope | None = None
        self._stopped = trio.Event()

    def add(self, *scenarios: ScenarioLike) -> None:
        self.queue.extend(scenarios)

    def provider_config(self, **overrides: Any) -> OpenAIConfig:
        """An ``OpenAIConfig`` for this server: short timeouts, key from ``FAKE_OPENAI_API_KEY``."""
        values: dict[str, Any] = {
            "base_url": self.base_url,
            "api_key_env": FAKE_API_KEY_ENV,
            "connect_timeout": 2.0,
            "first_byte_timeout": 5.0,
            "idle_timeout": 5.0,
            "max_retries": 2,
        }
        values.update(overrides)
        return OpenAIConfig(**values)

    async def wait_for_disconnect(self) -> Disconnect:
        """Wait for the next recorded disconnect (returns at once if one arrived since the last wait)."""
        await self._disconnected.wait()
        self._disconnected = trio.Event()
        return self.disconnects[-1]

    # -- lifecycle

    async def start(self, nursery: trio.Nursery) -> None:
        await nursery.start(self._serve)

    async def stop(self) -> None:
        if self._scope is not None:
            self._scope.cancel()
            with trio.move_on_after(5, shield=True):
                await self._stopped.wait()

    async def _serve(self, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        config = HypercornConfig()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = None
        config.errorlog = None
        try:
            with trio.CancelScope() as self._scope:
                async with trio.open_nursery() as inner:
                    binds = await inner.start(partial(serve, self._app, config))  # type: ignore[arg-type]
                    self.base_url = binds[0].rstrip("/") + "/v1"
                    task_status.started()
        finally:
            self._stopped.set()

    # -- ASGI

    async def _app(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while True:
                message = await receive()
                if message["type"] == "lifespan.startup":
                    await send({"type": "lifespan.startup.complete"})
                elif message["type"] == "lifespan.shutdown":
                    await send({"type": "lifespan.shutdown.complete"})
                    return
        if scope["type"] != "http":
            raise RuntimeError(f"fake_openai: unsupported scope {scope['type']}")
        body = bytearray()
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            body += message.get("body", b"")
            if not message.get("more_body"):
                break
        headers: dict[str, str] = {}
        for name, value in scope["headers"]:
            key = name.decode("latin-1").lower()
            headers[key] = f"{headers[key]}, {value.decode('latin-1')}" if key in headers else value.decode("latin-1")
        request = RecordedRequest(scope["method"], scope["path"], headers, bytes(body), time.monotonic())
        index = len(self.requests)
        self.requests.append(request)
        if scope["method"] != "POST" or not scope["path"].endswith("/chat/completions"):
            scenario = error(404, f"fake_openai: no route {scope['method']} {scope['path']}")
        else:
            scenario = self._next(request)
        complete = False

        async def watch(cancel: trio.CancelScope) -> None:
            while (await receive())["type"] != "http.disconnect":
                pass
            if not complete:
                self.disconnects.append(Disconnect(index, trio.current_time()))
                self._disconnected.set()
                cancel.cancel()

        try:
            async with trio.open_nursery() as nursery:
                nursery.start_soon(watch, nursery.cancel_scope)
                await send({
                    "type": "http.response.start",
                    "status": scenario.status,
                    "headers": [(k.encode(), v.encode()) for k, v in scenario.headers],
                })
                for step in scenario.steps:
                    if isinstance(step, Send):
                        await send({"type": "http.response.body", "body": step.data, "more_body": True})
                    elif isinstance(step, Pause):
                        await trio.sleep(step.seconds)
                    else:
                        raise _Dropped
                complete = True
                self.completed.append(index)
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                nursery.cancel_scope.cancel()
        except* _Dropped:
            # Ending without the final body message makes hypercorn close the connection mid-body.
            pass

    def _next(self, request: RecordedRequest) -> Scenario:
        item = self.queue.popleft() if self.queue else self.default
        if item is None:
            return error(500, f"fake_openai: no scenario left for request {len(self.requests) - 1}",
                         type="server_error")
        return item(request) if callable(item) else item


@asynccontextmanager
async def fake_openai_server(
    nursery: trio.Nursery, scenarios: Iterable[ScenarioLike] = (), *, default: ScenarioLike | None = None
) -> AsyncIterator[FakeOpenAI]:
    """Serve a ``FakeOpenAI`` in ``nursery`` for the duration of the block."""
    server = FakeOpenAI(scenarios, default=default)
    await server.start(nursery)
    try:
        yield server
    finally:
        await server.stop()
