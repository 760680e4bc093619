"""Dedup of a replayed history: the ledger answers facts, one pure function of the engine decides
(``awaken.engine.dedup``), and the answer is what the whole history gives (issue 18).

The property tests check that ``decide`` (with ``Ledger.answered_calls`` for what it leaves
unresolved) answers every question an adapter asks about a request's own ids as the whole history
does, and that random conversations, turn after turn over each ledger and both protocols (new
messages that are refused, so their turn commits nothing; a client that drops a message it sent
before; a thread the server did not see before), are admitted by the split parse and the bounded
view exactly as the plain parse and the whole history admit them.
"""

from __future__ import annotations

import tempfile
from typing import Any

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart, ToolResultPart, result_id
from awaken.engine.dedup import admission_view, decide, looked_up
from awaken.engine.state import RunStatus
from awaken.ledger.interface import (
    AdmissionFacts,
    Commit,
    Ledger,
    PendingCall,
    RunRecord,
    ThreadRecord,
    answered_in,
)
from awaken.ledger.testkit.harness import opened
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.request import scan_known_run_input, scan_run_input
from awaken.wires.aisdk.adapter import PROTOCOL as AISDK
from awaken.wires.aisdk.request import scan_chat_request, scan_known_chat_request
from awaken.wires.memo import ReplayMemo
from awaken.wires.protocol import Protocol
from tests.ledger_harness import BACKENDS

CT = "application/json"

ids = st.sampled_from([f"i{n}" for n in range(12)])
call_ids = st.sampled_from([f"c{n}" for n in range(6)])


@st.composite
def thread_and_request(draw: Any) -> tuple[list[Message], set[str], int, frozenset[str], dict[str, str | None]]:
    """A thread's history (user messages and tool results, some under the engine's result id, some
    under the client's own id), its pending calls (never answered), a tail length, and a request's
    message ids and tool calls (call id -> the request message carrying it, or None)."""
    history: list[Message] = []
    used: set[str] = set()
    for mid in draw(st.lists(ids, max_size=8, unique=True)):
        history.append(Message(mid, "user", (TextPart("x"),)))
        used.add(mid)
    answered = draw(st.lists(call_ids, max_size=4, unique=True))
    for call in answered:
        mid = result_id(call) if draw(st.booleans()) else f"client-{call}"
        history.insert(draw(st.integers(0, len(history))), Message(mid, "tool", (ToolResultPart(call, "tool", "ok"),)))
    history = [Message(m.id, m.role, m.parts, None, seq) for seq, m in enumerate(history, 1)]
    pending = set(draw(st.lists(call_ids.filter(lambda c: c not in answered), max_size=2, unique=True)))
    asked = frozenset(draw(st.frozensets(ids | st.sampled_from([result_id("c0"), "client-c1"]), max_size=6)))
    calls = draw(st.dictionaries(call_ids, st.none() | ids | st.just("client-c2"), max_size=4))
    return history, pending, draw(st.integers(0, 10)), asked, calls


@settings(max_examples=400, deadline=None)
@given(case=thread_and_request())
def test_the_decision_answers_as_the_whole_history(case):
    """Every id of the request is known committed exactly when the whole history holds it; every call
    not pending whose carrying message is not committed is answered exactly when the history holds
    its result (under any id); a call named answered always is."""
    history, pending, tail, asked, calls = case
    held = {m.id for m in history}
    thread = ThreadRecord("t", 0, last_seq=len(history))
    waiting = tuple(PendingCall(c, "r", "t", "tool", "{}", "client", "m") for c in sorted(pending))
    lookup = looked_up(asked, calls)
    facts = AdmissionFacts(thread, tuple(history[max(0, len(history) - tail):]) if tail else (), waiting,
                           frozenset(lookup & held))
    decision = decide(asked, calls, facts)
    answered = decision.answered | (answered_in(history) & decision.unresolved)  # ``Ledger.answered_calls``
    carriers = {m for m in calls.values() if m is not None}
    assert decision.known == (asked | carriers) & held
    truly = answered_in(history)
    assert answered <= truly
    for call, carrier in calls.items():
        if call not in pending and carrier not in held:
            assert (call in answered) == (call in truly)
    assert not answered & pending


# --- random conversations through a ledger ------------------------------------------------------

def agui_message(n: int, kind: str) -> dict[str, Any]:
    mid = f"m{n}"
    return {"user": {"id": mid, "role": "user", "content": f"question {n}"},
            "system": {"id": mid, "role": "system", "content": "be brief"},
            "bad": {"id": mid, "role": "user", "content": 5}}[kind]


def ui_message(n: int, kind: str) -> dict[str, Any]:
    mid = f"m{n}"
    return {"user": {"id": mid, "role": "user", "parts": [{"type": "text", "text": f"question {n}"}]},
            "system": {"id": mid, "role": "system", "parts": [{"type": "text", "text": "be brief"}]},
            "bad": {"id": mid, "role": "user", "parts": [{"type": "text", "text": 3}]}}[kind]


def agui_reply(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "content": "answer"}


def ui_reply(message_id: str) -> dict[str, Any]:
    return {"id": message_id, "role": "assistant", "parts": [{"type": "text", "text": "answer"}]}


PROTOCOLS = {
    "agui": (AGUI, agui_message, agui_reply, lambda thread, messages: orjson.dumps(
        {"threadId": thread, "runId": "r", "messages": messages, "tools": [], "context": []}),
        scan_known_run_input, scan_run_input),
    "aisdk": (AISDK, ui_message, ui_reply, lambda thread, messages: orjson.dumps(
        {"id": thread, "messages": messages, "trigger": "submit-message"}),
        scan_known_chat_request, scan_chat_request),
}

turn_plan = st.lists(st.tuples(st.lists(st.sampled_from(["user", "user", "system", "bad"]), min_size=1, max_size=3),
                               st.sampled_from(["replay", "replay", "replay", "drop-one"])),
                     min_size=2, max_size=7)


def outcome(protocol: Protocol, parsed: Any, view: Any) -> Any:
    try:
        request = protocol.to_run_request(parsed, "t", None, view)
    except InputRejected as exc:
        return ("refused", exc.code, exc.message)
    return [(m.id, m.role, m.parts) for m in request.inputs], request.decisions


async def commit_turn(ledger: Ledger, turn: int, inputs: list[Message]) -> str:
    """Commit a run that takes ``inputs`` and answers with one assistant message; its id."""
    run_id = f"run{turn}"
    await ledger.start_run(RunRecord(run_id, "t", "a", RunStatus.RUNNING, turn, turn), inputs)
    reply = Message(f"a{turn}", "assistant", (TextPart("answer"),), run_id)
    await ledger.commit("t", run_id, Commit(RunStatus.COMPLETED, (reply,)))
    return reply.id


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("wire", list(PROTOCOLS))
@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(plan=turn_plan, history=st.integers(0, 6))
def test_a_replayed_conversation_is_admitted_as_the_plain_path_admits_it(backend, wire, plan, history):
    """Turn after turn, the split parse and the bounded view give the same run request
    (or the same refusal) as the plain parse of the same body against the whole history; a refused
    turn commits nothing, and the next turn, built on it, is still deduped right."""
    protocol, message, reply, body_of, split_parse, plain_parse = PROTOCOLS[wire]

    async def main() -> None:
        memo = ReplayMemo(min_body=0)
        with tempfile.TemporaryDirectory() as root:
            async with opened(BACKENDS[backend], root) as ledger:
                held: list[dict[str, Any]] = []
                n = 0
                for turn in range(history):  # a thread the memo has never seen
                    await commit_turn(ledger, 100 + turn, [Message(f"h{turn}", "user", (TextPart("old"),))])
                    held += [message(0, "user") | {"id": f"h{turn}"}, reply(f"a{100 + turn}")]
                for turn, (kinds, how) in enumerate(plan):
                    new = [message(n + k, kind) for k, kind in enumerate(kinds)]
                    n += len(kinds)
                    sent = held + new
                    if how == "drop-one" and len(held) > 1:
                        sent = held[1:] + new  # the client lost a message it sent before
                    body = body_of("t", sent)
                    try:
                        parsed = split_parse(body, CT, memo) or plain_parse(body, CT, memo)
                        plain = plain_parse(body, CT)
                    except InputRejected as exc:
                        with pytest.raises(InputRejected) as again:
                            plain_parse(body, CT)
                        assert again.value.code == exc.code
                        continue
                    asks = protocol.asks(parsed)
                    view = await admission_view(ledger, "t", asks.message_ids, asks.calls, 4)
                    fast = outcome(protocol, parsed, view)
                    expected = outcome(protocol, plain, await ledger.thread_view("t"))
                    assert fast == expected
                    if fast[0] == "refused":
                        continue
                    inputs = [Message(mid, role, parts) for mid, role, parts in fast[0]]
                    held = sent + [reply(await commit_turn(ledger, turn, inputs))]

    trio.run(main)


@pytest.mark.parametrize("backend", list(BACKENDS))
@pytest.mark.parametrize("wire", list(PROTOCOLS))
async def test_a_replayed_history_is_deduped_and_only_the_new_message_decoded(backend, wire, tmp_path):
    """Turn after turn over a replayed history, the view knows exactly the committed ids the request
    carries, and only the new message is decoded."""
    protocol, message, reply, body_of, split_parse, plain_parse = PROTOCOLS[wire]
    memo = ReplayMemo(min_body=0)
    async with opened(BACKENDS[backend], tmp_path) as ledger:
        held: list[dict[str, Any]] = []
        for turn in range(10, 20):  # a history past what a ledger keeps without a set (files: 8 ids)
            held += [message(turn, "user"), reply(await commit_turn(ledger, turn, [
                Message(f"m{turn}", "user", (TextPart(f"question {turn}"),))]))]
        for turn in range(5):
            new = message(turn, "user")
            body = body_of("t", [*held, new])
            parsed = split_parse(body, CT, memo) or plain_parse(body, CT, memo)
            asks = protocol.asks(parsed)
            view = await admission_view(ledger, "t", asks.message_ids, asks.calls, 4)
            known = view.known_ids
            request = protocol.to_run_request(parsed, "t", None, view)
            assert [m.id for m in request.inputs] == [new["id"]]
            assert sorted(known) == sorted(m["id"] for m in held if m["role"] == "user"
                                           or wire == "aisdk")
            held += [new, reply(await commit_turn(ledger, turn, list(request.inputs)))]
        assert memo.hits == 4
