"""The dedup of a replayed history reads no id string: ``uncommitted`` names a request's new messages in
request order, whatever the dedup answered, and ``interned`` gives the hot-thread cache and the replay memo
one copy of each id (issue 28, item 6)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.core.ids import MAX_EXTRA, AllBut, IdSet, interned, uncommitted
from awaken.core.messages import Message, TextPart
from awaken.ledger.hotcache import cached_facts, entry_for
from awaken.ledger.interface import ThreadRecord
from awaken.wires.agui.request import scan_run_input
from awaken.wires.memo import ReplayMemo

ids_and_committed = st.lists(st.text(min_size=1, max_size=6), max_size=40).flatmap(
    lambda ids: st.tuples(st.just(ids), st.sets(st.sampled_from(ids)) if ids else st.just(set()),
                          st.sets(st.text(min_size=1, max_size=6), max_size=3)))


@settings(max_examples=300, deadline=None)
@given(ids_and_committed)
def test_uncommitted_is_the_plain_filter_in_request_order(case: tuple[list[str], set[str], set[str]]) -> None:
    ids, committed, others = case
    # ids unique or not, the answer a frozenset, a plain set or a list, holding ids the request may not carry
    id_set = frozenset(ids)
    asked = frozenset(id_set | others)
    # the hot-thread cache's answer: the asked ids (the request's own set, or a larger one) but the missing
    but = [AllBut(id_set, id_set - committed), AllBut(asked, asked - committed)]
    for answer in (frozenset(committed | others), committed | others, list(committed), *but):
        expected = [k for k, i in enumerate(ids) if i not in answer]
        assert uncommitted(tuple(ids), id_set, answer) == expected


@settings(max_examples=200, deadline=None)
@given(ids_and_committed)
def test_the_hot_caches_answer_is_the_intersection_as_a_set(case: tuple[list[str], set[str], set[str]]) -> None:
    ids, committed, others = case
    asked = frozenset(ids) | others
    answer = AllBut(asked, asked - committed)
    expected = asked & committed
    assert answer == expected and set(answer) == expected and len(answer) == len(expected)
    assert all((i in answer) == (i in expected) for i in asked | {"not-asked"})
    assert answer - {next(iter(expected), "x")} == expected - {next(iter(expected), "x")}
    assert type(answer | {"y"}) is frozenset and answer | {"y"} == expected | {"y"}


def test_uncommitted_finds_new_ids_anywhere_not_only_at_the_end() -> None:
    ids = tuple(f"m{k}" for k in range(100))
    committed = frozenset(ids) - {"m0", "m50", "m99"}
    assert uncommitted(ids, frozenset(ids), committed) == [0, 50, 99]
    many_new = frozenset(ids[::2])
    assert uncommitted(ids, frozenset(ids), many_new) == list(range(1, 100, 2))
    assert uncommitted(ids, frozenset(ids), frozenset()) == list(range(100))


def test_interned_ids_are_one_object_per_id() -> None:
    a, b = "".join(["tur", "n-1"]), "".join(["turn", "-1"])
    assert a is not b
    first, second = list(interned([a])), list(interned([b]))
    assert first[0] is second[0] and first[0] == "turn-1"


def test_a_history_the_memo_keeps_holds_the_ids_the_hot_cache_holds() -> None:
    messages = [{"id": "".join(["u", str(k)]), "role": "user" if k % 2 == 0 else "assistant", "content": "x" * 50}
                for k in range(60)]
    body = (b'{"threadId":"t","runId":"r","messages":' + __import__("orjson").dumps(messages)
            + b',"tools":[],"context":[],"state":{},"forwardedProps":{}}')
    memo: ReplayMemo = ReplayMemo(1 << 20, min_body=0)
    scan_run_input(body, "application/json", memo)
    (kept,) = memo._entries.values()
    assert kept.count == 60
    assert kept.scan.input_ids == kept.scan.ids[::2] and kept.scan.input_set == frozenset(kept.scan.ids[::2])
    assert all(mid is next(interned([f"u{2 * k}"])) for k, mid in enumerate(kept.scan.input_ids))
    assert all(mid is next(interned(["".join(mid)])) for mid in kept.scan.input_set)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.sets(st.text(min_size=1, max_size=3), max_size=8), min_size=1, max_size=60),
       st.sets(st.text(min_size=1, max_size=3), max_size=8))
def test_a_replayed_requests_id_set_is_the_union_it_stands_for(turns, other):
    """A split parse adds a turn's ids to the history's set without copying it (``IdSet``): it answers as
    the plain union would, however many turns were added (beyond ``MAX_EXTRA`` new ids it is one copy)."""
    joined: object = frozenset(turns[0])
    plain = frozenset(turns[0])
    for added in turns[1:]:
        joined, plain = IdSet.of(joined, added), plain | added
    assert joined == plain and plain == joined and len(joined) == len(plain) and set(joined) == plain
    assert all((i in joined) == (i in plain) for i in plain | other)
    assert joined.difference(other) == plain - other and joined.intersection(other) == plain & other
    assert joined.union(other) == plain | other and (joined - other) == plain - other
    if isinstance(joined, IdSet):
        assert len(joined.extra) <= MAX_EXTRA and joined.base.isdisjoint(joined.extra)
        assert IdSet.of(joined, ()) is joined


def test_the_hot_cache_checks_a_replayed_history_once_and_then_only_what_each_turn_adds():
    history = [Message(f"h{k}", "user" if k % 2 == 0 else "assistant", (TextPart("x"),)) for k in range(40)]
    entry = entry_for(ThreadRecord("t", 0, last_seq=40), history, 8, (), [m.id for m in history])
    base = frozenset(m.id for m in history[::2])
    turn = IdSet.of(base, ["new-1"])
    facts = cached_facts(entry, turn, 4)
    assert facts is not None and facts.committed == base and entry.covered is base
    assert uncommitted(("new-1",), frozenset({"new-1"}), facts.committed) == [0]
    # the history is not checked again: the next turn's answer holds the base and what it adds
    entry.ids.add("new-1")
    facts = cached_facts(entry, IdSet.of(turn, ["new-2"]), 4)
    assert facts is not None and facts.committed == base | {"new-1"}
    # a history the thread does not hold all of is answered id by id, and not marked
    stranger = frozenset({"h0", "elsewhere"})
    facts = cached_facts(entry, IdSet.of(stranger, ["new-3"]), 4)
    assert facts is not None and facts.committed == {"h0"} and entry.covered is base
