"""A request body hypercorn has already queued whole is read without a deadline; one still arriving keeps
its deadline (``BODY_TIMEOUT``). ``AppQueue.body_in`` (``awaken/runtime/tcp.py``) says which: it notes
the last body message as hypercorn queues it."""

from __future__ import annotations

from typing import Any

import pytest
import trio

from awaken.runtime.tcp import APP_QUEUE, AppQueue
from awaken.transports.body import LargeBodies, Refused, read_body


async def queue_of(messages: list[dict[str, Any]]) -> tuple[AppQueue, trio.MemoryReceiveChannel]:
    """An ``AppQueue`` in front of a trio channel (as hypercorn's task group makes), ``messages`` put."""
    send, receive = trio.open_memory_channel[dict[str, Any]](10)
    queue = AppQueue()
    queue.queue = send.send
    for message in messages:
        await queue.put(message)
    return queue, receive


async def test_the_queue_notes_the_last_body_message_as_it_is_queued():
    queue, _ = await queue_of([{"type": "http.request", "body": b"a", "more_body": True}])
    assert not queue.body_in
    await queue.put({"type": "http.request", "body": b"b", "more_body": False})
    assert queue.body_in and not queue.happened


@pytest.mark.parametrize("whole", [True, False], ids=["queued-whole", "still-arriving"])
async def test_a_body_queued_whole_is_read_past_its_deadline_and_one_still_arriving_is_not(whole):
    # a deadline of 0 s: any read that keeps one times out at its first checkpoint
    parts = [{"type": "http.request", "body": b'{"a":', "more_body": True}]
    if whole:
        parts.append({"type": "http.request", "body": b"1}", "more_body": False})
    queue, receive = await queue_of(parts)
    scope = {"type": "http", "headers": [], "extensions": {APP_QUEUE: queue}}
    bodies = LargeBodies(4, 1 << 20)
    if whole:
        body = await read_body(scope, receive.receive, limit=1 << 20, seconds=0, bodies=bodies)
        assert body.take() == b'{"a":1}'
    else:
        with pytest.raises(Refused) as refused:
            await read_body(scope, receive.receive, limit=1 << 20, seconds=0, bodies=bodies)
        assert refused.value.code == "BODY_TIMEOUT"
