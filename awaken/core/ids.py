"""The one rule for client-chosen ids (thread, run, message and tool call ids), checked at the door.

An id is 1 to ``MAX_ID_LENGTH`` characters, all printable (no control characters or line breaks),
without leading or trailing whitespace, not starting with ``/``, and not ``.`` or ``..`` (``/``
inside an id is allowed: the history routes take the rest of the path and never merge slashes). Every id that passes can be put in a
URL path segment (percent-encoded) and read back on every route; a
request carrying one that does not is refused ``INVALID_ID`` before anything is written.
"""

from __future__ import annotations

from awaken.core.errors import InputRejected

MAX_ID_LENGTH = 256


def id_problem(value: str) -> str | None:
    """Why ``value`` is not an acceptable id, or None."""
    if not 1 <= len(value) <= MAX_ID_LENGTH:
        return f"must be 1 to {MAX_ID_LENGTH} characters long"
    if not value.isprintable():
        return "must be printable (no control characters or line breaks)"
    if value != value.strip():
        return "must not start or end with whitespace"
    if value.startswith("/"):
        return "must not start with /"
    if value in (".", ".."):
        return "must not be . or .."
    return None


def check_id(field: str, value: str | None) -> None:
    """Raise ``InputRejected`` (``INVALID_ID``) naming ``field`` when ``value`` breaks the rule."""
    if value is not None and (problem := id_problem(value)):
        raise InputRejected(f"{field} {value[:64]!r} is not an acceptable id: it {problem}", code="INVALID_ID")


def check_request_ids(thread_id: str, run_id: str | None, message_ids: list[str | None]) -> None:
    """The ids a run request would commit: its thread, its proposed run and its new messages."""
    check_id("threadId", thread_id)
    check_id("runId", run_id)
    for message_id in message_ids:
        check_id("message id", message_id)
