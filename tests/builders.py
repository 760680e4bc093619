"""The tests' one shared builders module: messages and request bodies for each wire and for the engine,
config building, a live server in the test's nursery, SSE parsing, credentials and socket URLs.

Every test imports its builders from here; ``tests/package/test_helpers_shared.py`` fails when a helper is
defined more than twice across ``tests/``."""

from __future__ import annotations

import json
import socket
import tomllib
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import attrs
import httpx
import orjson
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve as hypercorn_serve
from werkzeug.routing import Map

from awaken.config import AppConfig, parse_config
from awaken.config.auth import AuthConfig
from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.http.app import build_asgi
from awaken.http.auth import Authenticator, build
from awaken.http.context import ServerContext
from awaken.http.cors import CorsPolicy
from awaken.http.edge import Edge
from awaken.http.hosts import HostPolicy
from awaken.http.metrics import RouteTemplates
from awaken.runtime import tcp
from awaken.streams.exchange import MAX_BODY
from awaken.telemetry.metrics import ServerMetrics

ROOT = Path(__file__).resolve().parent.parent


def default_config_data() -> dict[str, Any]:
    return tomllib.loads((ROOT / "config.toml").read_text())


def make_config(tmp_path: Path, *, backend: str = "sqlite", **top: Any) -> AppConfig:
    """The repo's config.toml with the ledger under ``tmp_path`` and top-level keys replaced."""
    data = default_config_data()
    data["ledger"] = {"backend": backend,
                      "path": str(tmp_path / ("awaken.db" if backend == "sqlite" else "ledger"))}
    data.update(top)
    return parse_config(data, source="test config")


@attrs.define
class LiveServer:
    base_url: str
    ctx: ServerContext
    cancel_scope: trio.CancelScope
    #: the ASGI app served (``build_asgi``)
    asgi: Any = None

    def client(self, **kw: Any) -> httpx.AsyncClient:
        return httpx.AsyncClient(base_url=self.base_url, timeout=kw.pop("timeout", 10), **kw)

    def memo(self, wire: str) -> Any:
        """The replay memo this server keeps for ``wire``'s protocol (``awaken.wires.memo.with_memos``)."""
        return self.asgi.wires[wire].protocol.memo


@asynccontextmanager
async def live_server(config: AppConfig) -> AsyncIterator[LiveServer]:
    """Serve ``config`` on 127.0.0.1 (a free port) inside a nursery; stop and close on exit."""
    ctx = ServerContext.build(config)
    await ctx.open()
    try:
        async with ctx.app.hosting(), trio.open_nursery() as nursery:
            await nursery.start(ctx.run_mcp)
            await nursery.start(ctx.run_claims)
            hc = HypercornConfig()
            hc.bind = ["127.0.0.1:0"]
            hc.accesslog = None
            hc.graceful_timeout = 0.5
            hc.websocket_max_message_size = MAX_BODY
            tcp.configure(hc, config.server.write_timeout_seconds)
            tcp.install()
            asgi = build_asgi(ctx)
            binds = await nursery.start(
                lambda task_status: hypercorn_serve(asgi, hc, task_status=task_status)
            )
            yield LiveServer(binds[0], ctx, nursery.cancel_scope, asgi)
            nursery.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await ctx.aclose()


def openai_config(tmp_path: Path, base_url: str, *, tools: tuple[str, ...] = ("calculator",),
                  **provider: Any) -> AppConfig:
    """The repo's config with one agent, ``assistant``, on the OpenAI-compatible provider at ``base_url``
    (the key from ``FAKE_OPENAI_API_KEY``; ``provider`` adds or replaces settings)."""
    return make_config(tmp_path,
                       providers={"openai": {"base_url": base_url, "api_key_env": "FAKE_OPENAI_API_KEY", **provider}},
                       agents={"assistant": {"model": "openai:fake-model", "tools": list(tools)}},
                       default_agent="assistant")


def edge_around(app: Any, authenticator: Authenticator | None = None) -> Edge:
    """The HTTP edge of a server bound to 127.0.0.1:1 (no CORS origin; ``authenticator``: mode "none") in
    front of ``app``, with no route of its own."""
    return Edge(app, metrics=ServerMetrics(), routes=RouteTemplates({}, Map()), host_policy=HostPolicy.of("127.0.0.1:1"),
                cors_policy=CorsPolicy.of([]), authenticator=authenticator or build(AuthConfig(mode="none"), "127.0.0.1:1", {}),
                metrics_roles=["admin"])


def live_tasks(suffix: str) -> int:
    """How many tasks of this trio run (the test's, its in-process server's) have a name ending in ``suffix``."""
    count, todo = 0, [trio.lowlevel.current_root_task()]
    while todo:
        task = todo.pop()
        count += task.name.endswith(suffix)
        todo.extend(t for nursery in task.child_nurseries for t in nursery.child_tasks)
    return count


class RecordingFeed:
    """An ``sse.Feed`` driven by a test: what it was handed, and the task its ``finish`` ran in (None: it
    did not run)."""

    def __init__(self) -> None:
        self.put: Any = None
        self.end: Any = None
        self.finished_in: Any = None

    def start(self, put: Any, end: Any) -> None:
        self.put, self.end = put, end

    async def finish(self) -> None:
        self.finished_in = trio.lowlevel.current_task()

    @property
    def finished(self) -> bool:
        return self.finished_in is not None


async def never_receive() -> dict[str, Any]:
    """An ASGI ``receive`` whose client never says anything (nor goes)."""
    await trio.sleep_forever()
    raise AssertionError("unreachable")


def free_port() -> int:
    """A TCP port free on 127.0.0.1 right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_request_outcome(protocol: Any, parsed: object, view: object) -> object:
    """What ``protocol`` makes of a parsed request against ``view``: the run request, or
    ``("refused", code, message)``."""
    try:
        return protocol.to_run_request(parsed, "t", None, view)
    except InputRejected as exc:
        return ("refused", exc.code, exc.message)


def bearer(token: str) -> dict[str, str]:
    """The ``Authorization`` header for ``token``."""
    return {"Authorization": f"Bearer {token}"}


def ws_url(base_url: str, path: str) -> str:
    """The WebSocket URL of ``path`` on the server at ``base_url``."""
    return "ws" + base_url.removeprefix("http") + path


async def ledger_view(ledger: Any, thread_id: str) -> tuple[Any, ...]:
    """Everything the ledger holds for one thread (record, runs, messages, pending calls): to prove nothing changed."""
    return (await ledger.get_thread(thread_id), await ledger.list_runs(thread_id),
            await ledger.read_messages(thread_id, 0, 10**6), await ledger.pending_calls(thread_id))


def parse_sse(raw: str | bytes) -> list[Any]:
    """The ``data:`` payloads of an SSE body, JSON-decoded (``[DONE]`` kept as the string)."""
    text = raw.decode() if isinstance(raw, bytes) else raw
    assert "\r" not in text, "SSE must be framed with LF only"
    out: list[Any] = []
    for frame in text.split("\n\n"):
        lines = [line for line in frame.split("\n") if line.startswith("data: ")]
        if not lines:
            continue
        payload = "\n".join(line[6:] for line in lines)
        out.append(payload if payload == "[DONE]" else orjson.loads(payload))
    return out


# -- messages and bodies ---------------------------------------------------------------------------------


def user(id: str, content: Any) -> dict[str, Any]:
    """An AG-UI user message (``content`` a string or a list of parts)."""
    return {"id": id, "role": "user", "content": content}


def aisdk_user(id: str, *parts: str | dict[str, Any]) -> dict[str, Any]:
    """An AI SDK ``UIMessage`` from the user: each string a text part, each dict a part as it is (no part: "hi")."""
    return {"id": id, "role": "user",
            "parts": [{"type": "text", "text": p} if isinstance(p, str) else p for p in parts]
            or [{"type": "text", "text": "hi"}]}


def user_message(text: str, *parts: Any, id: str = "u1") -> Message:
    """The engine's user ``Message``: ``text`` first, then any other parts."""
    return Message(id, "user", (TextPart(text), *parts))


def call(name: str, **args: Any) -> str:
    """The scripted model's directive to call ``name`` with ``args``."""
    return f"/call {name} {json.dumps(args)}"


def call_ids(events: list[dict[str, Any]]) -> list[str]:
    """The tool call ids of an AG-UI stream, in the order their calls started."""
    return [e["toolCallId"] for e in events if e["type"] == "TOOL_CALL_START"]


def ask(thread_id: str, run_id: str, message_id: str | None = None, text: str = "hi") -> dict[str, Any]:
    """An AG-UI run on ``thread_id`` with one user message (id ``u-<runId>`` unless given)."""
    return agui_body(thread_id, run_id, [user(message_id or f"u-{run_id}", text)])


def agui_body(thread_id: str, run_id: str, messages: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    """A ``RunAgentInput`` as ``HttpAgent`` sends it by default."""
    body = {"threadId": thread_id, "runId": run_id, "state": {}, "messages": messages, "tools": [],
            "context": [], "forwardedProps": {}}
    body.update(extra)
    return body


async def post_agui(client: httpx.AsyncClient, body: dict[str, Any], path: str = "/v1/ag-ui") -> list[dict[str, Any]]:
    response = await client.post(path, json=body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    return parse_sse(response.content)


async def history_page(client: httpx.AsyncClient, protocol: str, thread_id: str, **params: Any) -> dict[str, Any]:
    """One page of ``thread_id``'s history route for ``protocol`` (``ag-ui`` or ``ai-sdk``): ``{items, cursor}``."""
    response = await client.get(f"/v1/{protocol}/threads/{thread_id}/messages", params=params)
    assert response.status_code == 200, response.text
    return response.json()


def types(events: list[dict[str, Any]]) -> list[str]:
    return [e["type"] for e in events]


def agui_text(events: list[dict[str, Any]]) -> str:
    """The text an AG-UI stream carried (its TEXT_MESSAGE_CONTENT deltas, joined)."""
    return "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")


def squeeze(names: list[str]) -> list[str]:
    """Event types with runs of *_CONTENT / *_ARGS collapsed to one entry (their count is asserted apart)."""
    out: list[str] = []
    for name in names:
        if name.endswith(("_CONTENT", "_ARGS")) and out and out[-1] == name:
            continue
        out.append(name)
    return out


def aisdk_kinds(chunks: list[Any]) -> list[str]:
    """The chunk types of an AI SDK stream, with ``[DONE]`` kept as itself."""
    return [c if isinstance(c, str) else c["type"] for c in chunks]


def aisdk_text(chunks: list[Any]) -> str:
    """The text an AI SDK stream carried (its text-delta chunks, joined)."""
    return "".join(c["delta"] for c in chunks if not isinstance(c, str) and c["type"] == "text-delta")


# -- holding a run open (the scripted model's /hold and /release) ---------------------------------------


def held(gate: str, words: int = 12) -> str:
    """A scripted-model input that streams its first word, then holds until ``release(server, gate)``, then
    the other ``words - 1``: a run that is still streaming whatever the machine's load. Its events are those
    of ``/words N`` alone (the hold changes when, not what). A gate opens once per server: one name per use."""
    return f"/hold {gate}\n/words {words}"


def open_gate(ctx: ServerContext, gate: str) -> None:
    """Open ``gate`` on the scripted model of ``ctx`` directly (no releasing run: for a test that holds
    the ledger, or that has no HTTP server)."""
    ctx.app.agents.get(None).model.open_gate(gate)


async def release(server: LiveServer, gate: str) -> None:
    """Open ``gate``: a run saying ``/release GATE`` on a thread of its own, read to its end. Whatever was
    sent on another connection before must already have been read by the server (over a WebSocket: a
    ``ping`` first, whose pong follows every earlier message into the server)."""
    async with server.client() as c:
        events = await post_agui(c, agui_body(f"release-{gate}", f"release-{gate}",
                                              [{"id": f"release-{gate}", "role": "user", "content": f"/release {gate}"}]))
    assert types(events)[-1] == "RUN_FINISHED", events


def record_dedup(monkeypatch: Any) -> list[tuple[bool, int]]:
    """Spy on the hot-thread cache's answers to admission (``awaken.ledger.hotcache.cached_facts`` as
    the SQLite and Postgres ledgers call it): per admission, whether the hot entry answered (no read
    of the store), and how many of the asked ids it found not committed."""
    import importlib

    import storage_backends.sqlite_ledger as sqlite_ledger
    from awaken.ledger import hotcache

    seen: list[tuple[bool, int]] = []

    def cached_facts(entry: Any, ids: Any, tail: int) -> Any:
        facts = hotcache.cached_facts(entry, ids, tail)
        seen.append((facts is not None, len(ids) - len(facts.committed) if facts is not None else -1))
        return facts

    monkeypatch.setattr(sqlite_ledger, "cached_facts", cached_facts)
    try:
        postgres_ledger = importlib.import_module("storage_backends.postgres_ledger")
    except ImportError:  # without the postgres extra
        return seen
    monkeypatch.setattr(postgres_ledger, "cached_facts", cached_facts)
    return seen


@asynccontextmanager
async def in_process(config: AppConfig) -> AsyncIterator[tuple[httpx.AsyncClient, ServerContext]]:
    """The server's ASGI app served in this process, without a socket (httpx's ASGI transport), its runs
    hosted by the server's nursery; yields a client and the server's context."""
    ctx = ServerContext.build(config)
    await ctx.open()
    try:
        async with ctx.app.hosting():
            transport = httpx.ASGITransport(app=build_asgi(ctx))
            async with httpx.AsyncClient(transport=transport, base_url="http://127.0.0.1:8000") as client:
                yield client, ctx
    finally:
        await ctx.aclose()


# -- reading streams frame by frame ---------------------------------------------------------------


async def read_until(lines, event_type: str) -> list[dict[str, Any]]:
    """Read SSE lines from a streaming response until an event of ``event_type`` arrives."""
    seen = []
    async for line in lines:
        if line.startswith("data: "):
            seen.append(orjson.loads(line[6:]))
            if seen[-1]["type"] == event_type:
                return seen
    raise AssertionError(f"the stream ended before {event_type}: {types(seen)}")


def frames_of(raw: bytes) -> list[tuple[str | None, Any]]:
    """(position, payload) of each SSE frame (``[DONE]`` kept as the string)."""
    out = []
    for frame in raw.decode().split("\n\n"):
        pos, data = None, None
        for line in frame.split("\n"):
            if line.startswith("id: "):
                pos = line[4:]
            elif line.startswith("data: "):
                data = line[6:]
        if data is not None:
            out.append((pos, data if data == "[DONE]" else orjson.loads(data)))
    return out


class Frames:
    """A streaming response read frame by frame: ``until(stop)`` and then ``rest()``."""

    def __init__(self, response: httpx.Response) -> None:
        self.chunks = response.aiter_bytes()
        self.buffer = b""

    async def until(self, stop) -> list[tuple[str | None, Any]]:  # noqa: ANN001
        seen: list[tuple[str | None, Any]] = []
        async for chunk in self.chunks:
            self.buffer += chunk
            while b"\n\n" in self.buffer:
                frame, self.buffer = self.buffer.split(b"\n\n", 1)
                seen.extend(frames_of(frame + b"\n\n"))
                if seen and stop(seen[-1][1]):
                    return seen
        return seen

    async def rest(self) -> list[tuple[str | None, Any]]:
        return await self.until(lambda payload: False)


async def read_frames_until(response: httpx.Response, stop) -> list[tuple[str | None, Any]]:  # noqa: ANN001
    """Read a streaming response frame by frame until ``stop(payload)`` is true for one of them."""
    return await Frames(response).until(stop)


def is_type(name: str):  # noqa: ANN201
    return lambda payload: isinstance(payload, dict) and payload.get("type") == name


async def wait_for_status(ledger, thread_id: str, status: RunStatus, within: float = 5.0):  # noqa: ANN001
    with trio.fail_after(within):
        while True:
            runs = await ledger.list_runs(thread_id)
            if runs and runs[-1].status is status:
                return runs[-1]
            await trio.sleep(0.01)


async def watchers_gone(server, thread_id: str, within: float = 5.0) -> None:  # noqa: ANN001
    """Wait until the thread's active run has no watcher left: the server has handled the disconnect
    of the only stream (a condition, not a timing window; the run is held at its gate meanwhile)."""
    broadcast = server.ctx.app.active(thread_id).broadcast
    with trio.fail_after(within):
        while any(channel.watchers for channel in broadcast.channels.values()):
            await trio.sleep(0.01)
