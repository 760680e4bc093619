"""The floor: a raw ASGI app on hypercorn's trio worker that streams what Awaken streams, and nothing else.

It answers the same routes with the same wire content (AG-UI events; AI SDK UI message chunks;
over SSE and over WebSocket), reads the same scripted directives (``/words N``, ``/delay MS``) and
paces the same way (a ``trio.sleep`` before each delta). Frames are pre-encoded once per request
and written one ``send`` per event; there is no run engine, no ledger, no JSON encoding on the delta
path. What Awaken costs is its figure divided by the floor's, measured in the same run.

Run it as ``python -m bench.floor --bind 127.0.0.1:PORT [--backlog N]``. It listens with a backlog of 2,048
(uvicorn's default, and the kernel's ``somaxconn`` caps it) unless told otherwise: the floor is what hypercorn
can do, and hypercorn's own default of 100 is what ``bench.bursts`` measures as a control (``floor backlog 100``).
"""

from __future__ import annotations

import argparse
import signal
import uuid
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import trio
from hypercorn.config import Config
from hypercorn.trio import serve

#: the scripted model's word cycle (awaken/models/scripted.py)
WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
CHECKPOINT_EVERY = 64

Send = Callable[[dict[str, Any]], Awaitable[None]]
Receive = Callable[[], Awaitable[dict[str, Any]]]


def parse_script(text: str) -> tuple[int, float]:
    """``(words, delay seconds)`` from ``/words N`` and ``/delay MS`` lines (defaults: 8 words, no delay)."""
    words, delay = 8, 0.0
    for line in text.splitlines():
        head, _, rest = line.strip().partition(" ")
        rest = rest.strip()
        if head == "/words" and rest.isdigit():
            words = int(rest)
        elif head == "/delay":
            try:
                delay = max(0.0, float(rest)) / 1000.0
            except ValueError:
                pass
    return words, delay


def _last_user_text(protocol: str, body: dict[str, Any]) -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") != "user":
            continue
        if protocol == "agui":
            content = message.get("content")
            return content if isinstance(content, str) else ""
        return "".join(p.get("text", "") for p in message.get("parts") or [] if p.get("type") == "text")
    return ""


class Script:
    """One request's frames: head, the delta cycle (with and without the trailing space), tail."""

    def __init__(self, protocol: str, body: dict[str, Any], frame: Callable[[dict[str, Any]], Any]) -> None:
        self.words, self.delay = parse_script(_last_user_text(protocol, body))
        message_id = f"msg_{uuid.uuid4().hex}"
        if protocol == "agui":
            thread_id, run_id = body.get("threadId", ""), body.get("runId", "")
            self.head = [frame(e) for e in (
                {"type": "RUN_STARTED", "threadId": thread_id, "runId": run_id, "protocolVersion": "1.0"},
                {"type": "STEP_STARTED", "stepName": "step-1"},
                {"type": "TEXT_MESSAGE_START", "messageId": message_id, "role": "assistant"},
            )]

            def delta(text: str) -> Any:
                return frame({"type": "TEXT_MESSAGE_CONTENT", "messageId": message_id, "delta": text})

            self.tail = [frame(e) for e in (
                {"type": "TEXT_MESSAGE_END", "messageId": message_id},
                {"type": "STEP_FINISHED", "stepName": "step-1"},
                {"type": "RUN_FINISHED", "threadId": thread_id, "runId": run_id},
            )]
        else:
            text_id = f"txt_{uuid.uuid4().hex}"
            self.head = [frame(e) for e in (
                {"type": "start", "messageId": message_id},
                {"type": "start-step"},
                {"type": "text-start", "id": text_id},
            )]

            def delta(text: str) -> Any:
                return frame({"type": "text-delta", "id": text_id, "delta": text})

            self.tail = [frame(e) for e in (
                {"type": "text-end", "id": text_id},
                {"type": "finish-step"},
                {"type": "finish", "finishReason": "stop"},
            )]
        self.spaced = [delta(w + " ") for w in WORDS]
        self.last = [delta(w) for w in WORDS]

    def delta(self, i: int) -> Any:
        return self.spaced[i % 10] if i < self.words - 1 else self.last[i % 10]

    async def play(self, send_frame: Callable[[Any], Awaitable[None]]) -> None:
        for f in self.head:
            await send_frame(f)
        delay = self.delay
        for i in range(self.words):
            if delay:
                await trio.sleep(delay)
            await send_frame(self.delta(i))
        for f in self.tail:
            await send_frame(f)


def sse_frame(event: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(event) + b"\n\n"


def ws_frame(event: dict[str, Any]) -> str:
    return orjson.dumps(event).decode()


SSE_HEADERS = {
    "agui": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
             (b"x-accel-buffering", b"no")],
    "aisdk": [(b"content-type", b"text/event-stream"), (b"cache-control", b"no-cache"),
              (b"connection", b"keep-alive"), (b"x-vercel-ai-ui-message-stream", b"v1"),
              (b"x-accel-buffering", b"no")],
}
HTTP_ROUTES = {"/v1/ag-ui": "agui", "/v1/ai-sdk/chat": "aisdk"}
WS_ROUTES = {"/v1/ag-ui/ws": "agui", "/v1/ai-sdk/ws": "aisdk"}


async def http_stream(protocol: str, receive: Receive, send: Send) -> None:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        if message["type"] == "http.disconnect":
            return
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            break
    script = Script(protocol, orjson.loads(b"".join(chunks)), sse_frame)
    await send({"type": "http.response.start", "status": 200, "headers": SSE_HEADERS[protocol]})

    async def send_frame(frame: bytes) -> None:
        await send({"type": "http.response.body", "body": frame, "more_body": True})

    gone = False
    async with trio.open_nursery() as nursery:

        async def watch_disconnect() -> None:
            nonlocal gone
            while (await receive())["type"] != "http.disconnect":
                pass
            gone = True
            nursery.cancel_scope.cancel()

        nursery.start_soon(watch_disconnect)
        await script.play(send_frame)
        if protocol == "aisdk":
            await send_frame(b"data: [DONE]\n\n")
        nursery.cancel_scope.cancel()
    if not gone:
        await send({"type": "http.response.body", "body": b"", "more_body": False})


async def ws_session(protocol: str, receive: Receive, send: Send) -> None:
    if (await receive())["type"] != "websocket.connect":
        return
    await send({"type": "websocket.accept"})
    requests_in, requests_out = trio.open_memory_channel[str](16)

    async def send_frame(frame: str) -> None:
        await send({"type": "websocket.send", "text": frame})

    async with trio.open_nursery() as nursery:

        async def reader() -> None:
            while True:
                message = await receive()
                if message["type"] == "websocket.disconnect":
                    nursery.cancel_scope.cancel()
                    return
                if message["type"] == "websocket.receive":
                    await requests_in.send(message.get("text") or (message.get("bytes") or b"").decode())

        nursery.start_soon(reader)
        async for text in requests_out:
            await Script(protocol, orjson.loads(text), ws_frame).play(send_frame)


async def app(scope: dict[str, Any], receive: Receive, send: Send) -> None:
    kind = scope["type"]
    if kind == "lifespan":  # hypercorn's trio worker needs a real lifespan (python-stack.md §1.5)
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                await send({"type": "lifespan.shutdown.complete"})
                return
    path = scope["path"].rstrip("/") or "/"
    if kind == "http":
        protocol = HTTP_ROUTES.get(path)
        if protocol and scope["method"] == "POST":
            await http_stream(protocol, receive, send)
            return
        status, body = (200, b'{"status":"ok"}') if path == "/healthz" else (404, b"not found")
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})
    elif kind == "websocket":
        protocol = WS_ROUTES.get(path)
        if protocol is None:
            await send({"type": "websocket.close", "code": 1008})
            return
        await ws_session(protocol, receive, send)


#: the floor's listen backlog (hypercorn's default is 100)
BACKLOG = 2048


async def main_async(bind: str, backlog: int = BACKLOG) -> None:
    config = Config()
    config.bind = [bind]
    config.backlog = backlog
    config.accesslog = None
    config.errorlog = "-"
    config.keep_alive_timeout = 75
    config.graceful_timeout = 1.0
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:

        async def shutdown_trigger() -> None:
            async for _ in signals:
                return

        await serve(app, config, shutdown_trigger=shutdown_trigger)


def main() -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.floor", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8900")
    parser.add_argument("--backlog", type=int, default=BACKLOG, help=f"listen backlog (default {BACKLOG})")
    args = parser.parse_args()
    trio.run(main_async, args.bind, args.backlog)


if __name__ == "__main__":
    main()
