"""Authentication: ``[auth]`` config, authenticators per mode, the ASGI middleware, the principal.

``config`` (the ``[auth]`` table), ``authenticator`` (credentials → ``Principal``), ``middleware``
(HTTP and WebSocket: bearer header or ``bearer.<token>`` subprotocol, 401 refusals) and
``principal`` (``Principal``, ``principal_of(scope)`` for routes that act per user).
"""

from .authenticator import Authenticator, build
from .config import AuthConfig, JwtConfig, TokenConfig
from .middleware import AuthMiddleware
from .principal import ANONYMOUS, Principal, principal_of

__all__ = ["ANONYMOUS", "AuthConfig", "AuthMiddleware", "Authenticator", "JwtConfig", "Principal",
           "TokenConfig", "build", "principal_of"]
