"""The Managed Agents session events of a committed thread: the history projection, pure.

A session is a thread; its events are a function of what the ledger committed (messages with their
``seq``, the runs' statuses, the pending calls), so the history route and the stream, which both read
them here, agree event for event. Every event has a position ``(seq, k)``: the ledger position of
the message it comes from, and its place among that message's events. Ids are positions
(``sevt_<seq>_<k>``), except the two events the stream previews before they are committed
(``event_deltas``): an ``agent.message`` is ``sevt_m_<message id>`` and an ``agent.thinking``
``sevt_r_<reasoning id>``, ids the live run names before the ledger gives the message its ``seq``.

What each committed message yields, in position order:

* an input (user, system, developer): ``user.message`` (k 0, user text and images only); after the
  last input of a run, ``session.status_running`` (k ``RUNNING``);
* an assistant step: ``agent.thinking`` (k 0), ``agent.message`` (k 1), then per call
  ``agent.tool_use`` (a server tool, with ``evaluated_permission``) or ``agent.custom_tool_use`` (a
  tool the client executes) (k 2 + i);
* a tool result: the person's or the client's answer (``user.tool_confirmation`` or
  ``user.custom_tool_result``, k 0), ``session.status_running`` when it is the first answer after the
  run waited (k ``RUNNING``: after the answer, before the result), ``agent.tool_result`` for a server
  tool (k ``RESULT``);
* where the run stopped: ``session.status_idle`` with ``requires_action`` (the ids of the calls it
  waits on) after the last message before the answers (or the run's last while it waits); at a run's
  end ``session.error`` for a failure, then ``session.status_idle`` (``end_turn``, or
  ``retries_exhausted`` after a failure) (k ``ERROR``, ``IDLE``).
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from awaken.core.messages import ImagePart, Message, ReasoningPart, TextPart, ToolCallPart
from awaken.engine.state import RunStatus
from awaken.wires.protocol import DENIED, SUPERSEDED

Event = dict[str, Any]
#: an event's place: (the ledger seq of its message, its index among that message's events)
Position = tuple[int, int]

RUNNING = 1
RESULT = 2
ERROR = 1001
IDLE = 1002
#: the prefix of every event id this wire writes
PREFIX = "sevt_"
_POSITIONAL = re.compile(r"^sevt_(\d{1,18})_(\d{1,6})$")


def event_id(position: Position) -> str:
    return f"{PREFIX}{position[0]}_{position[1]}"


def message_event_id(message_id: str) -> str:
    """The id of the ``agent.message`` of the assistant message ``message_id`` (what a preview names)."""
    return f"{PREFIX}m_{message_id}"


def thinking_event_id(reasoning_id: str) -> str:
    """The id of the ``agent.thinking`` of the reasoning ``reasoning_id`` (what a preview names)."""
    return f"{PREFIX}r_{reasoning_id}"


def positional(value: str) -> Position | None:
    """The position a ``sevt_<seq>_<k>`` id names (None for any other id)."""
    match = _POSITIONAL.match(value.strip())
    return (int(match[1]), int(match[2])) if match else None


def timestamp(ms: int) -> str:
    """RFC 3339 (UTC, milliseconds) of a time in ms since the epoch."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"


@attrs.frozen
class RunFacts:
    """What the projection needs of a run: its status and, when it failed, why."""

    status: RunStatus
    error_code: str | None = None
    error_message: str | None = None


@attrs.frozen
class Positioned:
    position: Position
    event: Event

    @property
    def id(self) -> str:
        return self.event["id"]


def _is_answer(message: Message | None, client_tools: frozenset[str]) -> bool:
    """Whether ``message`` answers a call its run waited on: a person's decision at a gate, a client
    tool's result, or the close of a call that new input superseded."""
    if message is None or message.role != "tool" or message.tool_result is None:
        return False
    result = message.tool_result
    return result.approval is not None or result.name in client_tools or result.content.startswith(SUPERSEDED)


def _blocks(message: Message) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for part in message.parts:
        if isinstance(part, TextPart) and part.text:
            out.append({"type": "text", "text": part.text})
        elif isinstance(part, ImagePart):
            if part.url.startswith("data:"):
                head, _, data = part.url.partition(",")
                media = head[5:].split(";")[0] or part.mime_type or "image/png"
                out.append({"type": "image", "source": {"type": "base64", "media_type": media, "data": data}})
            else:
                out.append({"type": "image", "source": {"type": "url", "url": part.url}})
    return out


def _arguments(text: str) -> dict[str, Any]:
    import orjson

    try:
        value = orjson.loads(text or "{}")
    except orjson.JSONDecodeError:
        return {"_raw": text}
    return value if isinstance(value, dict) else {"value": value}


def project(messages: Sequence[Message], runs: Mapping[str, RunFacts], pending: Mapping[str, str],
            client_tools: Iterable[str], previous: Message | None = None) -> list[Positioned]:
    """Every event of ``messages`` (a thread's committed messages from some ``seq`` on, in order; their
    events need the message before them: ``previous``), oldest first.

    ``runs``: run id -> its facts; ``pending``: the calls the thread waits on now (id -> ``approval`` or
    ``client``); ``client_tools``: the names of the tools the client executes (the agent's and the runs')."""
    clients = frozenset(client_tools)
    out: list[Positioned] = []
    #: tool call id -> the id of its tool-use event (an answer names it)
    call_events: dict[str, str] = {}
    gated = {m.tool_result.tool_call_id for m in messages if m.tool_result is not None and m.tool_result.approval}
    gated |= {call for call, kind in pending.items() if kind == "approval"}
    denied_at_gate = {m.tool_result.tool_call_id for m in messages
                      if m.tool_result is not None and m.tool_result.status == "denied" and not m.tool_result.approval}
    for index, message in enumerate(messages):
        seq, at = message.seq, timestamp(message.created_at)
        before = messages[index - 1] if index else previous
        after = messages[index + 1] if index + 1 < len(messages) else None

        def add(k: int, kind: str, fields: dict[str, Any], *, id: str | None = None, seq: int = seq,
                at: str = at) -> None:
            out.append(Positioned((seq, k), {"id": id or event_id((seq, k)), "type": kind, **fields,
                                             "processed_at": at}))

        run = runs.get(message.run_id or "")
        if message.role in ("user", "system", "developer"):
            if message.role == "user":
                add(0, "user.message", {"content": _blocks(message)})
            last_input = after is None or after.role not in ("user", "system", "developer") \
                or after.run_id != message.run_id
            if last_input and run is not None:
                add(RUNNING, "session.status_running", {})
        elif message.role == "assistant":
            for part in message.parts:
                if isinstance(part, ReasoningPart):
                    add(0, "agent.thinking", {}, id=thinking_event_id(part.id))
                    break
            text = [{"type": "text", "text": p.text} for p in message.parts if isinstance(p, TextPart) and p.text]
            if text:
                add(1, "agent.message", {"content": text}, id=message_event_id(message.id))
            calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
            for i, call in enumerate(calls):
                k = RESULT + i
                call_events[call.tool_call_id] = event_id((seq, k))
                if call.name in clients:
                    add(k, "agent.custom_tool_use", {"name": call.name, "input": _arguments(call.arguments)})
                else:
                    permission = "ask" if call.tool_call_id in gated else \
                        "deny" if call.tool_call_id in denied_at_gate else "allow"
                    add(k, "agent.tool_use", {"name": call.name, "input": _arguments(call.arguments),
                                              "evaluated_permission": permission})
        elif message.role == "tool" and message.tool_result is not None:
            result = message.tool_result
            use = call_events.get(result.tool_call_id, result.tool_call_id)
            superseded = result.content.startswith(SUPERSEDED)
            if result.approval is not None:
                fields: dict[str, Any] = {"tool_use_id": use, "result": "allow" if result.approval == "approved"
                                          else "deny"}
                if result.approval == "denied":
                    reason = result.content[len(DENIED):].lstrip(": ").strip() \
                        if result.content.startswith(DENIED) else result.content
                    fields["deny_message"] = reason or None
                add(0, "user.tool_confirmation", fields)
            elif result.name in clients and not superseded:
                add(0, "user.custom_tool_result", {"custom_tool_use_id": use, "is_error": result.status != "ok",
                                                   "content": [{"type": "text", "text": result.content}]})
            if _is_answer(message, clients) and not superseded and not _is_answer(before, clients):
                add(RUNNING, "session.status_running", {})
            if result.name not in clients:
                add(RESULT, "agent.tool_result", {"tool_use_id": use, "is_error": result.status != "ok",
                                                  "content": [{"type": "text", "text": result.content}]})
        # where the run stopped after this message
        if run is None:
            continue
        answers = _is_answer(after, clients) and after is not None and after.run_id == message.run_id
        waiting_now = after is None and run.status is RunStatus.WAITING
        if (answers and not _is_answer(message, clients)) or waiting_now:
            if waiting_now:
                waited = list(pending)
            else:
                waited = []
                for later in messages[index + 1:]:
                    if not _is_answer(later, clients) or later.run_id != message.run_id:
                        break
                    assert later.tool_result is not None
                    waited.append(later.tool_result.tool_call_id)
            ids = [call_events.get(c, c) for c in waited]
            add(IDLE, "session.status_idle", {"stop_reason": {"type": "requires_action", "event_ids": ids},
                                              "stop_details": None})
            continue
        last_of_run = after is None or after.run_id != message.run_id
        if last_of_run and run.status in (RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.INTERRUPTED):
            if run.status is RunStatus.FAILED:
                add(ERROR, "session.error", {"error": {
                    "type": "unknown_error", "message": f"{run.error_code or 'INTERNAL_ERROR'}: "
                                                        f"{run.error_message or 'the run failed'}",
                    "retry_status": {"type": "exhausted"}}})
            reason = "retries_exhausted" if run.status is RunStatus.FAILED else "end_turn"
            add(IDLE, "session.status_idle", {"stop_reason": {"type": reason}, "stop_details": None})
    out.sort(key=lambda e: e.position)  # the order of positions, whatever the order they were made in
    return out


def idles(events: Iterable[Positioned]) -> list[Position]:
    """The positions of the ``session.status_idle`` events among ``events``."""
    return [e.position for e in events if e.event["type"] == "session.status_idle"]


def stream_start(events: Sequence[Positioned], running: bool, seen_idle: Position | None) -> Position:
    """Where a stream opened without ``Last-Event-ID`` starts (exclusive): at the turn now running (after
    the last idle); when the session is idle, at the latest turn if no stream of this server has
    delivered its idle yet (``seen_idle``: the latest one it did; a client that sent and then opened
    the stream sees that whole turn), else at the end (only what comes next)."""
    stops = idles(events)
    if running or not stops:
        return stops[-1] if stops and running else (0, 0)
    if seen_idle is not None and seen_idle >= stops[-1]:
        return events[-1].position if events else (0, 0)
    return stops[-2] if len(stops) > 1 else (0, 0)


def after(events: Iterable[Positioned], position: Position) -> list[Positioned]:
    return [e for e in events if e.position > position]


def page(events: Sequence[Positioned], limit: int, order: str, page_token: str | None) -> tuple[list[Event], str | None]:
    """One page of ``events`` (``order`` asc or desc) after the event ``page_token`` names; the token of
    the next page (None after the last). ``ValueError`` for a token that names no event."""
    ordered = list(events) if order == "asc" else list(reversed(events))
    start = 0
    if page_token:
        ids = [e.id for e in ordered]
        if page_token not in ids:
            raise ValueError(f"page {page_token!r} is not one this listing returned")
        start = ids.index(page_token) + 1
    chosen = ordered[start:start + limit]
    more = start + limit < len(ordered)
    return [e.event for e in chosen], (chosen[-1].id if more and chosen else None)


def waiting_calls(messages: Sequence[Message], pending: Iterable[str]) -> dict[str, str]:
    """The calls the thread waits on, by every id an answer may name: the id of the call's tool-use event
    and the tool call id itself."""
    waiting = set(pending)
    out = {call: call for call in waiting}
    for message in messages:
        calls = [p for p in message.parts if isinstance(p, ToolCallPart)]
        for i, call in enumerate(calls):
            if call.tool_call_id in waiting:
                out[event_id((message.seq, RESULT + i))] = call.tool_call_id
    return out


def resolve(value: str, events: Sequence[Positioned]) -> Position:
    """The position of the event ``value`` names (``Last-Event-ID``); ``ValueError`` when it names none."""
    position = positional(value)
    if position is not None:
        return position
    for event in events:
        if event.id == value:
            return event.position
    raise ValueError(f"{value[:80]!r} is not an event of this session")
