"""Cross-origin access for browser apps: the CORS policy (pure) and the HTTP edge applies it (``awaken/http/edge.py``).

A page served from ``http://localhost:3000`` that calls Awaken on ``http://127.0.0.1:8000`` is a
cross-origin caller. Its browser sends a preflight (``OPTIONS`` with ``Origin`` and
``Access-Control-Request-Method``) before a JSON POST, and reads a response only if it carries
``Access-Control-Allow-Origin``. ``[server] cors_origins`` lists the origins allowed to do that.

The rules (``CorsPolicy`` decides, the edge only moves bytes):

* Scope: every path under ``/v1/`` (runs, history, agents, threads, stop, and routes still to come);
  ``/healthz`` and ``/readyz`` are not for browsers and get nothing.
* Origins are exact (``scheme://host[:port]``, as a browser serialises them). ``"*"`` alone allows
  every origin and then ``Access-Control-Allow-Origin: *`` is sent.
* Credentials: Awaken authenticates with ``Authorization: Bearer`` headers, never cookies, so
  ``Access-Control-Allow-Credentials`` is never sent (with ``"*"`` a browser would refuse it anyway).
  ``"*"`` means "no credentials are involved": it is refused at start-up together with an ``[auth]``
  mode other than ``none`` (``wildcard_problem``), since any site could then drive a user's token.
* A preflight from an allowed origin is answered ``204`` with the allowed methods
  (``ALLOWED_METHODS``), the allowed request headers (``content-type``, ``authorization``,
  ``user-agent`` — older ``ai@6`` sends its own User-Agent —, ``last-event-id`` — a rejoining stream
  resumes after it — plus ``[server] cors_extra_headers``),
  ``Access-Control-Max-Age`` and ``Vary: Origin``, whatever method or headers it asked for (the
  browser compares). It never reaches the app, so it needs no credentials.
* A preflight from any other origin is answered ``403`` with the ``ORIGIN_NOT_ALLOWED`` JSON error and
  no CORS header at all.
* An actual request from an allowed origin gets ``Access-Control-Allow-Origin`` and
  ``Access-Control-Expose-Headers`` (``EXPOSED_HEADERS``: the headers clients read) on its
  ``http.response.start`` — streaming SSE runs and error answers (a 401 included: the edge applies CORS
  before authentication) alike. Other origins get no CORS header and the browser hides the answer.
  Every ``/v1/`` answer carries ``Vary: Origin`` (caches must not mix origins).
* WebSocket upgrades get no CORS headers: browsers apply no CORS to sockets. An upgrade whose
  ``Origin`` is neither allowed here nor one of the server's own origins is refused before it is
  accepted by the cross-site check (``awaken/http/hosts.py``), which the edge applies before CORS.

Bodies: CORS does not stop a "simple" cross-origin POST (``text/plain``, a form, no body) that skips
the preflight. The cross-site check (``awaken/http/hosts.py``) refuses every state-changing request whose
``Origin`` is neither allowed here nor the server's own; and the run routes refuse every body that is
not ``application/json`` (``UNSUPPORTED_MEDIA_TYPE``) before any run starts.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from awaken.core.asgi import header_of
from awaken.core.errors import error_response

Headers = list[tuple[bytes, bytes]]

#: the path prefix whose routes answer browsers
PREFIX = "/v1/"
#: every method a ``/v1/`` route takes (a preflight is answered for the prefix, not per route)
ALLOWED_METHODS = ("GET", "POST", "DELETE", "OPTIONS")
#: request headers a browser client sends beyond the CORS-safelisted ones
BASE_ALLOWED_HEADERS = ("content-type", "authorization", "user-agent", "last-event-id")
#: response headers a client reads (``content-type`` is always readable)
EXPOSED_HEADERS = ("x-vercel-ai-ui-message-stream", "www-authenticate")
#: seconds a browser may cache a preflight answer (Chromium caps this at 7200)
MAX_AGE = 600
#: the error code of a refused preflight
REFUSED_CODE = "ORIGIN_NOT_ALLOWED"


@attrs.frozen
class CorsPolicy:
    """Which origins may call ``/v1/`` from a browser, and the headers they get. Pure."""

    origins: frozenset[str] = frozenset()
    any_origin: bool = False
    allow_headers: tuple[str, ...] = BASE_ALLOWED_HEADERS

    @classmethod
    def of(cls, origins: Iterable[str], extra_headers: Iterable[str] = ()) -> CorsPolicy:
        origins = frozenset(origins)
        headers = list(BASE_ALLOWED_HEADERS)
        for name in extra_headers:
            if name.lower() not in headers:
                headers.append(name.lower())
        return cls(origins - {"*"}, "*" in origins, tuple(headers))

    def allows(self, origin: str) -> bool:
        return self.any_origin or origin in self.origins

    def _allow_origin(self, origin: str) -> Headers:
        return [(b"access-control-allow-origin", b"*" if self.any_origin else origin.encode("latin-1"))]

    def preflight(self, origin: str) -> tuple[int, Headers, bytes]:
        """The whole answer to a preflight from ``origin``: (status, headers, body)."""
        if not self.allows(origin):  # 403 (``error_response``)
            return error_response(REFUSED_CODE, f"the origin {origin} is not in server.cors_origins",
                                  headers=[(b"vary", b"Origin")])
        return 204, [
            *self._allow_origin(origin),
            (b"access-control-allow-methods", ", ".join(ALLOWED_METHODS).encode()),
            (b"access-control-allow-headers", ", ".join(self.allow_headers).encode()),
            (b"access-control-max-age", str(MAX_AGE).encode()),
            (b"vary", b"Origin"),
        ], b""

    def response_headers(self, origin: str | None) -> Headers:
        """The headers added to an actual ``/v1/`` response for a request from ``origin``."""
        if origin is None or not self.allows(origin):
            return [(b"vary", b"Origin")]
        return [*self._allow_origin(origin),
                (b"access-control-expose-headers", ", ".join(EXPOSED_HEADERS).encode()),
                (b"vary", b"Origin")]


def merge_headers(headers: Iterable[tuple[bytes, bytes]], added: Headers) -> Headers:
    """``headers`` with ``added`` appended; a ``vary`` already there is extended, not repeated."""
    out = list(headers)
    for name, value in added:
        if name == b"vary":
            at = next((i for i, (n, _) in enumerate(out) if n.lower() == b"vary"), None)
            if at is not None:
                present = {v.strip().lower() for v in out[at][1].split(b",")}
                if value.lower() not in present and b"*" not in present:
                    out[at] = (out[at][0], out[at][1] + b", " + value)
                continue
        out.append((name, value))
    return out


def is_preflight(scope: dict[str, Any]) -> bool:
    return (scope.get("method") == "OPTIONS" and header_of(scope, b"origin") is not None
            and header_of(scope, b"access-control-request-method") is not None)
