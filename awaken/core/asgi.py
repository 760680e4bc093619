"""What every layer reads of an ASGI scope: a request header."""

from __future__ import annotations

from typing import Any


def header_of(scope: dict[str, Any], name: bytes) -> str | None:
    """The first value of the (lower-case) header ``name`` the request carries, or None."""
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return None
