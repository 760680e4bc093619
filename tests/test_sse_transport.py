"""The SSE transport: coalescing, the byte limit for readers that stop reading, keep-alive."""

from __future__ import annotations

import trio

from awaken.transports.sse import FrameBuffer

from .helpers import agui_body, live_server, make_config


async def test_frames_queued_while_a_send_is_in_flight_are_coalesced():
    buffer = FrameBuffer(1000, lambda: None)
    buffer.put(b"a")
    buffer.put(b"b")
    buffer.put(b"c")
    assert await buffer.take(1) == b"abc"
    buffer.close()
    assert await buffer.take(1) is None and buffer.exhausted


async def test_an_idle_buffer_times_out_for_a_keepalive(autojump_clock):
    buffer = FrameBuffer(1000, lambda: None)
    start = trio.current_time()
    assert await buffer.take(15) is None
    assert trio.current_time() - start == 15
    assert not buffer.exhausted


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
        body = agui_body("t", "r", [{"id": "u1", "role": "user", "content": "/delay 300\n/words 2"}])
        response = await client.post("/v1/ag-ui", json=body)
    raw = response.text
    assert ": keep-alive\n\n" in raw
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    assert raw.rstrip().endswith('"type":"RUN_FINISHED","threadId":"t","runId":"r"}')
