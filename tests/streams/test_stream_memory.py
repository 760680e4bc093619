"""What a streaming run keeps (issue 18, point 4): not its request's raw body, nor the body's parse.

A replayed history of hundreds of KB arrives with every turn of HttpAgent/useChat; once the run is
admitted, the server needs the messages the run reads (its history), not the bytes they came in nor
the parsed request. The test sends the body on a raw socket (the client keeps no copy), holds the run
open at its first word (``/hold``) and looks through every live coroutine frame, closure cell and
container for the body (a ``bytes``, or over a WebSocket the message ``str``, of its size) or its parse
(``AguiInput``): none may hold them. Over SSE and over a WebSocket.
"""

from __future__ import annotations

import gc
import types
from pathlib import Path

import orjson
import trio
from trio_websocket import open_websocket_url

from awaken.wires.agui.request import AguiInput
from tests.builders import agui_body, held, live_server, make_config, release


def _holders(body_size: int) -> list[str]:
    """Where a live object refers to a ``bytes`` or ``str`` of ``body_size`` or an ``AguiInput``."""
    gc.collect()

    def wanted(value: object) -> bool:
        return (type(value) in (bytes, str) and len(value) == body_size) or isinstance(value, AguiInput)

    found: list[str] = []
    for obj in gc.get_objects():
        if isinstance(obj, types.CoroutineType) and obj.cr_frame is not None:
            frame = obj.cr_frame
            found += [f"{frame.f_code.co_qualname}: {name}" for name, v in frame.f_locals.items() if wanted(v)]
        elif isinstance(obj, types.CellType):
            try:
                if wanted(obj.cell_contents):
                    found.append("a closure cell")
            except ValueError:  # an empty cell
                pass
        elif isinstance(obj, dict):
            found += ["a dict" for v in list(obj.values()) if wanted(v)]
        elif isinstance(obj, list | tuple):
            found += [f"a {type(obj).__name__}" for v in obj if wanted(v)]
    return found


async def test_a_streaming_run_keeps_neither_its_raw_body_nor_its_parse(tmp_path: Path):
    history = [{"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant", "content": "lorem ipsum " * 40}
               for i in range(60)]
    payload = orjson.dumps(agui_body("t-big", "r-big", [*history, {"id": "m1", "role": "user",
                                                                  "content": held("big")}]))
    size = len(payload)
    request = (b"POST /v1/ag-ui HTTP/1.1\r\nhost: localhost\r\ncontent-type: application/json\r\ncontent-length: "
               + str(size).encode() + b"\r\n\r\n" + payload)
    del payload
    async with live_server(make_config(tmp_path)) as server:
        host, port = server.base_url.removeprefix("http://").split(":")
        async with await trio.open_tcp_stream(host, int(port)) as stream:
            await stream.send_all(request)
            del request
            seen = b""
            with trio.fail_after(20):
                while b"TEXT_MESSAGE_CONTENT" not in seen:  # the run streams, held at its first word
                    seen += await stream.receive_some(65536)
            assert _holders(size) == []
            await release(server, "big")
            with trio.fail_after(20):
                while b"RUN_FINISHED" not in seen:
                    seen += await stream.receive_some(65536)


async def test_a_run_streaming_on_a_websocket_keeps_neither_its_message_nor_its_parse(tmp_path: Path):
    history = [{"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant", "content": "lorem ipsum " * 40}
               for i in range(60)]
    message = orjson.dumps(agui_body("t-ws", "r-ws", [*history, {"id": "m1", "role": "user",
                                                                "content": held("ws-big")}])).decode()
    size = len(message)
    async with live_server(make_config(tmp_path)) as server:
        url = server.base_url.replace("http://", "ws://") + "/v1/ag-ui/ws"
        async with open_websocket_url(url) as ws:
            await ws.send_message(message)
            del message
            with trio.fail_after(20):
                while "TEXT_MESSAGE_CONTENT" not in await ws.get_message():  # held at its first word
                    pass
            assert _holders(size) == []
            await release(server, "ws-big")
            with trio.fail_after(20):
                while "RUN_FINISHED" not in await ws.get_message():
                    pass
