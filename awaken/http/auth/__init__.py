"""Authentication: ``[auth]`` config, authenticators per mode, the ASGI middleware, the principal.

``config`` (the ``[auth]`` table), ``authenticator`` (credentials → ``Principal``), ``middleware``
(HTTP and WebSocket: bearer header or ``bearer.<token>`` subprotocol, 401 refusals) and
``principal`` (``Principal``, ``principal_of(scope)`` for routes that act per user).
"""

from awaken.config.auth import AuthConfig, JwtConfig, TokenConfig
from awaken.core.principal import ANONYMOUS, Principal, principal_of
from awaken.http.auth.authenticator import Authenticator, build
from awaken.http.auth.middleware import AuthMiddleware

__all__ = ["ANONYMOUS", "AuthConfig", "AuthMiddleware", "Authenticator", "JwtConfig", "Principal",
           "TokenConfig", "build", "principal_of"]
