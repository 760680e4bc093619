"""WebSocket transport without a network: the ``Outbox``, write slicing, the plain-ASGI fallback wire,
and refusals that wait for the running stream."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.core.principal import ANONYMOUS, PRINCIPAL_KEY
from awaken.http.context import ServerContext
from awaken.runtime.tuning import WS_AT_ONCE_FRAMES
from awaken.streams.exchange import serve_websocket
from awaken.transports import ws as ws_module
from awaken.transports.ws import (
    AsgiWire,
    Batch,
    Close,
    HypercornWire,
    Outbox,
    RequestStream,
    WsConnection,
    slices,
    text_frames,
)
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from tests.builders import agui_body, default_config_data, held, make_config, open_gate


def test_outbox_hands_over_everything_queued_as_one_batch_in_order():
    box = Outbox(100, lambda: pytest.fail("no overflow expected"))
    box.put(b"a")
    box.put(b"b")
    box.ping()

    async def take() -> Batch:
        return await box.take()

    assert trio.run(take) == Batch(True, [b"a", b"b"], None)


def test_outbox_overflow_fires_once_and_a_dropping_close_discards_the_queue():
    calls: list[int] = []
    box = Outbox(10, lambda: calls.append(1) or box.close(4008, "too slow", drop=True))
    box.put(b"x" * 6)
    box.put(b"y" * 6)  # 12 > 10: overflow, and the close drops both
    box.put(b"z")  # after close: ignored
    box.ping()  # likewise
    assert calls == [1] and box.closing and box.dropped

    async def take() -> Batch:
        return await box.take()

    assert trio.run(take) == Batch(False, [], Close(4008, "too slow"))


async def test_outbox_graceful_close_sends_the_queue_first_and_nothing_after(autojump_clock):
    box = Outbox(100, lambda: None)
    box.put(b"last")
    box.close(1001, "bye", drop=False)
    assert not box.dropped
    assert await box.take() == Batch(False, [b"last"], Close(1001, "bye"))
    with trio.move_on_after(60) as waited:
        await box.take()  # the close batch was the last one
    assert waited.cancelled_caught


async def test_outbox_take_waits_for_a_put(autojump_clock):
    box = Outbox(100, lambda: None)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_put_later, box)
        assert (await box.take()).payloads == [b"late"]


async def _put_later(box: Outbox) -> None:
    await trio.sleep(5)
    box.put(b"late")


@pytest.mark.parametrize(
    ("sizes", "limit", "expected"),
    [([10] * 25, 100, [10, 10, 5]), ([], 5, []), ([500, 1], 100, [1, 1]), ([3, 3, 3], 100, [3])],
)
def test_slices_keep_order_and_bound_each_write(sizes, limit, expected):
    payloads = [f"{i:0{n}d}"[:n].encode() for i, n in enumerate(sizes)]
    chunks = list(slices(payloads, limit))
    assert [len(c) for c in chunks] == expected
    assert [p for c in chunks for p in c] == payloads


async def test_plain_asgi_server_gets_one_send_per_event_and_no_hypercorn_extras(tmp_path):
    """Under a server that is not hypercorn the transport still works: one ``websocket.send`` per
    wire event, no pings, and a disconnect ends the connection (``AsgiWire``)."""
    config = make_config(tmp_path, server={**default_config_data()["server"], "ws_ping_seconds": 0.01})
    ctx = ServerContext.build(config)
    await ctx.open()
    to_app, app_inbox = trio.open_memory_channel[dict[str, Any]](10)
    sent: list[dict[str, Any]] = []
    finished = trio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("text") and orjson.loads(message["text"])["type"] == "RUN_FINISHED":
            finished.set()

    assert type(HypercornWire.of(send)) is AsgiWire
    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_websocket, ctx, AGUI, {"type": "websocket", PRINCIPAL_KEY: ANONYMOUS}, app_inbox.receive, send, None)
            await to_app.send({"type": "websocket.connect"})
            body = agui_body("t-u", "r-u", [{"id": "u1", "role": "user", "content": "plain"}])
            await to_app.send({"type": "websocket.receive", "text": orjson.dumps(body).decode()})
            with trio.fail_after(5):
                await finished.wait()
            await trio.sleep(0.05)  # five ping intervals: nothing may be sent
            await to_app.send({"type": "websocket.disconnect", "code": 1000})
    finally:
        await ctx.aclose()
    assert sent[0] == {"type": "websocket.accept"}
    events = [orjson.loads(m["text"]) for m in sent[1:]]
    assert all(m["type"] == "websocket.send" for m in sent[1:])
    assert [e["type"] for e in events][0] == "RUN_STARTED" and events[-1]["type"] == "RUN_FINISHED"
    assert "".join(e.get("delta", "") for e in events) == 'You said: "plain".'


# -- refusals wait for the running stream (no network: the plain-ASGI wire records every send) ---------


async def serve_one_run_with_messages_mid_run(
    tmp_path, mid_run: list[dict[str, Any]], done: Callable[[list[dict[str, Any]]], bool]
) -> list[dict[str, Any]]:
    """One socket under a plain ASGI server: a run that streams 12 deltas, ``mid_run`` (ASGI receive
    messages) delivered once its first delta was sent and read before the run goes on past it; every ``send`` after the accept, until
    ``done(sent)`` holds and 50 ms more pass (whatever else the socket sends then is included too)."""
    ctx = ServerContext.build(make_config(tmp_path))
    await ctx.open()
    to_app, app_inbox = trio.open_memory_channel[dict[str, Any]](100)
    sent: list[dict[str, Any]] = []
    streaming = trio.Event()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)
        if message.get("text") and orjson.loads(message["text"]).get("type") == "TEXT_MESSAGE_CONTENT":
            streaming.set()

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(serve_websocket, ctx, AGUI, {"type": "websocket", PRINCIPAL_KEY: ANONYMOUS}, app_inbox.receive, send,
                               None)
            await to_app.send({"type": "websocket.connect"})
            slow = {"id": "u1", "role": "user", "content": held("mid-run", 12)}
            body = agui_body("t-slow", "r-slow", [slow])
            await to_app.send({"type": "websocket.receive", "text": orjson.dumps(body).decode()})
            with trio.fail_after(5):
                await streaming.wait()  # the run holds after its first delta until the gate opens
            for message in mid_run:
                await to_app.send(message)
            with trio.fail_after(5):  # the socket has taken every mid-run message and is waiting again
                await trio.testing.wait_all_tasks_blocked()
            assert to_app.statistics().current_buffer_used == 0
            open_gate(ctx, "mid-run")
            with trio.fail_after(5):
                while not done(sent):
                    await trio.sleep(0.005)
            await trio.sleep(0.05)
            await to_app.send({"type": "websocket.disconnect", "code": 1000})
    finally:
        await ctx.aclose()
    assert sent[0] == {"type": "websocket.accept"}
    return sent[1:]


def busy(i: int) -> dict[str, Any]:
    body = agui_body(f"t-{i}", f"r-{i}", [{"id": f"u-{i}", "role": "user", "content": "hi"}])
    return {"type": "websocket.receive", "text": orjson.dumps(body).decode()}


async def test_refusals_mid_run_follow_the_terminal_event_in_arrival_order(tmp_path):
    """Nothing is interleaved: the run's events, its RUN_FINISHED, then one RUN_ERROR per message that
    arrived mid-run, in arrival order (a binary message waits like a request does)."""
    binary = {"type": "websocket.receive", "bytes": b"\x00"}
    def three_refusals(sent: list[dict[str, Any]]) -> bool:
        return sum('"RUN_ERROR"' in m.get("text", "") for m in sent) == 3

    sent = await serve_one_run_with_messages_mid_run(tmp_path, [busy(1), binary, busy(2)], three_refusals)
    events = [orjson.loads(m["text"]) for m in sent]
    assert all(m["type"] == "websocket.send" for m in sent)
    kinds = [e["type"] for e in events]
    assert kinds[0] == "RUN_STARTED" and kinds.index("RUN_FINISHED") == len(kinds) - 4
    assert kinds.count("TEXT_MESSAGE_CONTENT") == 12 and "RUN_ERROR" not in kinds[:-3]
    assert [e["code"] for e in events[-3:]] == ["REQUEST_BUSY", "UNSUPPORTED_MEDIA_TYPE", "REQUEST_BUSY"]


async def test_more_than_max_deferred_mid_run_closes_with_1008_after_the_run_and_the_refusals(
        tmp_path, monkeypatch):
    """``MAX_DEFERRED`` refusals wait; the next message closes the socket with 1008 once they and the run
    are out; later messages are ignored."""
    monkeypatch.setattr(ws_module, "CLOSE_TIMEOUT", 0.01)
    limit = ws_module.MAX_DEFERRED
    sent = await serve_one_run_with_messages_mid_run(
        tmp_path, [busy(i) for i in range(limit + 3)], lambda sent: sent[-1]["type"] == "websocket.close")
    close = sent[-1]
    assert close == {"type": "websocket.close", "code": ws_module.CLOSE_POLICY,
                     "reason": "too many requests while a run was streaming"}
    events = [orjson.loads(m["text"]) for m in sent[:-1]]
    assert [e["type"] for e in events[-limit - 1 :]] == ["RUN_FINISHED"] + ["RUN_ERROR"] * limit
    assert {e["code"] for e in events[-limit:]} == {"REQUEST_BUSY"}
    assert "RUN_ERROR" not in [e["type"] for e in events[:-limit]]


# -- a request's opening frames go to the socket as the run makes them ----------------------------------


class RecordingWire(AsgiWire):
    """A wire whose socket takes ``capacity`` bytes of at-once writes (then none: the rest waits), and
    records every byte in the order it reached the socket."""

    can_ping = False

    def __init__(self, capacity: int = 1 << 30) -> None:
        super().__init__(self._unused)
        self.capacity = capacity
        self.wire = bytearray()
        self.at_once: list[bytes] = []

    async def _unused(self, message: dict[str, Any]) -> None:
        raise AssertionError("frames go through send_texts and send_raw")

    def write_now(self, payload: bytes) -> bytes | None:
        frame = text_frames([payload])
        taken = min(self.capacity, len(frame))
        self.capacity -= taken
        self.wire += frame[:taken]
        self.at_once.append(payload)
        return frame[taken:]

    async def send_raw(self, data: bytes | None) -> None:
        self.wire += data or b""

    async def send_texts(self, payloads: list[bytes]) -> None:
        self.wire += text_frames(payloads)


def connection(wire: AsgiWire) -> WsConnection:
    async def never(*args: Any) -> Any:
        raise AssertionError("no request is read here")

    return WsConnection(never, wire, never, lambda code, message: [], ping_seconds=0, max_buffered=1 << 20)


async def test_a_requests_opening_frames_go_to_the_socket_as_they_are_made_and_the_rest_to_the_writer():
    wire = RecordingWire()
    conn = connection(wire)
    payloads = [f'{{"n":{i}}}'.encode() for i in range(WS_AT_ONCE_FRAMES + 2)]
    for payload in payloads:
        conn.send(payload)  # synchronously, as a run's sink does, with no scheduling point between
    assert wire.at_once == payloads[:WS_AT_ONCE_FRAMES]
    assert bytes(wire.wire) == text_frames(payloads[:WS_AT_ONCE_FRAMES])
    async with trio.open_nursery() as nursery:
        nursery.start_soon(conn._write_loop)
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()
    assert bytes(wire.wire) == text_frames(payloads)


async def test_nothing_is_written_at_once_while_frames_wait_for_the_writer():
    wire = RecordingWire()
    conn = connection(wire)
    conn.outbox.ping()  # queued: whatever follows goes behind it
    conn.send(b"after")
    assert wire.at_once == []


_steps = st.lists(st.binary(min_size=0, max_size=300) | st.just(None), max_size=24)


@settings(max_examples=150, deadline=None)
@given(_steps, st.integers(0, 2000), st.integers(0, 6))
def test_the_socket_gets_every_frame_whole_and_in_order_whatever_it_takes_at_once(steps, capacity, at_once):
    """Payloads sent (``bytes``) and the writer let run (``None``) in any order, with a socket that takes
    only ``capacity`` bytes at once: the bytes on the wire are the frames of every payload, in order,
    as with no frame written at once."""

    async def main() -> bytes:
        wire = RecordingWire(capacity)
        conn = connection(wire)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(conn._write_loop)
            for step in steps:
                if step is None:
                    await trio.testing.wait_all_tasks_blocked()
                else:
                    conn.send(step)
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
        return bytes(wire.wire)

    original = ws_module.WS_AT_ONCE_FRAMES
    ws_module.WS_AT_ONCE_FRAMES = at_once
    try:
        written = trio.run(main)
    finally:
        ws_module.WS_AT_ONCE_FRAMES = original
    assert written == text_frames([s for s in steps if s is not None])


def test_a_finished_requests_run_reaches_nothing_of_the_socket():
    """A run whose request went before the run was handed over still delivers to that request (its
    watcher takes frames from the first event): none of it reaches the socket or its next request."""
    wire = RecordingWire()
    conn = connection(wire)
    gone = RequestStream(conn)
    conn.current = gone
    gone.finish()
    gone.deliver(None, b'{"type":"RUN_STARTED"}')
    assert wire.wire == b"" and conn.outbox.idle
