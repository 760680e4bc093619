"""The Managed Agents wire's live side and its shapes, pure: the encoder a run's broadcast feeds for
this wire's streams, the ``Protocol`` that names it, the session object, the SSE frame, the error
envelope.

A session stream writes committed events (``events.project``) and, between them, the previews a client
asked for with ``event_deltas``. The encoder here turns a run's live ``AgentEvent``s into what the
stream needs of them: ``preview`` frames (an ``event_start`` or ``event_delta`` in the SDK's shapes,
for ``agent.message`` text and the start of ``agent.thinking``) and ``commit`` marks (something was
committed: read the ledger). Previews never enter history.
"""

from __future__ import annotations

from typing import Any

import orjson

from awaken.core import events as ev
from awaken.core.errors import CODES, InputRejected
from awaken.ledger.interface import ThreadView
from awaken.wires.encoding import EncoderBase, WireEvent
from awaken.wires.managed import events as mev
from awaken.wires.managed.request import parse_events, run_request
from awaken.wires.protocol import Protocol, RunRequest

#: the beta the SDKs send (``anthropic-beta``); accepted, never required
BETA = "managed-agents-2026-04-01"
PREVIEWABLE = ("agent.message", "agent.thinking")
COMMIT: WireEvent = {"t": "commit"}


class LiveEncoder(EncoderBase):
    """A run's live events as previews and commit marks (``{"t": "preview", "event": …}``, ``COMMIT``)."""

    def __init__(self) -> None:
        super().__init__()
        self._message: str | None = None
        self._index = -1

    @staticmethod
    def _preview(event: dict[str, Any]) -> list[WireEvent]:
        return [{"t": "preview", "event": event}]

    def on_run_started(self, e: ev.RunStarted) -> list[WireEvent]:
        return [COMMIT]

    def on_text_start(self, e: ev.TextStart) -> list[WireEvent]:
        self._message, self._index = mev.message_event_id(e.message_id), 0
        return self._preview({"type": "event_start", "event": {"type": "agent.message", "id": self._message}})

    def on_text_delta(self, e: ev.TextDelta) -> list[WireEvent]:
        if self._message is None or not e.delta:
            return []
        return self._preview({"type": "event_delta", "event_id": self._message, "delta": {
            "type": "content_delta", "index": self._index, "content": {"type": "text", "text": e.delta}}})

    def on_reasoning_start(self, e: ev.ReasoningStart) -> list[WireEvent]:
        return self._preview({"type": "event_start", "event": {"type": "agent.thinking",
                                                               "id": mev.thinking_event_id(e.message_id)}})

    def _commit(self, e: Any) -> list[WireEvent]:
        return [COMMIT]

    on_step_finished = on_tool_result = on_tool_approval_requested = on_state_changed = _commit
    on_run_finished = on_run_stopped = on_run_failed = _commit


class ManagedProtocol(Protocol):
    """The wire's protocol: what a run's broadcast encodes for it (``LiveEncoder``), and the parse of
    a send (its routes do their own I/O: ``awaken.http.managed``)."""

    def parse(self, body: bytes, content_type: str | None) -> Any:
        return parse_events(body)

    def target(self, parsed: Any, route_agent: str | None) -> tuple[str | None, str | None]:
        return None, route_agent

    def to_run_request(self, parsed: Any, thread_id: str, agent_id: str | None, view: ThreadView) -> RunRequest:
        return run_request(parsed, thread_id, agent_id, {p.tool_call_id: p.tool_call_id for p in view.pending})

    def encoder(self, parsed: Any | None) -> EncoderBase:
        return LiveEncoder()

    def refusal(self, code: str, message: str, encoder: EncoderBase | None = None) -> list[WireEvent]:
        return [error_envelope(code, message)]


PROTOCOL = ManagedProtocol()


def frame(event: dict[str, Any], position_id: str | None) -> bytes:
    """One SSE frame: ``event: <type>``, ``id: <position>`` (what ``Last-Event-ID`` resumes after), data."""
    head = b"event: " + event["type"].encode() + b"\n"
    if position_id is not None:
        head += b"id: " + position_id.encode() + b"\n"
    return head + b"data: " + orjson.dumps(event) + b"\n\n"


#: the API's error types by HTTP status
ERROR_TYPES = {400: "invalid_request_error", 401: "authentication_error", 403: "permission_error",
               404: "not_found_error", 405: "invalid_request_error", 409: "invalid_request_error",
               413: "request_too_large", 415: "invalid_request_error", 429: "rate_limit_error",
               503: "overloaded_error"}


def error_envelope(code: str, message: str) -> dict[str, Any]:
    """``{"type": "error", "error": {"type", "message"}}``: the type from the code's status, the
    catalogue's code at the head of the message."""
    status = CODES[code].status if code in CODES else 500
    return {"type": "error", "error": {"type": ERROR_TYPES.get(status, "api_error"), "message": f"{code}: {message}"}}


def error_status(code: str) -> int:
    return CODES[code].status if code in CODES else 500


def agent_object(agent: Any) -> dict[str, Any]:
    """The session's ``agent``: an Awaken agent in the shape of the API's resolved agent (version 1)."""
    return {
        "type": "agent", "id": agent.id, "version": 1, "name": agent.id,
        "description": agent.config.description or None, "system": agent.config.system_prompt,
        "model": {"id": agent.config.model}, "execution_identity": {"type": "service_account"},
        "mcp_servers": [], "skills": [], "multiagent": None,
        "tools": [{"type": "custom", "name": t.name, "description": t.description, "input_schema": t.parameters}
                  for t in agent.client_tools],
    }


def session_object(*, session_id: str, agent: Any, status: str, created_at: int, updated_at: int,
                   title: str | None, metadata: dict[str, str], environment_id: str | None,
                   input_tokens: int = 0, output_tokens: int = 0) -> dict[str, Any]:
    return {
        "type": "session", "id": session_id, "agent": agent_object(agent), "status": status,
        "created_at": mev.timestamp(created_at), "updated_at": mev.timestamp(updated_at),
        "title": title, "metadata": metadata, "environment_id": environment_id or "",
        "archived_at": None, "budget": None, "deployment_id": None, "outcome_evaluations": [], "resources": [],
        "vault_ids": [], "stats": {"duration_seconds": max(0.0, (updated_at - created_at) / 1000)},
        "usage": {"input_tokens": input_tokens, "output_tokens": output_tokens},
    }


def require(condition: bool, message: str, code: str = "INVALID_REQUEST") -> None:
    if not condition:
        raise InputRejected(message, code=code)
