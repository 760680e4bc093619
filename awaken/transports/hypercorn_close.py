"""Close a connection when its client closes it: a fix for hypercorn's trio worker (0.18).

hypercorn's trio ``TCPServer.run`` reads until the client's EOF and then leaves its task group, which
waits for the connection's idle-timeout task. That task sleeps ``keep_alive_timeout`` (75 s in
``awaken serve``) before it closes the connection. So every connection a client closes after its last
response stayed open on the server (``CLOSE-WAIT``) with its tasks, parser and buffers, about 12 KB
of resident memory, for up to 75 s: a client making one run per connection (a browser page per
message, the bench's waiting runs) grew the process by that much per run. The asyncio worker stops
the idle task when it closes the connection; ``install`` makes the trio worker stop it once the read
side has ended, so the task group leaves as soon as the response (if any) is done.
"""

from __future__ import annotations

from typing import Any

from hypercorn.trio.tcp_server import TCPServer

_original_read_data = TCPServer._read_data


async def _read_data_then_stop_idling(self: Any) -> None:
    await _original_read_data(self)
    await self.idle_task.stop()  # nothing more will arrive: do not wait keep_alive_timeout to close


def install() -> None:
    """Patch ``TCPServer._read_data`` (idempotent)."""
    TCPServer._read_data = _read_data_then_stop_idling  # type: ignore[method-assign]
