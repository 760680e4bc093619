"""Answers that start before their request's body has been read: the connection is closed after them.

A route may answer before the request body has arrived (404, 405, 401, a Host or origin refusal, an
early 413 or 415): a client such as httpx sends the head and the body apart. HTTP/1.1 then leaves
the server two honest ways on: read the rest of the body, or say ``Connection: close`` and close.
Without either, hypercorn closes the connection anyway when the answer ends before the body has
(h11 is still waiting for the body, so the connection cannot be recycled), and a client that already
reuses the connection loses its next request; under quart-trio that close could even be cancelled
half-way (quart cancels the request task once hypercorn queues its ``http.disconnect``), leaving a
connection that is neither closed nor read: the next request on it was never answered.

``middleware`` (the outermost layer) watches the request: a request that declares a body
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

from collections.abc import Awaitable, Callable
from typing import Any

import trio

ASGIApp = Callable[[dict, Callable, Callable], Awaitable[None]]


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


def middleware(app: ASGIApp) -> ASGIApp:
    """Wrap ``app``: a response that starts before its request body was read closes its connection."""

    async def guard(scope: dict, receive: Callable, send: Callable) -> None:
        if scope["type"] != "http" or scope.get("http_version") not in ("1.0", "1.1") or not declares_body(scope):
            await app(scope, receive, send)
            return
        read = False

        async def receive_watched() -> dict[str, Any]:
            nonlocal read
            message = await receive()
            if message["type"] != "http.request" or not message.get("more_body", False):
                read = True  # the last body message, or a disconnect: nothing more will arrive
            return message

        closing = False

        async def drain() -> None:
            while not read:
                await receive_watched()

        async def send_closing(message: dict[str, Any]) -> None:
            nonlocal closing
            if message["type"] == "http.response.start" and not read:
                closing = True
                headers = list(message.get("headers", []))
                if not has_close(headers):
                    message = {**message, "headers": [*headers, (b"connection", b"close")]}
            if not (closing and not read and message["type"] == "http.response.body"
                    and not message.get("more_body", False)):
                await send(message)
                return
            async with trio.open_nursery() as nursery:  # the last message: drop the body while it is written
                nursery.start_soon(drain)
                await send(message)
                nursery.cancel_scope.cancel()

        await app(scope, receive_watched, send_closing)

    return guard
