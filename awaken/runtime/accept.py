"""Accepting connections in batches: every connection the kernel has queued is taken in one pass.

``trio.serve_listeners`` (what hypercorn's trio worker runs) accepts one connection per scheduler
pass: each ``accept`` is a checkpoint, and every pass also runs every task that is due. With
thousands of streams running, a burst of new clients waits thousands of passes in the listen queue,
and past the backlog the kernel drops their SYNs or resets them. ``serve_listeners`` here waits
until a listening socket is readable and then accepts without yielding until the queue is empty
(or ``ACCEPT_BATCH`` connections were taken), starting each connection's handler in the handler
nursery exactly as trio does. ``install`` makes hypercorn use it; nothing else changes.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import types
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from hypercorn.trio import run as hypercorn_run

from awaken.runtime.tuning import ACCEPT_BATCH

log = logging.getLogger(__name__)

#: errors of ``accept`` that say the process or system is out of a resource: wait, then try again
CAPACITY_ERRNOS = frozenset({errno.EMFILE, errno.ENFILE, errno.ENOMEM, errno.ENOBUFS})
#: errors of ``accept`` about a connection that went away before it was taken: skip it
GONE_ERRNOS = frozenset({errno.ECONNABORTED, errno.EPROTO, errno.EPERM})
#: seconds to wait after a capacity error (trio's own choice)
CAPACITY_PAUSE = 0.1

Handler = Callable[[trio.SocketStream], Awaitable[Any]]


def take_queued(sock: socket.socket, limit: int) -> list[socket.socket]:
    """Up to ``limit`` connections queued on the non-blocking listening ``sock``, without waiting.
    Raises the capacity errors (after taking what could be taken, those are returned first)."""
    taken: list[socket.socket] = []
    while len(taken) < limit:
        try:
            conn, _ = sock.accept()
        except BlockingIOError:
            break
        except OSError as exc:
            if exc.errno in GONE_ERRNOS:
                continue
            if taken:
                break  # hand over what was taken; the error comes back on the next call
            raise
        taken.append(conn)
    return taken


#: every connection's task is named this: a name trio would build per task (a string each) from the function
CONNECTION_TASK = "awaken.runtime.accept.connection"


async def _run_handler(stream: trio.SocketStream, handler: Handler) -> None:
    try:
        await handler(stream)
    finally:
        await trio.aclose_forcefully(stream)


async def _serve_one(listener: trio.SocketListener, handler_nursery: trio.Nursery, handler: Handler) -> None:
    # a second descriptor of the same listening socket, as a plain non-blocking socket
    sock = socket.socket(fileno=os.dup(listener.socket.fileno()))
    sock.setblocking(False)
    with sock:
        async with listener:
            while True:
                await trio.lowlevel.wait_readable(sock)
                try:
                    connections = take_queued(sock, ACCEPT_BATCH)
                except OSError as exc:
                    if exc.errno not in CAPACITY_ERRNOS:
                        raise
                    log.error("accept returned %s; retrying in %s s", errno.errorcode[exc.errno], CAPACITY_PAUSE)
                    await trio.sleep(CAPACITY_PAUSE)
                    continue
                for conn in connections:
                    stream = trio.SocketStream(trio.socket.from_stdlib_socket(conn))
                    handler_nursery.start_soon(_run_handler, stream, handler, name=CONNECTION_TASK)
                await trio.lowlevel.checkpoint()


async def serve_listeners(handler: Handler, listeners: list[Any], *, handler_nursery: trio.Nursery | None = None,
                          task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
    """``trio.serve_listeners`` with batched accepts on plain socket listeners (others are served by
    trio's own loop)."""
    plain = [lst for lst in listeners if isinstance(lst, trio.SocketListener)]
    others = [lst for lst in listeners if not isinstance(lst, trio.SocketListener)]
    async with trio.open_nursery() as nursery:
        nursery_for_handlers = handler_nursery if handler_nursery is not None else nursery
        for listener in plain:
            nursery.start_soon(_serve_one, listener, nursery_for_handlers, handler)
        if others:
            nursery.start_soon(trio.serve_listeners, handler, others, handler_nursery=nursery_for_handlers)
        task_status.started(listeners)


class _TrioForHypercorn(types.ModuleType):
    """The ``trio`` hypercorn's worker sees: trio itself, but ``serve_listeners`` is the batched one."""

    serve_listeners = staticmethod(serve_listeners)

    def __getattr__(self, name: str) -> Any:
        return getattr(trio, name)


def install() -> None:
    """Make hypercorn's trio worker accept in batches (idempotent)."""
    hypercorn_run.trio = _TrioForHypercorn("trio")  # type: ignore[attr-defined]
