"""``GET /metrics`` (awaken/telemetry/metrics.py, awaken/http/metrics.py): after a known sequence of runs (one
that finishes, one that fails, one that waits at a gate and is approved, refusals), served in process, the
scrape holds exactly what happened; with ``[auth]`` on, only the roles ``[auth] metrics_roles`` lists may read it.
"""

from __future__ import annotations

from pathlib import Path

import orjson
import trio
from prometheus_client.parser import text_string_to_metric_families
from trio_websocket import open_websocket_url

from awaken.telemetry.metrics import METRICS, ServerMetrics
from tests.builders import (
    agui_body,
    bearer,
    call,
    call_ids,
    held,
    in_process,
    live_server,
    make_config,
    post_agui,
    release,
    types,
    user,
    ws_url,
)

GUARDED = "/v1/ag-ui/agents/guarded"


def samples(text: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    """Every sample of a scrape: (name, sorted labels) -> value."""
    out = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out[(sample.name, tuple(sorted(sample.labels.items())))] = sample.value
    return out


def pick(scrape: dict, name: str, **labels: str) -> float:
    return scrape[(name, tuple(sorted(labels.items())))]


def named(scrape: dict, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {labels: value for (n, labels), value in scrape.items() if n == name}


async def test_a_known_sequence_of_runs_is_scraped_exactly(tmp_path: Path):
    async with in_process(make_config(tmp_path)) as (client, ctx):
        # a run that finishes: 'You said: "hi".' in three one-word deltas; the prompt is one word
        done = await post_agui(client, agui_body("t-done", "r-done", [user("u1", "hi")]))
        assert types(done)[-1] == "RUN_FINISHED"
        # a run whose model fails (MODEL_ERROR) after its first delta
        failed = await post_agui(client, agui_body("t-fail", "r-fail", [user("u1", "/fail")]))
        assert failed[-1]["type"] == "RUN_ERROR" and failed[-1]["code"] == "MODEL_ERROR"
        # a run that waits at a gate, then is approved: the tool runs and the run completes
        first = await post_agui(client, agui_body("t-gate", "r-gate", [user("u1", call("calculator", expression="2 + 2"))]),
                                GUARDED)
        (cid,) = call_ids(first)
        assert (await client.get("/metrics")).status_code == 200  # mid-sequence: the run waits
        approved = [user("u1", "x"), {"id": "tool-1", "role": "tool", "toolCallId": cid, "content": "approved"}]
        resumed = await post_agui(client, agui_body("t-gate", "r-gate2", approved), GUARDED)
        assert types(resumed)[-1] == "RUN_FINISHED"
        # refusals: a run route's refusal stream (every message already committed), a JSON 404
        again = await post_agui(client, agui_body("t-done", "r-again", [user("u1", "hi")]))
        assert again[-1]["code"] == "NO_NEW_INPUT"
        assert (await client.get("/v1/threads/t-nobody")).status_code == 404
        response = await client.get("/metrics")
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/plain; version=0.0.4")
    scrape = samples(response.text)

    assert named(scrape, "awaken_runs_started_total") == {
        (("agent", "assistant"),): 2.0, (("agent", "guarded"),): 2.0}
    assert named(scrape, "awaken_runs_ended_total") == {
        (("agent", "assistant"), ("outcome", "completed")): 1.0,
        (("agent", "assistant"), ("outcome", "failed")): 1.0,
        (("agent", "guarded"), ("outcome", "waiting")): 1.0,
        (("agent", "guarded"), ("outcome", "completed")): 1.0,
    }
    assert pick(scrape, "awaken_runs_active") == 0.0
    assert pick(scrape, "awaken_runs_waiting") == 0.0
    assert pick(scrape, "awaken_streams_open") == 0.0
    assert pick(scrape, "awaken_stream_watchers") == 0.0
    # every execution that produced output has its time to first delta; each a duration
    assert pick(scrape, "awaken_run_first_delta_seconds_count", agent="assistant") == 2.0
    assert pick(scrape, "awaken_run_first_delta_seconds_count", agent="guarded") == 2.0
    assert pick(scrape, "awaken_run_duration_seconds_count", agent="guarded", outcome="waiting") == 1.0
    assert pick(scrape, "awaken_run_duration_seconds_count", agent="assistant", outcome="failed") == 1.0
    assert named(scrape, "awaken_tool_calls_total") == {(("outcome", "ok"), ("tool", "calculator")): 1.0}
    assert named(scrape, "awaken_gate_decisions_total") == {(("decision", "approved"), ("tool", "calculator")): 1.0}
    assert named(scrape, "awaken_refusals_total") == {
        (("code", "NO_NEW_INPUT"),): 1.0, (("code", "UNKNOWN_THREAD"),): 1.0}
    # the ledger: each run's first write and every commit, timed under the backend's name
    commits = pick(scrape, "awaken_ledger_commit_seconds_count", backend="sqlite")
    # each fresh run: its first write and one commit (completed, failed, waiting); the resume: the
    # approved call's result, then the answer's step
    assert commits == 2 + 2 + 2 + 2
    requests = named(scrape, "awaken_http_requests_total")
    assert requests[(("method", "POST"), ("route", "/v1/ag-ui"), ("status", "200"))] == 3.0
    assert requests[(("method", "POST"), ("route", "/v1/ag-ui/agents/{agent}"), ("status", "200"))] == 2.0
    assert requests[(("method", "GET"), ("route", "/v1/threads/<path:thread_id>"), ("status", "404"))] == 1.0
    assert requests[(("method", "GET"), ("route", "/metrics"), ("status", "200"))] == 1.0
    # tokens: the scripted model counts the history's words in and its one-word deltas out
    tokens = named(scrape, "awaken_tokens_total")
    assert tokens[(("agent", "assistant"), ("direction", "output"), ("model", "scripted"))] == 3.0
    assert tokens[(("agent", "assistant"), ("direction", "input"), ("model", "scripted"))] == 1.0
    # GenAI client metrics: one observation per model call (the failed call has an error type, no tokens)
    chat = dict(gen_ai_operation_name="chat", gen_ai_provider_name="scripted", gen_ai_request_model="scripted")
    assert pick(scrape, "gen_ai_client_operation_duration_seconds_count", **chat, error_type="") == 3.0
    assert pick(scrape, "gen_ai_client_operation_duration_seconds_count", **chat, error_type="ModelFailure") == 1.0
    assert pick(scrape, "gen_ai_client_token_usage_count", **chat, gen_ai_token_type="output") == 3.0


def test_every_metric_has_a_help_text_and_one_registry_per_server():
    """Names and help texts live in one table; two servers in one process count apart."""
    assert all(help_text for _, help_text, _ in METRICS.values())
    one, two = ServerMetrics("sqlite"), ServerMetrics("sqlite")
    one.refused("THREAD_BUSY")
    assert b'awaken_refusals_total{code="THREAD_BUSY"} 1.0' in one.render()
    assert b"THREAD_BUSY" not in two.render()


async def test_with_auth_only_the_listed_roles_read_metrics(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("METRICS_TEST_ADMIN", "a" * 32)
    monkeypatch.setenv("METRICS_TEST_USER", "u" * 32)
    tokens = [{"name": "ops", "env": "METRICS_TEST_ADMIN", "role": "admin", "subject": "ops"},
              {"name": "app", "env": "METRICS_TEST_USER", "role": "user", "subject": "alice"}]
    async with in_process(make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})) as (client, _):
        anonymous = await client.get("/metrics")
        assert anonymous.status_code == 401
        assert anonymous.headers["www-authenticate"] == "Bearer"
        user_answer = await client.get("/metrics", headers=bearer("u" * 32))
        assert user_answer.status_code == 403
        assert user_answer.json()["error"]["code"] == "FORBIDDEN"
        assert (await client.get("/metrics", headers=bearer("a" * 32))).status_code == 200
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens, "metrics_roles": ["admin", "user"]})
    async with in_process(config) as (client, _):
        response = await client.get("/metrics", headers=bearer("u" * 32))
        assert response.status_code == 200
        assert 'awaken_refusals_total{code="UNAUTHENTICATED"}' not in response.text


async def test_a_streaming_run_is_active_with_its_open_stream_and_watcher(tmp_path: Path):
    """While a run streams (held at a gate after its first delta): one active run, one open stream, one
    watcher; after it ends, none."""
    async with live_server(make_config(tmp_path)) as server, server.client() as client:
        first_delta = trio.Event()

        async def stream() -> None:
            body = agui_body("t-held", "r-held", [user("u1", held("metrics-g1", words=3))])
            async with client.stream("POST", "/v1/ag-ui", json=body) as response:
                async for chunk in response.aiter_bytes():
                    if b"TEXT_MESSAGE_CONTENT" in chunk:
                        first_delta.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(stream)
            await first_delta.wait()
            during = samples((await client.get("/metrics")).text)
            await release(server, "metrics-g1")
        after = samples((await client.get("/metrics")).text)
    assert [pick(during, name) for name in LIVE] == [1.0, 1.0, 1.0]
    assert [pick(after, name) for name in LIVE] == [0.0, 0.0, 0.0]


LIVE = ("awaken_runs_active", "awaken_streams_open", "awaken_stream_watchers")


async def test_a_websocket_is_counted_once_and_each_refused_message_by_its_code(tmp_path: Path, caplog):
    """A socket is one request (101 once accepted) and one stream while open; on a socket each refused
    message counts (it has no HTTP status per request). The transport still writes to hypercorn's stream
    itself (the observer's ``send`` names what it wraps)."""
    async with live_server(make_config(tmp_path)) as server:
        async with open_websocket_url(ws_url(server.base_url, "/v1/ai-sdk/ws")) as ws:
            for thread_id in ("w1", "w2"):  # a body with no messages: NO_NEW_INPUT, twice
                await ws.send_message(orjson.dumps({"id": thread_id, "messages": []}).decode())
                with trio.fail_after(10):
                    while await ws.get_message() != "[DONE]":
                        pass
            async with server.client() as client:
                during = samples((await client.get("/metrics")).text)
        async with server.client() as client:
            with trio.fail_after(10):  # the server learns of the close after the client sent it
                while pick(after := samples((await client.get("/metrics")).text), "awaken_streams_open"):
                    await trio.sleep(0.01)
    assert pick(during, "awaken_streams_open") == 1.0
    assert named(during, "awaken_refusals_total") == {(("code", "NO_NEW_INPUT"),): 2.0}
    assert pick(after, "awaken_http_requests_total", method="WEBSOCKET", route="/v1/ai-sdk/ws", status="101") == 1.0
    assert "not served by hypercorn's WSStream" not in caplog.text
