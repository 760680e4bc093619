"""The Managed Agents sessions-and-events routes at the HTTP edge, and ``WIRE``, what the ``managed-agents``
entry point of the ``awaken.wires`` group registers (every route under ``/v1/sessions``).

    POST   /v1/sessions                       create a session (a thread): {agent, title?, metadata?, environment_id?}
    GET    /v1/sessions                       the caller's sessions, newest first ({data, next_page}; limit, page)
    GET    /v1/sessions/{id}                  one session (status idle | running)
    POST   /v1/sessions/{id}                  update its title and metadata
    DELETE /v1/sessions/{id}                  delete it ({id, type: "session_deleted"}; 409 while a turn runs)
    POST   /v1/sessions/{id}/events           send events: {events: [...]} -> {data: receipts}
    GET    /v1/sessions/{id}/events           the history ({data, next_page}; limit, order, page)
    GET    /v1/sessions/{id}/events/stream    SSE: committed events, previews (``event_deltas``), pings

A session is a thread, a turn is a run, an event id is a committed position (``awaken.wires.managed.events``):
the same conversation reads back on every other wire, and a thread started elsewhere is a session here.
A send answers once its input is committed (a new turn's input, or the answers a waiting turn resumes
with), before the turn runs on: the run belongs to the server's nursery, never to a connection, and a
stream is a tail of the session that may come and go (``Last-Event-ID`` resumes after an event). A
stream opened without one starts at the turn that runs, or at the latest turn no stream of this server
has seen end yet (so a client that sends and then opens the stream sees its whole turn), else at the end.

Errors are the API's envelope ``{"type": "error", "error": {"type", "message"}}`` with the catalogue
code's status (400 for a bad body, 404 for a session the caller may not see). The ``anthropic-beta`` and
``anthropic-version`` headers and the ``beta=true`` query are accepted and not required.

A session's ``title`` (until set, the thread's), ``metadata`` and ``environment_id`` are kept by the
serving process beside the ledger, which stores the thread, its owner and everything it runs.
"""

from __future__ import annotations

import math
import time
from typing import Any
from urllib.parse import parse_qs

import attrs
import orjson
import trio

from awaken.core.asgi import header_of
from awaken.core.errors import AwakenError, InputRejected, StoreUnavailable, UnknownThread
from awaken.core.ids import id_problem
from awaken.core.jsonbody import is_json_media_type
from awaken.core.principal import Principal
from awaken.engine.access import sees_every_thread, visible_thread
from awaken.engine.state import RunStatus
from awaken.http.auth import principal_of
from awaken.http.context import ServerContext
from awaken.ledger.interface import ThreadRecord, ThreadView
from awaken.runtime.tcp import app_queue_in
from awaken.streams.broadcast import RunBroadcast
from awaken.streams.exchange import MAX_BODY, content_type_of
from awaken.streams.rejoin import committed_through
from awaken.transports import sse
from awaken.transports.body import read_body_or_answer
from awaken.wires.managed import events as mev
from awaken.wires.managed import request as mreq
from awaken.wires.managed.protocol import (
    BETA,
    PREVIEWABLE,
    PROTOCOL,
    error_envelope,
    error_status,
    frame,
    session_object,
)
from awaken.wires.protocol import Protocol, new_id
from awaken.wires.registry import Handler, Route, Wire

PREFIX = "/v1/sessions"
_JSON = [(b"content-type", b"application/json"), (b"cache-control", b"no-store")]
DEFAULT_LIMIT, MAX_LIMIT = 20, 1000


def now_ms() -> int:
    return int(time.time() * 1000)


@attrs.define
class Extras:
    """What a session has beyond its thread: kept by this process."""

    agent_id: str | None = None
    title: str | None = None
    title_set: bool = False
    metadata: dict[str, str] = attrs.field(factory=dict)
    environment_id: str | None = None


class Sessions:
    """One server's session state: extras, the wake-ups of streams waiting for a turn, the latest idle
    each session's streams delivered."""

    def __init__(self) -> None:
        self.extras: dict[str, Extras] = {}
        self._wakeups: dict[str, trio.Event] = {}
        self.seen_idle: dict[str, mev.Position] = {}
        #: the streams of each session waiting for its next turn: a turn's broadcast feeds them from its start
        self.waiting: dict[str, set[SessionTail]] = {}

    def adopt(self, thread_id: str, run: Any, broadcast: RunBroadcast, protocol: Protocol) -> None:
        """Called as a turn's broadcast is made, before the run emits anything: every stream waiting on the
        session watches it from its first event."""
        for tail in self.waiting.pop(thread_id, set()):
            tail.watch(run, broadcast.open_channel(protocol))

    def waiter(self, thread_id: str) -> trio.Event:
        return self._wakeups.setdefault(thread_id, trio.Event())

    def wake(self, thread_id: str) -> None:
        event = self._wakeups.pop(thread_id, None)
        if event is not None:
            event.set()


async def _answer(send: sse.ASGISend, status: int, body: Any) -> None:
    await sse.send_once(send, _JSON, orjson.dumps(body), status)


async def _refuse(send: sse.ASGISend, exc: AwakenError) -> None:
    await _answer(send, error_status(exc.code), error_envelope(exc.code, exc.message))


def _query(scope: dict) -> dict[str, list[str]]:
    return parse_qs(scope.get("query_string", b"").decode("latin-1"))


def _one(query: dict[str, list[str]], name: str) -> str | None:
    values = query.get(name)
    return values[-1] if values else None


def _limit(query: dict[str, list[str]]) -> int:
    value = _one(query, "limit")
    if value is None or value == "":
        return DEFAULT_LIMIT
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_LIMIT:
        raise InputRejected(f"limit must be an integer from 1 to {MAX_LIMIT}", code="INVALID_LIMIT")
    return int(value)


class Served:
    """The routes of one server: its context, its session state, this wire's protocol."""

    def __init__(self, protocol: Protocol) -> None:
        self.protocol = protocol
        self.sessions = Sessions()

    async def route(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend) -> None:
        method = scope.get("method", "GET")
        rest = scope["path"][len(PREFIX):].rstrip("/")
        try:
            if rest == "":
                if method == "GET":
                    return await self.list_sessions(ctx, scope, send)
                if method == "POST":
                    return await self.create(ctx, scope, receive, send)
            elif rest.endswith("/events/stream"):
                thread_id = rest[1:-len("/events/stream")]
                if method == "GET":
                    return await self.stream(ctx, scope, receive, send, thread_id)
            elif rest.endswith("/events"):
                thread_id = rest[1:-len("/events")]
                if method == "GET":
                    return await self.list_events(ctx, scope, send, thread_id)
                if method == "POST":
                    return await self.send_events(ctx, scope, receive, send, thread_id)
            else:
                thread_id = rest[1:]
                if method == "GET":
                    return await self.retrieve(ctx, scope, send, thread_id)
                if method == "POST":
                    return await self.update(ctx, scope, receive, send, thread_id)
                if method == "DELETE":
                    return await self.delete(ctx, scope, send, thread_id)
            raise InputRejected(f"{method} {scope['path']} is not a sessions route", code="NOT_FOUND")
        except (InputRejected, UnknownThread, StoreUnavailable) as exc:
            await _refuse(send, exc)

    # -- reading -------------------------------------------------------------------------------

    async def _body(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend) -> bytes | None:
        if not is_json_media_type(content_type_of(scope)):
            raise InputRejected("the body must be JSON (Content-Type: application/json)", code="UNSUPPORTED_MEDIA_TYPE")
        body = await read_body_or_answer(scope, receive, send, limit=MAX_BODY,
                                         seconds=ctx.config.server.body_timeout_seconds, bodies=ctx.large_bodies)
        if body is None:
            return None
        try:
            if body.too_large:
                raise InputRejected(f"the body is larger than {MAX_BODY} bytes", code="BODY_TOO_LARGE")
            return body.take() or b""
        finally:
            body.release()

    async def _visible(self, ctx: ServerContext, principal: Principal, thread_id: str) -> None:
        if not thread_id or id_problem(thread_id):
            raise UnknownThread(f"no session {thread_id[:64]!r}")
        try:
            await visible_thread(ctx.app, principal, thread_id)
        except UnknownThread:
            raise UnknownThread(f"no session {thread_id!r}") from None

    def _agent(self, ctx: ServerContext, thread_id: str, latest: str | None) -> Any:
        extras = self.sessions.extras.get(thread_id)
        wanted = extras.agent_id if extras is not None and extras.agent_id else latest
        try:
            return ctx.agents.get(wanted)
        except InputRejected:  # an agent no longer published: the default answers for it
            return ctx.agents.get(None)

    async def _session(self, ctx: ServerContext, thread_id: str) -> dict[str, Any]:
        summary = await ctx.ledger.thread_summary(thread_id)
        if summary is None:
            raise UnknownThread(f"no session {thread_id!r}")
        runs = await ctx.ledger.list_runs(thread_id)
        extras = self.sessions.extras.get(thread_id) or Extras()
        active = ctx.app.active(thread_id)
        return session_object(
            session_id=thread_id, agent=self._agent(ctx, thread_id, summary.agent_id),
            status="running" if active is not None else "idle", created_at=summary.created_at,
            updated_at=summary.updated_at, title=extras.title if extras.title_set else summary.title,
            metadata=extras.metadata, environment_id=extras.environment_id,
            input_tokens=sum(r.usage.input_tokens for r in runs), output_tokens=sum(r.usage.output_tokens for r in runs))

    async def events_of(self, ctx: ServerContext, thread_id: str, running: str | None = None,
                        since: int | None = None) -> tuple[list[mev.Positioned], Any]:
        """The session's committed events, and its thread view (``since``: only the events of the messages
        from that ``seq`` on, read as a window of the thread, not the whole of it). The runs are read
        first: a run's status is committed with or after its messages, so an ended run's messages are
        all in the view. They are read again after the view, and the three reads again while a status
        changed between them (``CONSISTENT_READS`` at most): a waiting run's status read before a commit
        resumed and ended it, beside the messages read after, would project that turn's last message as a
        wait (``requires_action``) at the very position of its ``end_turn``, which a stream then never sends.
        A run followed live (``running``) is taken as running, whatever the ledger said a moment before (a
        resumed run reads ``waiting`` until its first commit)."""
        runs = await ctx.ledger.list_runs(thread_id)
        for attempt in range(CONSISTENT_READS):
            previous = None
            if since is None:
                view = await ctx.ledger.thread_view(thread_id)
            else:
                messages, previous = await _window(ctx, thread_id, since)
                view = ThreadView(None, tuple(messages), tuple(await ctx.ledger.pending_calls(thread_id)))
            again = await ctx.ledger.list_runs(thread_id)
            if [(r.run_id, r.status) for r in again] == [(r.run_id, r.status) for r in runs] \
                    or attempt == CONSISTENT_READS - 1:  # the last try keeps the runs read before its view
                break
            runs = again
        agent = self._agent(ctx, thread_id, runs[-1].agent_id if runs else None)
        clients = {t.name for t in agent.client_tools} | {t.name for r in runs for t in r.tools}
        facts = {r.run_id: mev.RunFacts(RunStatus.RUNNING if r.run_id == running else r.status, r.error_code,
                                        r.error_message) for r in runs}
        pending = {p.tool_call_id: p.kind for p in view.pending}
        return mev.project(view.messages, facts, pending, clients, previous), view

    # -- sessions ------------------------------------------------------------------------------

    async def create(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend) -> None:
        data = await self._body(ctx, scope, receive, send)
        if data is None:
            return
        parsed = mreq.parse_create(data)
        agent = ctx.agents.get(parsed.agent_id)  # UNKNOWN_AGENT: 404
        principal = principal_of(scope)
        thread_id = new_id("sesn")
        await ctx.ledger.import_thread(ThreadRecord(thread_id, now_ms(), owner=principal.subject), [], [], [])
        self.sessions.extras[thread_id] = Extras(agent.id, parsed.title, parsed.title is not None, parsed.metadata,
                                                 parsed.environment_id)
        if parsed.initial:
            body = orjson.dumps({"events": list(parsed.initial)})
            await self._send(ctx, principal, thread_id, mreq.parse_events(body))
        await _answer(send, 200, await self._session(ctx, thread_id))

    async def list_sessions(self, ctx: ServerContext, scope: dict, send: sse.ASGISend) -> None:
        query = _query(scope)
        principal = principal_of(scope)
        owner = mev_owner(principal)
        try:
            page = await ctx.ledger.list_thread_summaries(owner, _one(query, "agent_id") or None,
                                                          _one(query, "page") or None, _limit(query))
        except ValueError as exc:
            raise InputRejected(str(exc), code="INVALID_CURSOR") from None
        data = [await self._session(ctx, item.thread_id) for item in page.items]
        await _answer(send, 200, {"data": data, "next_page": page.cursor, "prev_page": None})

    async def retrieve(self, ctx: ServerContext, scope: dict, send: sse.ASGISend, thread_id: str) -> None:
        await self._visible(ctx, principal_of(scope), thread_id)
        await _answer(send, 200, await self._session(ctx, thread_id))

    async def update(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                     thread_id: str) -> None:
        await self._visible(ctx, principal_of(scope), thread_id)
        data = await self._body(ctx, scope, receive, send)
        if data is None:
            return
        title_given, title, patch = mreq.parse_update(data)
        extras = self.sessions.extras.setdefault(thread_id, Extras())
        if title_given:
            extras.title, extras.title_set = title, True
        for key, value in (patch or {}).items():
            if value is None:
                extras.metadata.pop(key, None)
            else:
                extras.metadata[key] = value
        if len(extras.metadata) > mreq.MAX_METADATA:
            raise InputRejected(f"metadata holds at most {mreq.MAX_METADATA} pairs")
        await _answer(send, 200, await self._session(ctx, thread_id))

    async def delete(self, ctx: ServerContext, scope: dict, send: sse.ASGISend, thread_id: str) -> None:
        await self._visible(ctx, principal_of(scope), thread_id)
        if not await ctx.app.delete(thread_id):
            raise UnknownThread(f"no session {thread_id!r}")
        self.sessions.extras.pop(thread_id, None)
        self.sessions.seen_idle.pop(thread_id, None)
        await _answer(send, 200, {"id": thread_id, "type": "session_deleted"})

    # -- events --------------------------------------------------------------------------------

    async def list_events(self, ctx: ServerContext, scope: dict, send: sse.ASGISend, thread_id: str) -> None:
        await self._visible(ctx, principal_of(scope), thread_id)
        query = _query(scope)
        order = _one(query, "order") or "asc"
        if order not in ("asc", "desc"):
            raise InputRejected("order must be asc or desc")
        events, _view = await self.events_of(ctx, thread_id)
        kinds = set(query.get("types", []) + query.get("types[]", []))
        if kinds:
            events = [e for e in events if e.event["type"] in kinds]
        try:
            data, next_page = mev.page(events, _limit(query), order, _one(query, "page"))
        except ValueError as exc:
            raise InputRejected(str(exc), code="INVALID_CURSOR") from None
        await _answer(send, 200, {"data": data, "next_page": next_page, "prev_page": None})

    async def send_events(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                          thread_id: str) -> None:
        principal = principal_of(scope)
        await self._visible(ctx, principal, thread_id)
        data = await self._body(ctx, scope, receive, send)
        if data is None:
            return
        receipts = await self._send(ctx, principal, thread_id, mreq.parse_events(data))
        await _answer(send, 200, {"data": receipts})

    async def _send(self, ctx: ServerContext, principal: Principal, thread_id: str,
                    sent: mreq.SentEvents) -> list[dict[str, Any]]:
        """Run one send; its receipts once its input is committed (the turn goes on in the server's nursery)."""
        stamp = mev.timestamp(now_ms())
        interrupts = [e for e in sent.events if e["type"] == "user.interrupt"]
        if sent.kind == "interrupt" or sent.interrupt_first:
            await ctx.app.stop(thread_id)
            if sent.kind == "interrupt":
                return [{"id": e["id"].replace("msg_", "sevt_int_"), "type": "user.interrupt", "processed_at": stamp}
                        for e in interrupts]
        runs = await ctx.ledger.list_runs(thread_id)
        agent = self._agent(ctx, thread_id, runs[-1].agent_id if runs else None)
        server = ctx.config.server
        protocol = self.protocol

        def build(view: Any) -> Any:
            return mreq.run_request(sent, thread_id, agent.id, mev.waiting_calls(view.messages,
                                                                                 [p.tool_call_id for p in view.pending]))

        def broadcast(run: Any) -> RunBroadcast:
            out = RunBroadcast(run.run_id, thread_id, server.replay_bytes, run.owner)
            out.open_channel(protocol)
            self.sessions.adopt(thread_id, run, out, protocol)
            return out

        async with ctx.app.launch(thread_id, agent.id, build, broadcast, None, principal=principal) as run:
            self.sessions.wake(thread_id)
            if run.start is not None:  # a new turn: its input is committed beside its first step
                await run.start.wait()
                if run.start_error is not None:
                    raise run.start_error
            else:  # answers: committed when the waiting turn resumes with them
                await _first_commit(run.broadcast, protocol)
        events, view = await self.events_of(ctx, thread_id)
        by_message = {m.id: m for m in view.messages}
        results = {m.tool_result.tool_call_id: m for m in view.messages if m.tool_result is not None}
        receipts = []
        request = build_request_for_receipts(sent, view, thread_id, agent.id)
        for event, made in zip(sent.events, request, strict=True):
            committed = by_message.get(made) if sent.kind == "message" else results.get(made)
            position_id = mev.event_id((committed.seq, 0)) if committed is not None else event["id"]
            receipt = {k: v for k, v in event.items() if k != "id"}
            receipts.append({"id": position_id, **receipt, "processed_at": mev.timestamp(committed.created_at)
                             if committed is not None else stamp})
        del events
        return receipts

    # -- the stream ----------------------------------------------------------------------------

    async def stream(self, ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                     thread_id: str) -> None:
        principal = principal_of(scope)
        await self._visible(ctx, principal, thread_id)
        query = _query(scope)
        deltas = {k for v in query.get("event_deltas", []) + query.get("event_deltas[]", []) for k in v.split(",")}
        deltas &= set(PREVIEWABLE)
        last = header_of(scope, b"last-event-id")
        events, _view = await self.events_of(ctx, thread_id)
        if last:
            try:
                start = mev.resolve(last, events)
            except ValueError as exc:
                raise InputRejected(str(exc), code="INVALID_POSITION") from None
        else:
            start = mev.stream_start(events, ctx.app.active(thread_id) is not None,
                                     self.sessions.seen_idle.get(thread_id))
        tail = SessionTail(self, ctx, thread_id, start, deltas)
        tail.arm()  # before the answer starts: a turn sent once the client has it is watched from its start
        server = ctx.config.server
        await sse.stream(send, receive, sse.sse_headers(), tail.produce, keepalive=server.keepalive_seconds,
                         max_buffered=server.max_buffered_bytes, app_queue=app_queue_in(scope),
                         heartbeat=ctx.heartbeat)


#: how many times ``events_of`` reads a session again when a run's status changed while it read
CONSISTENT_READS = 4
#: messages read per page of a stream's window
WINDOW_PAGE = 500


async def _window(ctx: ServerContext, thread_id: str, since: int) -> tuple[list[Any], Any]:
    """The thread's messages from ``since`` on, starting early enough to hold the step whose calls the
    first of them answer (a window never starts with a tool result), and the message before them."""
    start = max(1, since - 2)
    while True:
        first = await ctx.ledger.read_messages(thread_id, start - 1, 1)
        if start == 1 or not first or first[0].role != "tool":
            break
        start = max(1, start - 32)
    messages: list[Any] = []
    while True:
        page = await ctx.ledger.read_messages(thread_id, (messages[-1].seq if messages else start - 1), WINDOW_PAGE)
        messages += page
        if len(page) < WINDOW_PAGE:
            break
    before = await ctx.ledger.read_messages(thread_id, start - 2, 1) if start > 1 else []
    return messages, (before[0] if before and before[0].seq == start - 1 else None)


def mev_owner(principal: Principal) -> Any:
    from awaken.ledger.interface import ALL_OWNERS

    return ALL_OWNERS if sees_every_thread(principal) else principal.subject


def build_request_for_receipts(sent: mreq.SentEvents, view: Any, thread_id: str, agent_id: str) -> list[str]:
    """What each sent event became: the message id of a new input, or the tool call id an answer decided."""
    if sent.kind == "message":
        return [e["id"] for e in sent.events]
    out = []
    for event in sent.events:
        named = event.get("tool_use_id") or event.get("custom_tool_use_id")
        out.append(_call_of(named, view.messages) or named)
    return out


def _call_of(event_id: str, messages: Any) -> str | None:
    position = mev.positional(event_id)
    if position is None:
        return None
    for message in messages:
        if message.seq == position[0]:
            calls = [p for p in message.parts if p.kind == "tool_call"]
            index = position[1] - mev.RESULT
            return calls[index].tool_call_id if 0 <= index < len(calls) else None
    return None


async def _first_commit(broadcast: RunBroadcast | None, protocol: Protocol) -> None:
    """Wait until the run announces its first commit (a resume's answers), or ends."""
    if broadcast is None:
        return
    committed = trio.Event()

    def deliver(position: bytes, payload: bytes) -> None:
        if payload.startswith(b'{"t":"commit"') and b"commit" in payload:
            committed.set()

    channel = broadcast.open_channel(protocol)
    watcher = channel.watch(deliver, 1)  # after the run's start mark
    if watcher is None:
        return
    try:
        async with trio.open_nursery() as nursery:
            async def ended() -> None:
                await watcher.done.wait()
                nursery.cancel_scope.cancel()
            nursery.start_soon(ended)
            await committed.wait()
            nursery.cancel_scope.cancel()
    finally:
        watcher.leave()


PING = b'event: ping\ndata: {"type":"ping"}\n\n'


class SessionTail:
    """One stream of a session: committed events after ``start``, then whatever each turn commits, with
    the previews asked for between them; a ping while nothing runs."""

    def __init__(self, served: Served, ctx: ServerContext, thread_id: str, start: mev.Position,
                 deltas: set[str]) -> None:
        self.served = served
        self.ctx = ctx
        self.thread_id = thread_id
        self.position = start
        self.deltas = deltas
        self.last_id = mev.event_id(start)
        self.sent: set[str] = set()
        self.previewing: set[str] = set()
        #: the run this stream follows: (run, watcher, its queue's two ends)
        self.following: tuple[Any, Any, Any, Any] | None = None
        #: the ledger position the followed run had committed at the last mark this stream read
        self.through = 0

    async def catch_up(self, put: sse.Put, through: int | None = None, running: str | None = None) -> None:
        """Write the committed events after this stream's position (of the messages up to ``through``;
        ``running``: the run followed live, which has not ended)."""
        events, _view = await self.served.events_of(self.ctx, self.thread_id, running, since=self.position[0])
        for event in mev.after(events, self.position):
            if through is not None and event.position[0] > through:
                break
            put(frame(event.event, event.id))
            self.position, self.last_id = event.position, event.id
            self.sent.add(event.id)
            if event.event["type"] == "session.status_idle":
                seen = self.served.sessions.seen_idle
                seen[self.thread_id] = max(seen.get(self.thread_id, (0, 0)), event.position)

    def preview(self, put: sse.Put, event: dict[str, Any]) -> None:
        if event["type"] == "event_start":
            kind, named = event["event"]["type"], event["event"]["id"]
            if kind not in self.deltas or named in self.sent:
                return
            self.previewing.add(named)
        elif event["event_id"] not in self.previewing or event["event_id"] in self.sent:
            return
        put(frame(event, self.last_id))

    def watch(self, run: Any, channel: Any, after: int = 0) -> bool:
        """Watch ``run`` on ``channel`` from after ``after`` (frames queued until ``follow`` reads them);
        False when the channel no longer holds that position."""
        send_channel, receive_channel = trio.open_memory_channel[tuple[bytes, int]](math.inf)

        def deliver(_position: bytes, payload: bytes) -> None:
            # with the ledger position the run had committed when it said so: a commit mark shows the
            # events up to there, never later ones, so previews keep their place among them
            send_channel.send_nowait((payload, committed_through(run)))

        watcher = channel.watch(deliver, after)
        if watcher is None:
            return False
        self.following = (run, watcher, send_channel, receive_channel)
        self.through = committed_through(run)
        return True

    def arm(self) -> trio.Event:
        """Before waiting: follow the session's running turn, or enlist for its next (whose broadcast then
        feeds this stream from its first event); the event that says a turn started."""
        sessions = self.served.sessions
        wake = sessions.waiter(self.thread_id)
        if self.following is not None:
            return wake
        run = self.ctx.app.active(self.thread_id)
        broadcast = run.broadcast if run is not None else None
        if broadcast is not None and not broadcast.closed:
            channel = broadcast.open_channel(self.served.protocol)
            if self.watch(run, channel) or self.watch(run, channel, channel.next_seq - 1):
                return wake
        sessions.waiting.setdefault(self.thread_id, set()).add(self)
        return wake

    async def produce(self, put: sse.Put) -> None:
        sessions = self.served.sessions
        try:
            wake = sessions.waiter(self.thread_id)
            while True:
                if self.following is None:
                    await self.catch_up(put)
                    with trio.move_on_after(self.ctx.config.server.keepalive_seconds) as idle:
                        await wake.wait()
                    if idle.cancelled_caught:
                        put(PING)
                if self.following is not None:
                    sessions.waiting.get(self.thread_id, set()).discard(self)
                    await self.follow(put)
                wake = self.arm()
        finally:
            sessions.waiting.get(self.thread_id, set()).discard(self)
            if self.following is not None:
                self.following[1].leave()

    async def follow(self, put: sse.Put) -> None:
        """Follow one run: its previews live, the ledger read at each commit mark, until it ends. A new
        turn's input is committed beside its first step: previews wait for it, so they follow its events."""
        assert self.following is not None
        run, watcher, send_channel, receive_channel = self.following
        try:
            if run.start is not None:  # the turn's input is committed: its events come first
                await run.start.wait()
                inputs = [m.seq for m in run.history if m.run_id == run.run_id and m.role not in ("assistant", "tool")]
                self.through = max([self.through, *inputs])
            await self.catch_up(put, self.through, run.run_id)

            async def close_when_done() -> None:
                await watcher.done.wait()
                send_channel.close()

            async with trio.open_nursery() as nursery:
                nursery.start_soon(close_when_done)
                async for payload, through in receive_channel:
                    item = orjson.loads(payload)
                    if item["t"] == "preview":
                        self.preview(put, item["event"])
                    else:
                        await self.catch_up(put, through, run.run_id)
            await self.catch_up(put)
        finally:
            watcher.leave()
            self.following = None


#: what ``GET /v1/agents`` says of this wire
CAPABILITIES: dict[str, Any] = {
    "beta": BETA,
    "send": ["user.message", "user.tool_confirmation", "user.custom_tool_result", "user.interrupt"],
    "stream": ["user.message", "user.tool_confirmation", "user.custom_tool_result", "agent.message",
               "agent.thinking", "agent.tool_use", "agent.custom_tool_use", "agent.tool_result",
               "session.status_running", "session.status_idle", "session.error"],
    "event_deltas": list(PREVIEWABLE),
    "stop_reasons": ["end_turn", "requires_action", "retries_exhausted"],
    "resume": "Last-Event-ID",
}


def serve(protocol: Protocol | None) -> Handler:
    """The handler of every route under ``PREFIX``, with this server's session state."""
    served = Served(protocol or PROTOCOL)

    async def handler(ctx: ServerContext, scope: dict, receive: sse.ASGIReceive, send: sse.ASGISend,
                      params: dict[str, str]) -> None:
        await served.route(ctx, scope, receive, send)

    return handler


#: the sessions-and-events API as a wire: every route under ``PREFIX`` is ``Served.route``'s
WIRE = Wire(PROTOCOL, extra=(Route(("GET", "POST", "DELETE"), PREFIX + "{rest}", serve),),  # type: ignore[arg-type]
            capabilities=CAPABILITIES)
