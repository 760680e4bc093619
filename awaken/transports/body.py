"""Request bodies over ASGI: read whole, within a deadline and a size limit, few large ones at once.

``read_body`` returns a ``Body`` or raises ``Refused``, an HTTP answer that replaces the request:

* a body still arriving ``seconds`` after its request head (a stalled or trickling upload):
  408 ``BODY_TIMEOUT``;
* a body over ``limit``: ``Body.too_large`` as soon as it passes the limit (the rest is never read),
  whatever ``Content-Length`` said or did not say (chunked uploads);
* a body over ``LargeBodies.threshold`` (declared, or once that many bytes arrived) while
  ``LargeBodies.cap`` such bodies are already being read or parsed: 503 ``TOO_MANY_LARGE_BODIES``
  with ``Retry-After``. The slot is held until ``Body.release()`` (after the parse).

Every refusal that leaves the body unread closes the connection (``Connection: close``): hypercorn
then drops what the client still sends instead of handing it to nobody.

After the last large body in flight is released, ``memory.request_trim(freed)`` says how many bytes the
large bodies since then freed; once that adds up (a burst, not one replayed history) the server's
trimmer task hands the freed pages back to the system (the request does not wait for it): bodies
parsed in worker threads leave their memory in glibc's per-thread arenas, which the process
otherwise keeps for good.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from awaken.core.errors import CODES, error_response
from awaken.runtime import memory
from awaken.runtime.tcp import app_queue_in
from awaken.runtime.tuning import OFF_LOOP_BODY

log = logging.getLogger("awaken.body")

ASGIReceive = Callable[[], Awaitable[dict[str, Any]]]
ASGISend = Callable[[dict[str, Any]], Awaitable[None]]

#: seconds a client is told to wait before it sends a refused large body again
RETRY_AFTER = 1
#: the read of a body already queued whole: no deadline (it cannot wait)
_NO_DEADLINE = contextlib.nullcontext()
#: a body at least this large is a large one: it is parsed in a worker thread and takes one of
#: ``LargeBodies``' slots (``awaken.runtime.tuning.OFF_LOOP_BODY``)
LARGE_BODY = OFF_LOOP_BODY


class ClientGone(Exception):
    """The client disconnected before its request body was read."""


class Refused(Exception):
    """An HTTP answer instead of the request: ``code`` (its status is the catalogue's), ``message``,
    extra ``headers``."""

    def __init__(self, code: str, message: str, headers: list[tuple[bytes, bytes]] = ()) -> None:
        super().__init__(message)
        self.status = CODES[code].status
        self.code = code
        self.message = message
        self.headers = list(headers)

    async def answer(self, send: ASGISend) -> None:
        """The JSON error (``error_response``); the connection is closed after it."""
        status, headers, body = error_response(self.code, self.message,
                                               headers=[(b"connection", b"close"), *self.headers])
        await send({"type": "http.response.start", "status": status, "headers": headers})
        await send({"type": "http.response.body", "body": body, "more_body": False})


class LargeBodies:
    """At most ``cap`` bodies larger than ``threshold`` bytes read or parsed at once (one per server)."""

    def __init__(self, cap: int, threshold: int) -> None:
        self.cap = cap
        self.threshold = threshold
        self.in_flight = 0
        #: bytes of the large bodies released since the last time none was in flight
        self.freed = 0

    def take(self) -> None:
        if self.in_flight >= self.cap:
            raise Refused("TOO_MANY_LARGE_BODIES",
                          f"{self.cap} request bodies over {self.threshold} bytes are being read already; "
                          f"retry in {RETRY_AFTER} s", [(b"retry-after", str(RETRY_AFTER).encode())])
        self.in_flight += 1

    def give_back(self, size: int) -> None:
        """Free a slot taken for a body of ``size`` bytes (as many as were read of it)."""
        self.in_flight -= 1
        self.freed += size
        if self.in_flight == 0:
            memory.request_trim(self.freed)
            self.freed = 0


class Body:
    """A request body read whole (``data``), or ``too_large``; ``release()`` frees its large-body slot."""

    __slots__ = ("_bodies", "data", "size", "too_large")

    def __init__(self, data: bytes | None, bodies: LargeBodies | None = None) -> None:
        self.data = data
        self.too_large = data is None
        self.size = 0 if data is None else len(data)
        self._bodies = bodies

    def take(self) -> bytes | None:
        """The bytes, handed over: this ``Body`` no longer keeps them alive."""
        data, self.data = self.data, None
        return data

    def release(self) -> None:
        """Give the large-body slot back (idempotent); call it once the body is parsed or dropped.
        Synchronous: a cancellation cannot come between a request and the release of its slot."""
        self.data = None
        bodies, self._bodies = self._bodies, None
        if bodies is not None:
            bodies.give_back(self.size)


def declared_length(scope: dict[str, Any]) -> int | None:
    for name, value in scope.get("headers", []):
        if name == b"content-length":
            text = value.decode("latin-1")
            return int(text) if text.isascii() and text.isdigit() else None
    return None


async def read_body(scope: dict[str, Any], receive: ASGIReceive, *, limit: int, seconds: float,
                    bodies: LargeBodies) -> Body:
    """The request's body (see the module docstring); raises ``ClientGone`` or ``Refused``."""
    declared = declared_length(scope)
    if declared is not None and declared > limit:
        return Body(None)  # refused from the header: the body is never read
    holds = False
    if declared is not None and declared > bodies.threshold:
        bodies.take()
        holds = True
    chunks: list[bytes] = []
    size = 0
    queued = app_queue_in(scope)
    try:
        # a body already queued whole (hypercorn's ``AppQueue`` says so) cannot be slow: no deadline
        with trio.move_on_after(seconds) if queued is None or not queued.body_in else _NO_DEADLINE as deadline:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    raise ClientGone("the client disconnected")
                chunk = message.get("body", b"")
                size += len(chunk)
                if size > limit:
                    chunks.clear()
                    if holds:
                        bodies.give_back(size)
                        holds = False
                    return Body(None)
                if size > bodies.threshold and not holds:
                    bodies.take()
                    holds = True
                chunks.append(chunk)
                if not message.get("more_body", False):
                    break
        if deadline is not None and deadline.cancelled_caught:
            raise Refused("BODY_TIMEOUT", f"the request body did not arrive within {seconds:g} s")
        data = chunks[0] if len(chunks) == 1 else b"".join(chunks)
        chunks.clear()
    except BaseException:
        chunks.clear()
        if holds:
            bodies.give_back(size)
        raise
    return Body(data, bodies if holds else None)


async def read_body_or_answer(scope: dict[str, Any], receive: ASGIReceive, send: ASGISend, *, limit: int,
                              seconds: float, bodies: LargeBodies) -> Body | None:
    """``read_body``, or None when the request is already over: the client left, or its refusal (408,
    503) was answered on ``send``."""
    try:
        return await read_body(scope, receive, limit=limit, seconds=seconds, bodies=bodies)
    except ClientGone:
        return None
    except Refused as refused:
        await refused.answer(send)
        return None
