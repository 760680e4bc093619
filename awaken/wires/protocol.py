"""The protocol interface and the request value types: what an adapter needs, without the engine.

A ``Protocol`` (AG-UI, AI SDK) parses a request body, turns it into a ``RunRequest`` (dedup against
the ledger, tool decisions), builds its encoder, and owns how its streams end (``closing``) and how
a refused request looks (``refusal``, the one place a refusal stream is assembled). Everything here
is pure (sans-IO). The engine consumes ``RunRequest``/``ToolDecision`` and feeds a ``Sink``.
"""

from __future__ import annotations

import abc
from collections.abc import Callable
from os import urandom
from typing import Any, Literal

import attrs

from awaken.core.errors import count_refusal
from awaken.core.events import AgentEvent
from awaken.core.messages import Message, result_id  # noqa: F401 - re-exported: adapters and the engine import it here
from awaken.ledger.interface import ThreadView
from awaken.models import ContextEntry, ToolSpec
from awaken.wires.encoding import EncoderBase, WireEvent

#: what the engine streams a run into (synchronous: it never awaits the client)
Sink = Callable[[AgentEvent], None]
#: the content of a tool result the server commits for a call the user denied
DENIED = "denied: the user did not allow this call"
#: the content of a tool result the server commits for a call closed by new input
SUPERSEDED = "cancelled: new input arrived before this call was answered"


def denial(reason: str) -> str:
    """The committed content of a call a person denied, with their reason (if any)."""
    reason = reason.strip()
    return f"{DENIED}: {reason}" if reason else DENIED


def new_id(prefix: str) -> str:
    """``<prefix>_`` and 128 random bits as 32 hex digits (as long as a UUID's hex, made in a sixth of
    ``uuid4``'s time: a run takes three or four before its first delta)."""
    return f"{prefix}_{urandom(16).hex()}"


@attrs.frozen
class ToolDecision:
    """An answer to a pending call, as an adapter parsed it.

    ``kind``: ``ok`` (a result without error), ``error`` (a result flagged as an error), ``approve``
    or ``deny`` (an explicit permission decision). At a permission gate ``ok``/``approve`` allow the
    call and ``error``/``deny`` deny it; for a client tool ``ok``/``error`` are its result.
    """

    tool_call_id: str
    kind: Literal["ok", "error", "approve", "deny"]
    content: str = ""
    #: the client's tool message id: a client tool's result is committed under it (a permission gate's
    #: result is the server's own and always gets ``result_id``)
    message_id: str | None = None
    #: ``approve`` only: the JSON arguments a person edited, replacing the model's (validated against
    #: the tool's parameters before anything runs)
    arguments: str | None = None


@attrs.frozen
class ForkAt:
    """A run that continues on a new branch of its thread (a regenerate, an edit), as an adapter read it.

    ``message_id`` names a message of the thread's active path: the new branch keeps the path up to and
    including it (``keep``: a regenerate, its answer is made again) or up to the message before it (an
    edit: the request's version of it is the run's input). The engine finds its seq
    (``awaken.engine.branching``) and starts the run with a ``Fork`` of the ledger."""

    message_id: str
    keep: bool
    reason: Literal["regenerate", "edit"]


@attrs.frozen
class RunRequest:
    thread_id: str
    agent_id: str | None
    #: new input messages (already deduplicated against the ledger)
    inputs: tuple[Message, ...] = ()
    decisions: tuple[ToolDecision, ...] = ()
    #: the run id the client proposed; used for a new run when it is free
    run_id: str | None = None
    #: tools the client executes, declared for this run (offered beside the agent's own; stored with it)
    tools: tuple[ToolSpec, ...] = attrs.field(default=(), kw_only=True)
    #: context entries the model is shown for this run
    context: tuple[ContextEntry, ...] = attrs.field(default=(), kw_only=True)
    #: the client's state: the thread's state from the start of this run (None: keep the committed one)
    state: dict[str, Any] | None = attrs.field(default=None, kw_only=True)
    #: the request only repeats decisions already committed (an idempotent resume): nothing runs,
    #: the stream just starts and finishes
    replay: bool = attrs.field(default=False, kw_only=True)
    #: the run continues on a new branch (a regenerate: no input needed; an edit: its input is the
    #: edited message); None: it continues the active path
    fork: ForkAt | None = attrs.field(default=None, kw_only=True)


@attrs.frozen
class Asks:
    """What a request asks the ledger at admission (see ``Protocol.asks``)."""

    message_ids: frozenset[str]
    calls: dict[str, str | None]


class Protocol(abc.ABC):
    """A wire protocol's request side, encoder factory and stream ends. Every method is pure."""

    #: response headers for SSE, beyond the transport's own
    sse_headers: list[tuple[bytes, bytes]] = []
    #: the plain and the split parse the replay memo wraps (``awaken.wires.memo.Parses``; None: the
    #: protocol has none, a server parses its bodies plainly)
    parses: Any = None

    @abc.abstractmethod
    def parse(self, body: bytes, content_type: str | None) -> Any:
        """Validate a request body; raise ``InputRejected`` with a catalogue code."""

    @abc.abstractmethod
    def target(self, parsed: Any, route_agent: str | None) -> tuple[str | None, str | None]:
        """The thread (None: start a new one) and the agent (None: the default) a request addresses."""

    @abc.abstractmethod
    def to_run_request(self, parsed: Any, thread_id: str, agent_id: str | None, view: ThreadView) -> RunRequest:
        """Drop what ``view`` (the thread as committed) already holds; split the rest into new input
        and tool decisions. Raise ``InputRejected`` for what cannot be run."""

    def asks(self, parsed: Any) -> Asks | None:
        """The ids ``to_run_request`` will ask the view about: the message ids it dedups and the tool
        call ids it may take as decisions (call id -> the request message carrying it, or None).
        Admission then reads a bounded view (``awaken.engine.dedup.admission_view``) instead of the whole history.
        None (the default): the whole history is read."""
        return None

    @abc.abstractmethod
    def encoder(self, parsed: Any | None) -> EncoderBase:
        """The encoder for this request (``parsed`` is None when the body could not be parsed)."""

    def watch_encoder(self, thread_id: str, run_id: str) -> EncoderBase:
        """The encoder of a watcher that joins a run this protocol did not start (a rejoin)."""
        return self.encoder(None)

    def snapshot(self, messages: list[Message]) -> list[WireEvent] | None:
        """The committed messages as one wire event, for a rejoin whose position is gone (None: the
        protocol has no such event)."""
        return None

    def closing(self) -> list[WireEvent]:
        """What follows the terminal event of every stream, run or refusal (the AI SDK's ``[DONE]``)."""
        return []

    def refusal(self, code: str, message: str, encoder: EncoderBase | None = None) -> list[WireEvent]:
        """The whole stream for a refused request: no run started, nothing committed.

        ``encoder`` is the request's own when its body was parsed (AG-UI names the thread and run)."""
        count_refusal(code)
        return (encoder or self.encoder(None)).rejection(code, message) + self.closing()
