"""Batched accepts (awaken/runtime/accept.py): every connection the kernel queued is taken in one
pass, at most ``ACCEPT_BATCH`` at a time, and a burst of clients is served in full."""

from __future__ import annotations

import socket

import trio
from hypercorn.trio import run as hypercorn_run

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
