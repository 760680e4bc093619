"""The admission fast path admits exactly what the plain path admits.

Admission reads a bounded view (``awaken.engine.dedup.admission_view``: the latest messages, the pending calls,
and which of the request's own ids are committed) instead of the whole history (``thread_view``).
For random threads (user input, assistant steps with tool calls, results under the engine's
``tr_`` ids and under a client's own ids, a waiting run's pending calls) and random requests over
both protocols (replayed history, new input, answers to pending, answered and unknown calls), on
every built-in backend and on the out-of-tree plugin (which runs the ``Ledger`` defaults), both views
give the same ``RunRequest`` or the same refusal, the same thread and the same pending calls.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart, ToolCallPart, ToolResultPart, result_id
from awaken.engine.dedup import admission_view
from awaken.engine.state import RunStatus
from awaken.ledger.interface import Commit, Ledger, PendingCall, RunRecord
from awaken.ledger.testkit.harness import opened
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.request import AguiInput, InputMessage, ToolMessage
from awaken.wires.aisdk.adapter import PROTOCOL as AISDK
from awaken.wires.aisdk.request import AiSdkInput, InputUIMessage, ToolPartAnswer
from tests.builders import run_request_outcome
from tests.ledger_harness import BACKENDS
from tests.plugins.json_ledger import JsonFileLedger


def json_ledger(root: Path) -> Ledger:
    return JsonFileLedger(str(root / "ledger.json"))


FACTORIES = {**BACKENDS, "plugin": json_ledger}

#: one thread step: ("user",) | ("call", answered_how) with answered_how in engine/client/pending
steps = st.lists(
    st.one_of(st.just(("user",)), st.tuples(st.just("call"), st.sampled_from(["engine", "client", "open"]))),
    min_size=0, max_size=14,
)


async def build_thread(ledger: Ledger, plan: list[tuple[str, ...]]) -> tuple[list[str], list[str], list[str]]:
    """Commit ``plan`` to thread ``t``; return (committed message ids, call ids, pending call ids)."""
    ids: list[str] = []
    calls: list[str] = []
    open_calls: list[PendingCall] = []
    for n, step in enumerate(plan):
        run_id = f"r{n}"
        if open_calls:  # new input closes a waiting run's calls, as the engine does
            break
        user = Message(f"u{n}", "user", (TextPart(f"q{n}"),))
        await ledger.start_run(RunRecord(run_id, "t", "a", RunStatus.RUNNING, n, n), [user])
        ids.append(user.id)
        if step[0] == "user":
            await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, (
                Message(f"a{n}", "assistant", (TextPart("ok"),), run_id),)))
            ids.append(f"a{n}")
            continue
        call = f"c{n}"
        calls.append(call)
        assistant = Message(f"a{n}", "assistant", (ToolCallPart(call, "tool", "{}"),), run_id)
        if step[1] == "open":
            pending = PendingCall(call, run_id, "t", "tool", "{}", "client", assistant.id)
            await ledger.commit("t", run_id, Commit(RunStatus.WAITING, (assistant,), (pending,)))
            open_calls.append(pending)
            ids.append(assistant.id)
            continue
        result_message = result_id(call) if step[1] == "engine" else f"client{n}"
        result = Message(result_message, "tool", (ToolResultPart(call, "tool", "done"),), run_id)
        await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, (assistant, result)))
        ids += [assistant.id, result_message]
    return ids, calls, [p.tool_call_id for p in open_calls]


def agui_request(draw: st.DrawFn, ids: list[str], calls: list[str]) -> AguiInput:
    """A random AG-UI body: replayed ids, new user messages, tool messages for known and unknown calls."""
    pool = ids + [f"new{i}" for i in range(3)] + [result_id(c) for c in calls]
    chosen = draw(st.lists(st.sampled_from(pool), unique=True, max_size=12)) if pool else []
    messages: list[InputMessage | ToolMessage] = []
    for i in chosen:
        if draw(st.booleans()) and (calls or i.startswith("new")):
            call = draw(st.sampled_from(calls + ["c-unknown"])) if calls else "c-unknown"
            messages.append(ToolMessage(i, call, "answer", draw(st.sampled_from([None, "failed"]))))
        else:
            messages.append(InputMessage(i, "user", (TextPart(f"text {i}"),)))
    return AguiInput("t", "run-new", None, tuple(messages), tuple(m.id for m in messages))


def aisdk_request(draw: st.DrawFn, ids: list[str], calls: list[str]) -> AiSdkInput:
    pool = ids + [f"new{i}" for i in range(3)]
    inputs = tuple(InputUIMessage(i, "user", (TextPart(f"text {i}"),))
                   for i in draw(st.lists(st.sampled_from(pool), unique=True, max_size=10)))
    answered = draw(st.lists(st.sampled_from(calls + ["c-unknown"]), unique=True, max_size=4))
    answers = tuple(
        ToolPartAnswer(c, "tool", draw(st.sampled_from(["output-available", "output-error", "approval-responded"])),
                       output={"v": 1}, approval_id=f"approval_{c}", approved=True)
        for c in answered
    )
    trigger = draw(st.sampled_from(["submit-message", "regenerate-message"]))
    return AiSdkInput("t", None, trigger, inputs, answers, "assistant-1" if answers else None)


@pytest.mark.parametrize("backend", list(FACTORIES))
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, data=st.data(), tail=st.integers(0, 6))
def test_the_fast_path_admits_exactly_what_the_plain_path_admits(backend, plan, data, tail):
    """Same dedup, same refusals, same thread and pending calls: only the history it reads is bounded."""

    async def main() -> None:
        with tempfile.TemporaryDirectory() as root:
            async with opened(FACTORIES[backend], root) as ledger:
                ids, calls, _ = await build_thread(ledger, plan)
                plain = await ledger.thread_view("t")
                for protocol, make in ((AGUI, agui_request), (AISDK, aisdk_request)):
                    for _ in range(3):
                        parsed = data.draw(st.composite(lambda draw, make=make: make(draw, ids, calls))())
                        asks = protocol.asks(parsed)
                        assert asks is not None
                        fast = await admission_view(ledger, "t", asks.message_ids, asks.calls, tail)
                        assert (fast.thread, fast.pending) == (plain.thread, plain.pending)
                        assert fast.messages == (plain.messages[max(0, len(plain.messages) - tail):] if tail else ())
                        assert run_request_outcome(protocol, parsed, fast) == run_request_outcome(protocol, parsed, plain)

    trio.run(main)


@pytest.mark.parametrize("backend", list(FACTORIES))
async def test_a_new_thread_has_an_empty_admission_view(backend, tmp_path):
    async with opened(FACTORIES[backend], tmp_path) as ledger:
        view = await admission_view(ledger, "nobody", {"u1"}, {"c1": None}, 10)
    assert (view.thread, view.messages, view.pending) == (None, (), ())
    assert view.message_ids() == view.answered_calls() == frozenset()


# -- the one-pass AG-UI parser against the plain per-message one ------------------------------------


def plain_agui_messages(raw_messages: list) -> tuple[tuple, tuple[str, ...]]:
    """The plain parser's message loop (every message validated field by field, as before the
    one-pass parser): the reference the fast parser must agree with, refusals included."""
    from awaken.core.jsonbody import reject
    from awaken.wires.agui.request import _HISTORY_ROLES, _parts, _string, _tool_content

    messages: list = []
    ids: list[str] = []
    for i, raw in enumerate(raw_messages):
        where = f"messages[{i}]"
        if not isinstance(raw, dict):
            raise reject(f"{where} must be an object")
        message_id = _string(raw, "id", f"{where}.")
        role = raw.get("role")
        ids.append(message_id)
        if role in ("user", "system", "developer"):
            if role != "user" and not isinstance(raw.get("content"), str):
                raise reject(f"{where}.content must be a string")
            messages.append(InputMessage(message_id, role, _parts(raw.get("content"), where)))
        elif role == "tool":
            tool_call_id = _string(raw, "toolCallId", f"{where}.")
            error = raw.get("error")
            if error is not None and not isinstance(error, str):
                raise reject(f"{where}.error must be a string")
            messages.append(ToolMessage(message_id, tool_call_id, _tool_content(raw.get("content", ""), where),
                                        error))
        elif role in _HISTORY_ROLES:
            continue
        else:
            raise reject(f"{where}.role {role!r} is not a known role")
    return tuple(messages), tuple(ids)


_values = st.one_of(st.none(), st.just(""), st.just("x"), st.integers(0, 2), st.just([]),
                    st.just([{"type": "text", "text": "t"}]), st.just([{"type": "audio"}]), st.just({}))
_raw_message = st.one_of(
    st.fixed_dictionaries({"id": st.sampled_from(["m1", "m2", "m3", "", 7, None]),
                           "role": st.sampled_from(["user", "assistant", "system", "developer", "tool",
                                                    "reasoning", "activity", "robot", None, ["user"]])},
                          optional={"content": _values, "toolCallId": st.sampled_from(["c1", "", 3]),
                                    "error": st.sampled_from([None, "bad", 1])}),
    _values,
)


@settings(max_examples=300, deadline=None)
@given(raw=st.lists(_raw_message, max_size=6))
def test_the_one_pass_agui_parser_admits_and_refuses_exactly_as_the_plain_parser(raw):
    """Same messages and ids, or the same refusal (code and message naming the field)."""
    import orjson

    from awaken.wires.agui.request import parse_run_input

    def fast() -> object:
        try:
            parsed = parse_run_input(orjson.dumps({"threadId": "t", "runId": "r", "messages": raw}),
                                     "application/json")
            return parsed.messages, parsed.message_ids
        except InputRejected as exc:
            return ("refused", exc.code, exc.message)

    def plain() -> object:
        try:
            messages, ids = plain_agui_messages(raw)
        except InputRejected as exc:
            return ("refused", exc.code, exc.message)
        if len(set(ids)) != len(ids):
            return ("refused", "INVALID_REQUEST", "message ids must be unique within a request")
        return messages, ids

    assert fast() == plain()


# -- a replayed history is not decoded: the scanned body against the plain parser --------------------
#
# The semantics (``awaken/wires/agui/request.py``, ``scan_run_input``): a message the thread already holds is
# read for its id, its role and (a tool message) its toolCallId only; its content is the client's copy
# and is neither decoded nor refused. Every other message is validated in full. So the fast path on a
# body equals the plain path (every message decoded, the whole history read) on the same body with the
# committed messages' content left out; a body whose shape is wrong (an id, a role, a toolCallId, a
# repeated id) is refused by both.

_contents = st.one_of(st.just("text"), st.just(""), st.just(7), st.just([{"type": "text", "text": "t"}]),
                      st.just([{"type": "audio"}]), st.just([{"type": "image", "source": {"type": "url"}}]),
                      st.just({"deep": [[[[[[1]]]]]]}))


def _message(draw: st.DrawFn, message_id: object, calls: list[str]) -> object:
    role = draw(st.sampled_from(["user", "system", "developer", "tool", "assistant", "reasoning", "robot"]))
    message: dict = {"id": message_id, "role": role, "content": draw(_contents)}
    if role == "tool":
        message["toolCallId"] = draw(st.sampled_from([*calls, "c-unknown", "", 5]))
        if draw(st.booleans()):
            message["error"] = draw(st.sampled_from(["failed", 3]))
    return message


def without_content(raw: list, committed: frozenset[str]) -> list:
    """The body as the fast path reads it: committed messages (and history roles) without content."""
    out = []
    for m in raw:
        if isinstance(m, dict) and (m.get("id") in committed or m.get("role") in ("assistant", "reasoning")):
            m = {k: v for k, v in m.items() if k in ("id", "role", "toolCallId")}
            m["content"] = ""
        out.append(m)
    return out


@pytest.mark.parametrize("backend", ["sqlite", "files", "postgres"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, data=st.data(), tail=st.integers(0, 6))
def test_a_replayed_history_is_admitted_without_decoding_what_the_thread_holds(backend, plan, data, tail):
    """Random threads and random raw AG-UI bodies (replayed ids with valid or invalid content, new
    messages valid or not, tool messages, repeated ids): the fast path (``scan_run_input``, the hot
    ``admission_view``) admits exactly what the plain path (``parse_run_input`` of the body without the
    committed messages' content, the whole ``thread_view``) admits: the same ``RunRequest`` or the same
    refusal."""
    import orjson

    from awaken.wires.agui.request import parse_run_input, scan_run_input

    async def main() -> None:
        with tempfile.TemporaryDirectory() as root:
            async with opened(FACTORIES[backend], root) as ledger:
                ids, calls, _ = await build_thread(ledger, plan)
                plain_view = await ledger.thread_view("t")
                committed = frozenset(m.id for m in plain_view.messages)
                for _ in range(3):
                    pool = [*ids, "n1", "n2", "n3", result_id("c0")]
                    chosen = data.draw(st.lists(st.sampled_from(pool), max_size=8))
                    raw = [_message(data.draw, i, calls) for i in chosen]
                    if data.draw(st.booleans()):
                        raw.append(data.draw(st.sampled_from([{"id": "", "role": "user"}, [], {"role": "user"}])))
                    body = {"threadId": "t", "runId": "run-new", "messages": raw}

                    def fast(body: dict = body) -> object:
                        try:
                            parsed = scan_run_input(orjson.dumps(body), "application/json")
                        except InputRejected as exc:
                            return ("refused at parse", exc.code)
                        return parsed, AGUI.asks(parsed)

                    def plain(body: dict = body, raw: list = raw) -> object:
                        sanitized = dict(body, messages=without_content(raw, committed))
                        try:
                            parsed = parse_run_input(orjson.dumps(sanitized), "application/json")
                        except InputRejected as exc:
                            return ("refused", exc.code, exc.message)
                        return run_request_outcome(AGUI, parsed, plain_view)

                    scanned = fast()
                    expected = plain()
                    if isinstance(scanned, tuple) and scanned[0] == "refused at parse":
                        # a shape refusal: the plain path refuses the body too
                        assert isinstance(expected, tuple) and expected[0] == "refused"
                        continue
                    parsed, asks = scanned  # type: ignore[misc]
                    view = await admission_view(ledger, "t", asks.message_ids, asks.calls, tail)
                    assert run_request_outcome(AGUI, parsed, view) == expected

    trio.run(main)


_ui_parts = st.lists(st.one_of(
    st.just({"type": "text", "text": "hi"}), st.just({"type": "text", "text": 3}), st.just("not a part"),
    st.just({"type": "file", "mediaType": "image/png", "url": "https://x.test/a.png"}),
    st.just({"type": "step-start"}), st.just({"type": "tool-f", "toolCallId": "c0", "state": "output-available",
                                             "output": 1}),
    st.just({"type": "tool-f", "toolCallId": "", "state": "input-available"})), max_size=3)


def ui_without_parts(raw: list, committed: frozenset[str]) -> list:
    """The body as the fast path reads it: committed messages (but a last assistant one) without parts."""
    out = []
    for k, m in enumerate(raw):
        continued = k == len(raw) - 1 and m.get("role") == "assistant" if isinstance(m, dict) else False
        if isinstance(m, dict) and m.get("id") in committed and not continued and isinstance(m.get("parts"), list):
            m = dict(m, parts=[])
        out.append(m)
    return out


@pytest.mark.parametrize("backend", ["sqlite", "files"])
@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=steps, data=st.data(), tail=st.integers(0, 6))
def test_a_replayed_ui_history_is_admitted_without_decoding_what_the_thread_holds(backend, plan, data, tail):
    """The AI SDK body, likewise: ``scan_chat_request`` and the bounded view admit exactly what
    ``parse_chat_request`` of the body without the committed messages' parts and the whole history admit."""
    import orjson

    from awaken.wires.aisdk.request import parse_chat_request, scan_chat_request

    async def main() -> None:
        with tempfile.TemporaryDirectory() as root:
            async with opened(FACTORIES[backend], root) as ledger:
                ids, _, _ = await build_thread(ledger, plan)
                plain_view = await ledger.thread_view("t")
                committed = frozenset(m.id for m in plain_view.messages)
                for _ in range(3):
                    chosen = data.draw(st.lists(st.sampled_from([*ids, "n1", "n2", "n3"]), max_size=7))
                    raw: list = [{"id": i, "role": data.draw(st.sampled_from(["user", "system", "assistant", "x"])),
                                  "parts": data.draw(_ui_parts)} for i in chosen]
                    if data.draw(st.booleans()):
                        raw.append(data.draw(st.sampled_from([{"id": "", "role": "user", "parts": []}, 5,
                                                              {"id": "n9", "role": "user", "parts": "x"}])))
                    body = {"id": "t", "messages": raw, "trigger": "submit-message"}
                    try:
                        parsed = scan_chat_request(orjson.dumps(body), "application/json")
                    except InputRejected:
                        parsed = None
                    try:
                        plain = parse_chat_request(orjson.dumps(dict(body, messages=ui_without_parts(raw, committed))),
                                                   "application/json")
                        expected = run_request_outcome(AISDK, plain, plain_view)
                    except InputRejected as exc:
                        expected = ("refused", exc.code, exc.message)
                    if parsed is None:  # refused for its shape: the plain path refuses it too
                        assert isinstance(expected, tuple) and expected[0] == "refused"
                        continue
                    asks = AISDK.asks(parsed)
                    view = await admission_view(ledger, "t", asks.message_ids, asks.calls, tail)
                    assert run_request_outcome(AISDK, parsed, view) == expected

    trio.run(main)
