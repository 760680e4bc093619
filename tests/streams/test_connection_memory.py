"""An ended connection's objects are freed when it ends, by reference counting, not at the cycle
collector's next full collection (issue 26, finding 13).

hypercorn's per-connection objects refer to one another (the connection's ``protocol_send`` is held by
its protocol, the protocol's stream holds the protocol's ``stream_send``, ...), and so did a WebSocket's
``WsConnection`` (its outbox held its ``_on_overflow``, its nursery the tasks running its methods).
Each ended connection was one reference cycle of ~60 objects that only a full collection frees, and
those are rare under ``GC_THRESHOLDS``: a burst of 500 clients left ~5 MB of them a burst
(bench/SLOWCLIENTS.md). Here the cycle collector is off: every connection object the server made must
be gone once the server let go of the connection (``tcp.drop_connection``, ``WsConnection.release``).
"""

from __future__ import annotations

import gc
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import orjson
import pytest
import trio
from hypercorn.protocol.h11 import H11Protocol
from trio_websocket import open_websocket_url

from awaken.runtime import tcp
from awaken.transports import ws as ws_transport
from tests.builders import agui_body, live_server, make_config, post_agui


def track(monkeypatch: pytest.MonkeyPatch, cls: type) -> list[weakref.ref]:
    """A weak reference to every ``cls`` made from now on."""
    made: list[weakref.ref] = []
    original: Callable[..., None] = cls.__init__  # type: ignore[misc]

    def init(self: Any, *args: Any, **kwargs: Any) -> None:
        made.append(weakref.ref(self))
        original(self, *args, **kwargs)

    monkeypatch.setattr(cls, "__init__", init)
    return made


@contextmanager
def no_cycle_collector() -> Iterator[None]:
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def all_freed(refs: list[weakref.ref], limit_s: float = 10.0) -> bool:
    """Whether every referenced object is freed within ``limit_s`` (the server ends a connection's
    task soon after its client closed it; no collection runs meanwhile)."""
    with trio.move_on_after(limit_s):
        while any(ref() is not None for ref in refs):
            await trio.sleep(0.05)
        return True
    return False


async def test_http_and_websocket_connections_are_freed_when_they_end(tmp_path, monkeypatch):
    connections = track(monkeypatch, tcp.WriteDeadlineServer)
    protocols = track(monkeypatch, H11Protocol)
    sockets = track(monkeypatch, ws_transport.WsConnection)
    async with live_server(make_config(tmp_path)) as server:
        with no_cycle_collector():
            # two runs on one HTTP/1.1 connection, then the client closes it
            async with server.client(headers={"connection": "keep-alive"}) as client:
                for n in range(2):
                    events = await post_agui(client, agui_body(f"conn-mem-{n}", f"conn-mem-r{n}", [
                        {"id": f"conn-mem-u{n}", "role": "user", "content": "hello"}]))
                    assert events[-1]["type"] == "RUN_FINISHED"
            # a WebSocket that ran one request, and one that never sent anything
            url = server.base_url.replace("http://", "ws://", 1) + "/v1/ag-ui/ws"
            async with open_websocket_url(url) as ws:
                await ws.send_message(orjson.dumps(agui_body("conn-mem-ws", "conn-mem-ws-r", [
                    {"id": "conn-mem-ws-u", "role": "user", "content": "hello"}])).decode())
                while '"RUN_FINISHED"' not in await ws.get_message():
                    pass
            async with open_websocket_url(url):
                pass
            assert len(connections) >= 3 and len(protocols) >= 3 and len(sockets) == 2
            assert await all_freed(connections + protocols + sockets), (
                f"still alive: {sum(r() is not None for r in connections)} connections, "
                f"{sum(r() is not None for r in protocols)} protocols, {sum(r() is not None for r in sockets)} sockets")
