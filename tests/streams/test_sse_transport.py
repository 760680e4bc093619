"""The SSE transport: coalescing, the byte limit for readers that stop reading, keep-alive."""

from __future__ import annotations

from functools import partial
from typing import Any

import trio
import trio.testing

from awaken.transports.sse import COALESCE_BYTES, FrameBuffer
from tests.builders import RecordingFeed, agui_body, held, live_server, make_config, never_receive, release


async def test_frames_queued_while_a_send_is_in_flight_are_coalesced():
    buffer = FrameBuffer(1000, lambda: None)
    buffer.put(b"a")
    buffer.put(b"b")
    buffer.put(b"c")
    assert await buffer.take() == b"abc"
    buffer.close()
    assert await buffer.take() is None and buffer.exhausted


async def test_a_backlog_is_held_as_a_few_large_blocks_and_sent_unchanged():
    """A reader that stops reading leaves its frames queued: past ``COALESCE_BYTES`` of them they are
    joined into one block (large enough to be its own mapping, returned when dropped), never reordered."""
    buffer = FrameBuffer(16 * COALESCE_BYTES, lambda: None)
    frames = [b"data: %d\n\n" % i for i in range(100_000)]
    for frame in frames:
        buffer.put(frame)
    whole = b"".join(frames)
    assert len(buffer._chunks) <= len(whole) // COALESCE_BYTES + 1 + COALESCE_BYTES // len(frames[0])
    assert all(len(block) >= COALESCE_BYTES for block in buffer._chunks[: buffer._joined])
    assert await buffer.take() == whole
    buffer.put(b"next")
    assert await buffer.take() == b"next"


async def test_take_waits_for_a_put_and_close_ends_it(autojump_clock):
    buffer = FrameBuffer(1000, lambda: None)
    got = []

    async def reader() -> None:
        while (data := await buffer.take()) is not None:
            got.append((trio.current_time(), data))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(reader)
        await trio.sleep(5)
        buffer.put(b"x")
        await trio.sleep(5)
        buffer.close()
    assert got == [(5, b"x")]


async def test_keepalive_comes_after_an_idle_interval_only(autojump_clock):
    """The keep-alive timer counts idleness from the last queued bytes, not from a fixed tick."""
    from awaken.transports.sse import KEEPALIVE, _watch_client

    buffer = FrameBuffer(1000, lambda: None)
    never: trio.MemoryReceiveChannel = trio.open_memory_channel(0)[1]
    seen = []
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_client, never.receive, buffer, trio.CancelScope(), 15)
        await trio.sleep(10)
        buffer.put(b"data")          # activity at t=10
        await trio.sleep(14)         # t=24: idle 14 s, no keep-alive yet
        seen.append(await _drain(buffer))
        await trio.sleep(2)          # t=26: idle 16 s -> one keep-alive (queued at t=25)
        seen.append(await _drain(buffer))
        nursery.cancel_scope.cancel()
    assert seen == [b"data", KEEPALIVE]


async def _drain(buffer: FrameBuffer) -> bytes:
    with trio.move_on_after(0):
        return await buffer.take()
    return b"(nothing)"


async def test_overflow_calls_back_once_and_put_never_blocks():
    """A reader that stops reading never stalls the run: put() is synchronous; overflow drops it."""
    calls = []
    buffer = FrameBuffer(10, lambda: calls.append(1))
    for _ in range(100):
        buffer.put(b"12345")
    assert calls == [1] and buffer.overflowed


async def test_idle_streams_carry_keepalive_comments(tmp_path):
    """CONTRACT §3: `: keep-alive` comments on idle (interval from config)."""
    config = make_config(tmp_path, server={"keepalive_seconds": 0.05})
    async with live_server(config) as server, server.client() as client:
        body = agui_body("t", "r", [{"id": "u1", "role": "user", "content": held("t", 2)}])
        content = b""
        async with client.stream("POST", "/v1/ag-ui", json=body) as response:
            chunks = response.aiter_bytes()
            async for data in chunks:
                content += data
                if b"TEXT_MESSAGE_CONTENT" in content and b": keep-alive\n\n" in content.split(b"TEXT_MESSAGE_CONTENT")[1]:
                    break  # a comment while the run is held after its first delta
            await release(server, "t")
            async for data in chunks:
                content += data
    raw = content.decode()
    assert ": keep-alive\n\n" in raw
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert raw.rstrip().endswith('"type":"RUN_FINISHED","threadId":"t","runId":"r"}')


async def test_after_the_run_ends_the_watcher_waits_without_spinning(autojump_clock):
    """A reader that stops reading after the last frame must not make the receive loop spin: once
    the buffer is closed the watcher waits for a disconnect with no deadline."""
    from awaken.transports.sse import _watch_client

    buffer = FrameBuffer(1000, lambda: None)
    calls = 0
    send, receive = trio.open_memory_channel(1)

    async def counting_receive():
        nonlocal calls
        calls += 1
        return await receive.receive()

    connection = trio.CancelScope()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(_watch_client, counting_receive, buffer, connection, 15)
        buffer.put(b"last frame")
        buffer.close()
        await trio.sleep(3600)       # an hour with nothing read and nothing queued
        assert calls <= 2
        await send.send({"type": "http.disconnect"})
    assert connection.cancel_called



async def test_a_feed_runs_in_the_writers_task_until_its_end_and_finishes_there():
    from awaken.transports.sse import stream

    sent: list[dict[str, Any]] = []
    feed = RecordingFeed()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(partial(stream, send, never_receive, [], feed, keepalive=15, max_buffered=1000))
            await trio.testing.wait_all_tasks_blocked()
            (writer,) = nursery.child_tasks
            (connection,) = writer.child_nurseries
            # the client watcher only: no task waits for the feed's end
            assert [t.name.rsplit(".", 1)[-1] for t in connection.child_tasks] == ["_watch_client"]
            feed.put(b"data: 1\n\n")
            feed.end()
    assert [(m["type"], m.get("body")) for m in sent] == [
        ("http.response.start", None), ("http.response.body", b"data: 1\n\n"), ("http.response.body", b"")]
    assert feed.finished_in is writer
