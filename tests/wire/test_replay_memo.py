"""A replayed history is parsed only past what the server parsed before, and the parse is the plain one.

``awaken.wires.memo`` keeps the ``messages`` array of a thread's last request as its bytes; a request
whose top-level array starts with them is split there and only the rest is decoded (issue 18). The
property tests run random conversations turn by turn over both protocols (well-formed histories; new
messages that may be malformed, repeat an id, nest too deep or carry content the decoder refuses; a
nested ``messages`` key in the state holding the same bytes; another thread sending the same bytes)
and check that every split parse equals the plain parse of the same body, refusals included, and
that a split happens whenever it may.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from awaken.core.errors import InputRejected
from awaken.core.jsonbody import MAX_MESSAGES
from awaken.wires.agui.request import AguiInput, scan_known_run_input, scan_run_input
from awaken.wires.aisdk.request import AiSdkInput, _decode, scan_chat_request, scan_known_chat_request
from awaken.wires.memo import KEY_BYTES, MAX_SEGMENTS, Joined, PrefixedList, ReplayMemo

CT = "application/json"


def outcome(call: Any) -> tuple[str, Any]:
    try:
        return "ok", call()
    except InputRejected as exc:
        return "refused", (exc.code, exc.message)


# --- AG-UI --------------------------------------------------------------------------------------

text = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=40)


def nested(depth: int) -> Any:
    value: Any = 0
    for _ in range(depth):
        value = [value]
    return value


def agui_message(i: int, kind: str, body: str) -> Any:
    mid = f"m{i}"
    return {
        "user": {"id": mid, "role": "user", "content": body},
        "parts": {"id": mid, "role": "user", "content": [{"type": "text", "text": body}]},
        "system": {"id": mid, "role": "system", "content": body},
        "assistant": {"id": mid, "role": "assistant", "content": body,
                      "toolCalls": [{"id": f"c{i}", "type": "function", "function": {"name": "t", "arguments": "{}"}}]},
        "reasoning": {"id": mid, "role": "reasoning", "content": body},
        "tool": {"id": mid, "role": "tool", "toolCallId": f"c{i}", "content": body},
        # what the plain scan refuses or what only decoding refuses
        "not-object": 7,
        "no-id": {"role": "user", "content": body},
        "bad-role": {"id": mid, "role": "robot", "content": body},
        "tool-no-call": {"id": mid, "role": "tool", "content": body},
        "bad-content": {"id": mid, "role": "user", "content": 5},
        "audio": {"id": mid, "role": "user", "content": [{"type": "audio", "data": "x"}]},
        "deep": {"id": mid, "role": "user", "content": body, "extra": nested(70)},
        "repeat": {"id": "m0", "role": "user", "content": body},
    }[kind]


GOOD_AGUI = ["user", "parts", "system", "assistant", "reasoning", "tool"]
BAD_AGUI = ["not-object", "no-id", "bad-role", "tool-no-call", "bad-content", "audio", "deep", "repeat"]


@st.composite
def conversation(draw: Any, message: Any, good: list[str], bad: list[str]) -> list[list[Any]]:
    """Turns of new messages made by ``message(n, kind, text)``: the first turn's are ``good`` ones (a
    history the memo may keep), later ones may also be ``bad``."""
    turns: list[list[Any]] = []
    n = 0
    for t in range(draw(st.integers(2, 4))):
        kinds = draw(st.lists(st.sampled_from(good if t == 0 else good * 3 + bad),
                              min_size=1 if t == 0 else 0, max_size=6))
        turn = []
        for kind in kinds:
            turn.append(message(n, kind, draw(text)))
            n += 1
        turns.append(turn)
    return turns


def agui_summary(parsed: AguiInput) -> dict[str, Any]:
    scan = parsed.scan
    assert scan is not None
    return {
        "envelope": (parsed.thread_id, parsed.run_id, parsed.protocol_version, parsed.state, parsed.tools,
                     parsed.context, parsed.resume, parsed.messages),
        "scan": (parsed.message_ids, scan.positions, scan.ids, scan.calls, scan.id_set, scan.tool_ids,
                 parsed.input_ids(), parsed.tool_message_ids(), parsed.entries()),
        "decoded": [outcome(lambda k=k: scan.decode(k)) for k in range(len(scan.positions))],
    }


def agui_body(thread: str, messages: list[Any], *, nested: list[Any] | None = None, first: bool = False) -> bytes:
    envelope: dict[str, Any] = {"threadId": thread, "runId": "r", "state": {"messages": nested} if nested else {}}
    if first:
        return orjson.dumps({"messages": messages, **envelope, "tools": [], "context": []})
    return orjson.dumps({**envelope, "messages": messages, "tools": [], "context": [], "forwardedProps": {}})


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=conversation(agui_message, GOOD_AGUI, BAD_AGUI), nested=st.booleans(), first=st.booleans(), stranger=st.booleans())
def test_a_split_agui_parse_is_the_plain_parse(turns, nested, first, stranger):
    """AG-UI: every turn's body is parsed split when the memo knows its start, and the split parse
    equals the plain one (envelope, scan, every message's decode or refusal); a refused body is
    refused the same. Another thread sending the same bytes is parsed plainly."""
    memo = ReplayMemo(min_body=0)
    held: list[Any] = []
    recorded = False
    for t, turn in enumerate(turns):
        messages = held + turn
        body = agui_body("t1", messages, nested=messages if nested else None, first=first)
        if stranger and t == len(turns) - 1:
            body = agui_body("t2", messages, first=first)
        known = outcome(lambda body=body: scan_known_run_input(body, CT, memo))
        plain = outcome(lambda body=body: scan_run_input(body, CT))
        if known == ("ok", None):
            # not split: only allowed when nothing was kept, another thread asks, or the new part is off
            well_formed = all(isinstance(m, dict) and m.get("role") in ("user", "system", "assistant", "reasoning",
                                                                        "tool") and m.get("id") != "m0"
                              and "id" in m and (m["role"] != "tool" or "toolCallId" in m) for m in turn)
            assert not recorded or (stranger and t == len(turns) - 1) or not well_formed or plain[0] == "refused"
            known = outcome(lambda body=body: scan_run_input(body, CT, memo))  # what the server does next
        else:
            assert recorded and not (stranger and t == len(turns) - 1)
            if known[0] == "ok":
                assert isinstance(known[1].scan.raw, PrefixedList)
        assert (known[0], agui_summary(known[1]) if known[0] == "ok" else known[1]) == \
            (plain[0], agui_summary(plain[1]) if plain[0] == "ok" else plain[1])
        if plain[0] == "ok":
            held = messages
            recorded = recorded or len(memo) > 0
        else:
            break


# --- AI SDK -------------------------------------------------------------------------------------

def ui_message(i: int, kind: str, body: str) -> Any:
    mid = f"m{i}"
    tool = {"type": "tool-t", "toolCallId": f"c{i}", "state": "output-available", "input": {}, "output": body}
    return {
        "user": {"id": mid, "role": "user", "parts": [{"type": "text", "text": body}]},
        "system": {"id": mid, "role": "system", "parts": [{"type": "text", "text": body}]},
        "assistant": {"id": mid, "role": "assistant", "parts": [{"type": "step-start"}, {"type": "text", "text": body}]},
        "assistant-tool": {"id": mid, "role": "assistant", "parts": [tool]},
        "not-object": [],
        "no-id": {"role": "user", "parts": []},
        "no-parts": {"id": mid, "role": "user"},
        "bad-role": {"id": mid, "role": "tool", "parts": []},
        "bad-text": {"id": mid, "role": "user", "parts": [{"type": "text", "text": 3}]},
        "bad-tool": {"id": mid, "role": "assistant", "parts": [{**tool, "state": "output-error", "errorText": 4}]},
        "repeat": {"id": "m0", "role": "user", "parts": [{"type": "text", "text": body}]},
    }[kind]


GOOD_UI = ["user", "system", "assistant", "assistant-tool"]
BAD_UI = ["not-object", "no-id", "no-parts", "bad-role", "bad-text", "bad-tool", "repeat"]


def ui_summary(parsed: AiSdkInput) -> dict[str, Any]:
    scan = parsed.scan
    assert scan is not None
    return {
        "envelope": (parsed.thread_id, parsed.agent_id, parsed.trigger, parsed.inputs, parsed.answers,
                     parsed.continued_id),
        "scan": (scan.positions, scan.ids, scan.roles, scan.id_set, parsed.message_ids()),
        "decoded": [outcome(lambda i=i: _decode(scan.raw[i], i, last=False)) for i in scan.positions],
    }


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(turns=conversation(ui_message, GOOD_UI, BAD_UI), stranger=st.booleans(), by_id=st.booleans())
def test_a_split_ai_sdk_parse_is_the_plain_parse(turns, stranger, by_id):
    """AI SDK: the same, for ``useChat`` bodies (the thread named by ``id`` or ``threadId``; a last
    assistant message's tool parts decoded as decision candidates, split or not)."""
    memo = ReplayMemo(min_body=0)
    held: list[Any] = []
    for t, turn in enumerate(turns):
        messages = held + turn
        thread = "t2" if stranger and t == len(turns) - 1 else "t1"
        envelope = {"id": thread} if by_id else {"threadId": thread}
        body = orjson.dumps({**envelope, "messages": messages, "trigger": "submit-message", "messageId": None})
        known = outcome(lambda body=body: scan_known_chat_request(body, CT, memo))
        plain = outcome(lambda body=body: scan_chat_request(body, CT))
        if known == ("ok", None):
            known = outcome(lambda body=body: scan_chat_request(body, CT, memo))
        else:
            assert t > 0 and thread == "t1" and turn
        assert (known[0], ui_summary(known[1]) if known[0] == "ok" else known[1]) == \
            (plain[0], ui_summary(plain[1]) if plain[0] == "ok" else plain[1])
        if plain[0] != "ok":
            break
        held = messages


def test_a_well_formed_ai_sdk_replay_is_split():
    """The split is not vacuous: a second useChat turn on a kept history is split, its prefix not decoded."""
    memo = ReplayMemo(min_body=0)
    history = [ui_message(i, kind, f"text {i}") for i, kind in enumerate(["user", "assistant", "user"])]
    scan_chat_request(orjson.dumps({"id": "t1", "messages": history}), CT, memo)
    body = orjson.dumps({"id": "t1", "messages": [*history, ui_message(3, "assistant", "a"), ui_message(4, "user", "b")]})
    parsed = scan_known_chat_request(body, CT, memo)
    assert parsed is not None and memo.hits == 1
    assert parsed.scan is not None and parsed.scan.raw._decoded is None  # type: ignore[attr-defined]
    assert parsed.scan.ids == ("m0", "m1", "m2", "m3", "m4")


# --- the memo itself ----------------------------------------------------------------------------

def long_history(n: int, size: int = 80) -> list[dict[str, Any]]:
    return [{"id": f"h{i}", "role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "x" * size}
            for i in range(n)]


def test_only_the_new_messages_of_a_known_history_are_decoded():
    """Issue 18: the second turn of a 5,000-message thread is split where the first ended; the history
    is not decoded (its list is never built) unless admission asks for one of its messages."""
    memo = ReplayMemo()
    history = long_history(5000)
    scan_run_input(agui_body("t1", history), CT, memo)
    turn = [{"id": "a", "role": "assistant", "content": "ok"}, {"id": "u", "role": "user", "content": "next"}]
    parsed = scan_known_run_input(agui_body("t1", history + turn), CT, memo)
    assert parsed is not None and memo.hits == 1
    raw = parsed.scan.raw
    assert isinstance(raw, PrefixedList) and raw._decoded is None
    assert [m.id for m in parsed.fresh(frozenset(m["id"] for m in history))] == ["u"]
    assert raw._decoded is None
    # a message the thread does not hold is decoded from the kept bytes
    assert [m.id for m in parsed.fresh(frozenset({"h0"}))][:2] == ["h2", "h4"]


def test_a_nested_messages_key_with_the_same_bytes_is_not_the_top_level_array():
    """A state holding ``messages`` with the kept bytes, before a different top-level array, is not
    split at the nested one: the parse is the plain one."""
    memo = ReplayMemo(min_body=0)
    history = long_history(20)
    scan_run_input(agui_body("t1", history), CT, memo)
    other = long_history(3, 5)
    body = orjson.dumps({"threadId": "t1", "runId": "r", "state": {"messages": [*history, other[0]]},
                         "messages": other})
    assert b'"state":{"messages":[{"id":"h0"' in body
    parsed = scan_known_run_input(body, CT, memo)
    assert parsed is None or parsed.message_ids == ("h0", "h1", "h2")
    assert scan_run_input(body, CT).message_ids == ("h0", "h1", "h2")


def test_another_thread_sending_the_same_bytes_is_parsed_plainly():
    memo = ReplayMemo(min_body=0)
    history = long_history(20)
    scan_run_input(agui_body("t1", history), CT, memo)
    assert scan_known_run_input(agui_body("t2", history + long_history(1)[:0] + [
        {"id": "n", "role": "user", "content": "hi"}]), CT, memo) is None
    assert memo.hits == 0


def test_a_client_that_writes_spaces_is_never_kept():
    """Only bytes the server can match are kept: a body written with spaces (Python's json.dumps) is
    not, and costs one encode of its first message."""
    import json

    memo = ReplayMemo(min_body=0)
    body = json.dumps({"threadId": "t1", "runId": "r", "messages": long_history(20)}).encode()
    scan_run_input(body, CT, memo)
    assert len(memo) == 0


def test_the_memo_stays_within_its_budget_and_zero_turns_it_off():
    history = long_history(200)
    one = len(agui_body("t0", history))
    memo = ReplayMemo(budget=one * 12, min_body=0)
    for t in range(10):
        scan_run_input(agui_body(f"t{t}", [{**m, "id": f"{t}-{m['id']}"} for m in history]), CT, memo)
    assert 0 < len(memo) < 10 and memo.total <= memo.budget
    memo.configure(0)
    assert len(memo) == 0 and memo.total == 0
    scan_run_input(agui_body("t1", history), CT, memo)
    assert len(memo) == 0


def test_the_message_cap_holds_for_a_split_body():
    """``TOO_MANY_MESSAGES`` counts the kept prefix's messages too: the split refuses what the plain
    parse refuses."""
    memo = ReplayMemo()
    history = long_history(MAX_MESSAGES - 1, 10)
    scan_run_input(agui_body("t1", history), CT, memo)
    body = agui_body("t1", history + [{"id": "a", "role": "assistant", "content": "ok"},
                                      {"id": "u", "role": "user", "content": "next"}])
    with pytest.raises(InputRejected) as split:
        scan_known_run_input(body, CT, memo)
    with pytest.raises(InputRejected) as plain:
        scan_run_input(body, CT)
    assert (split.value.code, split.value.message) == (plain.value.code, plain.value.message)
    assert split.value.code == "TOO_MANY_MESSAGES"


def test_a_history_orjson_cannot_write_back_is_parsed_plainly():
    """A history message nested past orjson's 255 levels (its content is never decoded, so it is not
    refused) is not kept, and the request is parsed as ever, never failed."""
    import json

    def compact(thread: str, messages: list[Any]) -> bytes:  # what JSON.stringify writes
        return json.dumps({"threadId": thread, "runId": "r", "messages": messages}, separators=(",", ":")).encode()

    deep = {"id": "deep", "role": "assistant", "content": "x", "extra": nested(300)}
    memo = ReplayMemo(min_body=0)
    body = compact("t1", [*long_history(10), deep])
    assert scan_run_input(body, CT, memo).message_ids == scan_run_input(body, CT).message_ids
    assert len(memo) == 0
    history = long_history(10)
    scan_run_input(compact("t1", history), CT, memo)
    assert len(memo) == 1
    body = compact("t1", [*history, deep, {"id": "u", "role": "user", "content": "next"}])
    parsed = scan_known_run_input(body, CT, memo)
    assert parsed is not None and parsed.message_ids == scan_run_input(body, CT).message_ids
    assert memo.hits == 1


def test_a_split_that_leaves_much_to_decode_is_done_off_the_event_loop():
    """``parse_known`` (on the event loop) splits only when at most ``ON_LOOP_REST`` bytes are left to
    decode, what the server decodes on the loop anyway; ``parse`` (a worker thread's, for a large
    body) splits whatever is left."""
    from awaken.wires.agui.adapter import AguiProtocol
    from awaken.wires.memo import DEFAULT_BUDGET, ON_LOOP_REST, Memoized

    protocol = Memoized(AguiProtocol(), AguiProtocol.parses, DEFAULT_BUDGET)
    history = long_history(400)
    protocol.parse(agui_body("t1", history), CT)
    history.append({"id": "u", "role": "user", "content": "x"})
    assert protocol.parse_known(agui_body("t1", history), CT) is not None
    many = [{"id": f"n{i}", "role": "user", "content": "y" * 200} for i in range(ON_LOOP_REST // 200)]
    large = agui_body("t1", [*history, *many])
    assert protocol.parse_known(large, CT) is None
    hits = protocol.memo.hits
    parsed = protocol.parse(large, CT)
    assert protocol.memo.hits == hits + 1
    assert parsed.message_ids == scan_run_input(large, CT).message_ids


async def test_a_deleted_threads_kept_request_is_dropped_with_it(server, client):
    """Deleting a thread drops the bytes of its last request the replay memo kept (its content must not
    outlive it in the server's memory); other threads' stay."""
    memo = server.memo("ag-ui")
    for thread in ("t-del", "t-kept"):
        history = [{**m, "id": f"{thread}-{m['id']}"} for m in long_history(300, 120)]
        body = agui_body(thread, [*history, {"id": f"{thread}-u", "role": "user", "content": "hi"}])
        response = await client.post("/v1/ag-ui", content=body, headers={"content-type": "application/json"})
        assert response.status_code == 200 and b'"RUN_FINISHED"' in response.content
    assert {"t-del", "t-kept"} <= memo.owners()
    assert (await client.delete("/v1/threads/t-del")).status_code == 204
    assert "t-del" not in memo.owners() and "t-kept" in memo.owners()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.lists(st.integers(0, 9), max_size=5), min_size=1, max_size=40))
def test_a_joined_sequence_reads_as_its_segments_concatenated(segments):
    """A split parse joins its prefix's ids to the tail's instead of copying them: the join reads as the
    concatenation would, by index (negative too), slice, iteration and equality, however many turns it
    joined (more than ``MAX_SEGMENTS`` are copied into one)."""
    joined: Any = tuple(segments[0])
    plain = tuple(segments[0])
    for segment in segments[1:]:
        joined, plain = Joined.of(joined, segment), plain + tuple(segment)
    assert len(joined) == len(plain) and list(joined) == list(plain)
    assert joined == plain and plain == joined and joined != plain + (1,)
    assert [joined[i] for i in range(-len(plain), len(plain))] == [plain[i] for i in range(-len(plain), len(plain))]
    assert joined[1:-1] == plain[1:-1] and joined[::2] == plain[::2]
    for outside in (len(plain), -len(plain) - 1):
        with pytest.raises(IndexError):
            joined[outside]
    if isinstance(joined, Joined):
        assert len(joined.segments) <= MAX_SEGMENTS


# --- a history read back from the history route ---------------------------------------------------

def serve(memo: ReplayMemo, parses: Any, thread: str, items: list[Any], sizes: list[int], *,
          start: str | None = None) -> list[Any]:
    """Serve ``items`` in pages of ``sizes`` as the history route does (sorted keys; page k's cursor is
    ``c<k>``), starting after cursor ``start``; returns the items as a client holds them (decoded pages)."""
    held: list[Any] = []
    at, after = 0, start
    for k, size in enumerate(sizes):
        page = items[at:at + size]
        if not page:
            break
        encoded = orjson.dumps(page, option=orjson.OPT_SORT_KEYS)
        memo.served(thread, after, f"c{k}", orjson.loads(encoded), encoded, parses.served, parses.join)
        held += orjson.loads(encoded)
        at, after = at + size, f"c{k}"
    return held


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(GOOD_AGUI), min_size=1, max_size=12), body=text,
       sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12), new=st.sampled_from(GOOD_AGUI + BAD_AGUI))
def test_an_agui_history_read_back_from_the_history_route_is_split_as_the_plain_parse(kinds, body, sizes, new):
    """AG-UI: a history the server served page by page from the thread's start, sent back whole with a new
    message (a page that reloaded), is parsed split, and the split equals the plain parse."""
    from awaken.wires.agui.adapter import AguiProtocol

    memo = ReplayMemo(min_body=0)
    items = [agui_message(i, kind, body) for i, kind in enumerate(kinds)]
    held = serve(memo, AguiProtocol.parses, "t1", items, [*sizes, len(items)])
    request = agui_body("t1", [*held, agui_message(len(items), new, body)])
    known = outcome(lambda: scan_known_run_input(request, CT, memo))
    plain = outcome(lambda: scan_run_input(request, CT))
    if new in GOOD_AGUI and len(orjson.dumps(held)) > KEY_BYTES:  # (shorter bytes are never kept)
        assert known[0] == "ok" and known[1] is not None and isinstance(known[1].scan.raw, PrefixedList)
    if known == ("ok", None):
        return  # the new message is off: the plain parse words it
    assert (known[0], agui_summary(known[1]) if known[0] == "ok" else known[1]) == \
        (plain[0], agui_summary(plain[1]) if plain[0] == "ok" else plain[1])


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(kinds=st.lists(st.sampled_from(GOOD_UI), min_size=1, max_size=12), body=text,
       sizes=st.lists(st.integers(1, 5), min_size=1, max_size=12), new=st.sampled_from(GOOD_UI + BAD_UI))
def test_an_ai_sdk_history_read_back_from_the_history_route_is_split_as_the_plain_parse(kinds, body, sizes, new):
    """AI SDK: the same for ``UIMessage`` pages a ``useChat`` app reads back and sends with its next message."""
    from awaken.wires.aisdk.adapter import AiSdkProtocol

    memo = ReplayMemo(min_body=0)
    items = [ui_message(i, kind, body) for i, kind in enumerate(kinds)]
    held = serve(memo, AiSdkProtocol.parses, "t1", items, [*sizes, len(items)])
    request = orjson.dumps({"id": "t1", "messages": [*held, ui_message(len(items), new, body)],
                            "trigger": "submit-message", "messageId": None})
    known = outcome(lambda: scan_known_chat_request(request, CT, memo))
    plain = outcome(lambda: scan_chat_request(request, CT))
    if new in GOOD_UI and len(orjson.dumps(held)) > KEY_BYTES:
        assert known[0] == "ok" and known[1] is not None and isinstance(known[1].scan.raw, PrefixedList)
    if known == ("ok", None):
        return
    assert (known[0], ui_summary(known[1]) if known[0] == "ok" else known[1]) == \
        (plain[0], ui_summary(plain[1]) if plain[0] == "ok" else plain[1])


def test_only_pages_read_from_the_threads_start_one_after_another_are_kept():
    from awaken.wires.agui.adapter import AguiProtocol

    parses = AguiProtocol.parses
    items = long_history(60)
    # from a cursor never served (not the thread's start): nothing kept
    memo = ReplayMemo(min_body=0)
    serve(memo, parses, "t1", items, [20, 20], start="c-elsewhere")
    assert len(memo) == 0
    # a page that does not follow the one before it ends the chain: what came before stays, nothing after
    memo = ReplayMemo(min_body=0)
    held = serve(memo, parses, "t1", items[:20], [20])
    encoded = orjson.dumps(items[40:], option=orjson.OPT_SORT_KEYS)
    memo.served("t1", "c-other", "c9", items[40:], encoded, parses.served, parses.join)
    assert len(memo) == 1
    assert scan_known_run_input(agui_body("t1", [*held, {"id": "u", "role": "user", "content": "x"}]), CT, memo)
    # another thread's pages are not this thread's; a deleted thread's chain goes with it
    assert scan_known_run_input(agui_body("t2", [*held, {"id": "u", "role": "user", "content": "x"}]), CT, memo) is None
    memo.forget("t1")
    assert len(memo) == 0 and not memo._served


async def test_a_page_that_reloads_and_sends_the_history_it_read_back_is_split(server, client):
    """Over HTTP: the AG-UI history route's pages, read from the start and sent back whole with a new message
    (what a reloaded page does), are split by the replay memo, not parsed whole; the run answers."""
    memo = server.memo("ag-ui")
    history = long_history(300, 400)  # what the thread keeps (its user messages) is over the memo's smallest body
    body = agui_body("t-reload", [*history, {"id": "u1", "role": "user", "content": "hi"}])
    response = await client.post("/v1/ag-ui", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200 and b'"RUN_FINISHED"' in response.content
    memo.clear()  # a reload: the server never saw the bytes the client will send
    held: list[Any] = []
    cursor = None
    while True:
        page = (await client.get("/v1/ag-ui/threads/t-reload/messages",
                                 params={"limit": 100, **({"cursor": cursor} if cursor else {})})).json()
        if not page["items"]:
            break
        held += page["items"]
        cursor = page["cursor"]
    # the thread holds the user messages (a client's assistant messages are its history, not input) and the answer
    assert [m["id"] for m in held[:151]] == [m["id"] for m in history[::2]] + ["u1"] and len(held) == 152
    hits = memo.hits
    body = agui_body("t-reload", [*held, {"id": "u2", "role": "user", "content": "again"}])
    response = await client.post("/v1/ag-ui", content=body, headers={"content-type": "application/json"})
    assert response.status_code == 200 and b'"RUN_FINISHED"' in response.content
    assert memo.hits == hits + 1


def test_a_body_below_the_memos_floor_is_not_kept_and_no_scan_is_built_for_it(monkeypatch):
    """A small request (most of them) is parsed without building what the memo would keep of it; one at
    the floor is kept, for both protocols."""
    import awaken.wires.agui.request as agui_request

    small = agui_body("t1", long_history(2))
    memo = ReplayMemo(min_body=len(small) + 1)
    built: list[int] = []
    real = agui_request._memo_scan
    monkeypatch.setattr(agui_request, "_memo_scan", lambda *a: built.append(1) or real(*a))
    assert not memo.keeps(small)
    scan_run_input(small, CT, memo)
    scan_chat_request(orjson.dumps({"id": "t2", "messages": [ui_message(0, "user", "hi")]}), CT, memo)
    assert len(memo) == 0 and built == []
    large = agui_body("t3", long_history(3))
    assert memo.keeps(large)
    scan_run_input(large, CT, memo)
    assert len(memo) == 1 and built == [1]
