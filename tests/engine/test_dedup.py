"""Dedup of a replayed history looks up only what the client added, and answers what the plain
intersection answers (``awaken.ledger.dedup``, issue 18).

A split parse builds a request's ids on the thread's previous request's (``AskedIds.on``); a ledger's
hot entry remembers the largest asked set it found wholly committed. The property tests check that
``known_ids`` is always ``asked ∩ held`` (whatever the chain, the confirmations, a holder whose set was
replaced) and that random conversations, turn after turn over
each ledger and both protocols (new messages that are refused, so their turn commits nothing; a
client that drops a message it sent before; a thread the server did not see before), are admitted by
the split parse and the remembered dedup exactly as the plain parse and the whole history admit them.
"""

from __future__ import annotations

import gc
import tempfile
import weakref
from typing import Any

import orjson
import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart
from awaken.engine.state import RunStatus
from awaken.ledger.dedup import AskedIds, known_ids
from awaken.ledger.interface import Commit, Ledger, RunRecord
from awaken.ledger.testkit.harness import opened
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.request import scan_known_run_input, scan_run_input
from awaken.wires.aisdk.adapter import PROTOCOL as AISDK
from awaken.wires.aisdk.request import scan_chat_request, scan_known_chat_request
from awaken.wires.memo import ReplayMemo
from awaken.wires.protocol import Protocol
from tests.ledger_harness import BACKENDS

CT = "application/json"


class Holder:
    def __init__(self) -> None:
        self.confirmed = None


ids = st.sampled_from([f"i{n}" for n in range(12)])


@settings(max_examples=300, deadline=None)
@given(steps=st.lists(st.tuples(st.sampled_from(["grow", "ask-on", "ask-on", "ask-fresh", "replace-held"]),
                                st.frozensets(ids, max_size=4)), max_size=25))
def test_known_ids_is_the_intersection_whatever_the_chain(steps):
    """Random asks built on the previous one (or not), a held set that grows or is replaced by a new
    set: every answer is ``asked ∩ held``, and a ``whole`` it names is the ask's base, wholly held."""
    holder = Holder()
    held: set[str] = set()
    asked: AskedIds = AskedIds(())
    made = {asked.serial: asked}
    for op, values in steps:
        if op == "grow":
            held |= values
        elif op == "replace-held":
            held = set(values)  # a new holder set (a re-read thread): no confirmation carries over
        else:
            asked = AskedIds.on(asked, values) if op == "ask-on" else AskedIds(values)
            made[asked.serial] = asked
            known, whole = known_ids(asked, held, holder)
            assert known == asked & held
            if whole is not None:
                assert whole == asked.base_serial and made[whole] <= held


def test_a_chain_of_turns_keeps_no_earlier_set_alive():
    """Each set knows the one it was built on by number only: a long conversation's earlier id sets
    are freed as the memo drops them."""
    first = AskedIds([f"u{n}" for n in range(100)])
    gone = weakref.ref(first)
    asked = first
    for n in range(5):
        asked = AskedIds.on(asked, [f"v{n}"])
    del first
    gc.collect()
    assert gone() is None and len(asked) == 105


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
    """Turn after turn, the split parse and the ledger's remembered dedup give the same run request
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
                    view = await ledger.admission_view("t", asks.message_ids, asks.calls, 4)
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
async def test_a_replayed_history_is_deduped_by_what_the_client_added(backend, wire, tmp_path):
    """From the first split turn on, the view says the request's base is committed whole (nothing
    of it is looked up again) and only the new message is decoded."""
    protocol, message, reply, body_of, split_parse, plain_parse = PROTOCOLS[wire]
    memo = ReplayMemo(min_body=0)
    async with opened(BACKENDS[backend], tmp_path) as ledger:
        held: list[dict[str, Any]] = []
        for turn in range(10, 20):  # a history past what a ledger keeps without a set (files: 8 ids)
            held += [message(turn, "user"), reply(await commit_turn(ledger, turn, [
                Message(f"m{turn}", "user", (TextPart(f"question {turn}"),))]))]
        wholes = []
        for turn in range(5):
            new = message(turn, "user")
            body = body_of("t", [*held, new])
            parsed = split_parse(body, CT, memo) or plain_parse(body, CT, memo)
            asks = protocol.asks(parsed)
            view = await ledger.admission_view("t", asks.message_ids, asks.calls, 4)
            known = view.known_ids
            wholes.append(view.known_whole is not None and view.known_whole == asks.message_ids.base_serial)
            request = protocol.to_run_request(parsed, "t", None, view)
            assert [m.id for m in request.inputs] == [new["id"]]
            assert sorted(known) == sorted(m["id"] for m in held if m["role"] == "user"
                                           or wire == "aisdk")
            held += [new, reply(await commit_turn(ledger, turn, list(request.inputs)))]
        assert wholes == [False, True, True, True, True]


def test_a_confirmed_base_is_not_looked_up_again():
    """The second split turn finds the first one's base confirmed and its added ids committed: its
    answer is carried, not looked up; a turn whose added ids were not committed (refused) is looked up."""
    holder, held = Holder(), {"u0"}
    first = AskedIds(["u0"])
    second = AskedIds.on(first, ["u1"])
    assert known_ids(second, held, holder) == ({"u0"}, first.serial) and holder.confirmed.carried == 0
    held.add("u1")
    third = AskedIds.on(second, ["u2"])
    assert known_ids(third, held, holder) == ({"u0", "u1"}, second.serial) and holder.confirmed.carried == 1
    fourth = AskedIds.on(third, ["u3"])  # "u2" was refused: never committed
    assert known_ids(fourth, held, holder) == ({"u0", "u1"}, None)
    assert holder.confirmed.serial == second.serial  # still true; not advanced past what is committed
