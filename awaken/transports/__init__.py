"""Transports: the only code that owns sockets. They frame and write bytes; they decide nothing.

``sse.py`` streams a run over an HTTP response (raw ASGI on hypercorn's trio worker);
``ws.py`` carries the same frames over a WebSocket.
"""
