"""Awaken: a self-hosted agent server (AG-UI, the AI SDK, CopilotKit and Managed Agents sessions over one engine
and one ledger).

General layout, from the bottom layer up (``tests/package/test_layering.py`` holds every module to it:
a module imports its own layer and the ones below, never one above):

    core/          the vocabulary every layer shares: errors and their statuses, ids, messages,
                   live AgentEvents, principals, media and JSON-body checks (no I/O)
    runtime/       the process: memory tuning, hypercorn's seams (accept, read, write deadlines), workers
    telemetry/     traces (OpenTelemetry GenAI conventions), Prometheus metrics, structured logs
    engine/        RunApplication, the only execution authority; ``state`` (run states, the one object
                   that changes them) and ``claims`` (who may run on a thread) sit below the ledger
    models/        model providers (the ``awaken.models`` entry-point group): scripted, OpenAI-compatible
    tools/         server tools and the tool registry
    mcp/           tools from MCP servers
    config/        ``config.toml`` loaded into attrs classes; the shape checks of every table
    ledger/        the history authority's interface, its registry (``awaken.ledgers``), hot-thread
                   cache, paging, copy, migrate and the conformance kit (``testkit``) backends run
    wires/         the protocols, sans-IO: request parsers, encoders, history projection, adapters
                   (AG-UI, AI SDK, CopilotKit, Managed Agents sessions), registered under the ``awaken.wires`` group
    transports/    SSE and WebSocket framing: bytes only, no protocol, no engine
    streams/       one request, one run, one stream (exchange); a run's broadcast and replay; rejoin
    http/          the ASGI app: hosts, CORS, auth, visibility, the threads API, the console routes

    cli.py         the ``awaken`` command (``__main__``: ``python -m awaken``)

The shipped ledgers live beside the package, in ``storage_backends/``.
"""

__version__ = "0.1.0"
