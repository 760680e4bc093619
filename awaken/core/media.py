"""What an image part may be, and its bounds (sans-IO): the one check every protocol's parser calls.

An image reaches the model as a hosted ``http(s)`` URL or an inline ``data:image/<subtype>;base64,…``
URL, and nothing else. ``check_image`` refuses, naming the part:

* a media type (the part's own, or the data URL's) that is not a ``type/subtype`` token
  (RFC 6838: ``../../etc/passwd``, ``image/``, control characters) → ``INVALID_REQUEST``;
* a well-formed media type that is not ``image/*`` (``text/html``) → ``UNSUPPORTED_CONTENT``;
* a URL whose scheme is neither ``http(s)`` nor ``data`` (``javascript:``, ``file:``, ``ftp:``) →
  ``UNSUPPORTED_CONTENT``; an ``http(s)`` URL without a host or with whitespace or control
  characters → ``INVALID_REQUEST``;
* inline data that is not base64 → ``INVALID_REQUEST``;
* a bound passed: inline data over ``MAX_IMAGE_BYTES`` decoded bytes, a URL over ``MAX_URL_CHARS``,
  a message with more than ``MAX_IMAGES`` images (``check_count``) → ``CONTENT_TOO_LARGE``.

The body limit (``exchange.MAX_BODY``) still caps the whole request.
"""

from __future__ import annotations

import binascii
import re
from base64 import b64decode
from urllib.parse import urlsplit

from awaken.core.errors import InputRejected
from awaken.core.messages import ImagePart

MAX_IMAGE_BYTES = 8 * 1024 * 1024
MAX_URL_CHARS = 8192
MAX_IMAGES = 16

#: an RFC 6838 restricted-name: a media type's type or subtype
_NAME = r"[A-Za-z0-9][A-Za-z0-9!#$&^_.+-]{0,126}"
_MEDIA_TYPE = re.compile(rf"({_NAME})/({_NAME})")
#: a data URL parameter (``name=a.png``, ``charset=utf-8``) between its media type and ``;base64``
_DATA_PARAM = re.compile(r"[A-Za-z0-9!#$&^_.+-]+=[A-Za-z0-9!#$&^_.+%~*'()-]*")
#: whitespace, C0 and C1 controls, DEL: never in a URL the model is handed
_URL_FORBIDDEN = re.compile(r"[\x00-\x20\x7f-\x9f]")


def is_image_type(media_type: str, where: str) -> bool:
    """Whether ``media_type`` is ``image/*``; raise ``INVALID_REQUEST`` if it is no media type at all."""
    match = _MEDIA_TYPE.fullmatch(media_type)
    if match is None:
        raise InputRejected(f"{where}: the media type is not a valid type/subtype", code="INVALID_REQUEST")
    return match.group(1).lower() == "image"


def _require_image_type(media_type: str, where: str, what: str) -> None:
    if not is_image_type(media_type, where):
        raise InputRejected(f"{where}: {what} must be image/*, not {media_type}", code="UNSUPPORTED_CONTENT")


def check_image(part: ImagePart, where: str) -> ImagePart:
    """``part`` if it is an image within bounds; else raise ``InputRejected`` naming ``where``."""
    if part.mime_type is not None:
        _require_image_type(part.mime_type, where, "an image's media type")
    url = part.url
    if url[:5].lower() != "data:":
        if len(url) > MAX_URL_CHARS:
            raise InputRejected(f"{where}: the image URL is longer than {MAX_URL_CHARS} characters",
                                code="CONTENT_TOO_LARGE")
        scheme, _, _ = url.partition(":")
        if scheme.lower() not in ("http", "https"):
            raise InputRejected(f"{where}: an image URL must be http(s) or data:image/*", code="UNSUPPORTED_CONTENT")
        try:
            host = urlsplit(url).hostname
        except ValueError:
            host = None
        if not host or _URL_FORBIDDEN.search(url):
            raise InputRejected(f"{where}: the image URL is not a valid http(s) URL", code="INVALID_REQUEST")
        return part
    head, sep, value = url.partition(",")
    params = head[5:].split(";")
    if not sep or len(params) < 2 or params[-1].lower() != "base64":
        raise InputRejected(f"{where}: inline image data must be base64", code="INVALID_REQUEST")
    _require_image_type(params[0], where, "inline data's media type")
    if not all(_DATA_PARAM.fullmatch(p) for p in params[1:-1]):
        raise InputRejected(f"{where}: the data URL's parameters are malformed", code="INVALID_REQUEST")
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
