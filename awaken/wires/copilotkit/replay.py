"""``connect``'s stream, sans-IO: a thread's committed history as the AG-UI events of one replay,
and which of the active run's events that history already holds.

A reloaded CopilotKit page calls ``connect`` for its thread with an empty message list; the stream
it gets rebuilds the conversation: ``RUN_STARTED`` (the newest finished run), ``MESSAGES_SNAPSHOT``
with every committed message (the AG-UI history projection), ``STATE_SNAPSHOT`` when the thread has
state, ``RUN_FINISHED``. A thread with nothing committed replays nothing (an empty stream, as the Node
runtime's in-memory runner answers).

When a run is active on the thread, its AG-UI events follow from its ``RUN_STARTED`` to its terminal
event (CopilotKit applies ``connect`` without single-run verification, so two runs back to back are
fine). The snapshot was read while the run streams, so it may already hold the run's committed
steps; ``Joined`` drops the live events of a message or tool call the snapshot holds (as the Node
runtime drops events whose ``messageId`` it already replayed): replaying ``TEXT_MESSAGE_CONTENT`` of a
message the client has would append its text twice.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import attrs

from awaken.core.messages import Message, ReasoningPart
from awaken.ledger.interface import ThreadView
from awaken.wires.agui.encoder import AguiEncoder
from awaken.wires.encoding import WireEvent

#: live events that belong to a tool call (keyed by ``toolCallId``); a result is its own message
_TOOL_CALL_EVENTS = frozenset({"TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END"})


def replay_events(view: ThreadView, active_run_id: str | None = None) -> list[WireEvent]:
    """The replay of ``view``. RUN_STARTED/RUN_FINISHED name the run of its newest message that is not
    ``active_run_id`` (the run streaming now, replayed after this), or the newest one if there is none."""
    if view.thread is None or not view.messages:
        return []
    thread_id = view.thread.thread_id
    runs = [m.run_id for m in reversed(view.messages) if m.run_id]
    run_id = next((r for r in runs if r != active_run_id), runs[0] if runs else "")
    return AguiEncoder(thread_id, run_id).replay(list(view.messages), view.thread.state)


@attrs.frozen
class Joined:
    """What the replayed history holds: its message ids (reasoning parts are messages on the AG-UI wire)
    and tool call ids."""

    message_ids: frozenset[str]
    tool_call_ids: frozenset[str]

    @classmethod
    def of(cls, messages: Iterable[Message]) -> Joined:
        messages = list(messages)
        return cls(frozenset(m.id for m in messages) | {p.id for m in messages for p in m.parts
                                                          if isinstance(p, ReasoningPart)},
                   frozenset(c.tool_call_id for m in messages for c in m.tool_calls))

    def keeps(self, event: Any) -> bool:
        """Whether the live ``event`` (an AG-UI wire event) adds something the history does not hold."""
        if not isinstance(event, dict):
            return True
        if event.get("type") in _TOOL_CALL_EVENTS:
            return event.get("toolCallId") not in self.tool_call_ids
        return event.get("messageId") not in self.message_ids
