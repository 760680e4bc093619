"""The CopilotKit runtime protocol, sans-IO: which call a request is, and what the small answers say.

Read from ``@copilotkit/core`` 1.74 (``ProxiedCopilotRuntimeAgent``) and ``@copilotkit/runtime`` 1.74
(``v2/runtime``). A client with ``runtimeUrl`` first GETs ``{runtimeUrl}/info``; a 2xx selects the
REST form, anything else makes it POST ``{"method": "info"}`` to ``runtimeUrl`` itself (the
single-endpoint form). Both forms reach the same calls:

=========================================  ====================================================
REST (relative to ``/v1/copilotkit``)      single endpoint: ``POST /v1/copilotkit`` with
=========================================  ====================================================
``GET /info``                              ``{"method": "info"}``
``POST /agent/{agentId}/run``              ``{"method": "agent/run", "params": {"agentId"}, "body": RunAgentInput}``
``POST /agent/{agentId}/connect``          ``{"method": "agent/connect", "params": {"agentId"}, "body": RunAgentInput}``
``POST /agent/{agentId}/stop/{threadId}``  ``{"method": "agent/stop", "params": {"agentId", "threadId"}, "body"?: {"runId"}}``
=========================================  ====================================================

``run`` is an AG-UI run (``RunAgentInput`` in, SSE out); ``connect`` replays the thread's committed
history (``replay.py``); ``stop`` stops the thread's active run (optionally only if it is ``runId``).
Malformed calls raise ``InputRejected`` (the catalogue's codes, each with its HTTP status);
``error_answer`` gives a refusal in the runtime's error shape (``{"error": "invalid_request", "message"}``).
The AG-UI events an answer carries (``stop``'s ``interrupt``) come from the AG-UI encoder.
"""

from __future__ import annotations

import re
from importlib.metadata import version
from typing import Any, Literal

import attrs
import orjson

from awaken.core.errors import AwakenError, InputRejected
from awaken.core.jsonbody import is_json_media_type
from awaken.wires.agui.encoder import stopped_event

#: the server's version, as the package metadata says (``/info`` reports it)
VERSION = version("awaken")

Kind = Literal["info", "run", "connect", "stop"]
ENVELOPE_METHODS: dict[str, Kind] = {"info": "info", "agent/run": "run", "agent/connect": "connect",
                                     "agent/stop": "stop"}
#: the methods the Node runtime's single endpoint knows but this server does not serve
UNSERVED_METHODS = frozenset({"agent/suggest", "inspector/metadata", "inspector/learning", "transcribe",
                              "resource/request"})

_AGENT_CALL = re.compile(r"^/agent/(?P<agent>[^/]+)/(?P<kind>run|connect)/?$")
_STOP = re.compile(r"^/agent/(?P<agent>[^/]+)/stop/(?P<thread>[^/]+)/?$")


@attrs.frozen
class RuntimeCall:
    kind: Kind
    agent_id: str | None = None
    thread_id: str | None = None
    #: the RunAgentInput of ``run``/``connect`` as JSON bytes; the optional ``{runId}`` of ``stop``
    body: bytes = b""


#: the runtime's error name for a refusal's code (``{"error": name, "message"}``, the Node runtime's shape);
#: any other input code is ``invalid_request``, and a failure on the server's side names its own code
_ERROR_NAMES = {"UNSUPPORTED_MEDIA_TYPE": "unsupported_media_type", "NOT_FOUND": "not_found",
                "UNKNOWN_AGENT": "not_found"}


def error_answer(exc: AwakenError) -> tuple[int, dict[str, str]]:
    """A refusal as this endpoint answers it: the error's HTTP status and the runtime's JSON shape."""
    name = _ERROR_NAMES.get(exc.code, "invalid_request") if isinstance(exc, InputRejected) else exc.code
    return exc.status, {"error": name, "message": exc.message}


def route(method: str, tail: str) -> RuntimeCall | Literal["envelope"] | None:
    """The call a REST request names (``tail`` is the path after ``/v1/copilotkit``, percent-decoded),
    ``"envelope"`` for a POST to the endpoint itself (its body says the call), or None (404)."""
    if tail in ("", "/"):
        return "envelope" if method == "POST" else None
    if tail.rstrip("/") == "/info":
        return RuntimeCall("info") if method == "GET" else None
    if method != "POST":
        return None
    if match := _AGENT_CALL.match(tail):
        return RuntimeCall(match["kind"], match["agent"])  # type: ignore[arg-type]
    if match := _STOP.match(tail):
        return RuntimeCall("stop", match["agent"], match["thread"])
    return None


def _param(params: Any, key: str) -> str:
    value = params.get(key) if isinstance(params, dict) else None
    if isinstance(value, str) and value.strip():
        return value
    raise InputRejected(f"Missing or invalid parameter '{key}'")


def unsupported_media_type(content_type: str | None, message: str | None = None) -> InputRejected:
    """The refusal of a POST whose media type is not ``application/json`` itself."""
    return InputRejected(message or (f"the runtime expects JSON payloads (Content-Type: application/json), "
                                     f"not {content_type or 'absent'!r}"), code="UNSUPPORTED_MEDIA_TYPE")


def parse_envelope(body: bytes, content_type: str | None) -> RuntimeCall:
    """The call a single-endpoint POST carries: ``{method, params?, body?}``."""
    if not is_json_media_type(content_type):
        raise unsupported_media_type(content_type, "Single-route endpoint expects JSON payloads")
    try:
        envelope = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InputRejected("Invalid JSON payload", code="INVALID_JSON") from None
    if not isinstance(envelope, dict):
        raise InputRejected("Invalid JSON payload", code="INVALID_JSON")
    method = envelope.get("method")
    if not method:
        raise InputRejected("Missing method field")
    if not isinstance(method, str):
        raise InputRejected("Invalid method field: it must be a string")
    if method in UNSERVED_METHODS:
        raise InputRejected(f"Method '{method}' is not served by this runtime", code="NOT_FOUND")
    kind = ENVELOPE_METHODS.get(method)
    if kind is None:
        raise InputRejected(f"Unsupported method '{method}'")
    if kind == "info":
        return RuntimeCall("info")
    params = envelope.get("params")
    agent_id = _param(params, "agentId")
    inner = envelope.get("body")
    if kind == "stop":
        return RuntimeCall("stop", agent_id, _param(params, "threadId"),
                           orjson.dumps(inner) if inner is not None else b"")
    if inner is None:
        raise InputRejected("Missing request body for JSON handler")
    return RuntimeCall(kind, agent_id, body=inner.encode() if isinstance(inner, str) else orjson.dumps(inner))


def stop_scope(body: bytes) -> str | None:
    """The ``runId`` a stop is narrowed to (None: whatever runs on the thread)."""
    if not body.strip():
        return None
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError:
        raise InputRejected("Invalid stop request", code="INVALID_JSON") from None
    if not isinstance(data, dict) or set(data) - {"runId"}:
        raise InputRejected("Invalid stop request")
    if "runId" not in data:
        return None
    run_id = data["runId"]
    if not isinstance(run_id, str) or not run_id.strip():
        raise InputRejected("Invalid runId")
    return run_id


def info_document(agents: list[tuple[str, str, dict[str, Any]]]) -> dict[str, Any]:
    """``/info``: the published agents by id with their descriptions and their AG-UI
    ``AgentCapabilities`` (the document ``GET /v1/ag-ui/agents/{id}/capabilities`` serves), over plain SSE."""
    return {
        "version": VERSION,
        "agents": {agent_id: {"name": agent_id, "description": description, "capabilities": capabilities}
                   for agent_id, description, capabilities in agents},
        "audioFileTranscriptionEnabled": False,
        "mode": "sse",
        "threadEndpoints": {"list": False, "inspect": False, "mutations": False, "realtimeMetadata": False},
        "suggestions": False,
        "a2uiEnabled": False,
        "openGenerativeUIEnabled": False,
    }


def stop_answer(stopped: bool, thread_id: str, run_id: str | None) -> dict[str, Any]:
    """The answer to ``stop``, in the runtime's shape."""
    if stopped:
        return {"stopped": True, "interrupt": stopped_event("Run stopped by user")}
    what = f"Run '{run_id}' is not the active run" if run_id else "No active run"
    return {"stopped": False, "message": f"{what} for thread '{thread_id}'."}
