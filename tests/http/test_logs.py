"""Structured logs (awaken/telemetry/logs.py): with ``[server] log_format = "json"`` one JSON line per request and
one per run outcome, with the thread, run, agent, principal subject and trace id, and never a token, a password
or message content; the plain format writes neither."""

from __future__ import annotations

import logging
from pathlib import Path

import orjson
import pytest
from opentelemetry.sdk.trace import TracerProvider

from awaken.telemetry import logs
from tests.builders import agui_body, bearer, in_process, make_config, post_agui, user

USER_KEY = "u" * 32
SECRET_TEXT = "the launch code is 4242"


@pytest.fixture
def json_lines(monkeypatch, caplog):
    """The process writes JSON lines; yields a function returning the ``awaken.events`` lines so far,
    each as the JSON the formatter wrote."""
    monkeypatch.setattr(logs, "_json", True)
    caplog.set_level(logging.INFO, logger="awaken.events")
    formatter = logs.JsonFormatter()
    return lambda: [orjson.loads(formatter.format(r)) for r in caplog.records if r.name == "awaken.events"]


def config(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("LOGS_TEST_USER", USER_KEY)
    tokens = [{"name": "app", "env": "LOGS_TEST_USER", "role": "user", "subject": "alice"}]
    return make_config(tmp_path, auth={"mode": "tokens", "tokens": tokens})


async def test_json_lines_for_a_request_and_a_run_outcome(tmp_path, monkeypatch, json_lines):
    async with in_process(config(tmp_path, monkeypatch)) as (client, _):
        response = await client.post("/v1/ag-ui", json=agui_body("t-log", "r-log", [user("u1", SECRET_TEXT)]),
                                     headers=bearer(USER_KEY))
        assert response.status_code == 200
        assert (await client.get("/v1/threads/t-log", headers={"authorization": "Bearer wrong-key"})).status_code == 401
    lines = json_lines()
    run = [line for line in lines if line["event"] == "run"]
    assert len(run) == 1
    (run,) = run
    assert {k: run[k] for k in ("thread_id", "run_id", "agent", "outcome", "subject", "input_tokens",
                                "output_tokens", "level", "logger")} == {
        "thread_id": "t-log", "run_id": "r-log", "agent": "assistant", "outcome": "completed", "subject": "alice",
        "input_tokens": 5, "output_tokens": 7, "level": "info", "logger": "awaken.events"}
    assert run["duration_ms"] >= 0 and "trace_id" not in run  # no span is current: no trace id
    requests = [(r["method"], r["route"], r["status"], r.get("subject")) for r in lines if r["event"] == "request"]
    assert requests == [("POST", "/v1/ag-ui", 200, "alice"), ("GET", "/v1/threads/<path:thread_id>", 401, None)]
    text = "\n".join(orjson.dumps(line).decode() for line in lines)
    assert USER_KEY not in text and "wrong-key" not in text  # never a token
    assert "launch code" not in text and "4242" not in text  # never message content


async def test_the_trace_id_is_the_current_spans(tmp_path, monkeypatch, json_lines):
    """With OpenTelemetry and a span current, a line carries its trace id (32 hex digits)."""
    tracer = TracerProvider().get_tracer("test")
    assert logs.trace_id() is None
    async with in_process(config(tmp_path, monkeypatch)) as (client, _):
        with tracer.start_as_current_span("client") as span:
            assert logs.trace_id() == format(span.get_span_context().trace_id, "032x")
            assert (await client.get("/healthz")).status_code == 200
    (line,) = [line for line in json_lines() if line["event"] == "request"]
    assert line["route"] == "/healthz" and line["trace_id"] == format(span.get_span_context().trace_id, "032x")


async def test_the_plain_format_writes_no_request_or_run_lines(tmp_path, monkeypatch, caplog):
    caplog.set_level(logging.INFO, logger="awaken.events")
    assert not logs.json_enabled()
    async with in_process(make_config(tmp_path)) as (client, _):
        await post_agui(client, agui_body("t-plain", "r-plain", [user("u1", "hi")]))
    assert [r for r in caplog.records if r.name == "awaken.events"] == []


def test_the_json_formatter_writes_one_object_per_line_with_the_given_fields():
    record = logging.LogRecord("awaken.engine", logging.ERROR, __file__, 1, "run %s failed", ("r1",), None)
    record.run_id = "r1"
    record.created, record.msecs = 0.0, 5.0
    line = logs.JsonFormatter().format(record)
    assert "\n" not in line
    assert orjson.loads(line) == {"time": "1970-01-01T00:00:00.005Z", "level": "error", "logger": "awaken.engine",
                                  "message": "run r1 failed", "run_id": "r1"}


def test_configure_sets_the_root_handlers_format():
    root = logging.getLogger()
    saved = [(h, h.formatter) for h in root.handlers]
    try:
        logs.configure("json")
        assert logs.json_enabled() and all(isinstance(h.formatter, logs.JsonFormatter) for h in root.handlers)
        logs.configure("plain")
        assert not logs.json_enabled() and not any(isinstance(h.formatter, logs.JsonFormatter) for h in root.handlers)
        with pytest.raises(ValueError, match="log_format must be one of plain, json, not 'xml'"):
            logs.configure("xml")
    finally:
        for handler, formatter in saved:
            handler.setFormatter(formatter)
