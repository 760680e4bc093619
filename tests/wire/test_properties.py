"""Property tests: parsers classify every input, cursors never leak across threads."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.core.errors import CODES, BadCursor, InputRejected
from awaken.ledger.paging import decode_cursor, encode_cursor
from awaken.wires.agui.request import parse_run_input

json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=20,
)
message = st.fixed_dictionaries(
    {"id": st.text(min_size=1, max_size=4), "role": st.sampled_from(["user", "system", "tool", "assistant", "x"])},
    optional={"content": json_values, "toolCallId": json_values, "error": json_values},
)
run_input = st.fixed_dictionaries(
    {"threadId": st.text(max_size=4) | json_values, "runId": st.text(max_size=4) | json_values,
     "messages": st.lists(message, max_size=3) | json_values},
    optional={"tools": json_values, "context": json_values, "state": json_values, "forwardedProps": json_values,
              "resume": json_values, "parentRunId": json_values, "protocolVersion": json_values},
)


@settings(max_examples=150, deadline=None)
@given(run_input)
def test_agui_parser_accepts_or_rejects_with_a_catalogue_code(data):
    """CONTRACT §3: any body is either a valid input or one classified rejection, never a crash."""
    try:
        parsed = parse_run_input(orjson.dumps(data), "application/json")
    except InputRejected as exc:
        assert exc.code in CODES and CODES[exc.code][0] == "input"
        return
    assert isinstance(parsed.thread_id, str) and parsed.thread_id
    assert len(parsed.message_ids) == len(set(parsed.message_ids))


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=64))
def test_agui_parser_classifies_arbitrary_bytes(body):
    with pytest.raises(InputRejected) as info:
        parse_run_input(body, "application/json")
    assert info.value.code in {"INVALID_JSON", "INVALID_REQUEST"}


@settings(max_examples=200, deadline=None)
@given(st.text(min_size=1, max_size=20), st.text(min_size=1, max_size=20), st.integers(0, 10**9))
def test_a_cursor_belongs_to_its_thread_only(thread_a, thread_b, seq):
    """CONTRACT §3: a cursor from another thread is not in this thread's sequence (400)."""
    cursor = encode_cursor(thread_a, seq)
    assert decode_cursor(thread_a, cursor) == seq
    if thread_a != thread_b:
        with pytest.raises(BadCursor):
            decode_cursor(thread_b, cursor)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=30))
def test_fabricated_cursors_are_refused(garbage):
    try:
        seq = decode_cursor("t", garbage)
    except BadCursor:
        return
    assert encode_cursor("t", seq).rstrip("=") == garbage.rstrip("=")
