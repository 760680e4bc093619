"""What every protocol's request parser checks first: the content type and a JSON-object body.

Sans-IO: bytes and a header value in, a dict out, or an ``InputRejected`` with its catalogue code
(``UNSUPPORTED_MEDIA_TYPE``, ``INVALID_JSON``, ``INVALID_REQUEST``).
"""

from __future__ import annotations

from typing import Any

import orjson

from .errors import InputRejected


def reject(message: str, code: str = "INVALID_REQUEST") -> InputRejected:
    return InputRejected(message, code=code)


def check_content_type(content_type: str | None) -> None:
    media = (content_type or "").split(";", 1)[0].strip().lower()
    if media != "application/json":
        raise reject(f"Content-Type must be application/json, not {content_type or 'absent'!r}",
                     "UNSUPPORTED_MEDIA_TYPE")


def load_json_object(body: bytes) -> dict[str, Any]:
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise reject(f"the body is not valid JSON: {exc}", "INVALID_JSON") from None
    if not isinstance(data, dict):
        raise reject("the body must be a JSON object")
    return data
