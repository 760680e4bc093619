"""The AG-UI adapter: validate, deduplicate, hand the run to RunApplication, stream the encoding.

It decides no run state: it parses the body (``request.py``), drops messages the ledger already
holds (replayed history), turns new ``role: "tool"`` messages into ``ToolDecision``s, and streams
``AguiEncoder`` frames through the SSE transport. Every refusal is one ``RUN_ERROR`` stream with
HTTP 200, and starts no run.
"""

from __future__ import annotations

import logging

from ..context import ServerContext
from ..encoding import EncoderMisuse
from ..engine import RunRequest, ToolDecision
from ..errors import AwakenError, InputRejected, StoreUnavailable
from ..events import AgentEvent, RunFailed
from ..messages import Message
from ..transports import sse
from .encoder import AguiEncoder
from .request import AguiInput, InputMessage, parse_run_input

log = logging.getLogger("awaken.agui")
MAX_BODY = 32 * 1024 * 1024


async def to_run_request(ctx: ServerContext, data: AguiInput, agent_id: str | None) -> RunRequest:
    """Dedup against the ledger and split the rest into new input and tool decisions."""
    ctx.agents.get(agent_id)  # an unknown agent is refused before the ledger is touched
    committed = await ctx.ledger.committed_ids(data.thread_id, data.message_ids) if data.message_ids else set()
    if data.state:
        thread = await ctx.ledger.get_thread(data.thread_id)
        if thread is None or thread.state != data.state:
            raise InputRejected("state is not supported by this server; send it empty (or as it was last sent)",
                                code="UNSUPPORTED_FIELD")
    inputs: list[Message] = []
    decisions: list[ToolDecision] = []
    for m in data.messages:
        if m.id in committed:
            continue
        if isinstance(m, InputMessage):
            if m.parts:
                inputs.append(Message(m.id, m.role, m.parts))
        elif m.error is not None:
            decisions.append(ToolDecision(m.tool_call_id, "error", m.error or m.content, m.id))
        else:
            decisions.append(ToolDecision(m.tool_call_id, "ok", m.content, m.id))
    return RunRequest(data.thread_id, agent_id, tuple(inputs), tuple(decisions), data.run_id)


async def handle_run(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                     agent_id: str | None) -> None:
    """``POST /v1/ag-ui`` and ``POST /v1/ag-ui/agents/{agentId}``."""
    headers = sse.sse_headers()
    server = ctx.config.server
    encoder = AguiEncoder("", "")
    try:
        body = await sse.read_body(receive, MAX_BODY)
    except sse.ClientGone:
        return
    try:
        if body is None:
            raise InputRejected(f"the body is larger than {MAX_BODY} bytes", code="BODY_TOO_LARGE")
        content_type = dict(scope.get("headers", [])).get(b"content-type", b"").decode("latin-1") or None
        data = parse_run_input(body, content_type)
        encoder = AguiEncoder(data.thread_id, data.run_id, modern=data.modern)
        request = await to_run_request(ctx, data, agent_id)
        async with ctx.app.admit(request) as run:

            async def produce(put: sse.Put) -> None:
                await run.execute(_sink(encoder, put))

            await sse.stream(send, receive, headers, produce, keepalive=server.keepalive_seconds,
                             max_buffered=server.max_buffered_bytes)
    except (InputRejected, StoreUnavailable) as exc:
        await sse.send_once(send, headers, encoder.frame(encoder.rejection(exc.code, exc.message)))
    except AwakenError as exc:  # pragma: no cover - every admission error is one of the above
        log.exception("admission failed")
        await sse.send_once(send, headers, encoder.frame(encoder.rejection("INTERNAL_ERROR", exc.message)))


def _sink(encoder: AguiEncoder, put: sse.Put):  # noqa: ANN202 - returns the engine's Sink
    def sink(event: AgentEvent) -> None:
        try:
            put(encoder.encode(event))
        except EncoderMisuse:
            log.exception("AG-UI encoder refused %r", event)
            if not encoder.closed:
                encoder.closed = True
                put(encoder.frame([{"type": "RUN_ERROR", "code": "INTERNAL_ERROR",
                                    "message": "the server produced an invalid stream"}]))

    return sink


__all__ = ["handle_run", "to_run_request", "RunFailed"]
