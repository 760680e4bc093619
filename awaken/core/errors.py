"""The error hierarchy and the code catalogue.

Every failure a client can see carries one code from ``CODES``. Errors are raised deep inside and
classified once, at the adapter edge (the way h11's ``error_status_hint`` works):

* ``InputRejected`` — the client sent something we will not run. Nothing was started or committed.
  ``RateLimited`` is one: the caller is over a ``[limits]`` cap (429, ``Retry-After``).
* ``RunFailure`` — a run was admitted and then failed; the failure is committed on the run.
* ``StoreUnavailable`` — the ledger cannot be read or written; history answers 503.
* ``BadCursor`` — a history cursor that is not in the thread's committed page sequence (400).
* ``BadLimit`` — a history or listing ``limit`` that is not an integer in range (400).
* ``UnknownThread`` — history for a thread the ledger has never seen (404).
* ``Unauthenticated`` — no credentials, or bad ones, on a ``/v1/`` route (401).
"""

from __future__ import annotations

#: code -> (kind, what it means). ``input`` codes start no run; ``run`` codes end an admitted run.
CODES: dict[str, tuple[str, str]] = {
    "INVALID_JSON": ("input", "The request body is not valid JSON."),
    "UNSUPPORTED_MEDIA_TYPE": ("input", "The request Content-Type is not application/json."),
    "INVALID_REQUEST": ("input", "A field has the wrong type or a required field is missing."),
    "UNSUPPORTED_FIELD": (
        "input",
        "The request uses a field this server does not implement (non-empty forwardedProps, a state "
        "that is not an object, or any parentRunId).",
    ),
    "UNSUPPORTED_CONTENT": ("input", "A message carries audio, video, document or binary content."),
    "CONTENT_TOO_LARGE": ("input", "An image is over a bound: inline size, URL length or images per message."),
    "NO_NEW_INPUT": ("input", "Every message in the request is already committed: nothing to run."),
    "UNKNOWN_AGENT": ("input", "The request names an agent that is not published."),
    "THREAD_BUSY": ("input", "Another run is active on this thread; retry when it ends."),
    "RATE_LIMITED": (
        "input",
        "The caller is over a [limits] cap (runs at once, or new runs per minute): the run route's refusal "
        "stream (with Retry-After on an SSE response; HTTP 429 where a route answers with a status), whose "
        "message says how many seconds to wait.",
    ),
    "NO_PENDING_RUN": ("input", "A tool result or decision arrived but nothing on the thread is waiting."),
    "TOOL_CALL_NOT_PENDING": ("input", "A tool result or decision names a call that is not pending."),
    "INTERRUPT_UNKNOWN": ("input", "AG-UI resume: an interruptId names no interrupt of this thread."),
    "INTERRUPT_MISSING": ("input", "AG-UI resume: the resume does not answer every open interrupt."),
    "INTERRUPT_ANSWERED": ("input", "AG-UI resume: an interrupt was already answered, with another answer."),
    "INTERRUPTS_OPEN": ("input", "AG-UI 1.0: new input arrived while interrupts are open; resume them first."),
    "INVALID_RESUME": (
        "input",
        "AG-UI resume: a payload does not match the interrupt's responseSchema, or editedArgs do not "
        "match the tool's parameters.",
    ),
    "INVALID_CURSOR": ("input", "History: the cursor is not in this thread's committed page sequence (400)."),
    "UNKNOWN_THREAD": (
        "input",
        "No such thread for this caller: nothing was committed to it, or it belongs to another user (404).",
    ),
    "BODY_TOO_LARGE": ("input", "The request body is larger than the server accepts."),
    "BODY_TIMEOUT": ("input", "The request body did not arrive within server.body_timeout_seconds (408; the "
                     "connection is closed)."),
    "TOO_MANY_LARGE_BODIES": ("input", "server.max_large_bodies request bodies over 256 KiB are being read "
                              "already (503 with Retry-After; nothing was started, send it again)."),
    "INVALID_ID": ("input", "A thread, run or message id breaks the id rule (1-256 printable characters, no "
                   "surrounding whitespace, no leading /, not . or ..)."),
    "INVALID_LIMIT": ("input", "History: limit is not an integer from 1 to 500 (400)."),
    "NOT_FOUND": ("input", "No route has this path (404)."),
    "METHOD_NOT_ALLOWED": ("input", "The route exists but not for this method (405, with Allow)."),
    "NESTING_TOO_DEEP": ("input", "The request body nests arrays and objects deeper than 64 levels."),
    "TOO_MANY_MESSAGES": ("input", "The request carries more than 10,000 messages."),
    "REQUEST_BUSY": ("input", "A run is already streaming on this socket; send the next request after it ends."),
    "ORIGIN_NOT_ALLOWED": ("input", "A browser preflight came from an origin not in server.cors_origins, or a state "
                           "change (POST, DELETE) or WebSocket upgrade from an origin that is neither listed nor "
                           "the server's own (403)."),
    "HOST_NOT_ALLOWED": ("input", "The request's Host names neither a loopback name, nor the bind address, nor a "
                         "server.allowed_hosts entry (403; /healthz and /readyz stay open)."),
    "UNAUTHENTICATED": (
        "input",
        "A /v1/ route was called without valid credentials (HTTP 401 with WWW-Authenticate: Bearer; a "
        "WebSocket upgrade is refused the same way).",
    ),
    "INVALID_POSITION": ("input", "Rejoin: Last-Event-ID is not a stream position this server writes (400)."),
    "RUN_ON_OTHER_PROCESS": (
        "input",
        "Rejoin: the thread's run streams on another server process (the message names it); rejoin there (409).",
    ),
    "REPLAY_GONE": ("run", "Rejoin: the run's stream start is no longer held; read the history instead."),
    "MODEL_ERROR": ("run", "The model failed or answered with something unusable."),
    "MODEL_UNAVAILABLE": ("run", "The model endpoint could not be reached or refused the credentials."),
    "MODEL_RATE_LIMITED": ("run", "The model endpoint rate-limited the request."),
    "MODEL_TIMEOUT": ("run", "The model endpoint did not answer in time."),
    "STEP_LIMIT": ("run", "The agent reached its step limit without finishing."),
    "STORE_UNAVAILABLE": ("run", "The ledger could not be read or written; nothing partial was committed."),
    "INTERNAL_ERROR": ("run", "An unexpected server error; the run was stopped."),
    "STOPPED": (
        "run",
        "The run was stopped by POST /v1/threads/{id}/stop and committed interrupted with cause stopped "
        "(AG-UI ends the stream with RUN_ERROR carrying this code; the AI SDK stream ends with abort).",
    ),
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


class InputRejected(AwakenError):
    """The client broke the input contract; no run was started and nothing was committed."""

    code = "INVALID_REQUEST"


class RateLimited(InputRejected):
    """The caller is over one of its ``[limits]`` caps; ``retry_after`` is the seconds to wait
    (HTTP 429 with ``Retry-After`` where a status can be sent)."""

    code = "RATE_LIMITED"
    status = 429

    def __init__(self, message: str, *, retry_after: int) -> None:
        super().__init__(message)
        self.retry_after = retry_after

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


class ConfigError(Exception):
    """A bad config file. ``str()`` is one line naming the offending key."""
