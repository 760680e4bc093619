"""Who may reach the server at all: the ``Host`` check and the cross-site check (a pure policy; the HTTP
edge applies it before CORS and authentication: ``awaken/http/edge.py``).

DNS rebinding: a page on ``rebind.evil.example`` whose name is re-resolved to 127.0.0.1 reaches a
server on the developer's machine as its own origin: the browser lets it read every answer. What
gives it away is ``Host``, which names the attacker's domain. So every request's ``Host`` must name
the server:

* a loopback name (``127.0.0.1`` and the rest of 127.0.0.0/8, ``localhost``, ``[::1]``), on any port
  (a local load balancer in front of the server forwards its own port);
* the host of ``[server] bind``, on any port;
* an entry of ``[server] allowed_hosts``: ``name`` (any port) or ``name:port`` (that port only), the
  names clients use for a server behind a proxy or in a container.

Anything else is answered ``403`` with ``{"error": {"code": "HOST_NOT_ALLOWED", …}}`` on every route
and every WebSocket upgrade (refused before it is accepted), in every auth mode. ``/healthz`` and
``/readyz`` stay open for probes, which often send a bare IP or a pod name.

Cross-site state changes: CORS keeps a foreign page from *reading* answers, not from *sending*
requests a browser sends without a preflight (a form, ``text/plain``, a bodiless POST). So a request
that changes state (every ``POST``, ``PUT``, ``PATCH`` and ``DELETE``, and every WebSocket upgrade:
a socket carries runs) whose ``Origin`` is neither one of the server's own origins nor allowed by
``[server] cors_origins`` is answered ``403`` ``ORIGIN_NOT_ALLOWED`` before it reaches any route.
A request without ``Origin`` (curl, SDKs, other servers) is not a browser's cross-site request and
passes. Reads (``GET``) pass whatever their origin: CORS decides whether the page sees the answer.

The server's own origins never trust ``Host`` alone: an origin is the server's own when its host is
a name the server answers to (the list above) and its port is the port the request was sent to (the
page was served by this server under that name) or the port of ``bind``; an ``allowed_hosts`` name
given without a port is the server's own on any port. ``http`` and ``https`` both count (a TLS proxy
in front serves ``https`` pages from a server that sees ``http``).
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from typing import Any

import attrs

from awaken.config.edge import Authority, split_authority
from awaken.core.asgi import header_of
from awaken.core.errors import error_response
from awaken.http.cors import CorsPolicy
from awaken.runtime.tuning import HOST_ANSWERS as KNOWN_HOSTS

Headers = list[tuple[bytes, bytes]]

#: the names every server answers to, on any port
LOOPBACK_NAMES = frozenset({"localhost", "127.0.0.1", "::1"})
#: paths open whatever their ``Host`` (probes) and never cross-site checked
OPEN_PATHS = frozenset({"/healthz", "/readyz"})
#: the methods whose requests change state
STATE_CHANGING = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: the status and codes of the refusals
REFUSED_STATUS = 403
HOST_CODE = "HOST_NOT_ALLOWED"
ORIGIN_CODE = "ORIGIN_NOT_ALLOWED"
#: the close code refusing a WebSocket upgrade where the server cannot answer it with the 403
CLOSE_REFUSED = 1008

_ORIGIN = re.compile(r"^(?P<scheme>https?)://(?P<authority>[^/?#@\s]+)$")


def is_loopback(host: str) -> bool:
    if host in LOOPBACK_NAMES:
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@attrs.frozen
class HostPolicy:
    """The names the server answers to. Pure: headers in, a verdict out."""

    #: hosts accepted on any port: ``bind``'s host and the port-less ``allowed_hosts`` entries (loopback
    #: names are always accepted)
    names: frozenset[str] = frozenset()
    #: ``allowed_hosts`` entries with a port: accepted on that port only
    authorities: frozenset[tuple[str, int]] = frozenset()
    #: ``bind``'s port (0 when the system picks one: then only the request's own port counts)
    bind_port: int = 0
    #: the port-less ``allowed_hosts`` entries (an origin on them is the server's own on any port)
    listed: frozenset[str] = frozenset()
    #: the answers of ``allows_host`` for the latest ``Host`` values (clients send the same few)
    _known_hosts: dict[str | None, bool] = attrs.field(factory=dict, init=False, eq=False, repr=False)

    @classmethod
    def of(cls, bind: str, allowed_hosts: Iterable[str] = ()) -> HostPolicy:
        names: set[str] = set()
        authorities: set[tuple[str, int]] = set()
        listed: set[str] = set()
        bound = split_authority(bind)
        if bound is not None:
            names.add(bound[0])
        for entry in allowed_hosts:
            parsed = split_authority(entry)
            if parsed is None:
                continue  # refused at start-up (``allowed_host_problem``)
            host, port = parsed
            if port is None:
                names.add(host)
                listed.add(host)
            else:
                authorities.add((host, port))
        port = bound[1] if bound is not None and bound[1] is not None else 0
        return cls(frozenset(names), frozenset(authorities), port, frozenset(listed))

    def _answers_to(self, authority: Authority) -> bool:
        host, port = authority
        return is_loopback(host) or host in self.names or (port is not None and (host, port) in self.authorities)

    def allows_host(self, host: str | None) -> bool:
        """Whether a request whose ``Host`` header is ``host`` names this server."""
        known = self._known_hosts.get(host)
        if known is not None:
            return known
        authority = split_authority(host)
        answer = authority is not None and self._answers_to(authority)
        if KNOWN_HOSTS <= 0:
            return answer
        if len(self._known_hosts) >= KNOWN_HOSTS:
            self._known_hosts.clear()  # a client sending many names: start again
        self._known_hosts[host] = answer
        return answer

    def own_origin(self, origin: str, host: str | None) -> bool:
        """Whether ``origin`` is one of the server's own origins, for a request sent to ``host``."""
        match = _ORIGIN.match(origin)
        if match is None:
            return False
        authority = split_authority(match["authority"])
        if authority is None or not self._answers_to(authority):
            return False
        name, port = authority
        if name in self.listed:
            return True
        sent_to = split_authority(host)
        if sent_to is not None and port == sent_to[1]:
            return True
        return port is not None and port == self.bind_port


def verdict(scope: dict[str, Any], hosts: HostPolicy, cors: CorsPolicy) -> tuple[str, str] | None:
    """Why ``scope`` is refused, as (code, message), or None when it may go on."""
    if scope["path"] in OPEN_PATHS:
        return None
    host = header_of(scope, b"host")
    if not hosts.allows_host(host):
        shown = "no Host header" if host is None else f"the Host {host[:200]!r}"
        return HOST_CODE, (f"{shown} does not name this server; list the name clients use in "
                           "server.allowed_hosts")
    origin = header_of(scope, b"origin")
    if origin is None:
        return None
    if scope["type"] == "http" and scope.get("method", "GET") not in STATE_CHANGING:
        return None
    if cors.allows(origin) or hosts.own_origin(origin, host):
        return None
    return ORIGIN_CODE, (f"the origin {origin[:200]} is neither this server's nor in server.cors_origins: "
                         "a page on another site may not change state here")


def refusal(code: str, message: str) -> tuple[int, Headers, bytes]:
    """The whole 403 answer (``error_response``): (status, headers, body)."""
    return error_response(code, message)
