"""The console at ``/console``: built browser assets served from inside the package.

The assets in ``static/`` are the committed output of ``console/build.mjs`` (sources in
``console/src/``); nothing here needs Node. ``GET /console`` (and ``/console/``) is the page; the
page's own files are ``/console/<name>``. The console is a single page with hash routes
(``#/sessions``, ``#/sessions/{id}``, ``#/chat``, ``#/agents``), so no other path exists. These
routes are outside ``/v1/`` and open: the page holds no data, it asks the API (with the token a
person gives it) for everything it shows.
"""

from __future__ import annotations

from importlib.resources import files

from quart import Response
from quart_trio import QuartTrio

STATIC = files(__package__) / "static"
TYPES = {".html": "text/html; charset=utf-8", ".js": "text/javascript; charset=utf-8",
         ".css": "text/css; charset=utf-8"}


def asset(name: str) -> tuple[bytes, str] | None:
    """The bytes and content type of a shipped asset, or None when there is no such file."""
    if "/" in name or name.startswith(".") or "." not in name:
        return None
    kind = TYPES.get(name[name.rindex("."):])
    path = STATIC / name
    if kind is None or not path.is_file():
        return None
    return path.read_bytes(), kind


def add_routes(app: QuartTrio) -> None:
    def serve(name: str) -> Response:
        found = asset(name)
        if found is None:
            return Response("not found", status=404, content_type="text/plain; charset=utf-8")
        body, kind = found
        # index.html names its assets with a content hash, so only the page itself must be revalidated
        cache = "no-cache" if name == "index.html" else "public, max-age=31536000, immutable"
        return Response(body, content_type=kind, headers={"cache-control": cache,
                                                          "x-content-type-options": "nosniff"})

    @app.get("/console")
    @app.get("/console/")
    async def console_page() -> Response:
        return serve("index.html")

    @app.get("/console/<name>")
    async def console_asset(name: str) -> Response:
        return serve(name)
