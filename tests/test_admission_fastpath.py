"""The admission fast path admits exactly what the plain path admits.

Admission reads a bounded view (``Ledger.admission_view``: the latest messages, the pending calls,
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

from awaken.agui.adapter import PROTOCOL as AGUI
from awaken.agui.request import AguiInput, InputMessage, ToolMessage
from awaken.aisdk.adapter import PROTOCOL as AISDK
from awaken.aisdk.request import AiSdkInput, InputUIMessage, ToolPartAnswer
from awaken.errors import InputRejected
from awaken.ledger import Commit, Ledger, PendingCall, RunRecord
from awaken.messages import Message, TextPart, ToolCallPart, ToolResultPart, result_id
from awaken.protocol import Protocol
from awaken.runstate import RunStatus
from awaken.testing.harness import opened
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


def outcome(protocol: Protocol, parsed: object, view: object) -> object:
    try:
        return protocol.to_run_request(parsed, "t", None, view)  # type: ignore[arg-type]
    except InputRejected as exc:
        return ("refused", exc.code, exc.message)


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
                        fast = await ledger.admission_view("t", asks.message_ids, asks.calls, tail)
                        assert (fast.thread, fast.pending) == (plain.thread, plain.pending)
                        assert fast.messages == (plain.messages[max(0, len(plain.messages) - tail):] if tail else ())
                        assert outcome(protocol, parsed, fast) == outcome(protocol, parsed, plain)

    trio.run(main)


@pytest.mark.parametrize("backend", list(FACTORIES))
async def test_a_new_thread_has_an_empty_admission_view(backend, tmp_path):
    async with opened(FACTORIES[backend], tmp_path) as ledger:
        view = await ledger.admission_view("nobody", {"u1"}, {"c1": None}, 10)
    assert (view.thread, view.messages, view.pending) == (None, (), ())
    assert view.message_ids() == view.answered_calls() == frozenset()
