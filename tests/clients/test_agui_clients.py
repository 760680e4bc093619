"""The real AG-UI clients against a live server: ``@ag-ui/client`` 0.0.59 (what CopilotKit pins) and 1.x.

Each test runs ``tests/node/agui_client.mjs`` (a real ``HttpAgent``) for one scenario and checks what
the client saw: every stream passes the client's schema checks and sequence verification with no
warning and no "Agent execution failed", and the client's ``agent.messages`` / ``agent.state`` agree
with what the server committed.

CONTRACT §3 ("Both client generations must accept every stream") and ``reference/agui.md`` §4/§5/§9.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
import trio

from awaken.engine.state import RunStatus
from tests.builders import default_config_data, held, live_server, make_config, record_dedup, squeeze

NODE_DIR = Path(__file__).resolve().parents[1] / "node"
SCRIPT = NODE_DIR / "agui_client.mjs"
PACKAGES = ["agui-client-0059", "agui-client-1"]

pytestmark = [
    pytest.mark.skipif(shutil.which("node") is None, reason="node is not installed"),
    pytest.mark.skipif(not (NODE_DIR / "node_modules" / "agui-client-1").is_dir(),
                       reason="run `npm ci` in tests/node first"),
    pytest.mark.parametrize("package", PACKAGES),
    pytest.mark.slow,  # real client libraries in Node
    pytest.mark.timeout(120),
]

TEXT_RUN = ["RUN_STARTED", "STEP_STARTED", "TEXT_MESSAGE_START", "TEXT_MESSAGE_CONTENT", "TEXT_MESSAGE_END",
            "STEP_FINISHED", "RUN_FINISHED"]
WAITING_RUN = ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_END",
               "STEP_FINISHED", "RUN_FINISHED"]
#: a 1.x client's run waiting at a permission gate ends as an interrupt, after the snapshots
INTERRUPTED_RUN = [*WAITING_RUN[:-1], "STATE_SNAPSHOT", "MESSAGES_SNAPSHOT", "RUN_FINISHED"]


def gate_end(package: str) -> list[str]:
    """How a run waiting at a gate ends for ``package``: a plain RUN_FINISHED, or (1.x) an interrupt."""
    return ["RUN_FINISHED"] if package == "agui-client-0059" else ["STATE_SNAPSHOT", "MESSAGES_SNAPSHOT",
                                                                    "RUN_FINISHED"]


async def drive(base_url: str, package: str, scenario: str, thread_id: str) -> dict[str, Any]:
    """Run one scenario in Node; fail on any client-side failure, warning or log line."""
    result = await trio.run_process(["node", str(SCRIPT), package, base_url, scenario, thread_id],
                                    capture_stdout=True, capture_stderr=True, check=False, cwd=NODE_DIR)
    assert result.returncode == 0, result.stderr.decode()
    out = json.loads(result.stdout)
    assert out["logs"] == [], out["logs"]
    for run in out["runs"]:
        assert "failed" not in run, run["failed"]
    assert len({m["id"] for m in out["messages"]}) == len(out["messages"]), "duplicate message ids"
    return out


def run_types(out: dict[str, Any]) -> list[list[str]]:
    return [squeeze(run["types"]) for run in out["runs"]]


def answers(out: dict[str, Any]) -> list[str]:
    return [m["content"] for m in out["messages"] if m["role"] == "assistant" and "content" in m]


async def paged_history(client, thread_id: str, limit: int = 2, branch: int | None = None) -> list[dict[str, Any]]:
    """The whole committed history (the active path, or the path of ``branch``), read page by page with
    the returned cursors."""
    items: list[dict[str, Any]] = []
    cursor = None
    while True:
        params = {"limit": limit, **({"cursor": cursor} if cursor else {}),
                  **({"branch": branch} if branch is not None else {})}
        page = (await client.get(f"/v1/ag-ui/threads/{thread_id}/messages", params=params)).json()
        if not page["items"]:
            assert page["cursor"] == cursor
            return items
        items += page["items"]
        cursor = page["cursor"]


def without(messages: list[dict[str, Any]], ids: set[str]) -> list[dict[str, Any]]:
    return [m for m in messages if m["id"] not in ids]


async def test_multi_turn_text_conversation(package, server, client):
    """CONTRACT §3: one HttpAgent, three runs on one thread; it resends the whole history each time and
    the server drops what it already holds; the paged history equals agent.messages."""
    thread = f"multiturn-{package}"
    out = await drive(server.base_url, package, "multiturn", thread)
    assert run_types(out) == [TEXT_RUN] * 3
    assert all(run["errors"] == [] for run in out["runs"])
    assert [m["role"] for m in out["messages"]] == ["user", "assistant"] * 3
    assert answers(out) == ['You said: "hello".', 'You said: "second turn".', 'You said: "third turn".']
    assert await paged_history(client, thread) == out["messages"]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED] * 3


async def test_regenerate_and_edit_through_forwarded_props_branch_the_thread(package, server, client):
    """Issue 33 (docs/branches.md): one HttpAgent, two turns; then it regenerates the last answer (the
    history up to the last user message again, a new run id, ``forwardedProps: {awaken: {regenerate:
    true}}``) and edits the first message (its id with new content, ``{awaken: {edit: true}}``). Each
    continues on a new branch: the history route shows the active path, which is what the client holds,
    and every earlier path stays readable with ``?branch=N``."""
    thread = f"branches-{package}"
    out = await drive(server.base_url, package, "branches", thread)
    assert run_types(out) == [TEXT_RUN] * 4
    assert all(run["errors"] == [] for run in out["runs"])
    _, second, regenerated, edited = (run["after"] for run in out["runs"])
    assert [m["content"] for m in second] == ["first", 'You said: "first".', "second", 'You said: "second".']
    assert regenerated[:3] == second[:3]
    assert regenerated[3]["content"] == 'You said: "second".' and regenerated[3]["id"] != second[3]["id"]
    assert [(m["id"], m["content"]) for m in edited] == [(second[0]["id"], "first, edited"),
                                                         (edited[1]["id"], 'You said: "first, edited".')]
    assert edited[1]["id"] not in {m["id"] for m in second + regenerated}
    assert await paged_history(client, thread) == out["messages"] == edited
    assert await paged_history(client, thread, branch=0) == second
    assert await paged_history(client, thread, branch=1) == regenerated
    assert await paged_history(client, thread, branch=2) == edited
    listing = (await client.get(f"/v1/threads/{thread}/branches")).json()
    assert listing["activeBranch"] == 2
    assert [(b["branch"], b["parent"], b["forkSeq"], b["forkMessageId"], b["reason"]) for b in listing["items"]] == [
        (0, None, 0, None, "root"), (1, 0, 3, second[2]["id"], "regenerate"), (2, 0, 0, None, "edit")]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [(r.status, r.branch) for r in runs] == [(RunStatus.COMPLETED, 0)] * 2 + [(RunStatus.COMPLETED, 1),
                                                                                     (RunStatus.COMPLETED, 2)]


async def test_a_long_history_resent_every_turn_is_parsed_only_past_what_the_server_parsed_before(
        package, server, client, monkeypatch):
    """Issue 18: HttpAgent resends the whole history each turn, as JSON.stringify writes it. From the
    second turn the bodies are long enough for the replay memo, so turns 3 to 5 each start with the
    very bytes of the turn before: the server splits them there and parses only the new messages (the
    memo counts 3 splits), and what the client and the history show is the same as ever. Its dedup
    reads nothing from the store: the thread's hot entry answers it, every replayed id committed and
    only the new message not (``awaken.ledger.hotcache``)."""
    thread = f"long-history-{package}"
    splits = server.memo("ag-ui").hits
    dedup = record_dedup(monkeypatch)
    out = await drive(server.base_url, package, "long_history", thread)
    assert run_types(out) == [TEXT_RUN] * 5
    assert all(run["errors"] == [] for run in out["runs"])
    assert [m["role"] for m in out["messages"]] == ["user", "assistant"] * 5
    assert server.memo("ag-ui").hits - splits == 3
    assert dedup[-3:] == [(True, 1)] * 3
    assert await paged_history(client, thread, limit=4) == out["messages"]
    assert [r.status for r in await server.ctx.ledger.list_runs(thread)] == [RunStatus.COMPLETED] * 5


async def test_reasoning(package, server, client):
    """reference/agui.md §2.4: REASONING_* events build a reasoning message both clients keep."""
    thread = f"reasoning-{package}"
    out = await drive(server.base_url, package, "reasoning", thread)
    assert run_types(out) == [["RUN_STARTED", "STEP_STARTED", "REASONING_START", "REASONING_MESSAGE_START",
                               "REASONING_MESSAGE_CONTENT", "REASONING_MESSAGE_END", "REASONING_END",
                               *TEXT_RUN[2:]]]
    assert [(m["role"], m["content"]) for m in out["messages"][1:]] == [
        ("reasoning", "weighing the options"), ("assistant", 'You said: "which one?".')]
    assert await paged_history(client, thread) == out["messages"]


async def test_server_tool(package, server, client):
    """CONTRACT §3: server tool calls (two in one step) and their TOOL_CALL_RESULTs; the answer quotes them."""
    thread = f"server-tool-{package}"
    out = await drive(server.base_url, package, "server_tool", thread)
    first, second = run_types(out)
    assert first == ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_START",
                     "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_END", "TOOL_CALL_RESULT", "TOOL_CALL_RESULT",
                     "STEP_FINISHED", *TEXT_RUN[1:]]
    assert second == TEXT_RUN
    tools = [m for m in out["messages"] if m["role"] == "tool"]
    assert [t["content"] for t in tools] == ['{"result":42}', '{"result":32}']
    assert answers(out) == ['Here is what the tools said: calculator returned {"result":42}; '
                            'calculator returned {"result":32}.', 'You said: "thanks".']
    assert await paged_history(client, thread) == out["messages"]


async def test_state(package, server, client):
    """reference/agui.md §9.8: STATE_SNAPSHOT then STATE_DELTA; HttpAgent sends its state back on the
    next run and the server accepts it (it equals the committed state); agent.state = the ledger's."""
    thread = f"state-{package}"
    out = await drive(server.base_url, package, "state", thread)
    first, second, third = (run["types"] for run in out["runs"])
    assert "STATE_SNAPSHOT" in first and "STATE_DELTA" not in first
    assert second[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and "STATE_DELTA" not in second
    assert third[:2] == ["RUN_STARTED", "STATE_SNAPSHOT"] and "STATE_DELTA" in third
    assert all(run["errors"] == [] for run in out["runs"])
    committed = (await server.ctx.ledger.get_thread(thread)).state
    assert out["state"] == committed == {"color": "blue", "size": {"w": 2, "h": [1, 2]}}
    assert await paged_history(client, thread) == out["messages"]


async def test_approve_on_guarded(package, server, client):
    """CONTRACT §3: two calls wait at their gates (RUN_FINISHED); the app adds tool messages without
    ``error`` and runs again: the same run continues, the tools run, and the next turn still works."""
    thread = f"approve-{package}"
    out = await drive(server.base_url, package, "approve", thread)
    waiting, resumed, after = run_types(out)
    assert waiting == ["RUN_STARTED", "STEP_STARTED", "TOOL_CALL_START", "TOOL_CALL_ARGS", "TOOL_CALL_START",
                       "TOOL_CALL_ARGS", "TOOL_CALL_END", "TOOL_CALL_END", "STEP_FINISHED", *gate_end(package)]
    call_ids = [c["id"] for c in out["messages"][1]["toolCalls"]]
    finished = out["runs"][0]["finished"][0]
    # 1.x learns the gates as interrupts (and answers with resume[]); 0.0.59 gets no outcome at all
    if package == "agui-client-1":
        assert finished["outcome"] == "interrupt"
        assert [(i["id"], i["reason"], i["toolCallId"]) for i in finished["interrupts"]] == [
            (f"int_{c}", "tool_call", c) for c in call_ids]
    else:
        assert (finished["outcome"], finished["interrupts"], finished["pendingToolCallIds"]) == (
            "success", None, None)
    assert resumed == ["RUN_STARTED", "TOOL_CALL_RESULT", "TOOL_CALL_RESULT", *TEXT_RUN[1:]]
    assert after == TEXT_RUN
    assert answers(out)[0].startswith('Here is what the tools said: calculator returned {"result":1024}; '
                                      'current_time returned {"iso":"')
    runs = await server.ctx.ledger.list_runs(thread)
    assert [(r.status, r.steps) for r in runs] == [(RunStatus.COMPLETED, 2), (RunStatus.COMPLETED, 1)]
    decisions = {m["id"] for m in out["messages"] if m["role"] == "tool" and m["id"].startswith("tool-")}
    assert len(decisions) == (2 if package == "agui-client-0059" else 0)  # 1.x decided through resume[]
    assert await paged_history(client, thread) == without(out["messages"], decisions)


async def test_deny_on_guarded(package, server, client):
    """CONTRACT §3: a tool message with ``error`` denies the call; the model sees the denial."""
    thread = f"deny-{package}"
    out = await drive(server.base_url, package, "deny", thread)
    waiting, resumed, after = run_types(out)
    assert waiting == [*WAITING_RUN[:-1], *gate_end(package)]
    assert resumed == ["RUN_STARTED", "TOOL_CALL_RESULT", *TEXT_RUN[1:]]
    assert after == TEXT_RUN
    assert answers(out)[0] == ("Here is what the tools said: calculator failed: denied: the user did not allow "
                               "this call: the user said no.")
    items = await paged_history(client, thread)
    denied = next(m for m in items if m["role"] == "tool")
    assert denied["error"] == denied["content"]
    decision = {m["id"] for m in out["messages"] if m["role"] == "tool" and m["id"].startswith("tool-")}
    assert [m["id"] for m in items] == [m["id"] for m in without(out["messages"], decision)]


async def test_client_tool_on_frontend(package, server, client):
    """CONTRACT §3: the client's tool message is the result and continues the same run (one run record);
    the server does not echo it back, so agent.messages holds it once."""
    thread = f"client-tool-{package}"
    out = await drive(server.base_url, package, "client_tool", thread)
    waiting, resumed, after = run_types(out)
    assert waiting == WAITING_RUN
    assert resumed == TEXT_RUN and after == TEXT_RUN
    assert answers(out)[:1] == ["Here is what the tools said: ask_user returned Ada."]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.COMPLETED, RunStatus.COMPLETED]
    assert await paged_history(client, thread) == out["messages"]


async def test_mismatched_tool_call_id(package, server):
    """CONTRACT §3: a result for a call that is not pending fails closed: RUN_ERROR TOOL_CALL_NOT_PENDING
    (1.x: a resume naming an unknown interrupt, INTERRUPT_UNKNOWN) reaches onRunErrorEvent (runAgent
    resolves); the run keeps waiting."""
    thread = f"mismatch-{package}"
    out = await drive(server.base_url, package, "mismatch", thread)
    assert run_types(out) == [[*WAITING_RUN[:-1], *gate_end(package)], ["RUN_ERROR"]]
    (error,) = out["runs"][1]["errors"]
    code = "TOOL_CALL_NOT_PENDING" if package == "agui-client-0059" else "INTERRUPT_UNKNOWN"
    assert error["code"] == code and "call_not_pending" in error["message"]
    runs = await server.ctx.ledger.list_runs(thread)
    assert [r.status for r in runs] == [RunStatus.WAITING]


async def test_resume_after_restart(package, config):
    """CONTRACT §5: suspend in one server process; restart; a new HttpAgent rebuilt from the committed
    history answers the call and the same run finishes."""
    thread = f"restart-{package}"
    async with live_server(config) as srv:
        first = await drive(srv.base_url, package, "suspend", thread)
        assert run_types(first) == [[*WAITING_RUN[:-1], *gate_end(package)]]
    async with live_server(config) as srv, srv.client() as client:
        out = await drive(srv.base_url, package, "resume", thread)
        assert run_types(out) == [["RUN_STARTED", "TOOL_CALL_RESULT", *TEXT_RUN[1:]]]
        assert answers(out) == ['Here is what the tools said: calculator returned {"result":10}.']
        runs = await srv.ctx.ledger.list_runs(thread)
        assert [(r.status, r.steps) for r in runs] == [(RunStatus.COMPLETED, 2)]
        decision = {m["id"] for m in out["messages"] if m["id"].startswith("tool-")}
        assert await paged_history(client, thread) == without(out["messages"], decision)


async def test_a_tools_progress_reaches_on_custom_event(package, tmp_path):
    """docs/tools.md: ``ctx.progress`` is a ``CUSTOM`` event ``tool_progress`` between the call's end and its
    result, which both client generations pass to ``onCustomEvent`` without a warning."""
    config = make_config(tmp_path, tools={"plugins": ["tests.plugins.toolkit:count_up"]},
                         agents={"assistant": {"tools": ["count_up"]}})
    async with live_server(config) as server:
        done = await trio.run_process(
            ["node", str(SCRIPT), package, server.base_url, "say", f"progress-{package}",
             json.dumps({"text": '/call count_up {"to": 2}'})],
            capture_stdout=True, capture_stderr=True, check=False, cwd=NODE_DIR)
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    assert out["logs"] == [] and "failed" not in out["runs"][0]
    (run,) = out["runs"]
    call_id = next(c["id"] for m in out["messages"] if m["role"] == "assistant" for c in m.get("toolCalls", []))
    assert run["custom"] == [{"name": "tool_progress", "value": {"toolCallId": call_id, "toolName": "count_up",
                                                                  "data": {"counted": n}}} for n in (1, 2)]
    types = squeeze(run["types"])
    assert types[types.index("TOOL_CALL_END") + 1:types.index("TOOL_CALL_RESULT")] == ["CUSTOM", "CUSTOM"]


async def test_new_input_interrupts_a_streaming_turn_and_a_reload_shows_its_words(package, tmp_path):
    """docs/clients.md, "Interrupted answers and new input": with ``on_new_input = "interrupt"`` a second
    ``HttpAgent`` saying something while the first one's turn streams stops that turn (its ``runAgent``
    resolves; ``onRunErrorEvent`` says ``STOPPED``, superseded) and runs; an agent rebuilt from the
    history route holds the words the stopped turn had shown, with ``metadata.incomplete``."""
    config = make_config(tmp_path, agents={**default_config_data()["agents"],
                                           "impatient": {"model": "scripted", "on_new_input": "interrupt"}})
    thread = f"interrupt-{package}"
    async with live_server(config) as server:
        done = await trio.run_process(
            ["node", str(SCRIPT), package, server.base_url, "interrupt", thread,
             json.dumps({"path": "/v1/ag-ui/agents/impatient", "text": held(f"never-{package}", 3)})],
            capture_stdout=True, capture_stderr=True, check=False, cwd=NODE_DIR)
    assert done.returncode == 0, done.stderr.decode()
    out = json.loads(done.stdout)
    assert out["logs"] == [] and all("failed" not in run for run in out["runs"]), out
    first, second = sorted(out["runs"], key=lambda run: not run["errors"])  # the stopped turn, the new one
    assert first["errors"] == [{"code": "STOPPED", "message": "superseded by new input"}]
    assert squeeze(second["types"]) == TEXT_RUN and second["errors"] == []
    assert [(m["role"], m.get("content"), m.get("metadata")) for m in out["messages"]] == [
        ("user", held(f"never-{package}", 3), None),
        ("assistant", "alpha ", {"incomplete": "superseded"}),
        ("user", "next", None),
        ("assistant", 'You said: "next".', None)]
