"""Answers that start before their request's body has been read: the connection is closed after them.

A route may answer before the request body has arrived (404, 405, 401, a Host or origin refusal, an
early 413 or 415): a client such as httpx sends the head and the body apart. HTTP/1.1 then leaves
the server two honest ways on: read the rest of the body, or say ``Connection: close`` and close.
Without either, hypercorn closes the connection anyway when the answer ends before the body has
(h11 is still waiting for the body, so the connection cannot be recycled), and a client that already
reuses the connection loses its next request; under quart-trio that close could even be cancelled
half-way (quart cancels the request task once hypercorn queues its ``http.disconnect``), leaving a
connection that is neither closed nor read: the next request on it was never answered.

The HTTP edge (``awaken/http/edge.py``) watches the request: a request that declares a body
(``Content-Length`` above 0, or ``Transfer-Encoding``) and whose last body message the app has not
received when the response starts gets ``Connection: close`` on that response; hypercorn then closes
the connection once it is written (and ``tcp.py`` makes sure nothing cancels that close). A request
whose body was read, or that has none, keeps its connection alive as before. HTTP/1.x only (HTTP/2
streams end on their own).

While such a response's last message is written, what still arrives of the body is read and dropped:
hypercorn queues the body for the app (at most ``max_app_queue_size`` messages) and, as the answer
ends, an ``http.disconnect`` behind it, from inside the app's own ``send``; an app that never reads
its body would otherwise wait on its own full queue for good.
"""

from __future__ import annotations

from typing import Any


def declares_body(scope: dict[str, Any]) -> bool:
    """Whether the request's head announces body bytes (a chunked body, or a length above 0)."""
    for name, value in scope.get("headers", []):
        if name == b"transfer-encoding":
            return True
        if name == b"content-length":
            return value.strip() not in (b"0", b"")
    return False


def has_close(headers: Any) -> bool:
    return any(name.lower() == b"connection" and b"close" in value.lower() for name, value in headers)
