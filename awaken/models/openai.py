"""The OpenAI-compatible streaming provider: ``model = "openai:<model name>"`` (CONTRACT §2).

``OpenAIModel`` POSTs ``{base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage`` through one lazily created ``httpx.AsyncClient``, parses the
server-sent events itself (``_SSEParser``, sans-IO) and reports each chunk to the run's ``ModelOutput``.

What goes to the endpoint (``to_openai_messages``):

* the agent's system prompt first, as a ``system`` message;
* ``user`` text, with image parts as ``{"type": "image_url", "image_url": {"url": ...}}`` content items
  (hosted ``http(s)`` or ``data:`` URLs are passed through unchanged);
* ``system`` *and* ``developer`` input as ``role: "system"``: many OpenAI-compatible servers (vLLM,
  llama.cpp, Ollama, older gateways) reject ``developer``, and OpenAI itself treats ``system`` as
  ``developer`` for the models that have one;
* assistant steps as their text plus ``tool_calls``. Reasoning is never sent back;
* tool results as ``{"role": "tool", "tool_call_id", "content"}``. An ``error`` result is prefixed with
  ``error:`` so the model can tell it failed. A call with no result in history gets a synthetic
  "no result" message and a result whose call is not in history is dropped, because the endpoint
  rejects both with a 400.

What comes back: ``delta.content`` goes to ``out.text``. ``delta.reasoning_content`` (DeepSeek, vLLM)
or ``delta.reasoning`` (OpenRouter, Ollama) goes to ``out.reasoning``, never to text.
``delta.tool_calls[]`` fragments are assembled by ``index``; a call is announced once its name is known,
with the first id seen (or a generated one). The usage chunk is reported once, when the stream ends.
An endpoint that ignores ``stream`` and answers with one JSON completion is accepted too.

Timeouts. ``connect_timeout`` is httpx's connect, write and pool timeout. ``first_byte_timeout`` bounds
the time from sending the request to the first SSE ``data:`` event, connecting included.
``idle_timeout`` bounds the gap between two ``data:`` events (comments do not count). Both use trio
deadlines. A value of zero or less means no limit.

``temperature`` and ``max_tokens`` are sent when set. ``max_tokens`` goes out as
``max_completion_tokens`` when the host is ``api.openai.com``, because OpenAI's reasoning models refuse
``max_tokens``.

Retries (``max_retries``, exponential backoff with jitter, ``Retry-After`` or ``retry-after-ms``
honoured and capped at ``retry_after_max``) happen only while nothing has been passed to ``out``.
Once a delta is out, any failure ends the run. Connection errors, connect timeouts, 408, 429, 5xx
and a stream that drops before its first delta are retried. A first-byte timeout is not retried,
because the endpoint is up but slow and a retry would multiply the wait. Classification:

* ``MODEL_UNAVAILABLE``: connection refused or failed, 401/403 ("the endpoint refused the
  credentials"), 404, 3xx, 5xx once the retries are spent;
* ``MODEL_RATE_LIMITED``: 429 once the retries are spent, or an in-stream rate-limit error;
* ``MODEL_TIMEOUT``: connect, first-byte and idle timeouts, and 408;
* ``MODEL_ERROR``: 400 and other 4xx, malformed chunks, and a stream that breaks off or ends early.

Secrets. The API key is read from ``os.environ[config.api_key_env]`` at each request. If it is
missing or empty (local servers), no ``Authorization`` header is sent. Failure messages are built
here from status codes and the endpoint's error text, after ``sanitize`` has removed the key (and
any fragment of it), bearer tokens and key-like strings. They never include request headers or the
URL's user info or query.

Cancellation. A ``trio.Cancelled`` (the client went away) unwinds through the response's ``aclose()``,
which closes the upstream connection at once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
import re
import uuid
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import attrs
import httpx
import trio

from ..config import ProviderConfig
from ..errors import ModelFailure
from ..messages import ImagePart, Message, TextPart, ToolResultPart, Usage
from . import ModelOutput, ModelRequest, ToolSpec

log = logging.getLogger(__name__)

#: how long a finished stream (after ``data: [DONE]``) may take to end its body before it is dropped
_DRAIN_SECONDS = 0.25
#: how long reading a non-2xx error body may take
_ERROR_BODY_SECONDS = 5.0
#: how long closing the upstream response may take (it is shielded from cancellation)
_CLOSE_SECONDS = 2.0
#: an SSE line longer than this is a broken stream, not a chunk
_MAX_LINE_BYTES = 8 * 1024 * 1024
_DETAIL_CHARS = 300


class OpenAIModel:
    """``model = "openai:<model name>"``: one instance (and one HTTP client) per agent."""

    #: backoff before retry n (0-based) is ``min(backoff_max, backoff_base * 2**n)`` times a jitter in [0.5, 1]
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    #: the longest ``Retry-After`` honoured; longer requests are shortened to this
    retry_after_max: float = 20.0

    def __init__(self, model: str, config: ProviderConfig) -> None:
        self.model = model
        self.config = config
        self._url = config.base_url.rstrip("/") + "/chat/completions"
        self._where = safe_url(config.base_url)
        self._client: httpx.AsyncClient | None = None

    async def aclose(self) -> None:
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            t = self.config.connect_timeout if self.config.connect_timeout > 0 else None
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(connect=t, read=None, write=t, pool=t), follow_redirects=False
            )
        return self._client

    def request_body(self, request: ModelRequest) -> dict[str, Any]:
        """The JSON body POSTed to ``/chat/completions`` (public for tests and debugging)."""
        body: dict[str, Any] = {
            "model": self.model,
            "messages": to_openai_messages(request),
            "stream": True,
            "stream_options": {"include_usage": True},
        }
        if request.tools:
            body["tools"] = [_tool_json(t) for t in request.tools]
        if self.config.temperature is not None:
            body["temperature"] = self.config.temperature
        if self.config.max_tokens is not None:
            # OpenAI's reasoning models refuse ``max_tokens``; compatible servers only know ``max_tokens``.
            host = urlsplit(self.config.base_url).hostname or ""
            key = "max_completion_tokens" if host == "api.openai.com" else "max_tokens"
            body[key] = self.config.max_tokens
        return body

    async def stream(self, request: ModelRequest, out: ModelOutput) -> None:
        payload = json.dumps(self.request_body(request), ensure_ascii=False).encode()
        api_key = os.environ.get(self.config.api_key_env, "").strip() if self.config.api_key_env else ""
        headers = {"content-type": "application/json", "accept": "text/event-stream"}
        if api_key:
            headers["authorization"] = f"Bearer {api_key}"
        relay = _Relay(out)
        retries = max(0, self.config.max_retries)
        attempt = 0
        while True:
            try:
                await self._attempt(payload, headers, relay, api_key)
                return
            except _Failed as failed:
                message = sanitize(failed.message, api_key)
                if relay.started or not failed.retryable or attempt >= retries:
                    raise ModelFailure(message, code=failed.code) from None
                delay = self._delay(attempt, failed.retry_after)
                attempt += 1
                log.warning("model %s: %s; retry %d of %d in %.1f s", self.model, message, attempt, retries, delay)
                await trio.sleep(delay)

    def _delay(self, attempt: int, retry_after: float | None) -> float:
        if retry_after is not None:
            return min(max(retry_after, 0.0), self.retry_after_max)
        return min(self.backoff_max, self.backoff_base * 2**attempt) * random.uniform(0.5, 1.0)

    async def _attempt(self, payload: bytes, headers: dict[str, str], relay: _Relay, api_key: str) -> None:
        cfg = self.config
        client = self._http()
        deadline = trio.current_time() + _limit(cfg.first_byte_timeout)
        response: httpx.Response | None = None
        with trio.move_on_at(deadline):
            try:
                response = await client.send(client.build_request("POST", self._url, content=payload,
                                                                  headers=headers), stream=True)
            except (httpx.InvalidURL, httpx.UnsupportedProtocol):
                raise _Failed("MODEL_UNAVAILABLE", f"the model endpoint URL {self._where!r} is not a valid "
                              "http(s) URL; check base_url") from None
            except httpx.TimeoutException:
                raise _Failed("MODEL_TIMEOUT", f"could not connect to the model endpoint {self._where} "
                              f"within {cfg.connect_timeout:g} s", retryable=True) from None
            except httpx.HTTPError as exc:
                raise _Failed("MODEL_UNAVAILABLE", f"could not reach the model endpoint {self._where}: "
                              f"{_exc_text(exc)}", retryable=True) from None
        if response is None:
            raise _Failed("MODEL_TIMEOUT", f"the model endpoint sent nothing within first_byte_timeout "
                          f"({cfg.first_byte_timeout:g} s)")
        try:
            if not 200 <= response.status_code < 300:
                raise await self._status_failure(response, api_key)
            ctype = response.headers.get("content-type", "").lower()
            if "text/html" in ctype:
                raise _Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} answered with an HTML "
                              "page, not an event stream; check base_url")
            if "json" in ctype:
                await self._read_json(response, relay, deadline)
            else:
                await self._read_events(response, relay, deadline)
        finally:
            # Runs on Cancelled too: closing the response closes the upstream connection at once.
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_SECONDS):
                await response.aclose()

    async def _status_failure(self, response: httpx.Response, api_key: str) -> _Failed:
        status = response.status_code
        body = b""
        with trio.move_on_after(_ERROR_BODY_SECONDS):
            try:
                body = await response.aread()
            except httpx.HTTPError:
                pass
        detail = sanitize(_error_detail(body), api_key)
        said = f": {detail}" if detail else ""
        if status in (401, 403):
            env = self.config.api_key_env
            hint = f"check the API key in ${env}" if api_key else f"${env} is not set"
            return _Failed("MODEL_UNAVAILABLE", f"the endpoint refused the credentials (HTTP {status}); {hint}{said}")
        if status == 404:
            return _Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} has no such route or model "
                           f"{self.model!r} (HTTP 404){said}")
        if status == 429:
            return _Failed("MODEL_RATE_LIMITED", f"the model endpoint rate-limited the request (HTTP 429){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if status == 408:
            return _Failed("MODEL_TIMEOUT", f"the model endpoint timed out the request (HTTP 408){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if status >= 500:
            return _Failed("MODEL_UNAVAILABLE", f"the model endpoint failed (HTTP {status}){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if 300 <= status < 400:
            return _Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} redirected the request "
                           f"(HTTP {status}); check base_url")
        return _Failed("MODEL_ERROR", f"the model endpoint rejected the request (HTTP {status}){said}")

    async def _read_events(self, response: httpx.Response, relay: _Relay, deadline: float) -> None:
        parser = _SSEParser()
        chunks = _ChunkReader(relay)
        received = response.aiter_bytes()
        done = False
        while True:
            data: bytes | None = None
            with trio.move_on_at(deadline) as scope:
                try:
                    data = await received.__anext__()
                except StopAsyncIteration:
                    break
                except httpx.HTTPError as exc:
                    if done:
                        break
                    raise _Failed("MODEL_ERROR", f"the model stream broke off: {_exc_text(exc)}",
                                  retryable=True) from None
            if scope.cancelled_caught:
                if done:
                    break
                if not chunks.seen_data:
                    raise _Failed("MODEL_TIMEOUT", "the model endpoint sent no data within first_byte_timeout "
                                  f"({self.config.first_byte_timeout:g} s)")
                raise _Failed("MODEL_TIMEOUT", "the model stream stalled for longer than idle_timeout "
                              f"({self.config.idle_timeout:g} s)")
            assert data is not None
            for event in parser.feed(data):
                if done:
                    continue
                done = chunks.event(event)
            if done:
                deadline = trio.current_time() + _DRAIN_SECONDS
            elif chunks.seen_data:
                deadline = trio.current_time() + _limit(self.config.idle_timeout)
        if not done:
            for event in parser.close():
                if not done:
                    done = chunks.event(event)
        if not done and not chunks.finished:
            raise _Failed("MODEL_ERROR", "the model stream ended before the answer was complete", retryable=True)
        chunks.end()

    async def _read_json(self, response: httpx.Response, relay: _Relay, deadline: float) -> None:
        body: bytes | None = None
        with trio.move_on_at(deadline):
            try:
                body = await response.aread()
            except httpx.HTTPError as exc:
                raise _Failed("MODEL_ERROR", f"the model response broke off: {_exc_text(exc)}",
                              retryable=True) from None
        if body is None:
            raise _Failed("MODEL_TIMEOUT", "the model endpoint did not answer within first_byte_timeout "
                          f"({self.config.first_byte_timeout:g} s)")
        chunks = _ChunkReader(relay)
        if body.lstrip().startswith(b"data:"):  # an event stream mislabelled as JSON
            parser, done = _SSEParser(), False
            for event in parser.feed(body) + parser.close():
                done = done or chunks.event(event)
        else:
            chunks.chunk(_parse_json(body), key="message")
        chunks.end()


# --- the wire: request mapping ----------------------------------------------------------------------


def _tool_json(tool: ToolSpec) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {"name": tool.name, "description": tool.description, "parameters": tool.parameters},
    }


def to_openai_messages(request: ModelRequest) -> list[dict[str, Any]]:
    """The chat-completions ``messages`` for a request (see the module docstring for the rules)."""
    wire: list[dict[str, Any]] = []
    if request.system_prompt.strip():
        wire.append({"role": "system", "content": request.system_prompt})
    open_calls: list[str] = []  # ids of the last assistant step's calls still waiting for a result

    def close_open_calls() -> None:
        for call_id in open_calls:
            wire.append({"role": "tool", "tool_call_id": call_id, "content": "error: no result was recorded"})
        open_calls.clear()

    for message in request.messages:
        if message.role == "tool":
            result = message.tool_result
            if result is not None and result.tool_call_id in open_calls:
                open_calls.remove(result.tool_call_id)
                wire.append({"role": "tool", "tool_call_id": result.tool_call_id, "content": _result_text(result)})
            continue
        close_open_calls()
        if message.role == "assistant":
            text, calls = message.text, message.tool_calls
            if not text and not calls:
                continue
            item: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                item["tool_calls"] = [
                    {"id": c.tool_call_id, "type": "function",
                     "function": {"name": c.name, "arguments": c.arguments or "{}"}}
                    for c in calls
                ]
                open_calls.extend(c.tool_call_id for c in calls)
            wire.append(item)
        elif message.role == "user":
            content = _user_content(message)
            if content:
                wire.append({"role": "user", "content": content})
        elif message.text:  # system, developer
            wire.append({"role": "system", "content": message.text})
    close_open_calls()
    return wire


def _user_content(message: Message) -> str | list[dict[str, Any]]:
    if not any(isinstance(p, ImagePart) for p in message.parts):
        return message.text
    items: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            items.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            items.append({"type": "image_url", "image_url": {"url": part.url}})
    return items


def _result_text(result: ToolResultPart) -> str:
    if result.status == "error" and not result.content.lower().startswith("error"):
        return f"error: {result.content}"
    return result.content


# --- the wire: the event stream -----------------------------------------------------------------------


@attrs.define
class _Failed(Exception):
    """One attempt failed; ``stream`` decides whether to retry and raises the ``ModelFailure``."""

    code: str
    message: str
    retryable: bool = False
    retry_after: float | None = None


class _Relay:
    """The run's ``ModelOutput``, remembering whether anything was passed on (retries stop there)."""

    def __init__(self, out: ModelOutput) -> None:
        self.out = out
        self.started = False

    def text(self, delta: str) -> None:
        self.started = True
        self.out.text(delta)

    def reasoning(self, delta: str) -> None:
        self.started = True
        self.out.reasoning(delta)

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        self.started = True
        self.out.tool_call(index, call_id=call_id, name=name, arguments=arguments)


@attrs.define
class _Event:
    data: str
    event: str = ""


class _SSEParser:
    """Server-sent events, sans-IO: ``feed(bytes)`` returns the complete events (CR, LF or CRLF lines)."""

    _EOL = re.compile(rb"\r\n|\r|\n")

    def __init__(self) -> None:
        self._buffer = b""
        self._data: list[bytes] = []
        self._event = b""

    def feed(self, data: bytes) -> list[_Event]:
        self._buffer += data
        events: list[_Event] = []
        start = 0
        while (match := self._EOL.search(self._buffer, start)) is not None:
            if match.group() == b"\r" and match.end() == len(self._buffer):
                break  # maybe the first half of a CRLF split across reads
            event = self._line(self._buffer[start : match.start()])
            if event is not None:
                events.append(event)
            start = match.end()
        self._buffer = self._buffer[start:]
        if len(self._buffer) > _MAX_LINE_BYTES:
            raise _Failed("MODEL_ERROR", "the model stream sent an over-long line")
        return events

    def close(self) -> list[_Event]:
        """The end of the body: a last event without its blank line still counts."""
        events = self.feed(b"\n") if self._buffer else []
        event = self._line(b"")
        return events + ([event] if event is not None else [])

    def _line(self, line: bytes) -> _Event | None:
        if not line:
            if not self._data:
                self._event = b""
                return None
            try:
                event = _Event(b"\n".join(self._data).decode(), self._event.decode(errors="replace"))
            except UnicodeDecodeError:
                raise _Failed("MODEL_ERROR", "the model stream sent a chunk that is not UTF-8") from None
            self._data, self._event = [], b""
            return event
        if line.startswith(b":"):
            return None
        name, _, value = line.partition(b":")
        if value.startswith(b" "):
            value = value[1:]
        if name == b"data":
            self._data.append(value)
        elif name == b"event":
            self._event = value
        return None


class _ChunkReader:
    """``chat.completion.chunk`` objects in, ``ModelOutput`` calls out."""

    def __init__(self, relay: _Relay) -> None:
        self.relay = relay
        self.seen_data = False
        self.finished = False
        self._usage: Usage | None = None
        self._calls: dict[int, _Call] = {}
        self._last_index: int | None = None

    def event(self, event: _Event) -> bool:
        """Handle one SSE event; True once ``[DONE]`` arrived."""
        self.seen_data = True
        if event.data.strip() == "[DONE]":
            return True
        obj = _parse_json(event.data.encode())
        if event.event == "error" and isinstance(obj, dict) and "error" not in obj:
            obj = {"error": obj}
        self.chunk(obj)
        return False

    def chunk(self, obj: Any, *, key: str = "delta") -> None:
        if not isinstance(obj, dict):
            raise _Failed("MODEL_ERROR", "the model stream sent a chunk that is not a JSON object")
        if obj.get("error"):
            raise _stream_error(obj["error"])
        usage = obj.get("usage")
        if isinstance(usage, dict):
            self._usage = Usage(_int(usage.get("prompt_tokens")), _int(usage.get("completion_tokens")))
        choices = obj.get("choices") or []
        if not isinstance(choices, list):
            raise _Failed("MODEL_ERROR", "the model stream sent a chunk whose choices are not a list")
        for choice in choices:
            if not isinstance(choice, dict) or choice.get("index") not in (0, None):
                continue
            if choice.get("finish_reason"):
                self.finished = True
            delta = choice.get(key)
            if isinstance(delta, dict):
                self._delta(delta)

    def _delta(self, delta: dict[str, Any]) -> None:
        reasoning = delta.get("reasoning_content")
        if not (isinstance(reasoning, str) and reasoning):
            reasoning = delta.get("reasoning")
        if isinstance(reasoning, str) and reasoning:
            self.relay.reasoning(reasoning)
        content = delta.get("content")
        if isinstance(content, str):
            if content:
                self.relay.text(content)
        elif isinstance(content, list):  # a few servers stream content as typed parts
            for part in content:
                if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
                    if part["text"]:
                        self.relay.text(part["text"])
        elif content is not None:
            raise _Failed("MODEL_ERROR", "the model stream sent content that is not text")
        calls = delta.get("tool_calls")
        if calls is None:
            return
        if not isinstance(calls, list):
            raise _Failed("MODEL_ERROR", "the model stream sent tool_calls that are not a list")
        for call in calls:
            if not isinstance(call, dict):
                raise _Failed("MODEL_ERROR", "the model stream sent a tool call that is not an object")
            self._tool_call(call)

    def _tool_call(self, call: dict[str, Any]) -> None:
        call_id = call.get("id") if isinstance(call.get("id"), str) and call.get("id") else None
        function = call.get("function") if isinstance(call.get("function"), dict) else {}
        name = function.get("name") if isinstance(function.get("name"), str) and function.get("name") else None
        arguments = function.get("arguments")
        if arguments is None:
            arguments = ""
        elif isinstance(arguments, dict):  # some servers send the arguments as an object
            arguments = json.dumps(arguments, ensure_ascii=False)
        elif not isinstance(arguments, str):
            raise _Failed("MODEL_ERROR", "the model stream sent tool-call arguments that are not text")
        index = call.get("index")
        if not isinstance(index, int) or isinstance(index, bool):
            index = self._guess_index(call_id)
        self._last_index = index
        entry = self._calls.setdefault(index, _Call())
        entry.call_id = entry.call_id or call_id
        entry.name = entry.name or name
        if entry.announced:
            if arguments:
                self.relay.tool_call(index, call_id=None, name=None, arguments=arguments)
            return
        entry.buffered.append(arguments)
        if entry.name is None:
            return  # wait for the name: a call is announced with its name
        entry.announced = True
        call_id = entry.call_id or f"call_{uuid.uuid4().hex[:24]}"
        self.relay.tool_call(index, call_id=call_id, name=entry.name, arguments="".join(entry.buffered))
        entry.buffered.clear()

    def _guess_index(self, call_id: str | None) -> int:
        """For servers that omit ``index``: a new id starts a new call, anything else continues the last."""
        if call_id is not None:
            for index, entry in self._calls.items():
                if entry.call_id == call_id:
                    return index
            return max(self._calls, default=-1) + 1
        return self._last_index if self._last_index is not None else 0

    def end(self) -> None:
        if any(not entry.announced for entry in self._calls.values()):
            raise _Failed("MODEL_ERROR", "the model sent a tool call without a name")
        if self._usage is not None:
            self.relay.out.usage(self._usage)


@attrs.define
class _Call:
    call_id: str | None = None
    name: str | None = None
    announced: bool = False
    buffered: list[str] = attrs.field(factory=list)


def _limit(seconds: float) -> float:
    """A configured timeout; zero or less means none."""
    return seconds if seconds > 0 else math.inf


def _parse_json(data: bytes) -> Any:
    try:
        return json.loads(data)
    except ValueError:
        raise _Failed("MODEL_ERROR", "the model stream sent a malformed chunk (not JSON)") from None


def _int(value: Any) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _stream_error(error: Any) -> _Failed:
    detail = _error_detail(json.dumps({"error": error}).encode())
    text = json.dumps(error).lower() if not isinstance(error, str) else error.lower()
    limited = ("rate" in text and "limit" in text) or '"code": 429' in text
    code = "MODEL_RATE_LIMITED" if limited else "MODEL_ERROR"
    return _Failed(code, f"the model endpoint reported an error mid-stream: {detail or 'no details'}")


# --- secrets and messages -------------------------------------------------------------------------------

_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}")
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
_WINDOW = 8


def sanitize(text: str, secret: str | None = None) -> str:
    """``text`` without ``secret`` (or any 8-character piece of it), bearer tokens or key-like strings."""
    if secret:
        text = text.replace(secret, "[redacted]")
        if len(secret) >= _WINDOW:
            pieces = {secret[i : i + _WINDOW] for i in range(len(secret) - _WINDOW + 1)}
            kept: list[str] = []
            hidden_to = 0  # text[:hidden_to] is covered by a piece of the secret
            for i, char in enumerate(text):
                if text[i : i + _WINDOW] in pieces:
                    hidden_to = i + _WINDOW
                if i < hidden_to:
                    if not kept or kept[-1] != "[redacted]":
                        kept.append("[redacted]")
                else:
                    kept.append(char)
            text = "".join(kept)
    text = _BEARER.sub(lambda m: f"{m.group(1)} [redacted]", text)
    text = _SK.sub("[redacted]", text)
    text = _LONG_TOKEN.sub(lambda m: "[redacted]" if _key_like(m.group()) else m.group(), text)
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _key_like(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment, for messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "(the configured base_url)"


def _error_detail(body: bytes) -> str:
    """The human part of an error body: OpenAI's ``error.message``, a ``detail``/``message``, or the text."""
    text = body.decode(errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return "" if text.lstrip().startswith("<") else text
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(error.get(key), str):
                    return error[key]
        elif isinstance(error, str):
            return error
        if isinstance(data.get("detail"), str):
            return data["detail"]
    return text


def _exc_text(exc: BaseException) -> str:
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def retry_after(headers: httpx.Headers) -> float | None:
    """Seconds from ``retry-after-ms`` or ``Retry-After`` (seconds or an HTTP date), or None."""
    value = headers.get("retry-after-ms")
    if value is not None:
        try:
            return max(0.0, float(value) / 1000.0)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        pass
    try:
        when = parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    if when.tzinfo is None:
        when = when.replace(tzinfo=UTC)
    return max(0.0, (when - datetime.now(UTC)).total_seconds())
