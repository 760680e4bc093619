"""A connection its client closes is closed by the server at once, not after the keep-alive timeout.

hypercorn's trio worker held such a connection (and its tasks and buffers) until ``keep_alive_timeout``
(75 s in ``awaken serve``, 5 s in these tests' server): a client making one run per connection grew the
process by about 12 KB per run. The client here half-closes (``shutdown(SHUT_WR)``: its EOF reaches the
server) and then reads: the server's own EOF must arrive well within the keep-alive timeout.
"""

from __future__ import annotations

import socket
from pathlib import Path

import orjson
import trio

from tests.builders import agui_body, live_server, live_tasks, make_config


def _request(thread: str) -> bytes:
    body = orjson.dumps(agui_body(thread, f"run-{thread}", [{"id": f"m-{thread}", "role": "user",
                                                               "content": "/words 3"}]))
    return (b"POST /v1/ag-ui HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\n"
            b"content-length: " + str(len(body)).encode() + b"\r\n\r\n" + body)


async def _read_until(stream: trio.SocketStream, marker: bytes) -> bytes:
    data = b""
    while marker not in data:
        chunk = await stream.receive_some(65536)
        assert chunk, f"the server closed before {marker!r}: {data[-200:]!r}"
        data += chunk
    return data


async def _no_connection_left() -> None:
    while live_tasks("_serve_listeners._run_handler"):
        await trio.sleep(0.01)


async def _read_to_eof(stream: trio.SocketStream) -> bytes:
    data = b""
    while chunk := await stream.receive_some(65536):
        data += chunk
    return data


async def test_a_connection_the_client_closes_at_its_runs_last_event_is_closed_by_the_server_at_once(
        tmp_path: Path):
    """The client stops at the terminal event (as the bench's and most SSE clients do), before the
    response's last chunk."""
    async with live_server(make_config(tmp_path)) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            await stream.send_all(_request("t1"))
            await _read_until(stream, b"RUN_FINISHED")
            stream.socket.shutdown(socket.SHUT_WR)
            with trio.fail_after(2):  # the tests' server keeps an idle connection 5 s
                rest = await _read_to_eof(stream)
                await _no_connection_left()
            assert rest in (b"", b"0\r\n\r\n") or rest.endswith(b"\n\n0\r\n\r\n")


async def test_a_connection_the_client_closes_after_its_whole_response_is_closed_by_the_server_at_once(
        tmp_path: Path):
    async with live_server(make_config(tmp_path)) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            await stream.send_all(_request("t1"))
            await _read_until(stream, b"0\r\n\r\n")  # the whole chunked stream
            stream.socket.shutdown(socket.SHUT_WR)
            with trio.fail_after(2):
                assert await _read_to_eof(stream) == b""
                await _no_connection_left()  # its tasks (and all they hold) are gone too


async def test_a_connection_the_client_closes_before_any_request_is_closed_by_the_server_at_once(tmp_path: Path):
    async with live_server(make_config(tmp_path)) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            stream.socket.shutdown(socket.SHUT_WR)
            with trio.fail_after(2):
                assert await stream.receive_some(65536) == b""
                await _no_connection_left()
