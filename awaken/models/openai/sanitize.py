"""Secrets and messages: failure text that never carries the API key, and the URL as messages show it.

Failure messages are built from status codes and the endpoint's error text after ``sanitize`` has
removed the key (and any fragment of it), bearer tokens and key-like strings. They never include
request headers or the URL's user info or query (``safe_url``).
"""

from __future__ import annotations

import json
import re
from urllib.parse import urlsplit, urlunsplit

_DETAIL_CHARS = 300
_BEARER = re.compile(r"(?i)\b(bearer|basic)\s+[^\s\"',;]+")
_SK = re.compile(r"\bsk-[A-Za-z0-9_\-]{4,}")
_LONG_TOKEN = re.compile(r"[A-Za-z0-9_\-+/=]{32,}")
_WINDOW = 8


def sanitize(text: str, secret: str | None = None) -> str:
    """``text`` without ``secret`` (or any 8-character piece of it), bearer tokens or key-like strings."""
    if secret:
        text = text.replace(secret, "[redacted]")
        if len(secret) >= _WINDOW:
            pieces = {secret[i : i + _WINDOW] for i in range(len(secret) - _WINDOW + 1)}
            kept: list[str] = []
            hidden_to = 0  # text[:hidden_to] is covered by a piece of the secret
            for i, char in enumerate(text):
                if text[i : i + _WINDOW] in pieces:
                    hidden_to = i + _WINDOW
                if i < hidden_to:
                    if not kept or kept[-1] != "[redacted]":
                        kept.append("[redacted]")
                else:
                    kept.append(char)
            text = "".join(kept)
    text = _BEARER.sub(lambda m: f"{m.group(1)} [redacted]", text)
    text = _SK.sub("[redacted]", text)
    text = _LONG_TOKEN.sub(lambda m: "[redacted]" if _key_like(m.group()) else m.group(), text)
    text = " ".join(text.split())
    return text if len(text) <= _DETAIL_CHARS else text[: _DETAIL_CHARS - 1] + "…"


def _key_like(token: str) -> bool:
    return any(c.isdigit() for c in token) and any(c.isalpha() for c in token)


def safe_url(url: str) -> str:
    """``url`` without user info, query or fragment, for messages."""
    try:
        parts = urlsplit(url)
        host = parts.hostname or ""
        netloc = f"[{host}]" if ":" in host else host
        if parts.port is not None:
            netloc += f":{parts.port}"
        return urlunsplit((parts.scheme, netloc, parts.path, "", ""))
    except ValueError:
        return "(the configured base_url)"


def error_detail(body: bytes) -> str:
    """The human part of an error body: OpenAI's ``error.message``, a ``detail``/``message``, or the text."""
    text = body.decode(errors="replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return "" if text.lstrip().startswith("<") else text
    if isinstance(data, dict):
        error = data.get("error", data)
        if isinstance(error, dict):
            for key in ("message", "detail", "msg"):
                if isinstance(error.get(key), str):
                    return error[key]
        elif isinstance(error, str):
            return error
        if isinstance(data.get("detail"), str):
            return data["detail"]
    return text
