"""WebSocket transport (CONTRACT §5, §6) over AG-UI: a live server, trio-websocket and a raw socket client.

The raw client (``RawWs``) reads only when told to: it stands in for a browser tab that stopped
reading, and it sees ping and close frames that client libraries hide.
"""

from __future__ import annotations

import base64
import contextlib
import os
import socket
import time
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import orjson
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from trio_websocket import WebSocketConnection, open_websocket_url

from awaken.config import AppConfig
from awaken.engine.state import RunStatus
from awaken.http.app import build_asgi
from awaken.http.context import ServerContext
from awaken.transports import ws as ws_transport
from tests.builders import (
    LiveServer,
    agui_body,
    default_config_data,
    held,
    live_server,
    make_config,
    post_agui,
    release,
    types,
    user,
    ws_url,
)
from tests.builders import agui_text as text_of

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
TERMINAL = ("RUN_FINISHED", "RUN_ERROR")


# -- helpers ------------------------------------------------------------------------------------------


async def send_body(ws: WebSocketConnection, body: dict[str, Any]) -> None:
    await ws.send_message(orjson.dumps(body).decode())


async def until_terminal(ws: WebSocketConnection, terminal: tuple[str, ...] = TERMINAL) -> list[dict[str, Any]]:
    """Every AG-UI event up to and including the next terminal one."""
    events: list[dict[str, Any]] = []
    with trio.fail_after(10):
        while not events or events[-1]["type"] not in terminal:
            events.append(orjson.loads(await ws.get_message()))
    return events


async def run_over_ws(ws: WebSocketConnection, body: dict[str, Any]) -> list[dict[str, Any]]:
    await send_body(ws, body)
    return await until_terminal(ws)


def normalized(events: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Events with the per-run ids replaced, for comparing two runs of the same input."""
    out = []
    for e in events:
        e = dict(e)
        for key in ("messageId", "threadId", "runId", "toolCallId"):
            if key in e:
                e[key] = key
        out.append(e)
    return out


async def run_status(server: LiveServer | ServerContext, run_id: str) -> RunStatus | None:
    ctx = server.ctx if isinstance(server, LiveServer) else server
    record = await ctx.ledger.get_run(run_id)
    return record.status if record else None


async def wait_status(server: LiveServer | ServerContext, run_id: str, status: RunStatus, within: float) -> float:
    """Seconds until ``run_id`` is committed with ``status`` (fails after ``within``)."""
    start = time.perf_counter()
    with trio.fail_after(within):
        while await run_status(server, run_id) is not status:
            await trio.sleep(0.005)
    return time.perf_counter() - start


def config_with(tmp_path: Path, **server: Any) -> AppConfig:
    return make_config(tmp_path, server={**default_config_data()["server"], **server})


class RawWs:
    """A bare client WebSocket on a trio socket: it reads only when asked (and sees pings and close frames)."""

    def __init__(self, stream: trio.SocketStream, pending: bytes) -> None:
        self.stream = stream
        self.buffer = bytearray(pending)

    @classmethod
    async def connect(cls, base_url: str, path: str, *, receive_buffer: int | None = None) -> RawWs:
        parts = urlsplit(base_url)
        sock = trio.socket.socket()
        if receive_buffer:  # before connect, so the window the server sees stays small
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer)
        await sock.connect((parts.hostname, parts.port))
        stream = trio.SocketStream(sock)
        key = base64.b64encode(os.urandom(16)).decode()
        await stream.send_all(
            f"GET {path} HTTP/1.1\r\nHost: {parts.netloc}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {key}\r\nSec-WebSocket-Version: 13\r\n\r\n".encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = await stream.receive_some(4096)
            assert chunk, "the server closed during the handshake"
            head += chunk
        status, _, rest = head.partition(b"\r\n\r\n")
        assert status.startswith(b"HTTP/1.1 101"), status
        return cls(stream, rest)

    async def send_frame(self, opcode: int, payload: bytes) -> None:
        n = len(payload)
        length = bytes([0x80 | n]) if n < 126 else bytes([0x80 | 126]) + n.to_bytes(2, "big")
        mask = os.urandom(4)
        masked = bytes(b ^ mask[i % 4] for i, b in enumerate(payload))
        await self.stream.send_all(bytes([0x80 | opcode]) + length + mask + masked)

    async def send_text(self, text: str) -> None:
        await self.send_frame(0x1, text.encode())

    async def _fill(self, need: int) -> bool:
        while len(self.buffer) < need:
            chunk = await self.stream.receive_some(1 << 20)
            if not chunk:
                return False
            self.buffer += chunk
        return True

    async def read_frame(self) -> tuple[int, bytes] | None:
        """``(opcode, payload)`` of the next frame, or None at EOF."""
        if not await self._fill(2):
            return None
        opcode, n = self.buffer[0] & 0x0F, self.buffer[1] & 0x7F
        start = 2
        if n == 126:
            if not await self._fill(4):
                return None
            n, start = int.from_bytes(self.buffer[2:4], "big"), 4
        elif n == 127:
            if not await self._fill(10):
                return None
            n, start = int.from_bytes(self.buffer[2:10], "big"), 10
        if not await self._fill(start + n):
            return None
        payload = bytes(self.buffer[start : start + n])
        del self.buffer[: start + n]
        return opcode, payload

    async def read_until_close(self) -> tuple[list[bytes], int | None]:
        """Every text payload until the server's close frame (answered) or EOF: ``(texts, close code)``.

        The close code is None when the connection ended without a close frame (EOF or reset).
        """
        texts: list[bytes] = []
        while True:
            try:
                frame = await self.read_frame()
            except trio.BrokenResourceError:  # reset: the server dropped the connection
                return texts, None
            if frame is None:
                return texts, None
            opcode, payload = frame
            if opcode == 0x8:
                with contextlib.suppress(trio.BrokenResourceError):
                    await self.send_frame(0x8, payload[:2])
                return texts, int.from_bytes(payload[:2], "big")
            if opcode == 0x1:
                texts.append(payload)

    async def at_eof(self) -> bool:
        """Whether the server closes the TCP connection (after its close frame) within two seconds."""
        with trio.move_on_after(2):
            try:
                return await self.read_frame() is None
            except trio.BrokenResourceError:
                return True
        return False


@asynccontextmanager
async def stoppable_server(config: AppConfig, graceful: float) -> AsyncIterator[tuple[str, ServerContext, trio.Event]]:
    """Like ``live_server``, but stopped through hypercorn's shutdown trigger (a graceful shutdown)."""
    ctx = ServerContext.build(config)
    await ctx.open()
    stop = trio.Event()
    try:
        async with trio.open_nursery() as nursery:
            hc = HypercornConfig()
            hc.bind = ["127.0.0.1:0"]
            hc.accesslog = None
            hc.graceful_timeout = graceful
            binds = await nursery.start(
                lambda task_status: hypercorn_serve(build_asgi(ctx), hc, shutdown_trigger=stop.wait,
                                                    task_status=task_status)
            )
            yield binds[0], ctx, stop
            stop.set()
    finally:
        with trio.CancelScope(shield=True):
            await ctx.aclose()


# -- one run, several runs, tools ---------------------------------------------------------------------


async def test_text_run_is_the_sse_stream_one_message_per_event(server, client):
    """§6: each text message carries exactly what SSE puts after ``data: ``, for the same input."""
    sse = await post_agui(client, agui_body("t-sse", "r-sse", [user("u-sse", "hello there")]))
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        events = await run_over_ws(ws, agui_body("t-ws", "r-ws", [user("u-ws", "hello there")]))
    assert normalized(events) == normalized(sse)
    assert text_of(events) == 'You said: "hello there".'
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t-ws", "runId": "r-ws", "protocolVersion": "1.0"}
    assert await run_status(server, "r-ws") is RunStatus.COMPLETED


async def test_several_runs_in_sequence_on_one_socket(server):
    """§6: runs one after another on one socket, on the same thread and on others."""
    plan = [("t-a", "r1", "first"), ("t-a", "r2", "second"), ("t-b", "r3", "third"), ("t-a", "r4", "fourth")]
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        for thread, run, text in plan:
            events = await run_over_ws(ws, agui_body(thread, run, [user(f"u-{run}", text)]))
            assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_FINISHED"
            assert text_of(events) == f'You said: "{text}".'
    for _, run, _ in plan:
        assert await run_status(server, run) is RunStatus.COMPLETED
    history = await server.ctx.ledger.read_messages("t-a", 0, 100)
    assert [m.role for m in history] == ["user", "assistant"] * 3


async def test_permission_gate_and_client_tool_each_resume_on_their_socket(server):
    """§3 resume over WebSocket: a waiting run and its resume travel over one socket.

    AG-UI picks the agent by path (the body has no agent field), so ``guarded`` and ``frontend`` each
    get their own socket; ``test_ws_aisdk`` runs both agents over one socket (its body names the agent).
    """
    base = server.base_url
    async with open_websocket_url(ws_url(base, "/v1/ag-ui/agents/guarded/ws")) as ws:
        first = await run_over_ws(ws, agui_body("t-g", "r-g", [user("u-g", '/call calculator {"expression":"1+1"}')]))
        assert types(first)[-1] == "RUN_FINISHED"
        (start,) = [e for e in first if e["type"] == "TOOL_CALL_START"]
        assert start["toolCallName"] == "calculator"
        assert await run_status(server, "r-g") is RunStatus.WAITING
        call_id = start["toolCallId"]
        approve = {"id": "tm-g", "role": "tool", "toolCallId": call_id, "content": "approved"}
        ask = user("u-g", '/call calculator {"expression":"1+1"}')
        second = await run_over_ws(ws, agui_body("t-g", "r-g2", [ask, approve]))
        (result,) = [e for e in second if e["type"] == "TOOL_CALL_RESULT"]
        assert result["toolCallId"] == call_id and orjson.loads(result["content"]) == {"result": 2}
        assert "calculator returned" in text_of(second)
        assert types(second)[-1] == "RUN_FINISHED"
        # the same socket serves a plain run afterwards
        assert types(await run_over_ws(ws, agui_body("t-g", "r-g3", [user("u-g3", "thanks")])))[-1] == "RUN_FINISHED"
    assert await run_status(server, "r-g") is RunStatus.COMPLETED

    async with open_websocket_url(ws_url(base, "/v1/ag-ui/agents/frontend/ws")) as ws:
        first = await run_over_ws(ws, agui_body("t-f", "r-f", [user("u-f", '/call ask_user {"question":"?"}')]))
        (start,) = [e for e in first if e["type"] == "TOOL_CALL_START"]
        assert start["toolCallName"] == "ask_user" and types(first)[-1] == "RUN_FINISHED"
        answer = {"id": "tm-f", "role": "tool", "toolCallId": start["toolCallId"], "content": "forty-two"}
        second = await run_over_ws(ws, agui_body("t-f", "r-f2", [answer]))
        assert "ask_user returned forty-two" in text_of(second)
        assert types(second)[-1] == "RUN_FINISHED"
    assert await run_status(server, "r-f") is RunStatus.COMPLETED


# -- one request at a time; bad input -----------------------------------------------------------------


#: what the held runs stream (``held(gate)``: 12 words, held after the first until ``release``); the Node
#: client's held run (``ws_client.mjs`` ``SLOW``) is this with the gate "slow"
SLOW = held("slow")
WORDS = "/words 12"
SLOW_TEXT = "alpha bravo charlie delta echo foxtrot golf hotel india juliet alpha bravo"


async def until_streaming(ws: WebSocketConnection) -> list[dict[str, Any]]:
    """The run's events up to its first text delta (from then on it is streaming)."""
    events: list[dict[str, Any]] = []
    with trio.fail_after(10):
        while not events or events[-1]["type"] != "TEXT_MESSAGE_CONTENT":
            events.append(orjson.loads(await ws.get_message()))
    return events


async def test_requests_while_streaming_are_refused_after_the_run_never_inside_it(server, client):
    """REQUEST_BUSY for a request sent mid-run, and the binary message's refusal, come right after the
    run's terminal event, in arrival order, each a stream of its own: the socket carries exactly the run
    SSE gives for the same input, then the three refusals, then nothing until the next request."""
    alone = normalized(await post_agui(client, agui_body("t-alone", "r-alone", [user("u-alone", WORDS)])))
    assert types(alone)[-1] == "RUN_FINISHED" and text_of(alone) == SLOW_TEXT
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        await send_body(ws, agui_body("t-busy", "r-slow", [user("u-slow", held("busy"))]))
        received = await until_streaming(ws)
        await send_body(ws, agui_body("t-other", "r-refused", [user("u-refused", "hi")]))
        await ws.send_message(b"\x00binary")
        await send_body(ws, agui_body("t-other", "r-refused2", [user("u-refused2", "hi")]))
        await ws.ping()  # its pong: the server has read the three messages (the run is still held)
        await release(server, "busy")
        with trio.fail_after(10):
            while len(received) < len(alone) + 3:
                received.append(orjson.loads(await ws.get_message()))
        run, refusals = received[: len(alone)], received[len(alone) :]
        assert normalized(run) == alone  # the whole run stream, exactly, and nothing inside it
        assert run[0]["runId"] == run[-1]["runId"] == "r-slow"
        assert [e["code"] for e in refusals] == ["REQUEST_BUSY", "UNSUPPORTED_MEDIA_TYPE", "REQUEST_BUSY"]
        assert all(e["type"] == "RUN_ERROR" and set(e) == {"type", "code", "message"} for e in refusals)
        assert await run_status(server, "r-slow") is RunStatus.COMPLETED
        for refused in ("r-refused", "r-refused2"):
            assert await run_status(server, refused) is None
        assert await server.ctx.ledger.get_thread("t-other") is None
        # nothing else was queued: the next message on the socket is the next request's RUN_STARTED
        again = await run_over_ws(ws, agui_body("t-other", "r-refused", [user("u-refused", "hi")]))
        assert again[0]["type"] == "RUN_STARTED" and again[0]["runId"] == "r-refused"
        assert types(again)[-1] == "RUN_FINISHED"


async def test_more_refusals_than_max_deferred_close_with_1008_after_the_run(server):
    """At most ``MAX_DEFERRED`` refusals wait for the running stream; a client that sends more is
    closed with 1008, but only after the whole run and those refusals: the run is untouched."""
    limit = ws_transport.MAX_DEFERRED
    raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
    try:
        await raw.send_text(orjson.dumps(agui_body("t-flood", "r-flood", [user("u-flood", held("flood"))])).decode())
        events: list[dict[str, Any]] = []
        with trio.fail_after(10):
            while not events or events[-1]["type"] != "TEXT_MESSAGE_CONTENT":
                frame = await raw.read_frame()
                assert frame is not None
                if frame[0] == 0x1:
                    events.append(orjson.loads(frame[1]))
        for i in range(limit + 4):  # the first ``limit`` wait; the next one closes; the rest are ignored
            body = agui_body(f"t-flood{i}", f"r-flood{i}", [user(f"u-f{i}", "hi")])
            await raw.send_text(orjson.dumps(body).decode())
        await raw.send_frame(0x9, b"read?")  # a ping: its pong follows every earlier message into the server
        with trio.fail_after(10):
            assert await raw.read_frame() == (0xA, b"read?")  # the run is held: nothing else comes meanwhile
        await release(server, "flood")
        with trio.fail_after(10):
            texts, code = await raw.read_until_close()
        events += [orjson.loads(t) for t in texts]
        assert code == ws_transport.CLOSE_POLICY == 1008
        run, refusals = events[:-limit], events[-limit:]
        assert types(run)[-1] == "RUN_FINISHED" and "RUN_ERROR" not in types(run)
        assert text_of(run) == SLOW_TEXT
        assert [(e["type"], e["code"]) for e in refusals] == [("RUN_ERROR", "REQUEST_BUSY")] * limit
        assert await raw.at_eof()
    finally:
        await raw.stream.aclose()  # even when an assertion fails (an open socket fails the next test)
    assert await run_status(server, "r-flood") is RunStatus.COMPLETED
    assert await server.ctx.ledger.get_thread(f"t-flood{limit}") is None


@pytest.mark.parametrize(
    ("message", "code"),
    [
        ("{not json", "INVALID_JSON"),
        (b"\x00binary", "UNSUPPORTED_MEDIA_TYPE"),
        (orjson.dumps(agui_body("t-bad", "r-bad", [user("u-bad", "hi")], forwardedProps={"x": 1})).decode(),
         "UNSUPPORTED_FIELD"),
        ('{"threadId": "t-bad", "runId": "r-bad", "messages": "nope"}', "INVALID_REQUEST"),
        ("[]", "INVALID_REQUEST"),
    ],
)
async def test_bad_message_gets_the_post_routes_coded_error_and_the_socket_stays_usable(server, message, code):
    """Bad input: one coded RUN_ERROR (as POST gives), nothing committed, the socket still works."""
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        await ws.send_message(message)
        events = await until_terminal(ws)
        assert types(events) == ["RUN_ERROR"] and events[0]["code"] == code
        if isinstance(message, str):  # the POST route classifies the same body the same way
            async with server.client() as client:
                response = await client.post("/v1/ag-ui", content=message, headers={"content-type": "application/json"})
            assert [e["code"] for e in parse_sse_events(response.content)] == [code]
        assert await server.ctx.ledger.get_thread("t-bad") is None
        events = await run_over_ws(ws, agui_body("t-good", "r-good", [user("u-good", "still there?")]))
        assert text_of(events) == 'You said: "still there?".'


def parse_sse_events(raw: bytes) -> list[dict[str, Any]]:
    from tests.builders import parse_sse

    return parse_sse(raw)


async def test_unknown_agent_in_the_path_is_a_coded_error_per_request(server):
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/agents/nobody/ws")) as ws:
        events = await run_over_ws(ws, agui_body("t-x", "r-x", [user("u-x", "hi")]))
        assert types(events) == ["RUN_ERROR"] and events[0]["code"] == "UNKNOWN_AGENT"
        events = await run_over_ws(ws, agui_body("t-x", "r-x", [user("u-x", "hi")]))
        assert events[0]["code"] == "UNKNOWN_AGENT"


# -- disconnects, slow readers, pings, shutdown -------------------------------------------------------


async def test_closing_the_socket_mid_run_commits_interrupted_within_a_second(server):
    """§5: socket close = disconnect: the run is cancelled and committed ``interrupted`` at once."""
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        await send_body(ws, agui_body("t-close", "r-close", [user("u-close", held("close", 500))]))
        while orjson.loads(await ws.get_message())["type"] != "TEXT_MESSAGE_CONTENT":
            pass
        # a live delta is not an acknowledgement: the run's first write may follow it by a few ms
        await wait_status(server, "r-close", RunStatus.RUNNING, 2.0)
        started = time.perf_counter()
        await ws.aclose()
    await wait_status(server, "r-close", RunStatus.INTERRUPTED, 1.0)
    assert time.perf_counter() - started < 1.0
    assert not server.ctx.app.is_active("t-close")
    # the thread is free again
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        events = await run_over_ws(ws, agui_body("t-close", "r-next", [user("u-next", "again")]))
        assert types(events)[-1] == "RUN_FINISHED"


async def test_dropping_the_tcp_connection_mid_run_commits_interrupted(server):
    """A client that vanishes without a close frame (reset) is a disconnect too."""
    raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
    await raw.send_text(orjson.dumps(agui_body("t-drop", "r-drop", [user("u-drop", "/delay 20\n/words 500")])).decode())
    await wait_status(server, "r-drop", RunStatus.RUNNING, 2.0)
    raw.stream.socket.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, b"\x01\x00\x00\x00\x00\x00\x00\x00")
    await raw.stream.aclose()  # linger 0: RST
    assert await wait_status(server, "r-drop", RunStatus.INTERRUPTED, 1.0) < 1.0


async def test_a_reader_that_stops_reading_is_closed_with_4008_and_its_run_interrupted(tmp_path):
    """A client that never reads cannot stall the run or the server: past ``max_buffered_bytes`` the
    run is committed ``interrupted`` and, once the client reads again, the socket ends with 4008."""
    async with live_server(config_with(tmp_path, max_buffered_bytes=256 * 1024)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws", receive_buffer=4096)
        await raw.send_text(orjson.dumps(agui_body("t-stall", "r-stall", [user("u-stall", "/words 200000")])).decode())
        await wait_status(server, "r-stall", RunStatus.INTERRUPTED, 10.0)
        assert not server.ctx.app.is_active("t-stall")
        # the server still serves everyone else, over both transports
        async with server.client() as client:
            events = await post_agui(client, agui_body("t-sse", "r-sse", [user("u-sse", "ok?")]))
        assert types(events)[-1] == "RUN_FINISHED"
        async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
            events = await run_over_ws(ws, agui_body("t-ws", "r-ws", [user("u-ws", "ok?")]))
        assert types(events)[-1] == "RUN_FINISHED"
        # the stalled client finally reads: what was in flight, then the close frame
        with trio.fail_after(10):
            texts, code = await raw.read_until_close()
        assert code == ws_transport.CLOSE_TOO_SLOW
        assert 0 < len(texts) < 200000
        assert await raw.at_eof()
        await raw.stream.aclose()


async def test_a_client_that_never_reads_again_is_dropped_after_abort_after(tmp_path, monkeypatch):
    """The close frame cannot pass a write the client never reads: after ``ABORT_AFTER`` the TCP
    connection is dropped, so the connection's task and socket are freed."""
    monkeypatch.setattr(ws_transport, "ABORT_AFTER", 0.3)
    async with live_server(config_with(tmp_path, max_buffered_bytes=64 * 1024)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws", receive_buffer=4096)
        await raw.send_text(orjson.dumps(agui_body("t-gone", "r-gone", [user("u-gone", "/words 200000")])).decode())
        await wait_status(server, "r-gone", RunStatus.INTERRUPTED, 10.0)
        await trio.sleep(0.6)
        with trio.fail_after(10):
            texts, code = await raw.read_until_close()
        assert code is None  # EOF or reset, no close frame: the connection was dropped
        await raw.stream.aclose()


async def test_pings_keep_an_idle_socket_alive(tmp_path):
    """Keep-alive is a WebSocket ping every ``server.ws_ping_seconds``; the socket still serves runs."""
    async with live_server(config_with(tmp_path, ws_ping_seconds=0.05)) as server:
        raw = await RawWs.connect(server.base_url, "/v1/ag-ui/ws")
        pings = 0
        with trio.fail_after(2):
            while pings < 3:
                frame = await raw.read_frame()
                assert frame is not None
                pings += frame[0] == 0x9
        await raw.send_text(orjson.dumps(agui_body("t-p", "r-p", [user("u-p", "pong")])).decode())
        seen: list[str] = []
        with trio.fail_after(5):
            while "RUN_FINISHED" not in seen:
                frame = await raw.read_frame()
                assert frame is not None
                if frame[0] == 0x1:
                    seen.append(orjson.loads(frame[1])["type"])
        await raw.stream.aclose()


async def test_shutdown_closes_idle_sockets_at_once_and_streaming_ones_after_the_grace(tmp_path):
    """Server shutdown closes every socket with 1001: idle ones at once, a streaming one when the
    graceful timeout runs out, its run committed ``interrupted``."""
    async with stoppable_server(make_config(tmp_path), graceful=0.5) as (base, ctx, stop):
        idle = await RawWs.connect(base, "/v1/ag-ui/ws")
        busy = await RawWs.connect(base, "/v1/ag-ui/ws")
        await busy.send_text(orjson.dumps(agui_body("t-shut", "r-shut", [user("u-shut", held("shut", 100))])).decode())
        await wait_status(ctx, "r-shut", RunStatus.RUNNING, 2.0)
        started = time.perf_counter()
        stop.set()
        with trio.fail_after(2):
            assert await idle.read_until_close() == ([], ws_transport.CLOSE_GOING_AWAY)
        assert time.perf_counter() - started < 0.4
        assert await idle.at_eof()
        with trio.fail_after(3):
            texts, code = await busy.read_until_close()
        assert code == ws_transport.CLOSE_GOING_AWAY
        assert 0.4 < time.perf_counter() - started < 2.0
        assert "RUN_FINISHED" not in types([orjson.loads(t) for t in texts])
        assert await run_status(ctx, "r-shut") is RunStatus.INTERRUPTED
        for raw in (idle, busy):
            await raw.stream.aclose()


async def test_shutdown_lets_a_request_finish_within_the_grace(tmp_path):
    """A run that ends inside the graceful timeout streams to its end, then the socket closes with 1001."""
    async with stoppable_server(make_config(tmp_path), graceful=3.0) as (base, ctx, stop):
        raw = await RawWs.connect(base, "/v1/ag-ui/ws")
        await raw.send_text(orjson.dumps(agui_body("t-end", "r-end", [user("u-end", "/delay 20\n/words 10")])).decode())
        await wait_status(ctx, "r-end", RunStatus.RUNNING, 2.0)
        stop.set()
        with trio.fail_after(3):
            texts, code = await raw.read_until_close()
        events = [orjson.loads(t) for t in texts]
        assert code == ws_transport.CLOSE_GOING_AWAY
        assert types(events)[-1] == "RUN_FINISHED" and len(text_of(events).split()) == 10
        assert await raw.at_eof()
        assert await run_status(ctx, "r-end") is RunStatus.COMPLETED
        await raw.stream.aclose()


# -- the Node ``ws`` client ---------------------------------------------------------------------------


async def run_node(mode: str, base_url: str, *args: str) -> Any:
    result = await trio.run_process(["node", str(NODE_DIR / "ws_client.mjs"), mode, base_url, *args],
                                    cwd=NODE_DIR, capture_stdout=True, capture_stderr=True, check=False)
    assert result.returncode == 0, result.stderr.decode()
    return orjson.loads(result.stdout)


@pytest.mark.slow  # a real client in Node
@pytest.mark.timeout(120)
async def test_node_ws_client_runs_text_tools_busy_and_bad_frames(server):
    """The Node ``ws`` package (permessage-deflate on, as browsers negotiate it) against the AG-UI sockets."""
    out = await run_node("agui", ws_url(server.base_url, ""))
    text, busy, bad, again = out["default"]
    assert types(text)[-1] == "RUN_FINISHED" and text_of(text) == 'You said: "hi from node".'
    run, refusal = busy[:-1], busy[-1]  # the refusal comes after the run's terminal event
    assert types(run)[-1] == "RUN_FINISHED" and "RUN_ERROR" not in types(run)
    assert len(text_of(run).split()) == 12
    assert (refusal["type"], refusal["code"]) == ("RUN_ERROR", "REQUEST_BUSY")
    assert [e["code"] for e in bad] == ["INVALID_JSON", "UNSUPPORTED_MEDIA_TYPE", "UNSUPPORTED_FIELD"]
    assert types(again)[-1] == "RUN_FINISHED"
    gate, approved = out["guarded"]
    assert "TOOL_CALL_START" in types(gate) and types(gate)[-1] == "RUN_FINISHED"
    assert "calculator returned" in text_of(approved)
    ask, answered = out["frontend"]
    assert "TOOL_CALL_START" in types(ask)
    assert "ask_user returned forty-two" in text_of(answered)
    assert out["closes"] == {"default": 1000, "guarded": 1000, "frontend": 1000}


@pytest.mark.parametrize("package", ["agui-client-1", "agui-client-0059"])
@pytest.mark.slow  # a real client in Node
@pytest.mark.timeout(120)
async def test_real_agui_clients_sharing_a_socket_see_whole_runs_and_whole_refusals(server, package):
    """@ag-ui/client (1.x, and 0.0.59 as CopilotKit pins it) over the socket's actual output: HttpAgents
    whose ``fetch`` is a WebSocket adapter (``ws_client.mjs`` ``openShared``), so every reply runs
    through the client's schema checks and ``verifyEvents``. A run, then a request, a binary message
    and a request while it streams, then the run's next turn: the run completes whole, each refusal is
    a valid stream of its own, and the client logs nothing (no "Agent execution failed")."""
    out = await run_node("agui-shared", ws_url(server.base_url, ""), package)
    assert out["logs"] == [] and out["stray"] == [] and out["close"] == 1000
    slow, busy, busy2, again = out["slow"], out["busy"], out["busy2"], out["again"]
    for record in (slow, busy, busy2, again):
        assert "failed" not in record, record.get("failed")
    assert slow["errors"] == [] and slow["types"][-1] == "RUN_FINISHED"
    assert [m["content"] for m in slow["newMessages"]] == [SLOW_TEXT]
    assert (busy["types"], [e["code"] for e in busy["errors"]]) == (["RUN_ERROR"], ["REQUEST_BUSY"])
    assert (busy2["types"], [e["code"] for e in busy2["errors"]]) == (["RUN_ERROR"], ["REQUEST_BUSY"])
    assert [(e["type"], e["code"]) for e in out["binary"]] == [("RUN_ERROR", "UNSUPPORTED_MEDIA_TYPE")]
    assert again["errors"] == [] and [m["content"] for m in again["newMessages"]] == ['You said: "again".']
    assert [m["role"] for m in out["messages"]] == ["user", "assistant", "user", "assistant"]
    # the socket's own order: the run, the three refusals in arrival order, the next turn
    log = out["log"]
    assert types(log) == slow["types"] + ["RUN_ERROR"] * 3 + again["types"]
    assert [e["code"] for e in log if e["type"] == "RUN_ERROR"] == ["REQUEST_BUSY", "UNSUPPORTED_MEDIA_TYPE",
                                                                     "REQUEST_BUSY"]


async def test_a_large_message_while_every_large_body_slot_is_taken_is_refused_and_the_socket_stays_usable(server):
    """Issue 12, item 5, over WebSocket: a message over 256 KiB takes one of the large-body slots until
    it is parsed, as a POST body does. With every slot taken it is refused ``TOO_MANY_LARGE_BODIES``
    (nothing started or committed); once a slot is free the same message runs, and its slot is given
    back."""
    bodies = server.ctx.large_bodies
    for _ in range(bodies.cap):
        bodies.take()
    big = agui_body("t-big", "r-big", [user("u-big", "x" * (300 * 1024))])
    async with open_websocket_url(ws_url(server.base_url, "/v1/ag-ui/ws")) as ws:
        events = await run_over_ws(ws, big)
        assert types(events) == ["RUN_ERROR"] and events[0]["code"] == "TOO_MANY_LARGE_BODIES"
        assert await server.ctx.ledger.get_thread("t-big") is None
        bodies.give_back(0)
        events = await run_over_ws(ws, big)
        assert text_of(events) == f'You said: "{"x" * 300 * 1024}".'
        assert bodies.in_flight == bodies.cap - 1
    for _ in range(bodies.cap - 1):
        bodies.give_back(0)
