"""The headers every HTML answer carries: no page may frame it, and only the server's own scripts run.

In ``[auth] mode = "none"`` the console acts for whoever opens it; a page that framed it could make a
person click Approve, Stop or Delete without seeing what they click (clickjacking). Every answer whose
``Content-Type`` is ``text/html`` (the console's page, and any other HTML answer the server may give)
gets:

* ``X-Frame-Options: DENY`` (older browsers) and ``Content-Security-Policy`` with
  ``frame-ancestors 'none'`` (every current one);
* in that policy, ``script-src 'self'``: the console's bundle (``awaken/http/console/static/console.js``,
  loaded by ``<script type="module" src>``) runs, inline scripts, ``eval`` and other origins' scripts
  do not; its stylesheet, its fetches and WebSockets (same origin) and the images of a conversation
  (``http(s)`` and ``data:`` URLs) stay allowed;
* ``X-Content-Type-Options: nosniff``.

The HTTP edge (``awaken/http/edge.py``) adds them on ``http.response.start``; headers an answer set itself
are kept.
"""

from __future__ import annotations

from typing import Any

#: the Content-Security-Policy of every HTML answer
CSP = ("default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data: blob: http: https:; "
       "connect-src 'self'; object-src 'none'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'")
#: the headers an HTML answer gets
HTML_HEADERS: list[tuple[bytes, bytes]] = [
    (b"x-frame-options", b"DENY"),
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
]


def is_html(headers: Any) -> bool:
    for name, value in headers:
        if name.lower() == b"content-type":
            return value.split(b";", 1)[0].strip().lower() in (b"text/html", b"application/xhtml+xml")
    return False


def with_html_headers(headers: Any) -> list[tuple[bytes, bytes]]:
    """``headers`` plus those of ``HTML_HEADERS`` they do not set already."""
    out = list(headers)
    present = {name.lower() for name, _ in out}
    out.extend((name, value) for name, value in HTML_HEADERS if name not in present)
    return out
