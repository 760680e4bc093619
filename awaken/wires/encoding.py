"""The encoder base: a pure state machine from AgentEvents to wire events (h11 style).

``feed(event) -> list[wire event]`` dispatches on the event's class to a hook (``on_text_delta``…);
``frame(wire events) -> bytes`` gives the SSE bytes (``data: <compact JSON>\\n\\n``, LF only). No
I/O, no clock, no ids are invented here: everything comes in on the events or the constructor.

The base owns the lifecycle: after a terminal wire event it refuses further input
(``EncoderClosed``), and a hook that sees an out-of-order event raises ``EncoderMisuse`` and moves the
encoder to its error state: it never silently patches a stream.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson

from awaken.core import events as ev

WireEvent = dict[str, Any]


class Verbatim(str):
    """A wire payload sent as it is, not as JSON (the AI SDK's ``[DONE]``). Transports frame it like any
    wire event: SSE puts it after ``data: ``; WebSocket sends it as one text message."""

    __slots__ = ()


class EncoderMisuse(RuntimeError):
    """An AgentEvent arrived that the stream cannot carry in its current state (a server bug)."""


class EncoderClosed(EncoderMisuse):
    """Input after the terminal event."""


def _hook_name(cls: type) -> str:
    return "on_" + re.sub(r"(?<!^)(?=[A-Z])", "_", cls.__name__).lower()


_HOOKS: dict[type, str] = {cls: _hook_name(cls) for cls in (
    ev.RunStarted, ev.StepStarted, ev.StepFinished, ev.TextStart, ev.TextDelta, ev.TextEnd,
    ev.ReasoningStart, ev.ReasoningDelta, ev.ReasoningEnd, ev.ToolCallStart, ev.ToolCallArgs,
    ev.ToolCallEnd, ev.ToolApprovalRequested, ev.ToolResult, ev.ToolProgress, ev.StateChanged, ev.RunFinished,
    ev.RunStopped, ev.RunFailed,
)}


_TERMINAL = frozenset({ev.RunFinished, ev.RunStopped, ev.RunFailed})


def sse_frame(payload: Any) -> bytes:
    """One SSE frame: ``data: <compact JSON>\n\n`` (a ``Verbatim`` payload as it is), LF only."""
    if type(payload) is Verbatim:
        return b"data: " + payload.encode() + b"\n\n"
    return b"data: " + orjson.dumps(payload) + b"\n\n"


def sse_frame_at(position: bytes | None, payload: bytes) -> bytes:
    """One SSE frame of an encoded payload, with its ``id:`` line when it has a position."""
    if position is None:
        return b"data: " + payload + b"\n\n"
    return b"id: " + position + b"\ndata: " + payload + b"\n\n"


def text_payload(payload: Any) -> bytes:
    """The payload of one wire event as a text message carries it (what SSE puts after ``data: ``).

    A run's broadcast keeps these for rejoins (bounded by ``replay_bytes``, counted by length), so
    they are copied to their exact size: the bytes ``orjson.dumps`` returns are a 4 KiB allocation
    even for a 100-byte delta (see bench/README.md, "Memory per active stream")."""
    if type(payload) is Verbatim:
        return payload.encode()
    return bytes(memoryview(orjson.dumps(payload)))


def sse_frames(wire: Iterable[WireEvent]) -> bytes:
    """The SSE frames of a list of wire events (what the SSE transport writes)."""
    return b"".join(sse_frame(w) for w in wire)


class EncoderBase:
    """Subclasses override ``on_*`` hooks; each returns the wire events for one AgentEvent."""

    def __init__(self) -> None:
        self.closed = False
        self.failed = False

    #: event class -> the subclass's hook function (filled per subclass on first use)
    _dispatch: dict[type, Any]

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        cls._dispatch = {event_cls: getattr(cls, name) for event_cls, name in _HOOKS.items()}

    def feed(self, event: ev.AgentEvent) -> list[WireEvent]:
        if self.closed:
            raise EncoderClosed(f"{type(event).__name__} after the terminal event")
        if self.failed:
            raise EncoderMisuse("the encoder already refused an event")
        kind = type(event)
        try:
            out: list[WireEvent] = self._dispatch[kind](self, event)
        except EncoderMisuse:
            self.failed = True
            raise
        if kind in _TERMINAL:
            self.closed = True
        return out

    def rejection(self, code: str, message: str) -> list[WireEvent]:
        """The wire events of input refused before a run started (``Protocol.refusal`` adds the end)."""
        return self.feed(ev.RunFailed(code, message))

    def encode(self, event: ev.AgentEvent) -> bytes:
        """``feed`` and ``frame`` in one call (the live path)."""
        return self.frame(self.feed(event))

    def frame(self, wire: Iterable[WireEvent]) -> bytes:
        return sse_frames(wire)

    # Every hook defaults to emitting nothing.
    def on_run_started(self, e: ev.RunStarted) -> list[WireEvent]:
        return []

    def on_step_started(self, e: ev.StepStarted) -> list[WireEvent]:
        return []

    def on_step_finished(self, e: ev.StepFinished) -> list[WireEvent]:
        return []

    def on_text_start(self, e: ev.TextStart) -> list[WireEvent]:
        return []

    def on_text_delta(self, e: ev.TextDelta) -> list[WireEvent]:
        return []

    def on_text_end(self, e: ev.TextEnd) -> list[WireEvent]:
        return []

    def on_reasoning_start(self, e: ev.ReasoningStart) -> list[WireEvent]:
        return []

    def on_reasoning_delta(self, e: ev.ReasoningDelta) -> list[WireEvent]:
        return []

    def on_reasoning_end(self, e: ev.ReasoningEnd) -> list[WireEvent]:
        return []

    def on_tool_call_start(self, e: ev.ToolCallStart) -> list[WireEvent]:
        return []

    def on_tool_call_args(self, e: ev.ToolCallArgs) -> list[WireEvent]:
        return []

    def on_tool_call_end(self, e: ev.ToolCallEnd) -> list[WireEvent]:
        return []

    def on_tool_approval_requested(self, e: ev.ToolApprovalRequested) -> list[WireEvent]:
        return []

    def on_tool_result(self, e: ev.ToolResult) -> list[WireEvent]:
        return []

    def on_tool_progress(self, e: ev.ToolProgress) -> list[WireEvent]:
        return []

    def on_state_changed(self, e: ev.StateChanged) -> list[WireEvent]:
        return []

    def on_run_finished(self, e: ev.RunFinished) -> list[WireEvent]:
        return []

    def on_run_stopped(self, e: ev.RunStopped) -> list[WireEvent]:
        return []

    def on_run_failed(self, e: ev.RunFailed) -> list[WireEvent]:
        return []


EncoderBase._dispatch = {event_cls: getattr(EncoderBase, name) for event_cls, name in _HOOKS.items()}
