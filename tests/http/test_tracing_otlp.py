"""Traces (issue 30 item 1) against a real OTLP/HTTP receiver started here: ``POST /v1/traces`` bodies
decoded with the official protobuf definitions (``opentelemetry-proto``), through both wires, a gate,
a client tool, an MCP tool and a model failure; the names, the parentage and the attributes exactly.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
import trio
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import ExportTraceServiceRequest

from awaken.telemetry import tracing
from tests.builders import (
    agui_body,
    aisdk_user,
    call,
    call_ids,
    default_config_data,
    free_port,
    live_server,
    make_config,
    parse_sse,
    post_agui,
    user,
)
from tests.engine.test_mcp import http_demo
from tests.fake_openai import fake_openai_server, text_reply

TRACE_ID = "0af7651916cd43dd8448eb211c80319c"
PARENT_ID = "b7ad6b7169203331"


class Receiver:
    """An OTLP/HTTP traces receiver in a thread: every span it was sent, decoded."""

    def __init__(self) -> None:
        self.spans: list[dict[str, Any]] = []
        self.paths: list[str] = []
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - the stdlib's name
                body = self.rfile.read(int(self.headers["content-length"]))
                receiver.paths.append(self.path)
                request = ExportTraceServiceRequest()
                request.ParseFromString(body)
                for resource in request.resource_spans:
                    service = {a.key: value(a.value) for a in resource.resource.attributes}["service.name"]
                    for scope in resource.scope_spans:
                        receiver.spans.extend(decoded(s, service) for s in scope.spans)
                self.send_response(200)
                self.send_header("content-type", "application/x-protobuf")
                self.send_header("content-length", "0")
                self.end_headers()

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    async def trace(self, run_id: str, executions: int = 1) -> list[dict[str, Any]]:
        """The spans of the run's trace(s), once the receiver holds ``executions`` root spans of it."""
        while True:
            await trio.to_thread.run_sync(tracing.STATE.provider.force_flush)
            roots = [s for s in self.spans if s["attributes"].get("awaken.run.id") == run_id]
            if len(roots) >= executions:
                traces = {r["trace_id"] for r in roots}
                return [s for s in self.spans if s["trace_id"] in traces]
            await trio.sleep(0.01)


def value(any_value: Any) -> Any:
    kind = any_value.WhichOneof("value")
    if kind == "array_value":
        return tuple(value(v) for v in any_value.array_value.values)
    return getattr(any_value, kind)


def decoded(span: Any, service: str) -> dict[str, Any]:
    return {"name": span.name, "trace_id": span.trace_id.hex(), "span_id": span.span_id.hex(),
            "parent": span.parent_span_id.hex() or None, "kind": span.kind, "status": span.status.code,
            "attributes": {a.key: value(a.value) for a in span.attributes}, "service": service,
            "start": span.start_time_unix_nano, "end": span.end_time_unix_nano}


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    yield r
    r.close()


@pytest.fixture
def clean_env(monkeypatch):
    for name in ("OTEL_EXPORTER_OTLP_ENDPOINT", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_TRACES_EXPORTER",
                 "OTEL_SDK_DISABLED", "OTEL_SERVICE_NAME", "OTEL_EXPORTER_OTLP_HEADERS",
                 "OTEL_EXPORTER_OTLP_TRACES_HEADERS", "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT"):
        monkeypatch.delenv(name, raising=False)


def tree(spans: list[dict[str, Any]]) -> list[tuple[str, str | None]]:
    """(name, parent's name) of every span, sorted (the root's parent: the client's, ``remote``); a run's
    first write and its first model call run concurrently, so their order is not the contract."""
    by_id = {s["span_id"]: s for s in spans}
    return sorted((s["name"], by_id[s["parent"]]["name"] if s["parent"] in by_id else s["parent"] and "remote")
                  for s in spans)


def named(spans: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    return [s for s in spans if s["name"] == name]


def one(spans: list[dict[str, Any]], name: str) -> dict[str, Any]:
    (span,) = named(spans, name)
    return span


ERROR, UNSET = 2, 0
INTERNAL, CLIENT = 1, 3


def root_attributes(agent: str, thread: str, run: str, status: str, **extra: Any) -> dict[str, Any]:
    return {"gen_ai.operation.name": "invoke_agent", "gen_ai.agent.id": agent, "gen_ai.agent.name": agent,
            "gen_ai.agent.description": DESCRIPTIONS[agent], "gen_ai.conversation.id": thread,
            "awaken.run.id": run, "awaken.run.status": status, **extra}


DESCRIPTIONS = {
    "assistant": "Answers, and uses the calculator, the clock and the shared state freely.",
    "guarded": "The same tools, each one asking a person for permission first.",
    "frontend": "Asks the user through a tool the browser executes.",
}

CHAT = {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "scripted", "gen_ai.request.model": "scripted"}


def commit(status: str, messages: int) -> dict[str, Any]:
    return {"awaken.commit.status": status, "awaken.commit.messages": messages,
            "awaken.ledger.backend": "SqliteLedger"}


async def test_an_ag_ui_run_with_a_server_tool_is_one_trace_under_the_clients_traceparent(
        tmp_path, receiver, clean_env):
    config = make_config(tmp_path, telemetry={"endpoint": receiver.url, "service_name": "awaken-test"})
    async with live_server(config) as server, server.client() as client:
        body = agui_body("t-tr", "r-tr", [user("u1", call("calculator", expression="6 * 7"))])
        response = await client.post("/v1/ag-ui", json=body,
                                     headers={"traceparent": f"00-{TRACE_ID}-{PARENT_ID}-01"})
        assert response.status_code == 200
        spans = await receiver.trace("r-tr")
    assert receiver.paths[0] == "/v1/traces"
    assert {s["service"] for s in spans} == {"awaken-test"}
    assert {s["trace_id"] for s in spans} == {TRACE_ID}
    assert tree(spans) == sorted([
        ("invoke_agent assistant", "remote"),
        ("awaken.admission", "invoke_agent assistant"),
        ("awaken.step 1", "invoke_agent assistant"),
        ("awaken.commit start", "invoke_agent assistant"),
        ("chat scripted", "awaken.step 1"),
        ("execute_tool calculator", "awaken.step 1"),
        ("awaken.commit running", "awaken.step 1"),
        ("awaken.step 2", "invoke_agent assistant"),
        ("chat scripted", "awaken.step 2"),
        ("awaken.commit completed", "awaken.step 2"),
    ])
    root = one(spans, "invoke_agent assistant")
    assert root["parent"] == PARENT_ID
    assert root["attributes"] == root_attributes("assistant", "t-tr", "r-tr", "completed")
    assert (root["kind"], root["status"]) == (INTERNAL, UNSET)
    first, second = named(spans, "chat scripted")
    assert first["kind"] == CLIENT
    assert first["attributes"] == {**CHAT, "gen_ai.response.finish_reasons": ("tool_calls",),
                                   "gen_ai.usage.input_tokens": first["attributes"]["gen_ai.usage.input_tokens"],
                                   "gen_ai.usage.output_tokens": first["attributes"]["gen_ai.usage.output_tokens"]}
    assert second["attributes"]["gen_ai.response.finish_reasons"] == ("stop",)
    assert second["attributes"]["gen_ai.usage.output_tokens"] > 0
    tool = one(spans, "execute_tool calculator")
    (cid,) = call_ids(parse_sse(response.content))
    assert tool["attributes"] == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator", "gen_ai.tool.call.id": cid,
        "gen_ai.tool.type": "function", "awaken.tool.kind": "server", "awaken.gate.decision": "allow",
        "awaken.gate.decided_by": "policy", "awaken.tool.status": "ok"}
    assert one(spans, "awaken.commit start")["attributes"] == commit("start", 1)
    assert one(spans, "awaken.commit running")["attributes"] == commit("running", 2)
    assert one(spans, "awaken.commit completed")["attributes"] == commit("completed", 1)
    assert one(spans, "awaken.step 2")["attributes"] == {"awaken.step.number": 2}
    # no content unless switched on
    assert not any(k.startswith(("gen_ai.input", "gen_ai.output", "gen_ai.tool.call.arg", "gen_ai.tool.call.res"))
                   for s in spans for k in s["attributes"])


async def test_an_ai_sdk_model_failure_marks_the_model_call_and_the_run_failed(tmp_path, receiver, clean_env):
    config = make_config(tmp_path, telemetry={"endpoint": receiver.url, "capture_content": True})
    async with live_server(config) as server, server.client() as client:
        response = await client.post("/v1/ai-sdk/chat", json={"id": "t-fail", "messages": [aisdk_user("u1", "/fail\nhi")]})
        assert response.status_code == 200
        run_id = (await server.ctx.ledger.list_runs("t-fail"))[0].run_id
        spans = await receiver.trace(run_id)
    assert tree(spans) == sorted([
        ("invoke_agent assistant", None),
        ("awaken.admission", "invoke_agent assistant"),
        ("awaken.step 1", "invoke_agent assistant"),
        ("awaken.commit start", "invoke_agent assistant"),
        ("chat scripted", "awaken.step 1"),
        ("awaken.commit failed", "invoke_agent assistant"),
    ])
    chat = one(spans, "chat scripted")
    assert chat["status"] == ERROR
    assert chat["attributes"]["error.type"] == "MODEL_ERROR"
    assert chat["attributes"]["gen_ai.input.messages"] == '[{"role": "user", "parts": [{"type": "text", "content": "/fail\\nhi"}]}]'
    step = one(spans, "awaken.step 1")
    assert (step["status"], step["attributes"]["error.type"]) == (ERROR, "MODEL_ERROR")
    root = one(spans, "invoke_agent assistant")
    assert root["status"] == ERROR
    assert root["attributes"] == root_attributes("assistant", "t-fail", run_id, "failed", **{"error.type": "MODEL_ERROR"})


async def test_a_gate_and_its_approval_are_two_executions_with_the_wait_and_the_decision(
        tmp_path, receiver, clean_env):
    config = make_config(tmp_path, telemetry={"endpoint": receiver.url})
    async with live_server(config) as server, server.client() as client:
        first = await client.post("/v1/ag-ui/agents/guarded",
                                  json=agui_body("t-g", "r-g", [user("u1", call("calculator", expression="2 ** 10"))]))
        (cid,) = call_ids(parse_sse(first.content))
        resume = agui_body("t-g", "r-g2", [user("u1", "x"), {"id": "d1", "role": "tool", "toolCallId": cid,
                                                             "content": "approved"}])
        assert (await client.post("/v1/ag-ui/agents/guarded", json=resume)).status_code == 200
        spans = await receiver.trace("r-g", executions=2)
    waited, resumed = sorted(named(spans, "invoke_agent guarded"), key=lambda s: s["start"])
    assert waited["attributes"] == root_attributes("guarded", "t-g", "r-g", "waiting")
    assert resumed["attributes"] == root_attributes("guarded", "t-g", "r-g", "completed", **{"awaken.run.resumed": True})
    second = [s for s in spans if s["trace_id"] == resumed["trace_id"]]
    assert tree(second) == sorted([
        ("invoke_agent guarded", None),
        ("awaken.gate calculator", "invoke_agent guarded"),  # it began when the run started waiting
        ("awaken.admission", "invoke_agent guarded"),
        ("execute_tool calculator", "invoke_agent guarded"),
        ("awaken.commit running", "invoke_agent guarded"),
        ("awaken.step 2", "invoke_agent guarded"),
        ("chat scripted", "awaken.step 2"),
        ("awaken.commit completed", "awaken.step 2"),
    ])
    gate = one(second, "awaken.gate calculator")
    assert gate["attributes"] == {"gen_ai.tool.name": "calculator", "gen_ai.tool.call.id": cid,
                                  "awaken.gate.decision": "approve", "awaken.gate.decided_by": "anonymous"}
    waiting = one(spans, "awaken.commit waiting")
    assert waiting["start"] - 1_000_000 <= gate["start"] <= waiting["end"]  # from the committed waiting (in ms)
    assert one(second, "execute_tool calculator")["attributes"] == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "calculator", "gen_ai.tool.call.id": cid,
        "gen_ai.tool.type": "function", "awaken.tool.kind": "server", "awaken.gate.decision": "approve",
        "awaken.gate.decided_by": "anonymous", "awaken.tool.status": "ok"}


async def test_a_client_tool_is_the_clients_execution_from_the_wait_to_its_answer(tmp_path, receiver, clean_env):
    config = make_config(tmp_path, telemetry={"endpoint": receiver.url})
    async with live_server(config) as server, server.client() as client:
        first = await client.post("/v1/ag-ui/agents/frontend",
                                  json=agui_body("t-c", "r-c", [user("u1", call("ask_user", question="Name?"))]))
        (cid,) = call_ids(parse_sse(first.content))
        answer = agui_body("t-c", "r-c2", [{"id": "a1", "role": "tool", "toolCallId": cid, "content": "Ada"}])
        assert (await client.post("/v1/ag-ui/agents/frontend", json=answer)).status_code == 200
        spans = await receiver.trace("r-c", executions=2)
    tool = one(spans, "execute_tool ask_user")
    assert tool["attributes"] == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "ask_user", "gen_ai.tool.call.id": cid,
        "gen_ai.tool.type": "function", "awaken.tool.kind": "client", "awaken.tool.status": "ok"}
    waiting = one(spans, "awaken.commit waiting")
    assert waiting["start"] - 1_000_000 <= tool["start"] <= waiting["end"]  # from the committed waiting (in ms)
    resumed = max(named(spans, "invoke_agent frontend"), key=lambda s: s["start"])
    assert tool["parent"] == resumed["span_id"]


async def test_the_timeline_is_kept_without_a_collector(tmp_path, clean_env):
    async with live_server(make_config(tmp_path)) as server, server.client() as client:
        assert not tracing.enabled()
        body = agui_body("t-tl", "r-tl", [user("u1", call("calculator", expression="1 + 1"))])
        assert (await client.post("/v1/ag-ui", json=body)).status_code == 200
        detail = (await client.get("/v1/threads/t-tl")).json()
    timeline = detail["runs"][0]["timeline"]
    spans = timeline["spans"]
    by_id = {s["id"]: s for s in spans}
    assert sorted((s["kind"], s["name"], by_id[s["parentId"]]["name"] if s["parentId"] else None) for s in spans) == sorted([
        ("run", "invoke_agent assistant", None),
        ("admission", "awaken.admission", "invoke_agent assistant"),
        ("step", "awaken.step 1", "invoke_agent assistant"),
        ("model", "chat scripted", "awaken.step 1"),
        ("commit", "awaken.commit start", "invoke_agent assistant"),
        ("tool", "execute_tool calculator", "awaken.step 1"),
        ("commit", "awaken.commit running", "awaken.step 1"),
        ("step", "awaken.step 2", "invoke_agent assistant"),
        ("model", "chat scripted", "awaken.step 2"),
        ("commit", "awaken.commit completed", "awaken.step 2"),
    ])
    assert timeline["dropped"] == 0
    assert all(s["durationMs"] >= 0 and abs(s["durationMs"] - (s["end"] - s["start"])) < 0.01 for s in spans)
    assert spans[0]["attributes"] == {"status": "completed"}
    chat = next(s for s in spans if s["kind"] == "model")
    assert chat["attributes"] == {"model": "scripted", "provider": "scripted", "finishReasons": ["tool_calls"],
                                  "inputTokens": chat["attributes"]["inputTokens"],
                                  "outputTokens": chat["attributes"]["outputTokens"]}
    tool = next(s for s in spans if s["kind"] == "tool")
    assert tool["attributes"] == {"tool": "calculator", "toolCallId": tool["attributes"]["toolCallId"],
                                  "toolKind": "server", "toolStatus": "ok", "decision": "allow", "decidedBy": "policy"}


MCP_AGENT = {"description": "Uses the demo MCP server's tools.", "model": "scripted", "tools": ["demo__*"]}


async def test_an_mcp_tool_is_an_mcp_tool_span_and_its_http_request_carries_it(tmp_path, receiver, clean_env):
    log = tmp_path / "demo.log"
    async with http_demo(log) as (url, _):
        config = make_config(tmp_path, telemetry={"endpoint": receiver.url},
                             mcp_servers={"demo": {"transport": "http", "url": url, "permission": "allow"}},
                             agents={**default_config_data()["agents"], "mcp": MCP_AGENT})
        async with live_server(config) as server, server.client() as client:
            events = await post_agui(client, agui_body("t-m", "r-m", [user("u1", call("demo__echo", text="hi"))]),
                                     "/v1/ag-ui/agents/mcp")
            spans = await receiver.trace("r-m")
    (cid,) = call_ids(events)
    tool = one(spans, "execute_tool demo__echo")
    assert tool["attributes"] == {
        "gen_ai.operation.name": "execute_tool", "gen_ai.tool.name": "demo__echo", "gen_ai.tool.call.id": cid,
        "gen_ai.tool.type": "function", "awaken.tool.kind": "mcp", "awaken.gate.decision": "allow",
        "awaken.gate.decided_by": "policy", "awaken.tool.status": "ok"}
    assert tool["parent"] == one(spans, "awaken.step 1")["span_id"]
    # the MCP server's HTTP request for the call carried the tool call's span
    (line,) = [line for line in log.read_text().splitlines() if line.startswith("traceparent ")]
    assert line.split(" ")[1].split("-")[:3] == ["00", tool["trace_id"], tool["span_id"]]


async def test_the_openai_compatible_providers_request_carries_the_model_calls_span(
        tmp_path, receiver, clean_env, nursery, monkeypatch):
    monkeypatch.setenv("FAKE_OPENAI_API_KEY", "sk-test")
    async with fake_openai_server(nursery, [text_reply("Hel", "lo", usage=(3, 2))]) as upstream:
        config = make_config(tmp_path, telemetry={"endpoint": receiver.url},
                             providers={"openai": {"base_url": upstream.base_url, "api_key_env": "FAKE_OPENAI_API_KEY"}},
                             agents={"assistant": {"model": "openai:fake-model"}}, default_agent="assistant")
        async with live_server(config) as server, server.client() as client:
            await post_agui(client, agui_body("t-o", "r-o", [user("u1", "hi")]))
            spans = await receiver.trace("r-o")
    chat = one(spans, "chat fake-model")
    assert chat["attributes"] == {"gen_ai.operation.name": "chat", "gen_ai.provider.name": "openai",
                                  "gen_ai.request.model": "fake-model", "gen_ai.response.finish_reasons": ("stop",),
                                  "gen_ai.usage.input_tokens": 3, "gen_ai.usage.output_tokens": 2}
    assert upstream.requests[0].headers["traceparent"].split("-")[:3] == ["00", chat["trace_id"], chat["span_id"]]


async def test_a_collector_that_is_down_loses_spans_never_runs(tmp_path, clean_env):
    config = make_config(tmp_path, telemetry={"endpoint": f"http://127.0.0.1:{free_port()}"})
    async with live_server(config) as server, server.client() as client:
        assert tracing.enabled()
        events = await post_agui(client, agui_body("t-down", "r-down", [user("u1", "hi")]))
        assert events[-1]["type"] == "RUN_FINISHED"
        assert (await server.ctx.ledger.list_runs("t-down"))[0].status == "completed"
        # the timeline is kept all the same
        assert (await client.get("/v1/threads/t-down")).json()["runs"][0]["timeline"]["spans"][0]["name"] == \
            "invoke_agent assistant"


# -- the settings: the standard variables over the [telemetry] table -----------------------------------


def test_with_nothing_configured_there_is_no_exporter():
    assert tracing.settings_from({}) == tracing.TraceSettings()


def test_the_table_turns_the_otlp_exporter_on():
    assert tracing.settings_from({}, endpoint="http://collector:4318", headers={"X-Key": "k"},
                                 service_name="chat", capture_content=True) == tracing.TraceSettings(
        "otlp", "http://collector:4318/v1/traces", {"x-key": "k"}, "chat", True)


def test_the_standard_variables_come_first():
    environ = {"OTEL_EXPORTER_OTLP_ENDPOINT": "http://env:4318/", "OTEL_SERVICE_NAME": "from-env",
               "OTEL_EXPORTER_OTLP_HEADERS": "api-key=a%20b,other=c",
               "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT": "true"}
    assert tracing.settings_from(environ, endpoint="http://file:4318", headers={"x": "y"}, service_name="file") == \
        tracing.TraceSettings("otlp", "http://env:4318/v1/traces", {"api-key": "a b", "other": "c"}, "from-env", True)
    # the signal's own endpoint is used as it is
    assert tracing.settings_from({**environ, "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://t:1/x"}).endpoint == "http://t:1/x"


def test_the_exporter_variable_and_the_sdk_switch():
    assert tracing.settings_from({"OTEL_TRACES_EXPORTER": "otlp"}).endpoint == "http://localhost:4318/v1/traces"
    assert tracing.settings_from({"OTEL_TRACES_EXPORTER": "console"}).exporter == "console"
    assert tracing.settings_from({"OTEL_TRACES_EXPORTER": "none"}, endpoint="http://c:4318").exporter is None
    assert tracing.settings_from({"OTEL_SDK_DISABLED": "true"}, endpoint="http://c:4318").exporter is None


async def test_a_run_id_the_client_reused_keeps_each_runs_timeline_apart(tmp_path, clean_env):
    async with live_server(make_config(tmp_path)) as server, server.client() as client:
        await post_agui(client, agui_body("t-a", "r-same", [user("u1", "hi")]))
        await post_agui(client, agui_body("t-b", "r-same", [user("u1", "hi")]))
        a = (await client.get("/v1/threads/t-a")).json()["runs"][0]
        b = (await client.get("/v1/threads/t-b")).json()["runs"][0]
    assert a["runId"] == "r-same" and b["runId"] != "r-same"  # the ledger gave the second run a fresh id
    assert [s["kind"] for s in a["timeline"]["spans"]].count("run") == 1
    assert [s["kind"] for s in b["timeline"]["spans"]].count("run") == 1
    assert {s["id"] for s in a["timeline"]["spans"]}.isdisjoint(s["id"] for s in b["timeline"]["spans"])
