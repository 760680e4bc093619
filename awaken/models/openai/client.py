"""The request and its retry loop: ``OpenAIModel`` (``model = "openai:<model name>"``, CONTRACT §2).

``OpenAIModel`` POSTs ``{base_url}/chat/completions`` with ``stream: true`` and
``stream_options.include_usage`` through one lazily created ``httpx.AsyncClient``, feeds the body to
the SSE parser (``sse``) and the chunk reader (``chunks``), which report to the run's ``ModelOutput``.
An endpoint that ignores ``stream`` and answers with one JSON completion is accepted too.

Timeouts. ``connect_timeout`` is httpx's connect, write and pool timeout. ``first_byte_timeout`` bounds
the time from sending the request to the first SSE ``data:`` event, connecting included.
``idle_timeout`` bounds the gap between two complete ``data:`` events: only a parsed event restarts it,
never a byte, so comments, blank lines and half-sent lines trickled by a stuck upstream do not keep a
call alive. ``total_timeout`` bounds the whole call, from the first request to the last event, retries
and their waits included; a retry that could not start before it is spent is not attempted. All use trio
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
* ``MODEL_TIMEOUT``: connect, first-byte, idle and total timeouts, and 408;
* ``MODEL_ERROR``: 400 and other 4xx, malformed chunks, and a stream that breaks off or ends early.

Secrets. The API key is read from ``os.environ[config.api_key_env]`` at each request. If it is
missing or empty (local servers), no ``Authorization`` header is sent; every failure message passes
through ``sanitize`` first.

Cancellation. A ``trio.Cancelled`` (the client went away) unwinds through the response's ``aclose()``,
which closes the upstream connection at once.
"""

from __future__ import annotations

import json
import logging
import math
import os
import random
from datetime import UTC, datetime
from email.utils import parsedate_to_datetime
from typing import Any
from urllib.parse import urlsplit

import httpx
import trio

from awaken.core.errors import ModelFailure
from awaken.core.messages import Usage
from awaken.models import ModelOutput, ModelRequest
from awaken.models.openai.chunks import ChunkReader, parse_json
from awaken.models.openai.config import OpenAIConfig
from awaken.models.openai.failure import Failed
from awaken.models.openai.mapping import to_openai_messages, tool_json
from awaken.models.openai.sanitize import error_detail, safe_url, sanitize
from awaken.models.openai.sse import SSEParser
from awaken.telemetry import tracing

log = logging.getLogger(__name__)

#: how long a finished stream (after ``data: [DONE]``) may take to end its body before it is dropped
_DRAIN_SECONDS = 0.25
#: how long reading a non-2xx error body may take
_ERROR_BODY_SECONDS = 5.0
#: how long closing the upstream response may take (it is shielded from cancellation)
_CLOSE_SECONDS = 2.0


class OpenAIModel:
    """``model = "openai:<model name>"``: one instance (and one HTTP client) per agent."""

    #: backoff before retry n (0-based) is ``min(backoff_max, backoff_base * 2**n)`` times a jitter in [0.5, 1]
    backoff_base: float = 0.5
    backoff_max: float = 8.0
    #: the longest ``Retry-After`` honoured; longer requests are shortened to this
    retry_after_max: float = 20.0

    def __init__(self, model: str, config: OpenAIConfig) -> None:
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
            # with tracing on, each request carries the ``chat`` span it is made in (``traceparent``)
            self._client = httpx.AsyncClient(
                timeout=httpx.Timeout(connect=t, read=None, write=t, pool=t), follow_redirects=False,
                event_hooks=tracing.request_hooks(),
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
            body["tools"] = [tool_json(t) for t in request.tools]
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
        total = self.config.total_timeout
        end = trio.current_time() + _limit(total)
        last = ""
        with trio.move_on_at(end):
            while True:
                try:
                    await self._attempt(payload, headers, relay, api_key)
                    return
                except Failed as failed:
                    message = sanitize(failed.message, api_key)
                    if relay.started or not failed.retryable or attempt >= retries:
                        raise ModelFailure(message, code=failed.code) from None
                    delay = self._delay(attempt, failed.retry_after)
                    if trio.current_time() + delay >= end:
                        raise ModelFailure(f"the model call would pass total_timeout ({total:g} s) before its "
                                           f"next retry; the last attempt: {message}", code="MODEL_TIMEOUT") from None
                    attempt += 1
                    last = f"; before it, {message}"
                    log.warning("model %s: %s; retry %d of %d in %.1f s", self.model, message, attempt, retries,
                                delay)
                    await trio.sleep(delay)
        raise ModelFailure(f"the model call took longer than total_timeout ({total:g} s){last}", code="MODEL_TIMEOUT")

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
                raise Failed("MODEL_UNAVAILABLE", f"the model endpoint URL {self._where!r} is not a valid "
                              "http(s) URL; check base_url") from None
            except httpx.TimeoutException:
                raise Failed("MODEL_TIMEOUT", f"could not connect to the model endpoint {self._where} "
                              f"within {cfg.connect_timeout:g} s", retryable=True) from None
            except httpx.HTTPError as exc:
                raise Failed("MODEL_UNAVAILABLE", f"could not reach the model endpoint {self._where}: "
                              f"{_exc_text(exc)}", retryable=True) from None
        if response is None:
            raise Failed("MODEL_TIMEOUT", f"the model endpoint sent nothing within first_byte_timeout "
                          f"({cfg.first_byte_timeout:g} s)")
        try:
            if not 200 <= response.status_code < 300:
                raise await self._status_failure(response, api_key)
            ctype = response.headers.get("content-type", "").lower()
            if "text/html" in ctype:
                raise Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} answered with an HTML "
                              "page, not an event stream; check base_url")
            if "json" in ctype:
                await self._read_json(response, relay, deadline)
            else:
                await self._read_events(response, relay, deadline)
        finally:
            # Runs on Cancelled too: closing the response closes the upstream connection at once.
            with trio.CancelScope(shield=True, deadline=trio.current_time() + _CLOSE_SECONDS):
                await response.aclose()

    async def _status_failure(self, response: httpx.Response, api_key: str) -> Failed:
        status = response.status_code
        body = b""
        with trio.move_on_after(_ERROR_BODY_SECONDS):
            try:
                body = await response.aread()
            except httpx.HTTPError:
                pass
        detail = sanitize(error_detail(body), api_key)
        said = f": {detail}" if detail else ""
        if status in (401, 403):
            env = self.config.api_key_env
            hint = f"check the API key in ${env}" if api_key else f"${env} is not set"
            return Failed("MODEL_UNAVAILABLE", f"the endpoint refused the credentials (HTTP {status}); {hint}{said}")
        if status == 404:
            return Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} has no such route or model "
                           f"{self.model!r} (HTTP 404){said}")
        if status == 429:
            return Failed("MODEL_RATE_LIMITED", f"the model endpoint rate-limited the request (HTTP 429){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if status == 408:
            return Failed("MODEL_TIMEOUT", f"the model endpoint timed out the request (HTTP 408){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if status >= 500:
            return Failed("MODEL_UNAVAILABLE", f"the model endpoint failed (HTTP {status}){said}",
                           retryable=True, retry_after=retry_after(response.headers))
        if 300 <= status < 400:
            return Failed("MODEL_UNAVAILABLE", f"the model endpoint {self._where} redirected the request "
                           f"(HTTP {status}); check base_url")
        return Failed("MODEL_ERROR", f"the model endpoint rejected the request (HTTP {status}){said}")

    async def _read_events(self, response: httpx.Response, relay: _Relay, deadline: float) -> None:
        parser = SSEParser()
        chunks = ChunkReader(relay)
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
                    raise Failed("MODEL_ERROR", f"the model stream broke off: {_exc_text(exc)}",
                                  retryable=True) from None
            if scope.cancelled_caught:
                if done:
                    break
                if not chunks.seen_data:
                    raise Failed("MODEL_TIMEOUT", "the model endpoint sent no data within first_byte_timeout "
                                  f"({self.config.first_byte_timeout:g} s)")
                raise Failed("MODEL_TIMEOUT", "the model stream sent no complete event for longer than "
                              f"idle_timeout ({self.config.idle_timeout:g} s)")
            assert data is not None
            events = parser.feed(data)
            for event in events:
                if done:
                    continue
                done = chunks.event(event)
            if done:
                deadline = trio.current_time() + _DRAIN_SECONDS
            elif events:
                # Only a complete event restarts the idle clock: bytes that complete none (comments,
                # blank lines, a line sent a byte at a time) do not.
                deadline = trio.current_time() + _limit(self.config.idle_timeout)
        if not done:
            for event in parser.close():
                if not done:
                    done = chunks.event(event)
        if not done and not chunks.finished:
            raise Failed("MODEL_ERROR", "the model stream ended before the answer was complete", retryable=True)
        chunks.end()

    async def _read_json(self, response: httpx.Response, relay: _Relay, deadline: float) -> None:
        body: bytes | None = None
        with trio.move_on_at(deadline):
            try:
                body = await response.aread()
            except httpx.HTTPError as exc:
                raise Failed("MODEL_ERROR", f"the model response broke off: {_exc_text(exc)}",
                              retryable=True) from None
        if body is None:
            raise Failed("MODEL_TIMEOUT", "the model endpoint did not answer within first_byte_timeout "
                          f"({self.config.first_byte_timeout:g} s)")
        chunks = ChunkReader(relay)
        if body.lstrip().startswith(b"data:"):  # an event stream mislabelled as JSON
            parser, done = SSEParser(), False
            for event in parser.feed(body) + parser.close():
                done = done or chunks.event(event)
        else:
            chunks.chunk(parse_json(body), key="message")
        chunks.end()


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

    def usage(self, usage: Usage) -> None:
        self.out.usage(usage)


def _limit(seconds: float) -> float:
    """A configured timeout; zero or less means none."""
    return seconds if seconds > 0 else math.inf


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
