"""The HTTP edge's JSON errors: every error answer of every route is ``errors.error_response``'s.

``error_response`` (``awaken.core.errors``) is the one writer of the JSON error: the code's status from
the catalogue, ``{"error": {"code", "message"}}``, ``Content-Type: application/json`` and
``Cache-Control: no-store``, and the error's own headers (``Retry-After``). This module hands it to the
two kinds of route: ``quart_error`` for the quart routes (``answering`` wraps a route in it), ``write_error`` for raw ASGI (the run routes'
405, the Host, cross-site, CORS and auth refusals). The transports and the streams below the edge send
its triple themselves (``sse.send_once``). The run routes refuse inside their stream instead (HTTP 200),
as the contract says.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any

from quart import Response

from awaken.core.errors import AwakenError, error_response

ASGISend = Callable[[dict[str, Any]], Awaitable[None]]
Headers = Iterable[tuple[bytes, bytes]]
Handler = Callable[..., Awaitable[Any]]


def quart_error(error: AwakenError | str, message: str | None = None, *, headers: Headers = ()) -> Response:
    """``error`` as a quart response (``error_response``; quart sets the length itself)."""
    status, all_headers, body = error_response(error, message, headers=headers)
    response = Response(body, status=status, content_type="application/json")
    for name, value in all_headers:
        if name not in (b"content-type", b"content-length"):
            response.headers.add(name.decode("latin-1"), value.decode("latin-1"))
    return response


def answering(answered: tuple[type[AwakenError], ...]) -> Callable[[Handler], Handler]:
    """A quart route decorator: the ``answered`` classified errors become their JSON answer
    (``quart_error``); anything else is a server bug (500)."""

    def decorate(handler: Handler) -> Handler:
        async def route(**kwargs: Any) -> Any:
            try:
                return await handler(**kwargs)
            except answered as exc:
                return quart_error(exc)

        route.__name__ = handler.__name__
        return route

    return decorate


async def write_error(send: ASGISend, error: AwakenError | str, message: str | None = None, *,
                      headers: Headers = ()) -> None:
    """``error`` as a whole raw ASGI HTTP answer on ``send`` (``error_response``)."""
    status, all_headers, body = error_response(error, message, headers=headers)
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body, "more_body": False})
