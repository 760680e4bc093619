"""The error hierarchy and the code catalogue, each code with its HTTP status.

Every failure a client can see carries one code from ``CODES``, and every code carries the HTTP status
it is answered with on a JSON route (in the manner of h11's ``error_status_hint``): the same refusal
gets the same status on every route. Errors are raised deep inside and answered once, at the edge, by
``error_response`` (the one writer of the JSON error ``{"error": {"code", "message"}}``). The run routes
keep refusing inside their stream, as the contract says (AG-UI ``RUN_ERROR``, AI SDK ``error`` parts,
HTTP 200); a run code is committed on the run that failed.

* ``InputRejected`` — the client sent something we will not run. Nothing was started or committed.
  ``RateLimited`` is one: the caller is over a ``[limits]`` cap (429, ``Retry-After``); ``ServerDraining``
  another: the server is shutting down (503, ``Retry-After``).
* ``RunFailure`` — a run was admitted and then failed; the failure is committed on the run.
* ``StoreUnavailable`` — the ledger cannot be read or written (503).
* ``BadCursor`` — a history cursor that is not in the thread's committed page sequence (400).
* ``BadLimit`` — a history or listing ``limit`` that is not an integer in range (400).
* ``UnknownBranch`` / ``UnknownMessage`` — a history read or a fork naming a branch the thread does not
  have, or a message not on the chosen path (400).
* ``UnknownThread`` — a thread the ledger has never seen, or one the caller may not see (404).
* ``Unauthenticated`` — no credentials, or bad ones, on a ``/v1/`` route (401).

``docs/errors.md`` is generated from ``CODES``: ``python -m awaken.core.errors > docs/errors.md``.
"""

from __future__ import annotations

import sys
from collections.abc import Callable, Iterable
from contextvars import ContextVar
from typing import Literal, NamedTuple

import orjson


class Code(NamedTuple):
    """One catalogue entry: its kind, the HTTP status a JSON route answers it with, what it means."""

    kind: Literal["input", "run"]
    status: int
    description: str


#: code -> (kind, HTTP status, what it means). ``input`` codes start no run; ``run`` codes end an
#: admitted run (committed on it; a JSON route answers one with its status, e.g. 503 ``STORE_UNAVAILABLE``).
CODES: dict[str, Code] = {
    "INVALID_JSON": Code("input", 400, "The request body is not valid JSON."),
    "UNSUPPORTED_MEDIA_TYPE": Code("input", 415, "The request Content-Type is not application/json."),
    "INVALID_REQUEST": Code("input", 400, "A field has the wrong type or a required field is missing."),
    "UNSUPPORTED_FIELD": Code("input", 400, "The request uses a field this server does not implement (non-empty "
                              "forwardedProps beyond the documented keys, a state that is not an object, or any "
                              "parentRunId)."),
    "UNSUPPORTED_CONTENT": Code("input", 415, "A message carries audio, video, document or binary content, or an "
                                "image that is not image/* or not an http(s) or data:image/* URL (the message names "
                                "the part)."),
    "CONTENT_TOO_LARGE": Code("input", 413, "An image is over a bound: inline size, URL length or images per message."),
    "NO_NEW_INPUT": Code("input", 409, "Every message in the request is already committed: nothing to run."),
    "UNKNOWN_AGENT": Code("input", 404, "The request names an agent that is not published."),
    "THREAD_BUSY": Code("input", 409, "Another run is active on this thread, or its outcome is still being "
                        "committed; retry when it ends."),
    "RATE_LIMITED": Code("input", 429, "The caller is over a [limits] cap (runs at once, or new runs per minute); "
                         "Retry-After and the message say how many seconds to wait (on a run route: its refusal "
                         "stream, with Retry-After on an SSE response)."),
    "NO_PENDING_RUN": Code("input", 409, "A tool result or decision arrived but nothing on the thread is waiting."),
    "TOOL_CALL_NOT_PENDING": Code("input", 409, "A tool result or decision names a call that is not pending."),
    "INTERRUPT_UNKNOWN": Code("input", 409, "AG-UI resume: an interruptId names no interrupt of this thread."),
    "INTERRUPT_MISSING": Code("input", 409, "AG-UI resume: the resume does not answer every open interrupt."),
    "INTERRUPT_ANSWERED": Code("input", 409, "AG-UI resume: an interrupt was already answered, with another answer."),
    "INTERRUPTS_OPEN": Code("input", 409, "AG-UI 1.0: new input arrived while interrupts are open; resume them first."),
    "INVALID_RESUME": Code("input", 400, "AG-UI resume: a payload does not match the interrupt's responseSchema, "
                           "or editedArgs do not match the tool's parameters."),
    "INVALID_CURSOR": Code("input", 400, "History or the thread listing: the cursor is not in the committed page "
                           "sequence (fabricated, from another thread, malformed)."),
    "UNKNOWN_THREAD": Code("input", 404, "No such thread for this caller: nothing was committed to it, or it belongs "
                           "to another user (every route on a thread, runs included)."),
    "BODY_TOO_LARGE": Code("input", 413, "The request body exceeds 32 MiB (refused as soon as it passes the limit, "
                           "declared or not; the connection is closed), or holds more than 100,000 arrays and "
                           "objects."),
    "BODY_TIMEOUT": Code("input", 408, "The request body did not arrive within server.body_timeout_seconds; the "
                         "connection is closed."),
    "SERVER_DRAINING": Code("input", 503, "The server is shutting down (SIGTERM or SIGINT): it starts no new run while "
                            "the runs it has reach their end (with Retry-After; send it again, to this server once it "
                            "is back or to another process; /readyz answers the same meanwhile)."),
    "TOO_MANY_LARGE_BODIES": Code("input", 503, "server.max_large_bodies request bodies over 256 KiB are being read "
                                  "or parsed already (with Retry-After: 1; nothing was started, send it again)."),
    "INVALID_ID": Code("input", 400, "A thread, run or message id breaks the id rule (1-256 printable characters, "
                       "no surrounding whitespace, no leading /, not . or ..)."),
    "INVALID_LIMIT": Code("input", 400, "History or the thread listing: limit is not an integer from 1 to 500."),
    "UNKNOWN_BRANCH": Code("input", 400, "History or a fork: branch is not one of the thread's branches (an integer "
                           "GET /v1/threads/{id}/branches lists)."),
    "UNKNOWN_MESSAGE": Code("input", 400, "Fork: messageId names no message on the chosen path of the thread (its "
                            "active branch's, or the branch the body names)."),
    "BRANCHES_UNSUPPORTED": Code("input", 501, "A regenerate or an edit (a run on a new branch) on a ledger backend "
                                 "that does not keep branches (a third-party backend not updated yet); nothing was "
                                 "started."),
    "NOT_FOUND": Code("input", 404, "No route has this path (always answered as JSON)."),
    "METHOD_NOT_ALLOWED": Code("input", 405, "The route exists but not for this method (with Allow)."),
    "NESTING_TOO_DEEP": Code("input", 400, "The request body nests arrays and objects deeper than 64 levels."),
    "TOO_MANY_MESSAGES": Code("input", 413, "The request carries more than 10,000 messages."),
    "REQUEST_BUSY": Code("input", 409, "WebSocket: a request arrived while a run was streaming on this socket; send "
                         "the next request after it ends."),
    "ORIGIN_NOT_ALLOWED": Code("input", 403, "A browser preflight came from an origin not in server.cors_origins, or "
                               "a state change (POST, DELETE) or WebSocket upgrade from an origin that is neither "
                               "listed nor the server's own."),
    "HOST_NOT_ALLOWED": Code("input", 403, "The request's Host names neither a loopback name, nor the bind address, "
                             "nor a server.allowed_hosts entry (/healthz and /readyz stay open)."),
    "UNAUTHENTICATED": Code("input", 401, "A /v1/ route was called without valid credentials (with WWW-Authenticate: "
                            "Bearer; a WebSocket upgrade is refused the same way)."),
    "FORBIDDEN": Code("input", 403, "The credentials are valid but their role may not use the route (GET /metrics: "
                      "the roles [auth] metrics_roles lists, admin by default)."),
    "INVALID_POSITION": Code("input", 400, "Rejoin: Last-Event-ID is not a stream position this server writes."),
    "RUN_ON_OTHER_PROCESS": Code("input", 409, "Rejoin: the thread's run streams on another server process of a "
                                 "shared ledger that relays no runs (the message names it); rejoin there. "
                                 "Ledgers with a run relay (Postgres) serve the rejoin on any process."),
    "OWNER_DIED": Code("run", 503, "Rejoin on another process: the server process running the run died (its lease "
                       "lapsed); the run is committed interrupted, cause owner_died, and its history holds what "
                       "was committed."),
    "REPLAY_GONE": Code("run", 410, "Rejoin (AI SDK): the start of the run's stream is no longer held; read the "
                        "history instead."),
    "MODEL_ERROR": Code("run", 502, "The model failed or answered with something unusable."),
    "MODEL_UNAVAILABLE": Code("run", 502, "The model endpoint could not be reached or refused the credentials."),
    "MODEL_RATE_LIMITED": Code("run", 503, "The model endpoint rate-limited the request."),
    "MODEL_TIMEOUT": Code("run", 504, "The model endpoint did not answer in time."),
    "STEP_LIMIT": Code("run", 500, "The agent reached its step limit (max_steps) without finishing."),
    "STORE_UNAVAILABLE": Code("run", 503, "The ledger could not be read or written; nothing partial was committed. "
                              "Also the answer for a thread whose last run's outcome could not be committed yet, "
                              "until the server has committed it, and /readyz's while a write probe fails."),
    "INTERNAL_ERROR": Code("run", 500, "An unexpected server error; the run was stopped."),
    "STOPPED": Code("run", 409, "The run was stopped by POST /v1/threads/{id}/stop and committed interrupted with "
                    "cause stopped (AG-UI ends the stream with RUN_ERROR carrying this code; the AI SDK stream "
                    "ends with abort)."),
}


class AwakenError(Exception):
    """Base of every classified error. ``code`` is a key of ``CODES``."""

    code = "INTERNAL_ERROR"

    def __init__(self, message: str, *, code: str | None = None) -> None:
        super().__init__(message)
        if code is not None:
            self.code = code
        assert self.code in CODES, self.code

    @property
    def message(self) -> str:
        return str(self.args[0])

    @property
    def status(self) -> int:
        """The HTTP status of this error on a JSON route: its code's, from ``CODES``."""
        return CODES[self.code].status

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The response headers that go with this error (none but a subclass's own)."""
        return []


class InputRejected(AwakenError):
    """The client broke the input contract; no run was started and nothing was committed."""

    code = "INVALID_REQUEST"


class RateLimited(InputRejected):
    """The caller is over one of its ``[limits]`` caps; ``retry_after`` is the seconds to wait
    (HTTP 429 with ``Retry-After`` where a status can be sent)."""

    code = "RATE_LIMITED"

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The response headers that go with this refusal."""
        return [(b"retry-after", str(self.retry_after).encode())]


class ServerDraining(InputRejected):
    """The server is draining (a shutdown began): no new run starts (HTTP 503 with ``Retry-After``
    where a status can be sent)."""

    code = "SERVER_DRAINING"
    #: seconds a client waits before it sends the refused request again
    retry_after = 5

    @property
    def headers(self) -> list[tuple[bytes, bytes]]:
        """The response headers that go with this refusal."""
        return [(b"retry-after", str(self.retry_after).encode())]


class RunFailure(AwakenError):
    """An admitted run failed; the code is committed on the run as its error."""

    code = "INTERNAL_ERROR"


class ModelFailure(RunFailure):
    """The model provider failed. ``before_output`` tells whether any delta had been produced."""

    code = "MODEL_ERROR"


class StoreUnavailable(RunFailure):
    """The ledger cannot be reached: history answers 503, runs end with ``STORE_UNAVAILABLE``."""

    code = "STORE_UNAVAILABLE"


class BadCursor(AwakenError):
    """A history cursor that is not in the thread's committed page sequence (HTTP 400)."""

    code = "INVALID_CURSOR"


class BadLimit(AwakenError):
    """A history or listing ``limit`` that is not an integer in range (HTTP 400)."""

    code = "INVALID_LIMIT"


class UnknownBranch(AwakenError):
    """A history read or a fork named a branch the thread does not have (HTTP 400)."""

    code = "UNKNOWN_BRANCH"


class UnknownMessage(AwakenError):
    """A fork named a message that is not on the chosen path of the thread (HTTP 400)."""

    code = "UNKNOWN_MESSAGE"


class UnknownThread(AwakenError):
    """History was asked for a thread the ledger has never committed anything to (HTTP 404)."""

    code = "UNKNOWN_THREAD"


class Unauthenticated(AwakenError):
    """Missing or bad credentials (HTTP 401). ``token_given`` tells whether a bearer token was sent.
    The message says what was wrong and never quotes the token."""

    code = "UNAUTHENTICATED"

    def __init__(self, message: str, *, token_given: bool) -> None:
        super().__init__(message)
        self.token_given = token_given


#: the headers of every JSON error answer (beside its length and the error's own)
JSON_ERROR_HEADERS: tuple[tuple[bytes, bytes], ...] = ((b"content-type", b"application/json"),
                                                       (b"cache-control", b"no-store"))


#: who counts the errors answered while serving the current request: the server's metrics, set per
#: request by the HTTP edge (awaken/http/metrics.py); None (the default) counts nothing
REFUSAL_COUNTER: ContextVar[Callable[[str], None] | None] = ContextVar("awaken.refusal_counter", default=None)


def count_refusal(code: str) -> None:
    """An error with ``code`` is being answered: the one call of each writer of an error (``error_body``,
    and ``Protocol.refusal`` for a run route's refusal stream)."""
    counter = REFUSAL_COUNTER.get()
    if counter is not None:
        counter(code)


def error_body(code: str, message: str) -> bytes:
    """The JSON error body every route answers with: ``{"error": {"code", "message"}}``."""
    assert code in CODES, code
    count_refusal(code)
    return orjson.dumps({"error": {"code": code, "message": message}})


def error_response(error: AwakenError | str, message: str | None = None, *,
                   headers: Iterable[tuple[bytes, bytes]] = ()) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """The whole JSON answer to ``error`` as ``(status, headers, body)``: the one writer of every JSON
    error, for raw ASGI (``send`` the three) and quart alike (``quart.Response(body, status, headers)``).

    ``error`` is an ``AwakenError`` (its code, message, status and own headers, e.g. ``Retry-After``),
    or a code of ``CODES`` with ``message``. The status is always the code's: the same refusal gets
    the same status on every route. ``headers`` are added after the JSON ones.
    """
    if isinstance(error, AwakenError):
        code, text, extra = error.code, error.message, error.headers
    else:
        assert message is not None, "a code needs its message"
        code, text, extra = error, message, []
    body = error_body(code, text)
    return CODES[code].status, [*JSON_ERROR_HEADERS, (b"content-length", str(len(body)).encode()),
                                *extra, *headers], body


def _cell(text: str) -> str:
    return text.replace("|", "\\|")


def catalogue_markdown() -> str:
    """``docs/errors.md``: the catalogue as a page (``python -m awaken.core.errors > docs/errors.md``)."""
    lines = [
        "# Errors",
        "",
        "<!-- Generated from awaken/core/errors.py (CODES): do not edit by hand.",
        "     Regenerate with: python -m awaken.core.errors > docs/errors.md -->",
        "",
        "Every failure a client can see carries one code, and every code its HTTP status. A JSON route",
        "(history, the threads API, agents, capabilities, rejoin, `/readyz`, and the checks in front of every",
        "route: Host, origin, CORS, credentials, method, body) answers an error with the code's status and",
        "the body `{\"error\": {\"code\": \"…\", \"message\": \"…\"}}`: the same refusal gets the same status",
        "on every route.",
        "",
        "The run routes (`POST /v1/ag-ui…`, `POST /v1/ai-sdk/…chat`, their WebSockets, a CopilotKit `run`)",
        "refuse what a request says inside their stream instead, as the protocols expect: HTTP 200 with an",
        "AG-UI `RUN_ERROR` carrying the code, or an AI SDK `error` part. What is refused before a stream",
        "starts (credentials, Host and origin, the method, a body that does not arrive in time, and over SSE",
        "a thread the caller may not see) is answered as on every JSON route. The CopilotKit runtime",
        "(`/v1/copilotkit`) answers its own calls with the same statuses in the runtime's error shape",
        "`{\"error\", \"message\"}`.",
        "",
        "*Input* codes start no run and commit nothing. *Run* codes end a run that was admitted and are",
        "committed on it (the threads API shows them as `errorCode`); a route that answers one with a status",
        "uses the one listed (`STORE_UNAVAILABLE`: 503).",
        "",
    ]
    for kind, title in (("input", "Input codes: nothing was started or committed"),
                        ("run", "Run codes: an admitted run ended with them")):
        lines += [f"## {title}", "", "| Code | HTTP status | Meaning |", "| --- | --- | --- |"]
        lines += [f"| `{code}` | {entry.status} | {_cell(entry.description)} |"
                  for code, entry in CODES.items() if entry.kind == kind]
        lines.append("")
    return "\n".join(lines)


class ConfigError(Exception):
    """A bad config file. ``str()`` is one line naming the offending key."""


if __name__ == "__main__":
    sys.stdout.write(catalogue_markdown())
