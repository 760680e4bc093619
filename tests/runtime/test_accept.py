"""Batched accepts (awaken/runtime/accept.py): every connection the kernel queued is taken in one
pass, at most ``ACCEPT_BATCH`` at a time, and a burst of clients is served in full."""

from __future__ import annotations

import socket

import trio
import trio.testing
from hypercorn.trio import run as hypercorn_run
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.runtime import accept, tcp
from tests.builders import live_server, make_config


def _listening() -> socket.socket:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    sock.listen(512)
    sock.setblocking(False)
    return sock


def test_take_queued_takes_every_queued_connection_up_to_the_limit():
    with _listening() as server:
        clients = [socket.create_connection(server.getsockname()) for _ in range(30)]
        try:
            first = accept.take_queued(server, 20)
            rest = accept.take_queued(server, 20)
            none = accept.take_queued(server, 20)
            assert (len(first), len(rest), len(none)) == (20, 10, 0)
            for conn in first + rest:
                conn.close()
        finally:
            for client in clients:
                client.close()


def test_install_gives_hypercorn_the_batched_accept_loop():
    tcp.install()
    assert hypercorn_run.trio.serve_listeners is accept.serve_listeners
    assert hypercorn_run.trio.open_nursery is trio.open_nursery  # everything else is trio's own


async def test_a_burst_of_clients_is_answered_in_full(tmp_path):
    """100 connections opened at once, each asking /healthz on its own connection: all answered."""
    async with live_server(make_config(tmp_path)) as server:
        answers: list[int] = []

        async def one() -> None:
            async with server.client() as client:
                answers.append((await client.get("/healthz")).status_code)

        async with trio.open_nursery() as nursery:
            for _ in range(100):
                nursery.start_soon(one)
    assert answers == [200] * 100


async def _accepted(serve, bursts: list[int]) -> list[str]:  # noqa: ANN001
    """Serve a listener with ``serve`` (a ``serve_listeners``) while clients connect in ``bursts``
    (each burst connects in full, queued by the kernel, before any of its clients sends), each client
    sending its name and closing; returns the names the handlers read, in the order they finished."""
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    total = sum(bursts)
    got: list[str] = []
    all_in = trio.Event()

    async def handler(stream: trio.SocketStream) -> None:
        data = b""
        while chunk := await stream.receive_some():
            data += chunk
        got.append(data.decode())
        if len(got) == total:
            all_in.set()

    with trio.fail_after(30):  # a hang is a failure, not a wait
        async with trio.open_nursery() as nursery:
            await nursery.start(serve, handler, listeners)
            n = 0
            for size in bursts:
                clients = []
                for _ in range(size):
                    client = trio.socket.socket()
                    await client.connect(("127.0.0.1", port))
                    clients.append(client)
                for client in clients:
                    await client.send(f"c{n}".encode())
                    client.close()
                    n += 1
            await all_in.wait()
            await trio.testing.wait_all_tasks_blocked()  # a duplicate handler would have run by now
            nursery.cancel_scope.cancel()
    return got


@settings(max_examples=12, deadline=None)
@given(bursts=st.lists(st.integers(1, 40), min_size=1, max_size=4), batch=st.integers(1, 9))
def test_the_batched_loop_accepts_exactly_the_connections_trios_own_loop_accepts(bursts, batch):
    """Bursts of clients queued at once, taken ``batch`` at a time: the batched loop hands every
    connection to a handler exactly once, the same set as ``trio.serve_listeners`` (none lost, none
    twice)."""
    sent = sorted(f"c{n}" for n in range(sum(bursts)))
    saved = accept.ACCEPT_BATCH
    accept.ACCEPT_BATCH = batch
    try:
        batched = trio.run(_accepted, accept.serve_listeners, bursts)
    finally:
        accept.ACCEPT_BATCH = saved
    plain = trio.run(_accepted, trio.serve_listeners, bursts)
    assert sorted(batched) == sorted(plain) == sent

