"""A third-party-style wire: ``plain``, a JSON object with one line of text in, small JSON events out.

It is what a package would register under the ``awaken.wires`` entry-point group; the tests register it
by putting a dist-info directory on ``sys.path`` (``tests.plugins.plain_wire:WIRE``). It knows Awaken
only through the wires layer (``Protocol``, ``EncoderBase``, ``Wire``), the core vocabulary and the
ledger's paging; the server gives it the same front door as the shipped wires (Host, CORS, auth).

* run: ``POST /v1/plain`` or ``/v1/plain/agents/{agent}`` (SSE), ``/v1/plain/ws`` (WebSocket), with
  ``{"threadId"?, "messageId", "text"}``; the stream is ``start``, ``text`` deltas, then ``done``
  ``{outcome}`` or ``error`` ``{code, message}``;
* rejoin: ``GET /v1/plain/threads/{thread}/stream``;
* history: ``GET /v1/plain/threads/{thread}/messages`` → ``{items: [{id, role, text}], cursor}``.
"""

from __future__ import annotations

from typing import Any

import attrs

from awaken.core import events as ev
from awaken.core.errors import InputRejected
from awaken.core.jsonbody import is_json_media_type, load_json_object
from awaken.core.messages import Message, TextPart
from awaken.ledger.interface import Ledger, ThreadView
from awaken.ledger.paging import read_page
from awaken.wires.encoding import EncoderBase, WireEvent
from awaken.wires.protocol import Protocol, RunRequest
from awaken.wires.registry import Wire


@attrs.frozen
class PlainInput:
    thread_id: str | None
    message_id: str
    text: str


class PlainEncoder(EncoderBase):
    def on_run_started(self, e: ev.RunStarted) -> list[WireEvent]:
        return [{"type": "start", "threadId": e.thread_id, "runId": e.run_id}]

    def on_text_delta(self, e: ev.TextDelta) -> list[WireEvent]:
        return [{"type": "text", "delta": e.delta}] if e.delta else []

    def on_run_finished(self, e: ev.RunFinished) -> list[WireEvent]:
        return [{"type": "done", "outcome": e.outcome}]

    def on_run_stopped(self, e: ev.RunStopped) -> list[WireEvent]:
        return [{"type": "error", "code": "STOPPED", "message": e.message}]

    def on_run_failed(self, e: ev.RunFailed) -> list[WireEvent]:
        return [{"type": "error", "code": e.code, "message": e.message}]


class PlainProtocol(Protocol):
    def parse(self, body: bytes, content_type: str | None) -> PlainInput:
        if not is_json_media_type(content_type):
            raise InputRejected("send application/json", code="UNSUPPORTED_MEDIA_TYPE")
        data = load_json_object(body)
        thread_id, message_id, text = data.get("threadId"), data.get("messageId"), data.get("text")
        if thread_id is not None and not isinstance(thread_id, str):
            raise InputRejected("threadId must be a string")
        if not isinstance(message_id, str) or not isinstance(text, str) or not text.strip():
            raise InputRejected("messageId and text must be non-empty strings")
        return PlainInput(thread_id, message_id, text)

    def target(self, parsed: PlainInput, route_agent: str | None) -> tuple[str | None, str | None]:
        return parsed.thread_id, route_agent

    def to_run_request(self, parsed: PlainInput, thread_id: str, agent_id: str | None,
                       view: ThreadView) -> RunRequest:
        if parsed.message_id in view.message_ids():
            raise InputRejected("this message is committed already", code="NO_NEW_INPUT")
        return RunRequest(thread_id, agent_id, (Message(parsed.message_id, "user", (TextPart(parsed.text),)),))

    def encoder(self, parsed: Any | None) -> PlainEncoder:
        return PlainEncoder()


async def read_history(ledger: Ledger, thread_id: str, cursor: str | None, limit: int) -> tuple[list, str]:
    messages, next_cursor = await read_page(ledger, thread_id, cursor, limit)
    return [{"id": m.id, "role": m.role, "text": m.text} for m in messages if m.text], next_cursor


WIRE = Wire(
    PlainProtocol(),
    runs=("/v1/plain", "/v1/plain/agents/{agent}"),
    sockets=("/v1/plain/ws",),
    rejoins=("/v1/plain/threads/{thread}/stream",),
    history=("/v1/plain/threads/{thread}/messages",),
    read_history=read_history,
)
