"""Awaken: a self-hosted agent server (AG-UI and AI SDK v6 streams over one engine and one ledger).

General layout:
    config.py, errors.py       configuration and the error/code catalogue
    messages.py, events.py     the history model and the live AgentEvent vocabulary
    ledger.py, runstate.py     the storage plugin boundary and the run state table
    engine.py                  RunApplication, the only execution authority
    models/, tools/, agents.py model providers, tools, published agents
    encoding.py, agui/, aisdk/ the sans-IO encoders and protocol adapters
    transports/, server.py     SSE/WebSocket framing and the ASGI app
    cli.py                     the ``awaken`` command
"""

__version__ = "0.1.0"
