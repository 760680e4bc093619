"""AG-UI end to end over HTTP against a live server: runs, dedup, history paging, refusals, failures,
concurrency, disconnects, an unavailable store, and the service routes.

CONTRACT §3 (AG-UI), §5 (runs, disconnects, concurrency) and §7 (service routes).
"""

from __future__ import annotations

import sqlite3
from contextlib import contextmanager
from typing import Any

import httpx
import orjson
import pytest
import trio

from awaken.engine.state import RunStatus
from awaken.ledger.paging import encode_cursor
from tests.builders import (
    agui_body,
    held,
    live_server,
    live_tasks,
    make_config,
    open_gate,
    parse_sse,
    post_agui,
    read_until,
    release,
    types,
    user,
)
from tests.builders import agui_text as text_of

TEXT_RUN = ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", *["TEXT_MESSAGE_CONTENT"] * 3,
            "TEXT_MESSAGE_END", "STEP_FINISHED", "RUN_FINISHED"]


def answer_id(events: list[dict[str, Any]]) -> str:
    return next(e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START")


async def history(client: httpx.AsyncClient, thread_id: str, **params: Any) -> httpx.Response:
    return await client.get(f"/v1/ag-ui/threads/{thread_id}/messages", params=params)


async def ledger_view(ledger, thread_id: str) -> tuple:
    """Everything the ledger holds for a thread (and the thread list), to prove nothing changed."""
    return (await ledger.list_threads(), await ledger.get_thread(thread_id), await ledger.list_runs(thread_id),
            await ledger.read_messages(thread_id, 0, 10**6), await ledger.pending_calls(thread_id))


async def wait_for_run(ledger, run_id: str, status: RunStatus, within: float = 1.0):
    """Bounded polling: the run's committed status becomes ``status`` within ``within`` seconds."""
    with trio.fail_after(within):
        while True:
            run = await ledger.get_run(run_id)
            if run is not None and run.status is status:
                return run
            await trio.sleep(0.005)


# -- runs and dedup --------------------------------------------------------------------------------


async def test_a_run_streams_sse_with_the_contracted_headers_and_framing(client):
    """CONTRACT §3: text/event-stream, no-cache, X-Accel-Buffering: no; ``id: <run>:<seq>\\ndata: <json>\\n\\n``
    frames, positions numbered from 1."""
    response = await client.post("/v1/ag-ui", json=agui_body("t-h", "r-h", [user("u1", "hi")]))
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    assert response.headers["cache-control"] == "no-cache"
    assert response.headers["x-accel-buffering"] == "no"
    raw = response.content
    assert b"\r" not in raw and raw.endswith(b"\n\n")
    frames = [frame for frame in raw.split(b"\n\n") if frame]
    assert [frame.split(b"\n")[0] for frame in frames] == [b"id: r-h:%d" % n for n in range(1, len(frames) + 1)]
    assert all(frame.split(b"\n")[1].startswith(b"data: {") and frame.count(b"\n") == 1 for frame in frames)
    events = parse_sse(raw)
    assert types(events) == TEXT_RUN
    assert events[0] == {"type": "RUN_STARTED", "threadId": "t-h", "runId": "r-h", "protocolVersion": "1.0"}
    assert events[-1] == {"type": "RUN_FINISHED", "threadId": "t-h", "runId": "r-h"}
    assert text_of(events) == 'You said: "hi".'


async def test_multi_turn_on_one_thread_drops_replayed_messages(client, server):
    """CONTRACT §3: messages whose ids the ledger holds are replayed history and are dropped."""
    first = await post_agui(client, agui_body("t-mt", "r1", [user("u1", "first")]))
    a1 = answer_id(first)
    replay = [user("u1", "first"), {"id": a1, "role": "assistant", "content": text_of(first)}]
    second = await post_agui(client, agui_body("t-mt", "r2", [*replay, user("u2", "second")]))
    assert types(second) == TEXT_RUN
    assert text_of(second) == 'You said: "second".'
    a2 = answer_id(second)
    third = await post_agui(client, agui_body("t-mt", "r3", [
        *replay, user("u2", "second"), {"id": a2, "role": "assistant", "content": text_of(second)},
        user("u3", "third")]))
    assert text_of(third) == 'You said: "third".'
    items = (await history(client, "t-mt")).json()["items"]
    assert [(m["id"], m["role"], m["content"]) for m in items] == [
        ("u1", "user", "first"), (a1, "assistant", 'You said: "first".'),
        ("u2", "user", "second"), (a2, "assistant", 'You said: "second".'),
        ("u3", "user", "third"), (answer_id(third), "assistant", 'You said: "third".')]
    runs = await server.ctx.ledger.list_runs("t-mt")
    assert [(r.run_id, r.status) for r in runs] == [(f"r{i}", RunStatus.COMPLETED) for i in (1, 2, 3)]


async def test_a_reused_run_id_gets_a_fresh_ledger_run(client, server):
    """CONTRACT §3: the wire echoes the client's runId; the ledger never merges two runs."""
    await post_agui(client, agui_body("t-rid", "same", [user("u1", "a")]))
    events = await post_agui(client, agui_body("t-rid", "same", [user("u2", "b")]))
    assert events[0]["runId"] == events[-1]["runId"] == "same"
    runs = await server.ctx.ledger.list_runs("t-rid")
    assert len(runs) == 2 and runs[0].run_id == "same" and runs[1].run_id != "same"


async def test_image_input_is_committed_and_projected_back(client):
    """CONTRACT §3: image parts as URL or inline base64 are input, and history projects them back."""
    content = [{"type": "text", "text": "see"},
               {"type": "image", "source": {"type": "url", "value": "https://x.test/a.png", "mimeType": "image/png"}},
               {"type": "image", "source": {"type": "data", "value": "iVBORw0KGgo=", "mimeType": "image/png"}}]
    events = await post_agui(client, agui_body("t-img", "r1", [user("u1", content)]))
    assert types(events)[-1] == "RUN_FINISHED"
    assert (await history(client, "t-img")).json()["items"][0] == {"id": "u1", "role": "user", "content": content}


# -- history paging --------------------------------------------------------------------------------


async def test_history_pages_with_a_cursor_after_the_last_item(client):
    """CONTRACT §3: pages oldest first; the cursor marks the position after the last item; an empty page
    (same cursor) when nothing newer is committed; passing it back later catches up."""
    await post_agui(client, agui_body("t-pg", "r1", [user("u1", "one")]))
    await post_agui(client, agui_body("t-pg", "r2", [user("u2", "two")]))
    everything = (await history(client, "t-pg")).json()
    assert [m["id"] for m in everything["items"]][::2] == ["u1", "u2"] and len(everything["items"]) == 4

    page1 = (await history(client, "t-pg", limit=3)).json()
    assert page1["items"] == everything["items"][:3]
    page2 = (await history(client, "t-pg", limit=3, cursor=page1["cursor"])).json()
    assert page2["items"] == everything["items"][3:]
    assert page2["cursor"] == everything["cursor"]
    empty = (await history(client, "t-pg", limit=3, cursor=page2["cursor"])).json()
    assert empty == {"items": [], "cursor": page2["cursor"]}

    await post_agui(client, agui_body("t-pg", "r3", [user("u3", "three")]))
    caught_up = (await history(client, "t-pg", cursor=empty["cursor"])).json()
    assert [(m["id"], m["role"]) for m in caught_up["items"]] == [("u3", "user"), (caught_up["items"][1]["id"],
                                                                                    "assistant")]
    assert (await history(client, "t-pg", cursor=caught_up["cursor"])).json()["items"] == []


async def test_history_refuses_cursors_outside_the_page_sequence(client):
    """CONTRACT §3: a cursor from another thread, fabricated, or malformed → 400; unknown thread → 404."""
    await post_agui(client, agui_body("t-c1", "r1", [user("u1", "x")]))
    await post_agui(client, agui_body("t-c2", "r1", [user("u1", "y")]))
    other = (await history(client, "t-c2")).json()["cursor"]
    for cursor in (other, encode_cursor("t-c1", 99), "bm90LWEtY3Vyc29y", "%%%", "MS5hYmM"):
        response = await history(client, "t-c1", cursor=cursor)
        assert response.status_code == 400, cursor
        assert response.json()["error"]["code"] == "INVALID_CURSOR"
    for limit in ("0", "-1", "x", "501"):
        assert (await history(client, "t-c1", limit=limit)).status_code == 400
    missing = await history(client, "t-never")
    assert missing.status_code == 404
    assert missing.json()["error"]["code"] == "UNKNOWN_THREAD"


# -- refusals --------------------------------------------------------------------------------------


MALFORMED = [
    ("INVALID_JSON", b'{"threadId": "t-bad", "runId": ', "application/json", "/v1/ag-ui"),
    ("UNSUPPORTED_MEDIA_TYPE", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")])), "text/plain", "/v1/ag-ui"),
    ("INVALID_REQUEST", orjson.dumps(agui_body("t-bad", "r", {"id": "n1"})), "application/json", "/v1/ag-ui"),
    ("INVALID_REQUEST", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x"), user("n1", "y")])),
     "application/json", "/v1/ag-ui"),
    ("INVALID_REQUEST", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")],
                                               tools=[{"name": "f", "parameters": {"type": "nope"}}])),
     "application/json", "/v1/ag-ui"),
    ("INVALID_REQUEST", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")], context=[{"value": "v"}])),
     "application/json", "/v1/ag-ui"),
    ("UNSUPPORTED_FIELD", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")], forwardedProps={"a": 1})),
     "application/json", "/v1/ag-ui"),
    ("INVALID_REQUEST", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")], resume=[{"interruptId": "i"}])),
     "application/json", "/v1/ag-ui"),
    ("UNSUPPORTED_FIELD", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")], parentRunId="r0")),
     "application/json", "/v1/ag-ui"),
    ("UNSUPPORTED_FIELD", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")], state=["not", "an object"])),
     "application/json", "/v1/ag-ui"),
    ("UNSUPPORTED_CONTENT", orjson.dumps(agui_body("t-bad", "r", [user("n1", [
        {"type": "audio", "source": {"type": "url", "value": "https://x.test/a.mp3"}}])])),
     "application/json", "/v1/ag-ui"),
    ("NO_NEW_INPUT", orjson.dumps(agui_body("t-bad", "r", [user("u1", "committed already")])),
     "application/json", "/v1/ag-ui"),
    ("NO_NEW_INPUT", orjson.dumps(agui_body("t-bad", "r", [user("n1", "")])), "application/json", "/v1/ag-ui"),
    ("UNKNOWN_AGENT", orjson.dumps(agui_body("t-bad", "r", [user("n1", "x")])), "application/json",
     "/v1/ag-ui/agents/nobody"),
    ("NO_PENDING_RUN", orjson.dumps(agui_body("t-bad", "r", [{"id": "n1", "role": "tool", "toolCallId": "c",
                                                              "content": "x"}])), "application/json", "/v1/ag-ui"),
]


@pytest.mark.parametrize(("code", "raw", "content_type", "path"), MALFORMED,
                         ids=[f"{i}-{m[0]}" for i, m in enumerate(MALFORMED)])
async def test_each_refusal_is_one_run_error_and_leaves_the_ledger_unchanged(client, server, code, raw,
                                                                            content_type, path):
    """CONTRACT §3: refused before execution as a single RUN_ERROR{code, message} (HTTP 200), no run
    started, nothing committed."""
    await post_agui(client, agui_body("t-bad", "r0", [user("u1", "committed already")]))
    before = await ledger_view(server.ctx.ledger, "t-bad")
    response = await client.post(path, content=raw, headers={"content-type": content_type})
    assert response.status_code == 200
    assert response.headers["content-type"] == "text/event-stream"
    events = parse_sse(response.content)
    assert len(events) == 1 and events[0]["type"] == "RUN_ERROR" and events[0]["code"] == code
    assert set(events[0]) == {"type", "code", "message"} and events[0]["message"]
    assert await ledger_view(server.ctx.ledger, "t-bad") == before


async def test_a_refused_first_request_creates_no_thread(client, server):
    """CONTRACT §3: nothing committed, not even the thread."""
    events = await post_agui(client, agui_body("t-none", "r", [user("n1", "x")], tools=[{"name": "f", "parameters": {"type": "nope"}}]))
    assert types(events) == ["RUN_ERROR"]
    assert await server.ctx.ledger.get_thread("t-none") is None
    assert (await history(client, "t-none")).status_code == 404


# -- failures --------------------------------------------------------------------------------------


async def test_fail_gives_run_error_model_error_and_the_run_is_committed_failed(client, server):
    """CONTRACT §2.1/§3: ``/fail`` → RUN_ERROR MODEL_ERROR; the failure is committed on the run; the thread
    takes the next input."""
    events = await post_agui(client, agui_body("t-fail", "r-fail", [user("u1", "/fail")]))
    assert types(events) == ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "RUN_ERROR"]
    assert events[-1] == {"type": "RUN_ERROR", "message": "the scripted model failed as asked by /fail",
                          "code": "MODEL_ERROR"}
    run = await server.ctx.ledger.get_run("r-fail")
    assert (run.status, run.error_code) == (RunStatus.FAILED, "MODEL_ERROR")
    # what was streamed is kept with the failure, marked incomplete (CONTRACT §10, interrupted answers)
    assert (await history(client, "t-fail")).json()["items"][1:] == [
        {"id": answer_id(events), "role": "assistant", "content": "You ", "metadata": {"incomplete": "failed"}}]
    assert types(await post_agui(client, agui_body("t-fail", "r2", [user("u2", "again")]))) == TEXT_RUN
    assert not server.ctx.app._active


# -- concurrency and disconnects -------------------------------------------------------------------


async def test_concurrent_input_on_a_busy_thread_is_thread_busy(server):
    """CONTRACT §5: one active run per thread; a second input is refused (THREAD_BUSY) and never
    interleaves with the first."""
    async with server.client() as first, server.client() as second:
        body = agui_body("t-busy", "r-a", [user("ua", held("t-busy", 6))])
        async with first.stream("POST", "/v1/ag-ui", json=body) as response:
            lines = response.aiter_lines()
            seen = await read_until(lines, "TEXT_MESSAGE_CONTENT")
            refused = await post_agui(second, agui_body("t-busy", "r-b", [user("ub", "me too")]))
            assert refused == [{"type": "RUN_ERROR", "code": "THREAD_BUSY", "message": refused[0]["message"]}]
            await release(server, "t-busy")
            seen += await read_until(lines, "RUN_FINISHED")
        assert types(seen).count("TEXT_MESSAGE_CONTENT") == 6
        items = (await history(first, "t-busy")).json()["items"]
        assert [m["id"] for m in items] == ["ua", answer_id(seen)]
        assert [r.run_id for r in await server.ctx.ledger.list_runs("t-busy")] == ["r-a"]
        # once the first run is over, the same input is welcome
        again = await post_agui(second, agui_body("t-busy", "r-b", [user("ub", "me too")]))
        assert types(again)[-1] == "RUN_FINISHED" and text_of(again) == 'You said: "me too".'


async def test_a_client_disconnect_commits_interrupted_within_a_second(server):
    """CONTRACT §1/§5: a disconnect cancels the run; ``interrupted`` is committed and the thread released
    at once; a new run on the thread then succeeds. The stream has no task watching its client: the
    request's disconnect notice stops it (``runtime/tcp.py``), the server's heartbeat keeps it alive."""
    ledger = server.ctx.ledger
    async with server.client() as client:
        body = agui_body("t-drop", "r-drop", [user("u1", held("t-drop", 50))])  # never released
        async with client.stream("POST", "/v1/ag-ui", json=body) as response:
            await read_until(response.aiter_lines(), "TEXT_MESSAGE_CONTENT")
            assert live_tasks("._watch_client") == 0 and server.ctx.heartbeat.registered == 1
        # leaving the block closes the connection mid-stream
        with trio.fail_after(1):
            run = await wait_for_run(ledger, "r-drop", RunStatus.INTERRUPTED)
            while server.ctx.app.is_active("t-drop"):
                await trio.sleep(0.005)
        assert run.error_code is None
        # what was streamed is kept with the outcome, marked incomplete (CONTRACT §10, interrupted answers)
        assert [(m.role, m.text, m.incomplete) for m in await ledger.read_messages("t-drop", 0, 100)] == [
            ("user", held("t-drop", 50), None), ("assistant", "alpha ", "client_gone")]
        events = await post_agui(client, agui_body("t-drop", "r-next", [user("u2", "still there?")]))
        assert types(events)[-1] == "RUN_FINISHED" and text_of(events) == 'You said: "still there?".'
        assert [(r.run_id, r.status) for r in await ledger.list_runs("t-drop")] == [
            ("r-drop", RunStatus.INTERRUPTED), ("r-next", RunStatus.COMPLETED)]


async def test_keep_alive_comments_on_an_idle_stream(tmp_path):
    """CONTRACT §3: a ``: keep-alive`` comment on idle; clients ignore it."""
    config = make_config(tmp_path, server={"keepalive_seconds": 0.02})
    async with live_server(config) as srv, srv.client() as client:
        content = b""
        body = agui_body("t-ka", "r", [user("u1", held("t-ka", 2))])
        async with client.stream("POST", "/v1/ag-ui", json=body) as response:
            chunks = response.aiter_bytes()
            async for data in chunks:
                content += data
                if b"TEXT_MESSAGE_CONTENT" in content and b": keep-alive\n\n" in content.split(b"TEXT_MESSAGE_CONTENT")[1]:
                    break  # a comment while the run is held after its first delta
            await release(srv, "t-ka")
            async for data in chunks:
                content += data
    assert b": keep-alive\n\n" in content
    assert types(parse_sse(content))[-1] == "RUN_FINISHED"


# -- an unavailable store --------------------------------------------------------------------------


@contextmanager
def sqlite_connection(path: str):
    conn = sqlite3.connect(path, isolation_level=None)
    try:
        yield conn
    finally:
        conn.close()


TABLES = ("threads", "messages", "runs", "pending")


@pytest.fixture
def store_config(tmp_path):
    db = str(tmp_path / "awaken.db")
    return make_config(tmp_path, ledger={"backend": "sqlite", "path": db, "options": {"busy_timeout_ms": 100}})


async def test_an_unavailable_store_answers_503_and_store_unavailable_never_an_empty_thread(store_config):
    """CONTRACT §3/§7: store unavailable → history 503, a run RUN_ERROR STORE_UNAVAILABLE, /readyz 503;
    all OK again once the store is back.

    Another SQLite connection takes the ledger's tables away (renames them) and later puts them back:
    every query the server makes then really fails inside SQLite. (An exclusive lock cannot do this:
    SQLite refuses ``locking_mode=EXCLUSIVE`` while another WAL connection is open, and WAL readers are
    never blocked by a writer.)
    """
    async with live_server(store_config) as srv, srv.client() as client:
        await post_agui(client, agui_body("t-s", "r1", [user("u1", "before")]))
        committed = (await history(client, "t-s")).json()
        with sqlite_connection(store_config.ledger.path) as conn:
            conn.executescript("BEGIN;" + "".join(f"ALTER TABLE {t} RENAME TO {t}_away;" for t in TABLES) + "COMMIT;")
            response = await history(client, "t-s")
            assert response.status_code == 503
            assert response.json()["error"]["code"] == "STORE_UNAVAILABLE"
            assert (await history(client, "t-new")).status_code == 503
            ready = await client.get("/readyz")
            assert ready.status_code == 503 and ready.json()["error"]["code"] == "STORE_UNAVAILABLE"
            assert (await client.get("/healthz")).status_code == 200
            events = await post_agui(client, agui_body("t-s", "r2", [user("u2", "during")]))
            assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "STORE_UNAVAILABLE")]
            # A thread the ledger has never seen needs no read before its run starts: the failure
            # shows when the run's first write is refused, and the stream still ends with it.
            events = await post_agui(client, agui_body("t-new", "r2", [user("u2", "during")]))
            assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE")
            assert "RUN_FINISHED" not in types(events)
            conn.executescript("BEGIN;" + "".join(f"ALTER TABLE {t}_away RENAME TO {t};" for t in TABLES) + "COMMIT;")
        assert (await client.get("/readyz")).status_code == 200
        assert (await history(client, "t-s")).json() == committed
        assert (await history(client, "t-new")).status_code == 404
        events = await post_agui(client, agui_body("t-s", "r3", [user("u3", "after")]))
        assert types(events) == TEXT_RUN
        assert not srv.ctx.app._active


async def test_a_store_locked_for_writing_refuses_the_run_with_store_unavailable(store_config):
    """CONTRACT §3/§5: a run the ledger cannot record ends with RUN_ERROR STORE_UNAVAILABLE (never
    RUN_FINISHED), nothing committed; the thread is free again when the lock goes.

    The run's first write happens beside its first step (off the first-delta path), so the stream may
    carry RUN_STARTED and live deltas before the error: live deltas are best-effort, the outcome is
    what the ledger could commit."""
    async with live_server(store_config) as srv, srv.client() as client:
        await post_agui(client, agui_body("t-w", "r1", [user("u1", "before")]))
        before = await ledger_view(srv.ctx.ledger, "t-w")
        with sqlite_connection(store_config.ledger.path) as conn:
            conn.execute("BEGIN IMMEDIATE")
            events = await post_agui(client, agui_body("t-w", "r2", [user("u2", "during")]))
            assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE")
            assert "RUN_FINISHED" not in types(events) and types(events)[0] in ("RUN_STARTED", "RUN_ERROR")
            conn.execute("ROLLBACK")
        assert await ledger_view(srv.ctx.ledger, "t-w") == before
        assert not srv.ctx.app.is_active("t-w")
        assert types(await post_agui(client, agui_body("t-w", "r2", [user("u2", "during")]))) == TEXT_RUN


async def test_a_step_commit_that_fails_mid_run_ends_with_store_unavailable(store_config):
    """CONTRACT §5: a step that cannot be committed is not shown as committed: the stream ends RUN_ERROR
    STORE_UNAVAILABLE (never RUN_FINISHED), the step is not in history (what it streamed is, marked
    incomplete, committed with the failure once the store takes it), the thread is released."""
    async with live_server(store_config) as srv, srv.client() as client:
        body = agui_body("t-mid", "r1", [user("u1", held("mid", 5))])
        with sqlite_connection(store_config.ledger.path) as conn:
            async with client.stream("POST", "/v1/ag-ui", json=body) as response:
                lines = response.aiter_lines()
                seen = await read_until(lines, "TEXT_MESSAGE_CONTENT")  # the run holds after its first delta
                assert await srv.ctx.app.active("t-mid").started()  # its first write (beside the step) is in
                conn.execute("BEGIN IMMEDIATE")
                open_gate(srv.ctx, "mid")  # the rest of the step streams, then its commit meets the lock
                seen += await read_until(lines, "RUN_ERROR")
            conn.execute("ROLLBACK")
        assert "RUN_FINISHED" not in types(seen)
        assert seen[-1]["code"] == "STORE_UNAVAILABLE"
        with trio.fail_after(10):  # the failure (and the answer it cut off) is committed once the store answers
            while srv.ctx.app.is_active("t-mid"):
                await trio.sleep(0.01)
        assert (await history(client, "t-mid")).json()["items"][1:] == [
            {"id": answer_id(seen), "role": "assistant", "content": "alpha bravo charlie delta echo",
             "metadata": {"incomplete": "failed"}}]
        assert types(await post_agui(client, agui_body("t-mid", "r2", [user("u2", "next")]))) == TEXT_RUN


# -- service routes --------------------------------------------------------------------------------


async def test_service_routes(client):
    """CONTRACT §7: /healthz 200, /readyz 200 when the ledger answers, /v1/agents lists the published agents."""
    assert (await client.get("/healthz")).status_code == 200
    ready = await client.get("/readyz")
    assert ready.status_code == 200 and ready.json() == {"status": "ready"}
    listing = (await client.get("/v1/agents")).json()
    assert listing["default"] == "assistant"
    agents = {a["id"]: a for a in listing["agents"]}
    assert set(agents) == {"assistant", "guarded", "frontend"}
    assert {(t["name"], t["kind"], t["permission"]) for t in agents["assistant"]["tools"]} == {
        ("calculator", "server", "allow"), ("current_time", "server", "allow"), ("set_state", "server", "allow")}
    assert {(t["name"], t["kind"], t["permission"]) for t in agents["guarded"]["tools"]} == {
        ("calculator", "server", "ask"), ("current_time", "server", "ask"), ("set_state", "server", "ask")}
    assert [(t["name"], t["kind"]) for t in agents["frontend"]["tools"]] == [("ask_user", "client")]
    assert all(a["description"] for a in agents.values())


async def test_the_agent_route_serves_the_named_agent(client):
    """CONTRACT §3: ``POST /v1/ag-ui/agents/{agentId}`` runs that agent (guarded asks before its tool)."""
    events = await post_agui(client, agui_body("t-ag", "r", [user("u1", '/call current_time {}')]),
                             "/v1/ag-ui/agents/guarded")
    assert "TOOL_CALL_RESULT" not in types(events) and types(events)[-1] == "RUN_FINISHED"


async def test_a_reused_run_id_gets_a_fresh_ledger_id_and_the_step_follows_it(server, client):
    """The wire echoes the client's runId; the ledger gives a taken one a fresh id, and every message
    of the run (input, assistant step) carries that fresh id."""
    await post_agui(client, agui_body("t-a", "same", [user("u1", "hi")]))
    events = await post_agui(client, agui_body("t-b", "same", [user("u1", '/call calculator {"expression": "2"}')]))
    assert {e.get("runId") for e in events if e["type"] in ("RUN_STARTED", "RUN_FINISHED")} == {"same"}
    runs = await server.ctx.ledger.list_runs("t-b")
    assert len(runs) == 1 and runs[0].run_id != "same" and runs[0].status == "completed"
    messages = await server.ctx.ledger.read_messages("t-b", 0, 100)
    assert {m.run_id for m in messages} == {runs[0].run_id}
    assert [m.role for m in messages] == ["user", "assistant", "tool", "assistant"]
