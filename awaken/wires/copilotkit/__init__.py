"""The CopilotKit runtime endpoint: what ``<CopilotKit runtimeUrl=...>`` calls, served under
``/v1/copilotkit`` over the same engine and ledger as AG-UI (no Node runtime in between).

* ``runtime`` — sans-IO: the routes and the single-endpoint envelope as ``RuntimeCall``s, the info
  document, the stop answer, refusals in the runtime's error shape.
* ``replay`` — sans-IO: a thread's committed history as the AG-UI events ``connect`` streams (built by
  the AG-UI encoder).

The ASGI handler that reads bodies and writes answers does I/O through the streams and the HTTP edge,
so it lives there: ``awaken.http.copilotkit``, whose ``WIRE`` the ``copilotkit`` entry point of the
``awaken.wires`` group registers.
"""
