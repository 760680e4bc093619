"""Who is asking: the ``Principal`` the HTTP edge attaches (``awaken/http/edge.py``) to every ``/v1/`` request's scope.

Routes read it with ``principal_of(scope)`` (for quart routes: ``principal_of(request.scope)``).
"""

from __future__ import annotations

from typing import Literal

import attrs

#: the ASGI scope key holding the request's ``Principal``
PRINCIPAL_KEY = "awaken.principal"
#: the ASGI scope key of the request's telemetry facts (``awaken/http/metrics.py``): an object whose
#: ``subject`` the HTTP edge sets to the principal's, for the request's log line
FACTS_KEY = "awaken.request_facts"


@attrs.frozen
class Principal:
    """``subject`` is the user (None for ``anonymous``). ``anonymous`` is what ``[auth] mode = "none"``
    gives every request: a single-user server, so it may see and do everything an admin may. It is
    never a default: every engine and stream entry point takes the principal as a required argument.
    Which threads it may see is decided in one place: ``awaken.engine.access.may_see``."""

    subject: str | None
    role: Literal["admin", "user", "anonymous"]


ANONYMOUS = Principal(None, "anonymous")


def principal_of(scope: dict) -> Principal:
    """The principal the HTTP edge attached to ``scope``.

    Raises ``LookupError`` for a scope that never went through it (a route outside ``/v1/``, or a
    server built without ``AuthMiddleware``): failing closed, never guessing a principal.
    """
    try:
        return scope[PRINCIPAL_KEY]
    except KeyError:
        raise LookupError(f"no principal on this request ({scope.get('path')!r} is not behind the HTTP edge's authentication)") from None
