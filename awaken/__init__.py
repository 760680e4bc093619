"""Awaken: a self-hosted agent server (AG-UI and AI SDK v6 streams over one engine and one ledger).

General layout:
    config.py, errors.py       configuration and the error/code catalogue
    messages.py, events.py     the history model and the live AgentEvent vocabulary
    ledger.py, runstate.py     the storage plugin boundary; run states, transitions, interruption causes
    engine/                    RunApplication, the only execution authority
    models/, tools/, agents.py model providers, tools, published agents
    protocol.py                the Protocol interface and request value types (no engine)
    encoding.py, agui/, aisdk/ the sans-IO encoders and protocol adapters
    transports/                SSE/WebSocket framing (no protocol, no engine)
    exchange.py, server.py     protocol + transport + engine joined; the ASGI app's routes
    cli.py                     the ``awaken`` command
"""

__version__ = "0.1.0"
