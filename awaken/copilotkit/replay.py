"""``connect``'s stream, sans-IO: a thread's committed history as the AG-UI events of one replay.

A reloaded CopilotKit page calls ``connect`` for its thread with an empty message list; the stream
it gets rebuilds the conversation: ``RUN_STARTED`` (the newest message's run), ``MESSAGES_SNAPSHOT``
with every committed message (the AG-UI history projection), ``STATE_SNAPSHOT`` when the thread has
state, ``RUN_FINISHED``. A thread with nothing committed replays nothing (an empty stream, as the Node
runtime's in-memory runner answers). A run streaming right now is not joined: its committed steps
are in the snapshot; the rest arrives in history once it commits.
"""

from __future__ import annotations

from ..agui.encoder import PROTOCOL_VERSION
from ..agui.history import project_history
from ..encoding import WireEvent
from ..ledger import ThreadView


def replay_events(view: ThreadView) -> list[WireEvent]:
    """The replay of ``view`` (RUN_STARTED/RUN_FINISHED name the run of its newest message)."""
    if view.thread is None or not view.messages:
        return []
    thread_id = view.thread.thread_id
    run_id = next((m.run_id for m in reversed(view.messages) if m.run_id), "")
    events: list[WireEvent] = [
        {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "protocolVersion": PROTOCOL_VERSION},
        {"type": "MESSAGES_SNAPSHOT", "messages": project_history(list(view.messages))},
    ]
    if view.thread.state:
        events.append({"type": "STATE_SNAPSHOT", "snapshot": view.thread.state})
    events.append({"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id})
    return events
