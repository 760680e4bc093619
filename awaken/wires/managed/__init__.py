"""The Managed Agents sessions-and-events wire (Anthropic's beta ``managed-agents-2026-04-01``), sans-IO: the
request bodies (``request``), the history projection of a thread as session events (``events``), the live
encoder, the shapes and the error envelope (``protocol``). Its routes are ``awaken.http.managed``."""
