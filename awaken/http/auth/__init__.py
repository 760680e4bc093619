"""Authentication: ``[auth]`` config, authenticators per mode, a request's credentials, the principal.

``config`` (the ``[auth]`` table), ``authenticator`` (credentials → ``Principal``), ``credentials``
(HTTP and WebSocket: bearer header or ``bearer.<token>`` subprotocol, 401 refusals; applied by the HTTP
edge, ``awaken/http/edge.py``) and
``principal`` (``Principal``, ``principal_of(scope)`` for routes that act per user).
"""

from awaken.config.auth import AuthConfig, JwtConfig, TokenConfig
from awaken.core.principal import ANONYMOUS, Principal, principal_of
from awaken.http.auth.authenticator import Authenticator, build

__all__ = ["ANONYMOUS", "AuthConfig", "Authenticator", "JwtConfig", "Principal",
           "TokenConfig", "build", "principal_of"]
