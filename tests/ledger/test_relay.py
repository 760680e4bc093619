"""Any process serves any thread (issue 29): a run streaming on process A, rejoined through process B
on the same Postgres database, gets the same positions and frames as a rejoin on A, from the start or
from a ``Last-Event-ID`` either process wrote; stop sent to B stops A's run; a SIGKILLed A ends B's
watchers with ``OWNER_DIED`` once its lease lapses. Real ``awaken serve`` processes on the session's
throwaway cluster.
"""

from __future__ import annotations

import signal
from pathlib import Path
from typing import Any

import httpx
import pytest
import trio

from awaken.core import events as ev
from awaken.core.messages import Message, TextPart
from awaken.ledger.relay import event_from_json, event_to_json
from tests.builders import Frames, agui_body, aisdk_user, frames_of, held, is_type, user
from tests.ledger.test_scaleout import LEASE_SECONDS, awaken_serve, postgres_config, release_on, run_row

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def test_events_travel_as_json_unchanged() -> None:
    events = [ev.RunStarted("t", "r", "m", state={"a": 1}), ev.TextDelta("m", "hé\u0000"),
              ev.RunFinished("t", "r", "waiting", pending=("c",), gates=(ev.Gate("c", "calc", "{}", {}),),
                             history=(Message("m1", "user", (TextPart("hi"),)),))]
    assert [event_from_json(event_to_json(e)) for e in events] == events


async def rest(frames: Frames) -> list[tuple[str | None, Any]]:
    """Every frame left, to the stream's end (the one still buffered included)."""
    return await frames.rest() + frames_of(frames.buffer)


async def rejoin(client: httpx.AsyncClient, path: str, stack: Any, last_event_id: str | None = None) -> Frames:
    headers = {"last-event-id": last_event_id} if last_event_id else {}
    response = await stack.enter_async_context(client.stream("GET", path, headers=headers))
    assert response.status_code == 200, (str(client.base_url), path, last_event_id)
    return Frames(response)


async def test_a_rejoin_on_another_process_gets_the_same_positions(tmp_path: Path) -> None:
    """AG-UI thread stream and the AI SDK's resume route on B: every frame and position a rejoin on A
    gets, from the start, then the live tail to the end; a Last-Event-ID written by A resumes on B."""
    import contextlib

    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        for wire, start, path in [
            ("agui", ("/v1/ag-ui", agui_body("t-r", "r-r", [user("u1", held("g1", 4))])), "/v1/ag-ui/threads/t-r/stream"),
            ("aisdk", ("/v1/ai-sdk/chat", {"id": "c-r", "messages": [aisdk_user("u2", held("g2", 4))]}),
             "/v1/ai-sdk/chat/c-r/stream"),
        ]:
            first_delta = is_type("TEXT_MESSAGE_CONTENT") if wire == "agui" else is_type("text-delta")
            async with contextlib.AsyncExitStack() as stack:
                origin = await stack.enter_async_context(on_a.stream("POST", start[0], json=start[1]))
                origin_frames = Frames(origin)  # kept: a dropped reader closes the stream, which stops the run
                started = await origin_frames.until(first_delta)
                assert started and first_delta(started[-1][1]), started
                on_own, on_other = await rejoin(on_a, path, stack), await rejoin(on_b, path, stack)
                seen_a, seen_b = await on_own.until(first_delta), await on_other.until(first_delta)
                assert seen_a == seen_b and all(pos for pos, _ in seen_a), (seen_a, seen_b)
                # a position A wrote resumes on B exactly after it
                resumed = await rejoin(on_b, path, stack, seen_a[0][0])
                assert await resumed.until(first_delta) == seen_a[1:]
                await release_on(a, "g1" if wire == "agui" else "g2")
                rest_a, rest_b = await rest(on_own), await rest(on_other)
                assert rest_a == rest_b and len(rest_a) > 3, (rest_a, rest_b)
                assert await rest(resumed) == rest_b
            assert (await on_b.get(path)).status_code == 204  # nothing runs anywhere now


async def test_stop_on_another_process_answers_for_the_run_it_stopped(tmp_path: Path) -> None:
    """POST /v1/threads/{id}/stop on B stops A's run: 200 {runId, status}, B's watcher sees the stop;
    204 once nothing runs anywhere."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        body = agui_body("t-s", "r-s", [user("u1", held("never", 4))])
        async with on_a.stream("POST", "/v1/ag-ui", json=body) as origin, \
                on_b.stream("GET", "/v1/ag-ui/threads/t-s/stream") as watching:
            origin_frames = Frames(origin)  # kept: a dropped reader closes the stream, which stops the run
            await origin_frames.until(is_type("TEXT_MESSAGE_CONTENT"))
            watcher = Frames(watching)
            await watcher.until(is_type("TEXT_MESSAGE_CONTENT"))
            stopped = await on_b.post("/v1/threads/t-s/stop")
            assert stopped.status_code == 200 and stopped.json() == {"runId": "r-s", "status": "interrupted"}
            tail = await rest(watcher)
            assert "RUN_FINISHED" not in str(tail) and tail, tail
        assert run_row(tmp_path, "r-s") == ("interrupted", "stopped", "stopped on request")
        assert (await on_b.post("/v1/threads/t-s/stop")).status_code == 204


async def test_a_killed_owner_ends_the_watchers_elsewhere_with_a_code(tmp_path: Path) -> None:
    """SIGKILL A while B's watcher follows its run: once A's lease lapses, B's stream ends with
    RUN_ERROR OWNER_DIED, and history holds what A committed."""
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        body = agui_body("t-k", "r-k", [user("u1", held("never", 4))])
        async with on_a.stream("POST", "/v1/ag-ui", json=body) as origin, \
                on_b.stream("GET", "/v1/ag-ui/threads/t-k/stream") as watching:
            origin_frames = Frames(origin)  # kept: a dropped reader closes the stream, which stops the run
            await origin_frames.until(is_type("TEXT_MESSAGE_CONTENT"))
            watcher = Frames(watching)
            await watcher.until(is_type("TEXT_MESSAGE_CONTENT"))
            a.proc.send_signal(signal.SIGKILL)
            await a.proc.wait()
            with trio.fail_after(LEASE_SECONDS * 15):
                tail = await rest(watcher)
        assert tail[-1][1]["type"] == "RUN_ERROR" and tail[-1][1]["code"] == "OWNER_DIED", tail
        assert run_row(tmp_path, "r-k")[:2] == ("interrupted", "owner_died")  # type: ignore[index]
        items = (await on_b.get("/v1/ag-ui/threads/t-k/messages")).json()["items"]
        assert [m["id"] for m in items][:1] == ["u1"]


async def test_copilotkit_connect_and_stop_on_another_process(tmp_path: Path) -> None:
    """CopilotKit's ``connect`` on B joins A's run with the frames a connect on A gets (the finished history,
    then the live run); the runtime's ``stop`` on B stops it there (``stopped: true``), a wrong ``runId``
    stops nothing, and once nothing runs anywhere ``stopped`` is false."""
    import contextlib

    ck = "/v1/copilotkit/agent/assistant"
    config = postgres_config(tmp_path / "pg.toml", tmp_path)
    async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
        first = await on_a.post(f"{ck}/run", json=agui_body("t-ck", "r-ck1", [user("u1", "hello")]))
        assert first.status_code == 200
        body = agui_body("t-ck", "r-ck2", [user("u1", "hello"), user("u2", held("never", 4))])
        async with contextlib.AsyncExitStack() as stack:
            origin = Frames(await stack.enter_async_context(on_a.stream("POST", f"{ck}/run", json=body)))
            await origin.until(is_type("TEXT_MESSAGE_CONTENT"))
            # the run's first write may land after its first delta (it overlaps the first step): both
            # connects snapshot the history once it holds the run's input, as any read after it would
            with trio.fail_after(10):
                while "u2" not in [m["id"] for m in (await on_a.get("/v1/ag-ui/threads/t-ck/messages")).json()["items"]]:
                    await trio.sleep(0.01)
            connect = agui_body("t-ck", "r-connect", [])
            joined = []
            for client in (on_a, on_b):
                response = await stack.enter_async_context(client.stream("POST", f"{ck}/connect", json=connect))
                assert response.status_code == 200 and response.headers["content-type"].startswith("text/event-stream")
                joined.append(Frames(response))
            seen_a, seen_b = [await f.until(is_type("TEXT_MESSAGE_CONTENT")) for f in joined]
            assert seen_a == seen_b and [p["type"] for _, p in seen_a[:3]] == \
                ["RUN_STARTED", "MESSAGES_SNAPSHOT", "RUN_FINISHED"], seen_b
            assert seen_b[3][1]["type"] == "RUN_STARTED" and seen_b[3][1]["runId"] == "r-ck2"
            wrong = await on_b.post(f"{ck}/stop/t-ck", json={"runId": "not-it"})
            assert wrong.json() == {"stopped": False, "message": "Run 'not-it' is not the active run for thread 't-ck'."}
            stopped = await on_b.post(f"{ck}/stop/t-ck", json={"runId": "r-ck2"})
            assert stopped.status_code == 200 and stopped.json()["stopped"] is True, stopped.json()
            rest_a, rest_b = await rest(joined[0]), await rest(joined[1])
            assert rest_a == rest_b and "RUN_FINISHED" not in str(rest_b), (rest_a, rest_b)
        assert run_row(tmp_path, "r-ck2") == ("interrupted", "stopped", "stopped on request")
        idle = await on_b.post(f"{ck}/stop/t-ck")
        assert idle.json() == {"stopped": False, "message": "No active run for thread 't-ck'."}
