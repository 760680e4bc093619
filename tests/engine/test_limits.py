"""Limits per principal (issue 26 item 6): ``[limits]`` caps the runs one caller has executing at once
and the runs it starts per minute.

A refusal is ``RATE_LIMITED``: on the run routes the protocol's refusal stream (HTTP 200, as every
admission refusal) with ``Retry-After`` on the response and the wait in the message, on a WebSocket
the refusal stream alone. The caps apply by default to authenticated users, not to admins nor to the
anonymous caller of ``[auth] mode = "none"``. Runs are held open with the scripted model's ``/hold``;
the per-minute window moves on the limiter's injectable clock.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
import pytest
from trio_websocket import open_websocket_url

from awaken.config import LimitsConfig
from awaken.core.principal import Principal
from tests.builders import (
    agui_body,
    ask,
    bearer,
    held,
    live_server,
    make_config,
    open_gate,
    parse_sse,
    read_until,
    types,
)

ALICE_KEY = "alice-key-0123456789abcdef"
BOB_KEY = "bob-key-0123456789abcdef"
OPS_KEY = "ops-key-0123456789abcdef"
TOKENS = [
    {"name": "alice", "env": "AWAKEN_TEST_ALICE_KEY", "role": "user", "subject": "alice"},
    {"name": "bob", "env": "AWAKEN_TEST_BOB_KEY", "role": "user", "subject": "bob"},
    {"name": "ops", "env": "AWAKEN_TEST_OPS_KEY", "role": "admin", "subject": "ops"},
]
ALICE = Principal("alice", "user")
BUSY_2 = ("too many runs at once: 2 are executing for this caller (limits.max_concurrent_runs = 2); "
          "retry in 1 s, or when one of them ends")


def chat(chat_id: str, text: str = "hi") -> dict[str, Any]:
    return {"id": chat_id, "messages": [{"id": f"u-{chat_id}", "role": "user",
                                          "parts": [{"type": "text", "text": text}]}]}


@pytest.fixture
def keys(monkeypatch):  # noqa: ANN001, ANN201
    monkeypatch.setenv("AWAKEN_TEST_ALICE_KEY", ALICE_KEY)
    monkeypatch.setenv("AWAKEN_TEST_BOB_KEY", BOB_KEY)
    monkeypatch.setenv("AWAKEN_TEST_OPS_KEY", OPS_KEY)


def tokens_config(tmp_path, **limits: Any):  # noqa: ANN001, ANN201
    return make_config(tmp_path, auth={"mode": "tokens", "tokens": TOKENS}, limits=limits)


@contextlib.asynccontextmanager
async def holding(client: httpx.AsyncClient, thread_id: str, gate: str, key: str | None = None,
                  path: str = "/v1/ag-ui") -> AsyncIterator[Any]:
    """A run streaming on ``thread_id``, admitted and held at its first delta until ``gate`` opens;
    yields the rest of its events' reader."""
    headers = bearer(key) if key else {}
    async with client.stream("POST", path, json=ask(thread_id, f"r-{thread_id}", text=held(gate, 3)),
                             headers=headers) as response:
        lines = response.aiter_lines()
        await read_until(lines, "TEXT_MESSAGE_CONTENT")
        yield lines


async def to_end(lines: Any) -> list[str]:
    return [orjson.loads(line[6:])["type"] async for line in lines if line.startswith("data: ")]


async def post(client: httpx.AsyncClient, path: str, body: dict[str, Any], key: str | None = None) -> httpx.Response:
    return await client.post(path, json=body, headers=bearer(key) if key else {})


def assert_rate_limited_stream(response: httpx.Response, retry_after: str, message: str) -> None:
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.headers["retry-after"] == retry_after
    assert parse_sse(response.content) == [{"type": "RUN_ERROR", "message": message, "code": "RATE_LIMITED"}]


async def test_the_concurrency_cap_refuses_every_wire_and_transport_and_frees_slots_when_runs_end(tmp_path, keys):
    config = tokens_config(tmp_path, max_concurrent_runs=2, runs_per_minute=0)
    async with live_server(config) as srv, srv.client() as client:
        async with holding(client, "a1", "g-a1", ALICE_KEY) as one, holding(client, "a2", "g-a2", ALICE_KEY) as two:
            assert srv.ctx.app.limiter.executing(ALICE) == 2
            agui = await post(client, "/v1/ag-ui", ask("a3", "r-a3"), ALICE_KEY)
            copilot = await post(client, "/v1/copilotkit/agent/assistant/run", ask("a4", "r-a4"), ALICE_KEY)
            sdk = await post(client, "/v1/ai-sdk/chat", chat("a5"), ALICE_KEY)
            url = srv.base_url.replace("http://", "ws://", 1) + "/v1/ag-ui/ws"
            async with open_websocket_url(url, subprotocols=["awaken.v1", f"bearer.{ALICE_KEY}"]) as ws:
                await ws.send_message(orjson.dumps(ask("a6", "r-a6")).decode())
                over_ws = orjson.loads(await ws.get_message())
            bob = parse_sse((await post(client, "/v1/ag-ui", ask("b1", "r-b1"), BOB_KEY)).content)
            refused_history = await client.get("/v1/threads/a3", headers=bearer(ALICE_KEY))
            open_gate(srv.ctx, "g-a1")
            open_gate(srv.ctx, "g-a2")
            ends = [(await to_end(one))[-1], (await to_end(two))[-1]]
        assert srv.ctx.app.limiter.executing(ALICE) == 0
        after = [parse_sse((await post(client, "/v1/ag-ui", ask(f"a{n}", f"r-a{n}"), ALICE_KEY)).content)
                 for n in (7, 8, 9)]
    assert_rate_limited_stream(agui, "1", BUSY_2)
    assert_rate_limited_stream(copilot, "1", BUSY_2)
    assert sdk.status_code == 200 and sdk.headers["retry-after"] == "1"
    assert parse_sse(sdk.content) == [{"type": "error", "errorText": f"RATE_LIMITED: {BUSY_2}"},
                                      {"type": "finish", "finishReason": "error"}, "[DONE]"]
    assert over_ws == {"type": "RUN_ERROR", "message": BUSY_2, "code": "RATE_LIMITED"}
    assert types(bob)[-1] == "RUN_FINISHED"  # another caller's runs are counted apart
    assert (refused_history.status_code, refused_history.json()["error"]["code"]) == (404, "UNKNOWN_THREAD")
    assert ends == ["RUN_FINISHED", "RUN_FINISHED"]
    assert [types(events)[-1] for events in after] == ["RUN_FINISHED"] * 3  # one after another: never over 2


async def test_the_rate_cap_refuses_with_retry_after_until_the_oldest_start_leaves_the_minute(tmp_path, keys):
    config = tokens_config(tmp_path, max_concurrent_runs=0, runs_per_minute=3)
    async with live_server(config) as srv, srv.client() as client:
        now = [1000.0]
        srv.ctx.app.limiter.clock = lambda: now[0]

        async def run(at: float, thread_id: str, run_id: str, message_id: str | None = None) -> httpx.Response:
            now[0] = at
            return await post(client, "/v1/ag-ui", ask(thread_id, run_id, message_id=message_id), ALICE_KEY)

        first = await run(1000, "t1", "r1")
        await run(1010, "t2", "r2")
        nothing_new = await run(1015, "t1", "r1-again", message_id="u-r1")  # refused: it counts for nothing
        await run(1020, "t3", "r3")
        at_30 = await run(1030, "t4", "r4")
        at_59 = await run(1059.5, "t4", "r4")
        at_60 = await run(1060, "t4", "r4")
        at_61 = await run(1061, "t5", "r5")
        admin = await post(client, "/v1/ag-ui", ask("t6", "r6"), OPS_KEY)
    assert types(parse_sse(first.content))[-1] == "RUN_FINISHED"
    assert parse_sse(nothing_new.content)[0]["code"] == "NO_NEW_INPUT"
    assert_rate_limited_stream(at_30, "30", "too many new runs: 3 were started by this caller in the last minute "
                                            "(limits.runs_per_minute = 3); retry in 30 s")
    assert_rate_limited_stream(at_59, "1", "too many new runs: 3 were started by this caller in the last minute "
                                           "(limits.runs_per_minute = 3); retry in 1 s")
    assert types(parse_sse(at_60.content))[-1] == "RUN_FINISHED"
    assert_rate_limited_stream(at_61, "9", "too many new runs: 3 were started by this caller in the last minute "
                                           "(limits.runs_per_minute = 3); retry in 9 s")
    assert "retry-after" not in admin.headers and types(parse_sse(admin.content))[-1] == "RUN_FINISHED"


async def test_admins_and_the_anonymous_caller_are_unlimited_by_default(tmp_path, keys):
    assert make_config(tmp_path).limits == LimitsConfig(max_concurrent_runs=8, runs_per_minute=60, roles=["user"])
    async with live_server(tokens_config(tmp_path / "tokens", max_concurrent_runs=1, runs_per_minute=1)) as srv, \
            srv.client() as client:
        async with holding(client, "o1", "g-o1", OPS_KEY) as one:
            admin = [parse_sse((await post(client, "/v1/ag-ui", ask(f"o{n}", f"r-o{n}"), OPS_KEY)).content)
                     for n in (2, 3)]
            open_gate(srv.ctx, "g-o1")
            admin.append([{"type": t} for t in await to_end(one)])
    none_config = make_config(tmp_path / "none", limits={"max_concurrent_runs": 1, "runs_per_minute": 1})
    async with live_server(none_config) as srv, srv.client() as client:
        async with holding(client, "n1", "g-n1") as one:
            anonymous = [parse_sse((await post(client, "/v1/ag-ui", ask(f"n{n}", f"r-n{n}"))).content) for n in (2, 3)]
            open_gate(srv.ctx, "g-n1")
            anonymous.append([{"type": t} for t in await to_end(one)])
    assert [types(events)[-1] for events in admin] == ["RUN_FINISHED"] * 3
    assert [types(events)[-1] for events in anonymous] == ["RUN_FINISHED"] * 3


async def test_the_anonymous_caller_is_limited_when_configured(tmp_path):
    config = make_config(tmp_path, limits={"max_concurrent_runs": 1, "runs_per_minute": 0, "roles": ["anonymous"]})
    async with live_server(config) as srv, srv.client() as client:
        async with holding(client, "n1", "g-n1") as one:
            refused = await post(client, "/v1/ag-ui", ask("n2", "r-n2"))
            open_gate(srv.ctx, "g-n1")
            await to_end(one)
        again = parse_sse((await post(client, "/v1/ag-ui", ask("n3", "r-n3"))).content)
    assert_rate_limited_stream(refused, "1", "too many runs at once: 1 are executing for this caller "
                                             "(limits.max_concurrent_runs = 1); retry in 1 s, or when one of them ends")
    assert types(again)[-1] == "RUN_FINISHED"


async def test_a_waiting_run_holds_no_slot_and_its_resume_takes_one(tmp_path, keys):
    config = tokens_config(tmp_path, max_concurrent_runs=1, runs_per_minute=0)
    path = "/v1/ag-ui/agents/frontend"
    question = [{"id": "u1", "role": "user", "content": '/call ask_user {"question": "which?"}'}]
    async with live_server(config) as srv, srv.client() as client:
        waiting = parse_sse((await post(client, path, agui_body("w", "r-w", question), ALICE_KEY)).content)
        call = next(e["toolCallId"] for e in waiting if e["type"] == "TOOL_CALL_START")
        resume = agui_body("w", "r-w2", question + [{"id": "t1", "role": "tool", "toolCallId": call, "content": "this"}])
        executing_while_waiting = srv.ctx.app.limiter.executing(ALICE)
        async with holding(client, "h", "g-h", ALICE_KEY) as other:  # admitted: the waiting run holds nothing
            refused = await post(client, path, resume, ALICE_KEY)
            open_gate(srv.ctx, "g-h")
            other_end = (await to_end(other))[-1]
        resumed = parse_sse((await post(client, path, resume, ALICE_KEY)).content)
        runs = await srv.ctx.ledger.list_runs("w")
    assert types(waiting)[-1] == "RUN_FINISHED" and executing_while_waiting == 0
    assert_rate_limited_stream(refused, "1", "too many runs at once: 1 are executing for this caller "
                                             "(limits.max_concurrent_runs = 1); retry in 1 s, or when one of them ends")
    assert other_end == "RUN_FINISHED"
    assert types(resumed)[-1] == "RUN_FINISHED"
    assert [(r.run_id, str(r.status)) for r in runs] == [("r-w", "completed")]


async def test_a_run_whose_client_went_away_gives_its_slot_back(tmp_path, keys):
    config = tokens_config(tmp_path, max_concurrent_runs=1, runs_per_minute=0)
    async with live_server(config) as srv, srv.client() as client:
        async with holding(client, "gone", "g-gone", ALICE_KEY):
            pass  # the client leaves mid-run: the run is interrupted (cause client_gone)
        run = srv.ctx.app.active("gone")
        if run is not None:
            await run.settled()
        next_run = parse_sse((await post(client, "/v1/ag-ui", ask("next", "r-next"), ALICE_KEY)).content)
        runs = await srv.ctx.ledger.list_runs("gone")
    assert [(r.status, r.cause) for r in runs] == [("interrupted", "client_gone")]
    assert types(next_run)[-1] == "RUN_FINISHED"


async def test_limits_are_checked_at_start_up(tmp_path):
    from awaken.core.errors import ConfigError

    with pytest.raises(ConfigError, match=r"^test config: limits.runs_per_minute: -1 is out of range"):
        make_config(tmp_path, limits={"runs_per_minute": -1})
    with pytest.raises(ConfigError, match=r"^test config: limits.roles\[0\]: "):
        make_config(tmp_path, limits={"roles": ["root"]})
