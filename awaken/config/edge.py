"""Shape checks of the HTTP edge's settings (``[server] cors_origins``, ``cors_extra_headers``,
``allowed_hosts``), shared by the config loader and the middlewares that apply them. Pure."""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable

#: ``host[:port]`` read from a header or a setting: (lower-case host, port or None)
Authority = tuple[str, "int | None"]

_NAME = re.compile(r"^[a-z0-9_]([a-z0-9_.-]*[a-z0-9_])?$")
_ORIGIN = re.compile(r"^https?://(\[[0-9a-f:.]+\]|[a-z0-9]([a-z0-9.-]*[a-z0-9])?)(:[0-9]{1,5})?$")
_TOKEN = re.compile(r"^[A-Za-z0-9!#$%&'*+.^_`|~-]+$")


def split_authority(value: str | None) -> Authority | None:
    """``host[:port]`` as (host, port or None): the host lower case, without IPv6 brackets or a trailing
    dot, an IP literal in its canonical form. None when ``value`` is not such an authority."""
    if value is None:
        return None
    value = value.strip().lower()
    port: int | None = None
    if value.startswith("["):
        host, bracket, rest = value[1:].partition("]")
        if not bracket:
            return None
        if rest:
            if not rest.startswith(":"):
                return None
            port_text = rest[1:]
        else:
            port_text = None
        try:
            host = str(ipaddress.IPv6Address(host))
        except ValueError:
            return None
    else:
        host, colon, port_text_ = value.partition(":")
        port_text = port_text_ if colon else None
        if host.endswith("."):
            host = host[:-1]
        if not _NAME.match(host):
            return None
    if port_text is not None:
        if not (port_text.isascii() and port_text.isdigit() and 0 < len(port_text) <= 5) or int(port_text) > 65535:
            return None
        port = int(port_text)
    return host, port


def allowed_host_problem(entry: str) -> str | None:
    """Why ``entry`` cannot be a ``[server] allowed_hosts`` entry, or None when it can."""
    if "://" in entry or "/" in entry:
        return f"{entry!r} is not a host: write a name or address, with :port or without (no scheme, no path)"
    if split_authority(entry) is None:
        return f"{entry!r} is not a host: write a name or address, with :port or without"
    return None


def origin_problem(origin: str) -> str | None:
    """Why ``origin`` cannot be a ``cors_origins`` entry, or None when it can."""
    if origin == "*":
        return None
    if origin.endswith("/"):
        return f"{origin!r} has a trailing '/': an origin is scheme://host[:port] with no path"
    if origin != origin.lower():
        return f"{origin!r} must be lower case, as browsers send it"
    if not _ORIGIN.match(origin):
        return f"{origin!r} is not an origin: write scheme://host[:port] (http or https, no path)"
    return None


def header_problem(name: str) -> str | None:
    """Why ``name`` cannot be a ``cors_extra_headers`` entry, or None when it can."""
    if not _TOKEN.match(name):
        return f"{name!r} is not an HTTP header name"
    return None


def wildcard_problem(origins: Iterable[str], auth_mode: str) -> str | None:
    """Why this combination is refused at start-up: ``"*"`` must stand alone, and only when no
    credentials are involved (``[auth] mode = "none"``)."""
    origins = list(origins)
    if "*" not in origins:
        return None
    if len(origins) > 1:
        return '"*" allows every origin: list it alone or list exact origins'
    if auth_mode != "none":
        return f'"*" is only allowed when no credentials are involved, but [auth] mode is {auth_mode!r}'
    return None
