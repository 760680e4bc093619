"""A WebSocket client's messages reach the socket's reader as hypercorn would hand them over, only sooner.

Two speed-ups, each held to the plain path. ``client_text`` (``awaken/runtime/wsread.py``, behind
``WS_OWN_READING``) reads a read that is one whole text frame; a property holds it to wsproto's parse of
any client frames, and a live server answers a request the same however its frames arrive, keeping
wsproto's close codes for bad frames. ``AppQueue.receive_directly`` (``awaken/runtime/tcp.py``, behind
``WS_DIRECT_RECEIVE``) hands a text message to the waiting reader in the connection's read; a property
holds the order the reader sees to the order of the queue.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import orjson
import pytest
import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st
from wsproto.connection import Connection, ConnectionType
from wsproto.events import BytesMessage, CloseConnection, Ping, TextMessage
from wsproto.frame_protocol import ParseFailed

from awaken.runtime import tcp
from awaken.runtime.wsread import client_text
from tests.builders import agui_body, live_server, make_config, user
from tests.streams.test_ws_transport import RawWs, normalized

# -- client_text against wsproto ----------------------------------------------------------------------


def client_frames(events: list[Any]) -> bytes:
    """What a client's wsproto connection sends for ``events`` (masked, as every client frame is)."""
    client = Connection(ConnectionType.CLIENT)
    return b"".join(client.send(event) for event in events)


def wsproto_reads(data: bytes) -> list[Any] | str:
    """What a server's wsproto connection (no extension, as hypercorn makes one for a client that
    offered none) makes of ``data``: its events, or "refused" when it fails the connection."""
    server = Connection(ConnectionType.SERVER)
    server.receive_data(data)
    try:
        events = list(server.events())
    except ParseFailed:
        return "refused"
    if any(isinstance(event, CloseConnection) and event.code >= 1002 for event in events):
        return "refused"  # wsproto's answer to a frame it cannot accept
    return events


def frame(first: int, payload: bytes, *, masked: bool = True, length_bytes: int | None = None) -> bytes:
    """One frame made by hand: ``first`` (FIN, RSV, opcode), the length in ``length_bytes`` (None: the
    fewest), masked or not."""
    size = len(payload)
    if length_bytes is None:
        length_bytes = 0 if size < 126 else 2 if size < 0x10000 else 8
    mask_bit = 0x80 if masked else 0
    if length_bytes == 0:
        head = bytes((first, mask_bit | size))
    else:
        head = bytes((first, mask_bit | (126 if length_bytes == 2 else 127))) + size.to_bytes(length_bytes, "big")
    if not masked:
        return head + payload
    key = os.urandom(4)
    return head + key + bytes(b ^ key[i % 4] for i, b in enumerate(payload))


def sent_until_close(groups: list[list[Any]]) -> list[Any]:
    """The events of ``groups`` in order, up to the first close (a client sends nothing after it)."""
    sent: list[Any] = []
    for event in (e for group in groups for e in group):
        sent.append(event)
        if isinstance(event, CloseConnection):
            break
    return sent


texts = st.text(max_size=200) | st.builds(lambda n: "é" * n, st.sampled_from([62, 63, 64, 32767, 32768, 40000]))
events = st.one_of(
    texts.map(lambda t: [TextMessage(data=t)]),
    texts.map(lambda t: [TextMessage(data=t[: len(t) // 2], message_finished=False),
                         TextMessage(data=t[len(t) // 2 :])]),
    st.binary(max_size=200).map(lambda b: [BytesMessage(data=b)]),
    st.binary(max_size=100).map(lambda b: [Ping(payload=b)]),
    st.just([CloseConnection(code=1000)]),
)


@settings(max_examples=400, deadline=None)
@given(st.lists(events, min_size=1, max_size=3).map(sent_until_close),
       st.integers(min_value=0, max_value=8), st.integers(min_value=0, max_value=1 << 17))
def test_a_read_is_taken_as_text_only_when_wsproto_reads_exactly_that_one_message(sent, cut, limit):
    data = client_frames(sent)
    for read in (data, data[: len(data) - cut] if cut else data):
        text = client_text(read, limit)
        if text is not None:
            assert len(text.encode()) <= limit
            assert wsproto_reads(read) == [TextMessage(data=text, frame_finished=True, message_finished=True)]
    whole_text = len(sent) == 1 and isinstance(sent[0], TextMessage) and len(sent[0].data.encode()) <= limit
    assert (client_text(data, limit) == sent[0].data) if whole_text else client_text(data, limit) is None


@pytest.mark.parametrize("size", [0, 1, 125, 126, 127, 65535, 65536, 70000])
def test_a_whole_text_frame_is_read_at_every_length_boundary(size):
    text = "é" * (size // 2) + "x" * (size % 2)
    assert client_text(client_frames([TextMessage(data=text)]), 1 << 20) == text


@pytest.mark.parametrize("read", [
    pytest.param(frame(0x81, b"\xff\xfe"), id="invalid UTF-8"),
    pytest.param(frame(0x81, b"{}", masked=False), id="unmasked"),
    pytest.param(frame(0xC1, b"{}"), id="a reserved bit"),
    pytest.param(frame(0x81, b"{}", length_bytes=2), id="a 16-bit length for 2 bytes"),
    pytest.param(frame(0x81, b"x" * 200, length_bytes=8), id="a 64-bit length for 200 bytes"),
])
def test_a_frame_wsproto_refuses_is_left_to_wsproto(read):
    assert wsproto_reads(read) == "refused"
    assert client_text(read, 1 << 20) is None


def test_a_message_over_the_limit_is_left_to_hypercorn():
    read = client_frames([TextMessage(data="x" * 100)])
    assert client_text(read, 100) == "x" * 100
    assert client_text(read, 99) is None


# -- a live server --------------------------------------------------------------------------------------


class _Counted:
    """Counts the reads wsproto parses (``Connection.receive_data`` with bytes: its constructor passes
    none) while installed."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.reads = 0
        original = Connection.receive_data

        def receive_data(connection: Connection, data: bytes | None) -> None:
            self.reads += bool(data)
            original(connection, data)

        monkeypatch.setattr(Connection, "receive_data", receive_data)


async def until_terminal(raw: RawWs) -> list[dict[str, Any]]:
    events: list[dict[str, Any]] = []
    with trio.fail_after(10):
        while not events or events[-1]["type"] not in ("RUN_FINISHED", "RUN_ERROR"):
            got = await raw.read_frame()
            assert got is not None and got[0] == 0x1, got
            events.append(orjson.loads(got[1]))
    return events


async def test_a_request_in_one_text_frame_is_read_without_wsproto_and_answered_as_one_in_fragments_or_reads(
        tmp_path, monkeypatch):
    counted = _Counted(monkeypatch)
    async with live_server(make_config(tmp_path)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
        async with raw.stream:
            body = orjson.dumps(agui_body("t-whole", "r-whole", [user("u-whole", "hello there")]))
            await raw.stream.send_all(frame(0x81, body))
            whole = await until_terminal(raw)
            assert counted.reads == 0

            fragmented = orjson.dumps(agui_body("t-parts", "r-parts", [user("u-parts", "hello there")]))
            await raw.stream.send_all(frame(0x01, fragmented[:10]) + frame(0x80, fragmented[10:]))
            parts = await until_terminal(raw)
            assert counted.reads == 1

            # one frame over two reads: wsproto holds the first part, so it reads the second too
            split = frame(0x81, orjson.dumps(agui_body("t-split", "r-split", [user("u-split", "hello there")])))
            await raw.stream.send_all(split[:20])
            with trio.fail_after(10):
                while counted.reads < 2:  # the server has read the first part
                    await trio.sleep(0.01)
            await raw.stream.send_all(split[20:])
            halves = await until_terminal(raw)
            assert counted.reads == 3
    assert whole[-1]["type"] == "RUN_FINISHED"
    assert normalized(parts) == normalized(halves) == normalized(whole)


async def test_with_own_reading_off_every_read_goes_through_wsproto(tmp_path, monkeypatch):
    counted = _Counted(monkeypatch)
    monkeypatch.setattr(tcp, "WS_OWN_READING", False)
    async with live_server(make_config(tmp_path)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
        async with raw.stream:
            await raw.stream.send_all(frame(0x81, orjson.dumps(agui_body("t-off", "r-off", [user("u-off", "hello")]))))
            events = await until_terminal(raw)
    assert events[-1]["type"] == "RUN_FINISHED" and counted.reads > 0


@pytest.mark.parametrize("read", [
    pytest.param(frame(0x81, b'{"x": "\xff"}'), id="invalid UTF-8"),
    pytest.param(frame(0x81, b"{}", masked=False), id="unmasked"),
    pytest.param(frame(0x81, b"{}", length_bytes=2), id="a non-minimal length"),
])
@pytest.mark.parametrize("own_reading", [True, False])
async def test_a_bad_frame_ends_the_connection_as_hypercorn_ends_it_and_runs_nothing(
        tmp_path, monkeypatch, read, own_reading):
    monkeypatch.setattr(tcp, "WS_OWN_READING", own_reading)
    async with live_server(make_config(tmp_path)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
        async with raw.stream:
            await raw.stream.send_all(read)
            with trio.fail_after(10):
                texts, closed_with = await raw.read_until_close()
            threads = await server.ctx.ledger.list_threads()
    assert (texts, closed_with, threads) == ([], None, [])


# -- direct hand-over from the connection's read (``AppQueue.receive_directly``) ------------------------


def received(value: str) -> dict[str, Any]:
    return {"type": "websocket.receive", "bytes": None, "text": value}


async def _reader(receive: trio.MemoryReceiveChannel, seen: list[tuple[str, str]]) -> None:
    async for event in receive:
        seen.append(("queued", event.get("text") or event["type"]))


@asynccontextmanager
async def reading_queue(size: int = 10) -> AsyncIterator[tuple[tcp.AppQueue, trio.MemorySendChannel,
                                                               list[tuple[str, str]]]]:
    """A request's ``AppQueue`` in front of a channel as hypercorn makes it, a reader taking from the
    channel, and what was seen, in order (("queued" or "direct", text)); handed over while installed."""
    send, receive = trio.open_memory_channel[dict[str, Any]](size)
    queue = tcp.AppQueue()
    queue.queue = send.send
    seen: list[tuple[str, str]] = []
    queue.receive_directly(lambda event: seen.append(("direct", event["text"])))
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_reader, receive, seen)
        await trio.testing.wait_all_tasks_blocked()
        yield queue, send, seen
        await trio.testing.wait_all_tasks_blocked()
        nursery.cancel_scope.cancel()


async def test_a_message_for_a_waiting_reader_is_handed_over_in_the_put_and_never_queued():
    async with reading_queue() as (queue, send, seen):
        await queue.put(received("a"))
        assert seen == [("direct", "a")] and send.statistics().current_buffer_used == 0
        send.send_nowait({"type": "websocket.connect"})  # handed to the reader, which has not run yet
        await queue.put(received("b"))  # so this one waits behind it
        await queue.put({"type": "websocket.disconnect", "code": 1000})  # never handed over
        await trio.testing.wait_all_tasks_blocked()
        assert seen == [("direct", "a"), ("queued", "websocket.connect"), ("queued", "b"),
                        ("queued", "websocket.disconnect")]
        queue.receive_directly(None)
        await queue.put(received("c"))
    assert seen[-1] == ("queued", "c")


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sampled_from(["text", "other", "slipped", "run", "off", "on"]), max_size=30))
def test_the_reader_sees_messages_in_the_order_they_were_put_whatever_is_handed_over(steps):
    """``slipped``: an event the reader has not taken yet when the next is put (queued without a
    scheduling point)."""

    async def main() -> tuple[list[str], list[str]]:
        put: list[str] = []
        async with reading_queue(len(steps) + 1) as (queue, send, seen):
            handler = queue._direct
            for i, step in enumerate(steps):
                if step == "run":
                    await trio.testing.wait_all_tasks_blocked()
                elif step in ("off", "on"):
                    queue.receive_directly(handler if step == "on" else None)
                else:
                    put.append(f"m{i}")
                    if step == "slipped":
                        send.send_nowait({"type": "websocket.connect", "text": f"m{i}"})
                    else:
                        await queue.put(received(f"m{i}") if step == "text" else {"type": "websocket.connect",
                                                                                "text": f"m{i}"})
        return put, [value for _, value in seen]

    put, seen = trio.run(main)
    assert seen == put


async def test_with_direct_receive_off_every_message_is_queued(monkeypatch):
    monkeypatch.setattr(tcp, "WS_DIRECT_RECEIVE", False)
    async with reading_queue() as (queue, _send, seen):
        await queue.put(received("a"))
    assert seen == [("queued", "a")]
