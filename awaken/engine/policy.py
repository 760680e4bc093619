"""Tool policy: what happens to each tool call a model step makes, and to each decision a resume
brings.

* A client tool (configured, or declared by the client for this run) is parked as a pending
  ``client`` call (the client runs it and answers).
* A server tool under ``ask`` is parked at a permission gate (a pending ``approval`` call).
* A server tool under ``deny`` gets a ``denied`` result; an unknown tool an ``error`` result.
* An allowed server tool runs now; several run concurrently. Results keep call order.

A resume's decisions are applied by ``decided``: approved calls run, denied ones get a ``denied``
result, a client tool's answer becomes its result, and all of it is one commit. Both return what the
run commits (results, pending calls, a ``Commit``); neither writes into the run.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import trio

from awaken.core.messages import Message, ToolCallPart, ToolResultPart
from awaken.engine.rundata import RunBase
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, PendingCall
from awaken.telemetry import tracing
from awaken.telemetry.conventions import BY_POLICY
from awaken.tools import ToolContext
from awaken.wires.protocol import SUPERSEDED, Sink, denial, result_id


async def run_tools(
    run: RunBase, calls: list[ToolCallPart], message_id: str, sink: Sink | None = None
) -> tuple[list[Message], list[PendingCall], dict[str, Any]]:
    """Execute allowed server tools concurrently; deny or park the rest. Results keep call order.
    A tool's progress goes to ``sink`` (the run's stream) while it runs."""
    agent = run.agent
    state = dict(run.state)
    outcomes: dict[str, ToolResultPart] = {}
    pending: list[PendingCall] = []
    runnable: list[ToolCallPart] = []
    declared = {t.name for t in run.client_tools}
    for call in calls:
        if agent.is_client_tool(call.name) or call.name in declared:
            pending.append(PendingCall(call.tool_call_id, run.run_id, run.thread_id, call.name,
                                       call.arguments, "client", message_id))
        elif call.name not in {t.name for t in agent.server_tools}:
            outcomes[call.tool_call_id] = ToolResultPart(call.tool_call_id, call.name,
                                                         f"unknown tool {call.name!r}", "error")
            with tracing.tool(call.name, call.tool_call_id, "server") as span:
                tracing.tool_result(span, "error", call.arguments, outcomes[call.tool_call_id].content)
        elif (permission := agent.permission(call.name)) == "deny":
            outcomes[call.tool_call_id] = ToolResultPart(
                call.tool_call_id, call.name, f"denied: the policy does not allow {call.name}", "denied"
            )
            with tracing.tool(call.name, call.tool_call_id, tool_kind(run, call.name), decision="deny",
                              decided_by=BY_POLICY) as span:
                tracing.tool_result(span, "denied", call.arguments)
        elif permission == "ask":
            pending.append(PendingCall(call.tool_call_id, run.run_id, run.thread_id, call.name,
                                       call.arguments, "approval", message_id))
        else:
            runnable.append(call)

    async def run_one(call: ToolCallPart) -> None:
        with tracing.tool(call.name, call.tool_call_id, tool_kind(run, call.name), decision="allow",
                          decided_by=BY_POLICY) as span:
            outcome = await run.tools.execute(call.name, call.arguments, context(run, state, call, sink))
            tracing.tool_result(span, "ok" if outcome.ok else "error", call.arguments, outcome.content)
        outcomes[call.tool_call_id] = ToolResultPart(call.tool_call_id, call.name, outcome.content,
                                                     "ok" if outcome.ok else "error")

    if len(runnable) == 1:
        await run_one(runnable[0])
    elif runnable:
        async with trio.open_nursery() as nursery:
            for call in runnable:
                nursery.start_soon(run_one, call)
    results = [
        Message(result_id(c.tool_call_id), "tool", (outcomes[c.tool_call_id],), run.run_id)
        for c in calls
        if c.tool_call_id in outcomes
    ]
    return results, pending, state


def context(run: RunBase, state: dict[str, Any], call: ToolCallPart | PendingCall,
            sink: Sink | None) -> ToolContext:
    """The context of one server tool call: who asked, where, the run's working state, its stream."""
    return ToolContext(run.thread_id, run.run_id, state, principal=run.principal, tool_call_id=call.tool_call_id,
                       emit=sink)


async def decided(run: RunBase, sink: Sink | None = None) -> Commit:
    """Run approved calls; the commit of every decided result in one step (a resume's first commit),
    not written: ``waiting`` while calls remain undecided, else ``running``.

    Until that commit the run stays ``waiting``: a crash or a disconnect while an approved tool
    runs leaves the same calls pending, to be decided again. New input in the same request closes
    any call it leaves undecided (as new input always does) and is committed after the results.
    """
    state = dict(run.state)
    results: list[Message] = []
    for call, decision in run.spec.decided:
        if call.kind == "client":
            status = "ok" if decision.kind == "ok" else "error"
            part = ToolResultPart(call.tool_call_id, call.name, decision.content, status)
            # the client ran it while the run waited: its span is that wait
            with tracing.tool(call.name, call.tool_call_id, "client", start_ns=tracing.since()) as span:
                tracing.tool_result(span, status, call.arguments, decision.content)
        elif decision.kind in ("ok", "approve"):
            tracing.waited(call.name, call.tool_call_id, "approve")
            # Edited arguments (validated at admission) replace the model's; the result records them.
            with tracing.tool(call.name, call.tool_call_id, tool_kind(run, call.name), decision="approve",
                              decided_by=tracing.decider()) as span:
                outcome = await run.tools.execute(
                    call.name, decision.arguments or call.arguments, context(run, state, call, sink)
                )
                tracing.tool_result(span, "ok" if outcome.ok else "error", decision.arguments or call.arguments,
                                    outcome.content)
            part = ToolResultPart(call.tool_call_id, call.name, outcome.content,
                                  "ok" if outcome.ok else "error", "approved", decision.arguments)
        else:
            part = ToolResultPart(call.tool_call_id, call.name, denial(decision.content), "denied", "denied")
            tracing.waited(call.name, call.tool_call_id, "deny")
            with tracing.tool(call.name, call.tool_call_id, tool_kind(run, call.name), decision="deny",
                              decided_by=tracing.decider()) as span:
                tracing.tool_result(span, "denied", call.arguments)
        # A client tool's result is the client's own tool message, committed under its id; a gate's
        # result is the server's (the client's message only carried the decision), so it gets the
        # server's stable id and the client can receive it as a new message.
        message_id = decision.message_id if call.kind == "client" else None
        results.append(Message(message_id or result_id(call.tool_call_id), "tool", (part,), run.run_id))
    inputs = tuple(attrs.evolve(m, run_id=run.run_id) for m in run.request.inputs)
    remaining = run.spec.remaining
    closed: tuple[Message, ...] = ()
    if inputs and remaining:
        closed, remaining = superseded(remaining, run.run_id), ()
    return Commit(
        status=RunStatus.WAITING if remaining else RunStatus.RUNNING,
        messages=tuple(results) + closed + (inputs if not remaining else ()),
        resolved=tuple(c.tool_call_id for c, _ in run.spec.decided) + tuple(m.tool_result.tool_call_id
                                                                           for m in closed),
        # a state the client sent with the decisions is committed with them
        state=state if state != run.state or run.spec.client_state else None,
    )


def tool_kind(run: RunBase, name: str) -> str:
    """Where the server tool ``name`` runs: ``server`` or ``mcp`` (its registry entry's kind)."""
    return run.tools.get(name).kind if name in run.tools else "server"


def superseded(pending: Sequence[PendingCall], run_id: str) -> tuple[Message, ...]:
    """The results that close ``pending`` calls when new input arrives before they were answered."""
    return tuple(
        Message(result_id(p.tool_call_id), "tool", (ToolResultPart(p.tool_call_id, p.name, SUPERSEDED, "error"),),
                run_id)
        for p in pending
    )
