"""The AG-UI protocol adapter: validate, deduplicate, split input from decisions, pick the encoder.

It decides no run state: it parses the body (``request.py``), drops messages the ledger already
holds (replayed history), and turns new ``role: "tool"`` messages into ``ToolDecision``s. Every
refusal is one ``RUN_ERROR`` stream (HTTP 200) and starts no run. ``handle_run`` is the SSE route.
"""

from __future__ import annotations

from typing import Any

from ..context import ServerContext
from ..engine import RunRequest, ToolDecision
from ..errors import InputRejected
from ..exchange import Protocol, sse_exchange
from ..messages import Message
from .encoder import AguiEncoder
from .request import AguiInput, InputMessage, parse_run_input


class AguiProtocol(Protocol):
    def parse(self, body: bytes, content_type: str | None) -> AguiInput:
        return parse_run_input(body, content_type)

    def encoder(self, parsed: AguiInput | None) -> AguiEncoder:
        if parsed is None:
            return AguiEncoder("", "")
        return AguiEncoder(parsed.thread_id, parsed.run_id, modern=parsed.modern)

    async def to_run_request(self, ctx: ServerContext, parsed: AguiInput, agent_id: str | None) -> RunRequest:
        data = parsed
        ctx.agents.get(agent_id)  # an unknown agent is refused before the ledger is touched
        committed = await ctx.ledger.committed_ids(data.thread_id, data.message_ids) if data.message_ids else set()
        if data.state:
            thread = await ctx.ledger.get_thread(data.thread_id)
            if thread is None or thread.state != data.state:
                raise InputRejected(
                    "state is not supported by this server; send it empty (or exactly as the server last sent it)",
                    code="UNSUPPORTED_FIELD",
                )
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


PROTOCOL = AguiProtocol()


async def handle_run(ctx: ServerContext, scope: dict, receive: Any, send: Any, agent_id: str | None) -> None:
    """``POST /v1/ag-ui`` and ``POST /v1/ag-ui/agents/{agentId}`` over SSE."""
    await sse_exchange(ctx, PROTOCOL, scope, receive, send, agent_id)
