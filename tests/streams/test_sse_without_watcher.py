"""SSE streams without a task of their own: the request's disconnect notice and the server's heartbeat.

A run's stream (an ``sse.Feed``) on a live server learns that its client went from the ``AppQueue``
hypercorn's task group puts in its scope (``awaken/runtime/tcp.py``), and gets its keep-alive comments
from the server-wide ``Heartbeat`` (``awaken/transports/sse.py``): no ``_watch_client`` task, no nursery.
These tests hold each promise of that path: the notice fires on the disconnect (and at once for a late
registration), the heartbeat comments only idle open streams, the bytes written are those of the watched
path, a disconnect, a write-deadline close and an overflow end the writer as before, an ended stream
leaves no reference cycle, and through a live server a stream takes this path and still gets its
comments. Through a live server too: a disconnect stops its run (tests/http/test_agui_http.py, which
checks the stream had no watcher task), a client that stops reading is ``client_too_slow`` by the
write deadline or the byte limit (tests/streams/test_slow_clients.py). Runs are held with the scripted
model's ``/hold``; time is trio's autojump clock where the heartbeat's interval matters.
"""

from __future__ import annotations

import gc
import weakref
from functools import partial
from typing import Any

import pytest
import trio
import trio.testing
from hypercorn.config import Config as HypercornConfig

from awaken.runtime.tcp import AppQueue, NotifyingTaskGroup, app_queue_in
from awaken.transports.sse import KEEPALIVE, FrameBuffer, Heartbeat, stream
from tests.builders import (
    RecordingFeed,
    agui_body,
    held,
    live_server,
    live_tasks,
    make_config,
    never_receive,
    parse_sse,
    read_until,
    release,
    types,
    user,
)


async def drain(buffer: FrameBuffer) -> bytes | None:
    """What ``buffer`` holds now (None: nothing)."""
    with trio.move_on_after(0):
        return await buffer.take()
    return None


def notice() -> tuple[AppQueue, trio.MemoryReceiveChannel]:
    """An ``AppQueue`` whose queue is a channel the test reads."""
    send, receive = trio.open_memory_channel[dict[str, Any]](10)
    disconnect = AppQueue()
    disconnect.queue = send.send
    return disconnect, receive


# -- the disconnect notice -------------------------------------------------------------------------


async def test_the_notice_fires_its_callback_on_the_disconnect_put_then_queues_the_event():
    disconnect, queued = notice()
    calls: list[str] = []
    disconnect.on_disconnect(lambda: calls.append("gone"))
    await disconnect.put({"type": "http.request", "body": b"", "more_body": False})
    assert calls == []
    await disconnect.put({"type": "http.disconnect"})
    assert calls == ["gone"] and disconnect.happened
    assert [queued.receive_nowait()["type"] for _ in range(2)] == ["http.request", "http.disconnect"]


async def test_a_callback_registered_after_the_disconnect_fires_at_once_and_an_unregistered_one_never():
    disconnect, _queued = notice()
    calls: list[str] = []
    disconnect.on_disconnect(lambda: calls.append("first"))
    disconnect.on_disconnect(None)
    await disconnect.put({"type": "websocket.disconnect", "code": 1000})
    assert calls == []
    disconnect.on_disconnect(lambda: calls.append("late"))
    assert calls == ["late"]


async def test_hypercorns_task_group_hands_every_request_a_notice_that_fires_before_receive_returns():
    order: list[str] = []
    ready = trio.Event()

    async def app(scope: dict[str, Any], receive: Any, send: Any, *_threads: Any) -> None:
        notified = app_queue_in(scope)
        assert notified is not None
        notified.on_disconnect(lambda: order.append("callback"))
        ready.set()
        order.append((await receive())["type"])

    async def hypercorn_send(_event: Any) -> None:
        return None

    with trio.fail_after(5):
        async with NotifyingTaskGroup() as group:
            put = await group.spawn_app(app, HypercornConfig(), {"type": "http", "extensions": {}}, hypercorn_send)
            await ready.wait()
            await put({"type": "http.disconnect"})
    assert order == ["callback", "http.disconnect"]


# -- the heartbeat ----------------------------------------------------------------------------------


async def test_the_heartbeat_comments_an_idle_open_buffer_and_neither_a_busy_nor_a_closed_one(autojump_clock):
    heartbeat = Heartbeat(15)
    idle, busy, closed = (FrameBuffer(1000, lambda: None) for _ in range(3))
    closed.close()
    for buffer in (idle, busy, closed):
        heartbeat.add(buffer)
    async with trio.open_nursery() as nursery:
        nursery.start_soon(heartbeat.run)
        for _ in range(2):  # 6 and 12 s in: the busy stream queues a frame
            await trio.sleep(6)
            assert await drain(idle) is None  # not idle for an interval yet
            busy.put(b"data: x\n\n")
        await trio.sleep(7)  # 19 s in: past 1.25 × the interval
        assert await drain(idle) == KEEPALIVE
        assert await drain(busy) == b"data: x\n\ndata: x\n\n"  # its own frames only
        assert await drain(closed) is None
        nursery.cancel_scope.cancel()
    assert not heartbeat.running


async def test_a_stream_with_a_running_heartbeat_gets_its_comments_without_a_task_and_leaves_it(autojump_clock):
    heartbeat = Heartbeat(15)
    disconnect, _queued = notice()
    feed = RecordingFeed()
    sent: list[bytes] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body", b"(head)"))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(heartbeat.run)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(partial(stream, send, None, [], feed, keepalive=15, max_buffered=1000,  # type: ignore[arg-type]
                                   app_queue=disconnect, heartbeat=heartbeat))
        await trio.testing.wait_all_tasks_blocked()
        writer = next(t for t in nursery.child_tasks if t.name.endswith(".stream"))
        assert writer.child_nurseries == [] and heartbeat.registered == 1
        feed.put(b"data: 1\n\n")
        await trio.sleep(15 * 1.25 + 0.1)  # just past 1.25 × the interval (not on a tick)
        assert sent == [b"(head)", b"data: 1\n\n", KEEPALIVE]
        feed.end()
        await trio.testing.wait_all_tasks_blocked()
        assert heartbeat.registered == 0 and feed.finished
        nursery.cancel_scope.cancel()
    assert sent[-1] == b""


# -- the writer on this path -------------------------------------------------------------------------


async def _written(frames: list[list[bytes]], *, notified: bool) -> list[dict[str, Any]]:
    """What ``stream`` sends for a feed that puts each group of ``frames`` while the writer waits, then
    ends: with the notice and a running heartbeat (``notified``), or watched by ``_watch_client``."""
    feed = RecordingFeed()
    sent: list[dict[str, Any]] = []
    heartbeat = Heartbeat(15)
    disconnect, _queued = notice()

    async def send(message: dict[str, Any]) -> None:
        sent.append(message)

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            nursery.start_soon(heartbeat.run)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(partial(stream, send, never_receive, [(b"content-type", b"text/event-stream")], feed,
                                       keepalive=15, max_buffered=1000, app_queue=disconnect if notified else None,
                                       heartbeat=heartbeat if notified else None))
            await trio.testing.wait_all_tasks_blocked()
            assert live_tasks("._watch_client") == (0 if notified else 1)
            for group in frames:
                for frame in group:
                    feed.put(frame)
                await trio.testing.wait_all_tasks_blocked()
            feed.end()
            await trio.testing.wait_all_tasks_blocked()
            nursery.cancel_scope.cancel()
    assert feed.finished
    return sent


async def test_the_bytes_written_are_those_of_the_watched_path():
    frames = [[b"data: 1\n\n"], [b"data: 2\n\n", b"data: 3\n\n"], [b"id: 4\ndata: 4\n\n"]]
    notified = await _written(frames, notified=True)
    assert notified == await _written(frames, notified=False)
    assert [m.get("body") for m in notified] == [
        None, b"data: 1\n\n", b"data: 2\n\ndata: 3\n\n", b"id: 4\ndata: 4\n\n", b""]


async def _open_stream(nursery: trio.Nursery, *, timed_out: bool = False, max_buffered: int = 1000,
                       send_gate: trio.Event | None = None) -> tuple[RecordingFeed, AppQueue, list[Any], list[str]]:
    """A notified stream started in ``nursery``, beside a running heartbeat: its feed, its notice, what
    it sent (the bodies) and the overflow callbacks it made."""
    heartbeat = Heartbeat(15)
    nursery.start_soon(heartbeat.run)
    await trio.testing.wait_all_tasks_blocked()
    feed = RecordingFeed()
    disconnect, _queued = notice()
    sent: list[Any] = []
    overflows: list[str] = []

    async def send(message: dict[str, Any]) -> None:
        sent.append(message.get("body"))
        if send_gate is not None and message["type"] == "http.response.body":
            await send_gate.wait()  # a reader that stops reading: the write does not return

    nursery.start_soon(partial(stream, send, None, [], feed, keepalive=15, max_buffered=max_buffered,  # type: ignore[arg-type]
                               on_overflow=lambda: overflows.append("too slow"), timed_out=lambda: timed_out,
                               app_queue=disconnect, heartbeat=heartbeat))
    await trio.testing.wait_all_tasks_blocked()
    return feed, disconnect, sent, overflows


async def test_a_disconnect_ends_the_writer_unfinished_and_the_feed_finishes():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            feed, disconnect, sent, overflows = await _open_stream(nursery)
            feed.put(b"data: 1\n\n")
            await trio.testing.wait_all_tasks_blocked()
            await disconnect.put({"type": "http.disconnect"})
            await trio.testing.wait_all_tasks_blocked()
            assert feed.finished and live_tasks(".stream") == 0
            feed.put(b"data: 2\n\n")  # a late frame of the run: nowhere to go
            nursery.cancel_scope.cancel()
    assert sent == [None, b"data: 1\n\n"]  # no closing chunk: the client is gone
    assert overflows == []  # client_gone: no cause of its own


@pytest.mark.parametrize("path", ["without a watcher", "with a watcher"])
async def test_a_response_that_cannot_start_still_finishes_the_feed(path):
    """A feed's ``finish`` runs on every path (it lets go of the run's watcher and stops an attached run):
    also when the response head could not be sent, before the feed was started."""
    feed = RecordingFeed()

    async def send(_message: dict[str, Any]) -> None:
        raise trio.BrokenResourceError("the client went before the response started")

    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            heartbeat = Heartbeat(15)
            nursery.start_soon(heartbeat.run)
            await trio.testing.wait_all_tasks_blocked()
            disconnect, _queued = notice()
            with pytest.raises(trio.BrokenResourceError):
                await stream(send, never_receive, [], feed, keepalive=15, max_buffered=1000,
                             app_queue=disconnect if path == "without a watcher" else None, heartbeat=heartbeat)
            nursery.cancel_scope.cancel()
    assert feed.put is None and feed.finished
    assert heartbeat.registered == 0


async def test_a_disconnect_made_by_the_write_deadline_reads_as_too_slow():
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            feed, disconnect, sent, overflows = await _open_stream(nursery, timed_out=True)
            await disconnect.put({"type": "http.disconnect"})
            await trio.testing.wait_all_tasks_blocked()
            assert feed.finished and live_tasks(".stream") == 0
            nursery.cancel_scope.cancel()
    assert overflows == ["too slow"] and sent == [None]


async def test_an_overflow_stops_the_writer_at_its_next_step():
    gate = trio.Event()
    with trio.fail_after(5):
        async with trio.open_nursery() as nursery:
            feed, _disconnect, sent, overflows = await _open_stream(nursery, max_buffered=20, send_gate=gate)
            feed.put(b"data: 1\n\n")  # taken: the write of it never returns
            await trio.testing.wait_all_tasks_blocked()
            for _ in range(3):
                feed.put(b"data: 2345678\n\n")  # queued behind it: past the limit
            assert overflows == ["too slow"]
            gate.set()  # the write returns (as a write-deadline close would make it): nothing more is written
            await trio.testing.wait_all_tasks_blocked()
            assert feed.finished and live_tasks(".stream") == 0
            nursery.cancel_scope.cancel()
    assert sent == [None, b"data: 1\n\n"]


class Run:
    """What an overflow stops (``SseTransport`` hands ``stream`` a closure over the run)."""

    def cancel(self) -> None:
        return None


async def test_an_ended_stream_leaves_no_cycle_holding_its_run():
    """The buffer's overflow callback refers to the buffer and to the run: once the stream ended, reference
    counting alone frees them (the server collects cycles rarely: ``GC_THRESHOLDS``)."""
    run = Run()
    freed = weakref.ref(run)
    gc.disable()
    try:
        with trio.fail_after(5):
            async with trio.open_nursery() as nursery:
                heartbeat = Heartbeat(15)
                nursery.start_soon(heartbeat.run)
                await trio.testing.wait_all_tasks_blocked()
                feed = RecordingFeed()
                disconnect, _queued = notice()

                async def send(_message: dict[str, Any]) -> None:
                    return None

                nursery.start_soon(partial(stream, send, None, [], feed, keepalive=15, max_buffered=1000,  # type: ignore[arg-type]
                                           on_overflow=run.cancel, app_queue=disconnect, heartbeat=heartbeat))
                del run
                await trio.testing.wait_all_tasks_blocked()
                feed.put(b"data: 1\n\n")
                feed.end()
                await trio.testing.wait_all_tasks_blocked()
                assert feed.finished
                feed = None  # what it was handed (the buffer's methods) goes with it
                nursery.cancel_scope.cancel()
        assert freed() is None
    finally:
        gc.enable()


# -- through a live server ----------------------------------------------------------------------------


async def test_a_live_run_stream_has_no_watcher_task_and_gets_keepalive_comments_from_the_heartbeat(tmp_path):
    """CONTRACT §3 on this path: a ``: keep-alive`` comment while the run is held; the stream is the
    heartbeat's, and no ``_watch_client`` task exists for it (a rejoin stream, a plain producer, keeps
    its watcher: the count sees such tasks)."""
    config = make_config(tmp_path, server={"keepalive_seconds": 0.05})
    async with live_server(config) as server, server.client() as client, server.client() as rejoiner:
        body = agui_body("t-hb", "r-hb", [user("u1", held("t-hb", 3))])
        content = b""
        with trio.fail_after(20):
            async with client.stream("POST", "/v1/ag-ui", json=body) as response:
                chunks = response.aiter_bytes()
                async for data in chunks:
                    content += data
                    if b"TEXT_MESSAGE_CONTENT" in content:
                        break
                assert server.ctx.heartbeat.running and server.ctx.heartbeat.registered == 1
                assert live_tasks("._watch_client") == 0
                async with rejoiner.stream("GET", "/v1/ag-ui/threads/t-hb/stream") as rejoined:
                    await read_until(rejoined.aiter_lines(), "TEXT_MESSAGE_CONTENT")
                    assert live_tasks("._watch_client") == 1  # the rejoin's
                while b": keep-alive\n\n" not in content.split(b"TEXT_MESSAGE_CONTENT")[1]:
                    content += await anext(chunks)  # the heartbeat's comment, while the run is held
                await release(server, "t-hb")
                async for data in chunks:
                    content += data
        assert server.ctx.heartbeat.registered == 0
    events = parse_sse(content)
    assert types(events)[-1] == "RUN_FINISHED" and types(events).count("TEXT_MESSAGE_CONTENT") == 3
