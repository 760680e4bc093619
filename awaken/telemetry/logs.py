"""Structured logs: ``[server] log_format = "json"`` writes every log line as one JSON object.

``configure(log_format)`` sets the process's log lines up once, at start: ``plain`` (the default) keeps
the readable ``time level logger: message`` lines; ``json`` gives the root handler ``JsonFormatter``, so
everything the server logs (its own lines, hypercorn's errors) is one JSON object per line with
``time``, ``level``, ``logger`` and ``message``, and the fields a line was given (``extra``).

Two kinds of line are written only in the JSON format, for machines to count and join:

* ``request`` — one per HTTP request or WebSocket, when it ends (``request_line``): the method, the
  route template, the status, the duration, the principal's subject and the trace id;
* ``run`` — one per run outcome (``run_line``): the thread, run (``thread_id``, ``run_id``), agent,
  outcome (``completed``, ``waiting``, ``failed``, ``interrupted``), cause or error code, duration, the
  tokens of its model calls, the principal's subject and the trace id.

What a line never holds: a token, a password, a header's value, a request body, a query string, or
message content (text, tool arguments or results, error messages a model or tool wrote). The trace id
is the current OpenTelemetry span's when a tracer is active (``trace_id``); without OpenTelemetry it is
absent.
"""

from __future__ import annotations

import logging
import sys
import time
from typing import Any

import orjson

try:  # the trace id of a line: the current span's, when OpenTelemetry is there
    from opentelemetry import trace as _otel_trace
except ImportError:  # pragma: no cover - a dependency, but the logs do not need it
    _otel_trace = None

#: the logger of the ``request`` and ``run`` lines
log = logging.getLogger("awaken.events")

FORMATS = ("plain", "json")
PLAIN = "%(asctime)s %(levelname)s %(name)s: %(message)s"

#: ``LogRecord`` attributes that are the record's own, not fields a caller added with ``extra``
_RECORD_KEYS = frozenset(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}

_json = False


def json_enabled() -> bool:
    """Whether the process writes JSON lines (the ``request`` and ``run`` lines are written only then)."""
    return _json


def configure(log_format: str) -> None:
    """Set the root handler's format: ``plain`` or ``json`` (one JSON object per line, on stderr)."""
    global _json
    if log_format not in FORMATS:
        raise ValueError(f"log_format must be one of {', '.join(FORMATS)}, not {log_format!r}")
    _json = log_format == "json"
    root = logging.getLogger()
    if not root.handlers:
        root.addHandler(logging.StreamHandler(sys.stderr))
    if root.level == logging.NOTSET or root.level > logging.INFO:
        root.setLevel(logging.INFO)
    for handler in root.handlers:
        handler.setFormatter(JsonFormatter() if _json else logging.Formatter(PLAIN))


class JsonFormatter(logging.Formatter):
    """A log record as one JSON object: ``time`` (ISO 8601, UTC), ``level``, ``logger``, ``message``,
    the fields given with ``extra``, and ``error`` (the exception's traceback) when there is one."""

    def format(self, record: logging.LogRecord) -> str:
        line: dict[str, Any] = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(record.created))
            + f".{int(record.msecs):03d}Z",
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        for key, value in vars(record).items():
            if key not in _RECORD_KEYS and not key.startswith("_"):
                line[key] = value
        if record.exc_info:
            line["error"] = self.formatException(record.exc_info)
        return orjson.dumps(line, default=str).decode()


def trace_id() -> str | None:
    """The current OpenTelemetry span's trace id (32 hex digits), or None: no span, or no OpenTelemetry."""
    if _otel_trace is None:  # pragma: no cover - OpenTelemetry is optional here
        return None
    context = _otel_trace.get_current_span().get_span_context()
    return format(context.trace_id, "032x") if context.is_valid else None


def _fields(**fields: Any) -> dict[str, Any]:
    return {k: v for k, v in fields.items() if v is not None}


def request_line(method: str, route: str, status: int, seconds: float, subject: str | None) -> None:
    """The ``request`` line of one finished HTTP request or WebSocket (JSON format only); the trace id is
    the current span's."""
    if not _json:
        return
    log.info("%s %s %d", method, route, status, extra=_fields(
        event="request", method=method, route=route, status=status, duration_ms=round(seconds * 1000, 3),
        subject=subject, trace_id=trace_id()))


def run_line(*, thread: str, run: str, agent: str, outcome: str, cause: str | None, error_code: str | None,
             seconds: float, input_tokens: int, output_tokens: int, subject: str | None) -> None:
    """The ``run`` line of one run outcome (JSON format only); the trace id is the current span's."""
    if not _json:
        return
    log.info("run %s %s", run, outcome, extra=_fields(
        event="run", thread_id=thread, run_id=run, agent=agent, outcome=outcome, cause=cause, error_code=error_code,
        duration_ms=round(seconds * 1000, 3), input_tokens=input_tokens, output_tokens=output_tokens,
        subject=subject, trace_id=trace_id()))
