"""The CopilotKit runtime endpoint: what ``<CopilotKit runtimeUrl=...>`` calls, served under
``/v1/copilotkit`` over the same engine and ledger as AG-UI (no Node runtime in between).

* ``runtime`` — sans-IO: the routes and the single-endpoint envelope as ``RuntimeCall``s, the info
  document, the stop answer.
* ``replay`` — sans-IO: a thread's committed history as the AG-UI events ``connect`` streams.
* ``routes`` — the ASGI handler that reads bodies and writes answers.
"""
