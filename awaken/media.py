"""Bounds on the images a request may carry (sans-IO), shared by every protocol's parser.

An image reaches the model as a hosted ``http(s)`` URL or an inline ``data:<mime>;base64,…`` URL.
Inline data must be base64 of at most ``MAX_IMAGE_BYTES`` decoded bytes with an ``image/*`` type; a
URL is at most ``MAX_URL_CHARS`` long; a message holds at most ``MAX_IMAGES`` images. Anything over a
bound is refused with ``CONTENT_TOO_LARGE`` naming the part; inline data that is not base64 is
``INVALID_REQUEST``. The body limit (``exchange.MAX_BODY``) still caps the whole request.
"""

from __future__ import annotations

import binascii
from base64 import b64decode

from .errors import InputRejected
from .messages import ImagePart

MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_URL_CHARS = 8192
MAX_IMAGES = 16


def check_image(part: ImagePart, where: str) -> ImagePart:
    """``part`` if it is within bounds; else raise ``InputRejected`` naming ``where``."""
    url = part.url
    if not url.startswith("data:"):
        if len(url) > MAX_URL_CHARS:
            raise InputRejected(f"{where}: the image URL is longer than {MAX_URL_CHARS} characters",
                                code="CONTENT_TOO_LARGE")
        return part
    head, sep, value = url.partition(",")
    if not sep or not head.endswith(";base64"):
        raise InputRejected(f"{where}: inline image data must be base64", code="INVALID_REQUEST")
    if len(value) > (MAX_IMAGE_BYTES * 4) // 3 + 4:
        raise InputRejected(f"{where}: the image is larger than {MAX_IMAGE_BYTES} bytes", code="CONTENT_TOO_LARGE")
    try:
        b64decode(value, validate=True)
    except (binascii.Error, ValueError):
        raise InputRejected(f"{where}: inline image data is not valid base64", code="INVALID_REQUEST") from None
    return part


def check_count(parts: list, where: str) -> None:
    if sum(isinstance(p, ImagePart) for p in parts) > MAX_IMAGES:
        raise InputRejected(f"{where}: more than {MAX_IMAGES} images in one message", code="CONTENT_TOO_LARGE")


def describe_image(part: ImagePart) -> str:
    """A short description (the scripted model's ``/parts``): the type and the inline size or the URL."""
    mime = part.mime_type or "image/*"
    if part.url.startswith("data:"):
        value = part.url.partition(",")[2]
        size = len(value) * 3 // 4 - value[-2:].count("=")
        return f"image {mime} inline {size} bytes"
    return f"image {mime} {part.url}"
