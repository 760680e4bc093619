"""What a streaming run holds in memory (issue 12, item 5: memory returns near its baseline after a
burst of silent clients).

A run that streams to a client that stops reading holds its replay, its event log, its step's text
and the client's backlog as a few blocks, not one small object per delta: freed, such objects left
the interpreter's small-object arenas pinned by whatever else was allocated among them. And the
blocks keep exactly what the deques they replace kept: the same frames, positions and events under
the same byte bound.
"""

from __future__ import annotations

import gc
import sys
from collections import deque

from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.core import events as ev
from awaken.engine.steps import StepBuilder
from awaken.streams.broadcast import FRAME_OVERHEAD, RunBroadcast
from awaken.streams.replay import BATCH, LARGE, EventLog, FrameRing
from awaken.transports.sse import FrameBuffer
from awaken.wires.agui import adapter as agui_adapter
from awaken.wires.encoding import sse_frame_at

WORDS = [w + " " for w in "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda".split()]


async def test_a_run_streaming_to_a_reader_that_stopped_holds_a_few_blocks_not_an_object_per_delta():
    deltas = 30_000
    gc.collect()
    gc.disable()
    try:
        before = sys.getallocatedblocks()
        out = RunBroadcast("r1", "t1", limit=1 << 20)
        backlog = FrameBuffer(1 << 30, lambda: None)  # the client's unread frames: it never reads
        out.open_channel(agui_adapter.PROTOCOL).watch(lambda p, d: backlog.put(sse_frame_at(p, d)), 0)
        out.sink(ev.RunStarted("t1", "r1", "m1"))
        out.sink(ev.StepStarted(1))
        step = StepBuilder(out.sink, "m1")
        for i in range(deltas):
            step.text(WORDS[i % len(WORDS)] + str(i))  # a fresh string per delta, as a model's are
        held = sys.getallocatedblocks() - before
    finally:
        gc.enable()
    # before: ~2.4 blocks per delta (the step's text list, the log's tuples and events, the replay's
    # tuples, sequence numbers and payloads, the backlog's frames); now a few per thousand deltas
    assert held < deltas // 10, f"{held} blocks held for {deltas} deltas"
    assert str(step.message("r1").parts[0].text) == "".join(WORDS[i % len(WORDS)] + str(i) for i in range(deltas))


#: frame lengths (event sizes): mostly small, now and then one large enough to be packed at once
sizes = st.one_of(st.integers(0, 400), st.integers(0, 400), st.integers(LARGE - 10, 2 * LARGE))


class DequeReplay:
    """The replay as it was: a deque of ``(seq, payload)`` bounded in bytes, the newest frame kept."""

    def __init__(self, limit: int) -> None:
        self.limit, self.frames, self.size, self.next_seq = limit, deque(), 0, 1

    def append(self, payload: bytes) -> None:
        self.frames.append((self.next_seq, payload))
        self.next_seq += 1
        self.size += len(payload) + FRAME_OVERHEAD
        while self.size > self.limit and len(self.frames) > 1:
            self.size -= len(self.frames.popleft()[1]) + FRAME_OVERHEAD


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 4 * LARGE), st.lists(sizes, max_size=4 * BATCH + 20), st.data())
def test_the_replay_holds_exactly_the_frames_a_deque_bounded_in_bytes_holds(limit, lengths, data):
    ring, reference = FrameRing(limit, FRAME_OVERHEAD), DequeReplay(limit)
    for n, length in enumerate(lengths):
        payload = bytes([n % 251]) * length
        ring.append(payload)
        reference.append(payload)
        if data.draw(st.booleans()):  # read in the middle of a batch, as a rejoin may
            assert (ring.first_seq, ring.size, len(ring)) == (reference.frames[0][0], reference.size,
                                                             len(reference.frames))
            after = data.draw(st.integers(0, reference.next_seq))
            assert list(ring.after(after)) == [f for f in reference.frames if f[0] > after]
    assert list(ring) == list(reference.frames)
    assert ring.size == reference.size


event_kinds = st.sampled_from([
    lambda i: ev.TextDelta("m1", f"w{i} "), lambda i: ev.TextDelta("m2", f"é{i}\ud800 "),
    lambda i: ev.ReasoningDelta("m1", f"r{i}"), lambda i: ev.ToolCallArgs("c1", f'{{"a":{i}'),
    lambda i: ev.ToolCallArgs("c2", ""), lambda i: ev.StepStarted(i), lambda i: ev.TextStart(f"m{i}"),
])


@settings(max_examples=150, deadline=None)
@given(st.integers(0, 4 * LARGE), st.lists(st.tuples(event_kinds, sizes), max_size=4 * BATCH + 20),
       st.data())
def test_the_event_log_holds_exactly_the_events_a_deque_bounded_in_bytes_holds(limit, appended, data):
    log, reference, size, complete = EventLog(limit), deque(), 0, True
    for i, (make, weight) in enumerate(appended):
        event = make(i)
        log.append(event, weight)
        reference.append((event, weight))
        size += weight
        while size > limit and reference:  # the log may drop its newest event too
            size -= reference.popleft()[1]
            complete = False
        if data.draw(st.booleans()):
            assert (list(log), log.complete, len(log)) == ([e for e, _ in reference], complete, len(reference))
    assert list(log) == [e for e, _ in reference]
    assert log.complete is complete
    log.clear()
    assert (list(log), log.complete) == ([], False)


def test_a_late_channel_is_encoded_from_the_packed_log_as_it_was_from_the_events():
    """A channel opened after many deltas gets the frames one that watched from the start got (the
    log rebuilt the deltas it packed)."""
    out = RunBroadcast("r1", "t1", limit=1 << 20)
    early = out.open_channel(agui_adapter.PROTOCOL)
    out.sink(ev.RunStarted("t1", "r1", "m1"))
    out.sink(ev.StepStarted(1))
    step = StepBuilder(out.sink, "m1")
    for i in range(5 * BATCH + 3):
        step.text(f"w{i} ")
    out.channels.clear()  # as if the first protocol to watch were this one, now
    late = out.open_channel(agui_adapter.PROTOCOL)
    assert late is not early and late.next_seq == early.next_seq == 5 * BATCH + 3 + 4
    assert late.frames == early.frames
