"""A run's event output as a broadcast: one producer (the run's sink), any number of watchers.

The run's ``AgentEvent``s are encoded once per protocol that watches it: a ``Channel`` is that
protocol's encoder (and its ``closing`` after the terminal event). Every wire event of a channel
has a position, the run's key and its sequence number in the channel (``<key>:<seq>``, from 1);
SSE sends it as the frame's ``id:`` line. A channel keeps its newest wire events as a replay,
bounded in bytes (``server.replay_bytes``), plus the run's head (the wire events of ``RunStarted``),
which is never dropped. A watcher joins at a position: it is replayed what the channel still holds
after it, then fed live. The replay and the event log below are kept packed in blocks, not as an
object per frame or event (``replaylog``: what a run held is freed as a few blocks).

The broadcast also keeps the run's ``AgentEvent``s under the same byte bound, so a protocol that
starts watching after the run began gets its channel by replaying them into a fresh encoder. Once
that log lost its beginning, a late channel starts at the run's next step boundary (a step's start
or the run's end) after the head.

Delivery is synchronous: the run never awaits a watcher. A watcher's ``deliver`` puts into its
transport's bounded buffer; a watcher that cannot keep up is dropped (``Watcher.leave``), and the
run and the other watchers go on. Pure apart from ``trio.Event`` (and ``Flag``): no I/O here.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import TYPE_CHECKING

import trio

from awaken.core import events as ev
from awaken.ledger.relay import RunRelay
from awaken.runtime.flag import Flag
from awaken.streams.replay import BATCH, LARGE, EventLog, FrameRing
from awaken.wires.encoding import EncoderBase, EncoderMisuse, WireEvent, text_payload

if TYPE_CHECKING:
    from awaken.wires.protocol import Protocol

log = logging.getLogger("awaken.streams.broadcast")

#: ``deliver(position, payload)``: one wire event, its payload as SSE puts it after ``data: ``
Deliver = Callable[[bytes, bytes], None]
#: bytes counted per replayed frame beyond its payload (the position and the deque entry)
FRAME_OVERHEAD = 64
_BOUNDARY = (ev.StepStarted, ev.RunFinished, ev.RunFailed, ev.RunStopped)


def position(key: bytes, seq: int) -> bytes:
    return key + b":" + str(seq).encode()


def parse_position(value: str) -> tuple[str, int]:
    """``(key, seq)`` of a position; ``ValueError`` for anything ``position`` does not make."""
    key, sep, seq = value.strip().rpartition(":")
    if not sep or not key or not seq.isdigit() or len(seq) > 18:
        raise ValueError(f"{value!r} is not a stream position (<run>:<sequence>)")
    return key, int(seq)


class Watcher:
    """One reader of a channel. ``done`` is set when the channel closes or the watcher leaves.

    While ``held`` is a list, deliveries are kept there (``release`` sends them): a rejoin that must
    first send a snapshot holds the live tail meanwhile. ``boundary`` is set once a watcher that
    joined "at the next step boundary" starts receiving; ``mark`` is what its ``marker`` answered at
    that very moment (a rejoin asks for the last ledger position the run had committed, so that its
    snapshot stops where the live tail starts, however late the snapshot is read).
    """

    __slots__ = ("_boundary", "channel", "deliver", "done", "held", "mark", "marker", "on_done", "reached")

    def __init__(self, channel: Channel, deliver: Deliver, *, hold: bool = False,
                 marker: Callable[[], int] | None = None) -> None:
        self.channel = channel
        self.deliver = deliver
        self.done = Flag()
        #: whether it receives yet (``boundary``'s event is made only for a rejoin that waits for it: a
        #: stream's own watcher receives from the start, and an event per stream cost 216 bytes)
        self.reached = False
        self._boundary: trio.Event | None = None
        self.held: list[tuple[bytes, bytes]] | None = [] if hold else None
        self.marker = marker
        self.mark: int | None = None
        #: called once when ``done`` is set (a transport that waits on the watcher without a task of its own)
        self.on_done: Callable[[], None] | None = None

    def end(self) -> None:
        """The watcher has received its last frame: set ``done`` (and call ``on_done``, once)."""
        if not self.done.is_set():
            self.done.set()
            if self.on_done is not None:
                self.on_done()

    @property
    def boundary(self) -> trio.Event:
        """Set once the watcher receives (at once, or for one that joined "at the next step boundary"
        when the run reaches it)."""
        if self._boundary is None:
            self._boundary = trio.Event()
            if self.reached:
                self._boundary.set()
        return self._boundary

    def reach_boundary(self) -> None:
        """Start receiving here: take the mark, then set ``boundary``."""
        if not self.reached:
            self.mark = self.marker() if self.marker is not None else None
            self.reached = True
            if self._boundary is not None:
                self._boundary.set()

    def push(self, pos: bytes, payload: bytes) -> None:
        if self.held is not None:
            self.held.append((pos, payload))
        else:
            self.deliver(pos, payload)

    def attach(self, deliver: Deliver) -> None:
        """Deliver to ``deliver`` from now on, starting with what was held (the origin's watcher is
        made holding before the run emits anything, and attached once its transport is ready)."""
        self.deliver = deliver
        self.release()

    def release(self) -> None:
        """Send what was held and deliver directly from now on."""
        held, self.held = self.held or [], None
        for pos, payload in held:
            self.deliver(pos, payload)

    def leave(self) -> None:
        """Stop receiving (a disconnect, or a reader too slow to keep). Safe to call twice."""
        self.channel._remove(self)
        self.end()


class Channel:
    """One protocol's encoding of a run: positions, a bounded replay, the watchers."""

    def __init__(self, key: bytes, encoder: EncoderBase, closing: list[WireEvent], limit: int, *,
                 from_boundary: bool = False) -> None:
        self.key = key
        self.encoder = encoder
        self.closing = tuple(closing)  # read only: the empty one is Python's one empty tuple
        self.limit = limit
        #: the frames of ``RunStarted`` (never dropped: a snapshot rejoin starts with them)
        self.head: list[tuple[int, bytes]] = []
        #: the replay, bounded in bytes (``FrameRing``: a few blocks, not one object per frame)
        self._ring = FrameRing(limit, FRAME_OVERHEAD)
        self.next_seq = 1
        self.closed = False
        self.watchers: list[Watcher] = []
        #: watchers waiting for the next step boundary (a tuple: most channels never have one)
        self.awaiting: tuple[Watcher, ...] = ()
        #: a late channel that lost the run's start ignores events until the next step boundary
        self._skipping = from_boundary

    @property
    def first_seq(self) -> int:
        """The oldest sequence number the replay still holds (``next_seq`` when it holds none)."""
        first = self._ring.first_seq
        return self.next_seq if first is None else first

    @property
    def size(self) -> int:
        """The bytes the replay counts for the frames it holds (their lengths, ``FRAME_OVERHEAD`` each)."""
        return self._ring.size

    @property
    def frames(self) -> list[tuple[int, bytes]]:
        """``(seq, payload)`` of every frame the replay holds, oldest first."""
        return list(self._ring)

    def holds_after(self, seq: int) -> bool:
        """Whether every frame after ``seq`` is still here (or still to come)."""
        return seq + 1 >= self.first_seq and seq < self.next_seq

    def feed(self, event: ev.AgentEvent) -> int:
        """Encode one event and send its frames; returns the payload bytes it added."""
        if self.closed:
            return 0
        boundary = isinstance(event, _BOUNDARY)
        if boundary:
            self._skipping = False
            for watcher in self.awaiting:
                self.watchers.append(watcher)
                watcher.reach_boundary()
            self.awaiting = ()
        if self._skipping and not isinstance(event, ev.RunStarted):
            return 0
        try:
            wire = self.encoder.feed(event)
        except EncoderMisuse:
            log.exception("encoder refused %r", event)
            if self.encoder.closed:
                return 0
            self.encoder.closed = True
            wire = self.encoder.on_run_failed(ev.RunFailed("INTERNAL_ERROR", "the server produced an invalid stream"))
        if self.encoder.closed:
            wire = [*wire, *self.closing]
        added = 0
        for w in wire:
            payload = text_payload(w)
            seq = self._append(payload)
            added += len(payload)
            if isinstance(event, ev.RunStarted):
                self.head.append((seq, payload))
        return added

    def _append(self, payload: bytes) -> int:
        seq = self.next_seq
        self.next_seq += 1
        pending = self._ring.pending  # FrameRing.append, inlined: this runs for every frame
        pending.append(payload)
        if len(pending) >= BATCH or len(payload) >= LARGE:
            self._ring.pack()
        pos = position(self.key, seq)
        for watcher in list(self.watchers):
            watcher.push(pos, payload)
        return seq

    def watch(self, deliver: Deliver, after: int = 0, *, hold: bool = False) -> Watcher | None:
        """A watcher replayed every frame after ``after`` and then fed live; None when the replay
        no longer holds the frame after ``after`` (or ``after`` is not a position of this run)."""
        if not self.holds_after(after):
            return None
        watcher = Watcher(self, deliver, hold=hold)
        watcher.reached = True
        for seq, payload in self._ring.after(after):
            watcher.push(position(self.key, seq), payload)
        if self.closed:
            watcher.end()
        else:
            self.watchers.append(watcher)
        return watcher

    def watch_from_boundary(self, deliver: Deliver, marker: Callable[[], int] | None = None) -> Watcher:
        """A holding watcher that receives from the run's next step boundary on (``boundary`` is
        set then, and ``mark`` taken with ``marker``); ``done`` and ``boundary`` are set at once when
        the run already ended."""
        watcher = Watcher(self, deliver, hold=True, marker=marker)
        if self.closed:
            watcher.reach_boundary()
            watcher.end()
        else:
            self.awaiting = (*self.awaiting, watcher)
        return watcher

    def close(self) -> None:
        """The run ended: every watcher is done (after the frames it was sent). A watcher still awaiting
        a step boundary (the run ended with none: interrupted, no terminal event) has reached its last."""
        self.closed = True
        for watcher in self.awaiting:
            watcher.reach_boundary()
        for watcher in [*self.watchers, *self.awaiting]:
            watcher.end()
        self.watchers = []
        self.awaiting = ()

    def _remove(self, watcher: Watcher) -> None:
        if watcher in self.watchers:
            self.watchers.remove(watcher)
        if watcher in self.awaiting:
            self.awaiting = tuple(w for w in self.awaiting if w is not watcher)


class RunBroadcast:
    """One run's output: the ``AgentEvent`` log, a ``Channel`` per watching protocol.

    ``owner`` is the subject who started the run (None without authentication): with the thread's
    owner and admins, the only principal that may watch it from another connection.
    """

    def __init__(self, key: str, thread_id: str, limit: int, owner: str | None = None) -> None:
        self.key = key
        self.thread_id = thread_id
        self.limit = limit
        self.owner = owner
        self.channels: dict[Protocol, Channel] = {}
        #: the run's newest events and the size each is counted for (an ``EventLog``: deltas kept as text blocks)
        self._log = EventLog(limit)
        self._started: ev.RunStarted | None = None
        self.closed = False
        #: carries every event to watchers on other processes (a ledger shared by processes; else None)
        self.relay: RunRelay | None = None

    def lost(self) -> None:
        """Events before the next ones are missing (a relayed run joined after its relay dropped some):
        channels opened from now on start at the run's next step boundary."""
        self._log.clear()

    def open_channel(self, protocol: Protocol, encoder: EncoderBase | None = None) -> Channel:
        """The protocol's channel, built now if it does not exist (``encoder``: the one to build it
        with; by default the protocol's ``watch_encoder`` for this run)."""
        channel = self.channels.get(protocol)
        if channel is not None:
            return channel
        if encoder is None:
            encoder = protocol.watch_encoder(self.thread_id, self.key)
        complete = self._log.complete and not self.closed
        channel = Channel(self.key.encode(), encoder, protocol.closing(), self.limit, from_boundary=not complete)
        if not complete and self._started is not None:
            channel.feed(self._started)
        for event in self._log:
            channel.feed(event)
        if self.closed:
            channel.close()
        self.channels[protocol] = channel
        return channel

    def sink(self, event: ev.AgentEvent) -> None:
        """The engine's sink: every channel encodes ``event`` and sends it to its watchers."""
        if isinstance(event, ev.RunStarted):
            self._started = event
        if self.relay is not None:
            self.relay.publish(self.key, self.thread_id, self.owner, event)
        size = FRAME_OVERHEAD
        for channel in list(self.channels.values()):
            size = max(size, channel.feed(event) + FRAME_OVERHEAD)
        log = self._log  # EventLog.append, inlined: this runs for every event
        log.events.append(event)
        log.sizes.append(size)
        if len(log.events) >= BATCH or size >= LARGE:
            log.pack()

    def close(self) -> None:
        """The run ended (its outcome is committed): every watcher's stream ends."""
        if self.closed:
            return
        self.closed = True
        if self.relay is not None:
            self.relay.end(self.key)
        for channel in self.channels.values():
            channel.close()
        self._log.clear()
