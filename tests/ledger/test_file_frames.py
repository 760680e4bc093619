"""The file ledger's frame codec: a record with a long list is encoded an item at a time (so another
thread runs between items) into exactly the bytes one encoder call makes, and decoded back, a piece at
a time, into exactly what a replay of the frame decodes."""

from __future__ import annotations

import json
import zlib

from hypothesis import given
from hypothesis import strategies as st

from storage_backends.files.frames import HEADER, SPLIT_ITEMS, decode_frames, decode_pieces, encode_pieces

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
    max_leaves=12,
)


def whole(record: dict) -> bytes:
    payload = json.dumps(record, separators=(",", ":"), ensure_ascii=False).encode("utf-8", "surrogatepass")
    return HEADER.pack(len(payload), zlib.crc32(payload)) + payload


@given(st.dictionaries(st.text(max_size=8), json_values, max_size=4), st.lists(json_values, max_size=3),
       st.integers(min_value=0, max_value=2 * SPLIT_ITEMS))
def test_a_record_encoded_an_item_at_a_time_is_the_record_encoded_whole(fields, items, count):
    record = {**fields, "type": "commit", "messages": [items[i % len(items)] if items else i for i in range(count)]}
    frame, pieces = encode_pieces(record)
    assert frame == whole(record)
    decoded = decode_frames(frame)[0][0][2]
    assert decode_pieces(pieces) == decoded == json.loads(json.dumps(record))


def test_a_long_list_is_split_into_items_and_a_short_one_is_not():
    record = {"type": "commit", "messages": [{"id": f"m{i}", "text": "\ud800 lone"} for i in range(SPLIT_ITEMS + 1)],
              "pending": [1, 2]}
    frame, pieces = encode_pieces(record)
    kinds = {key: type(piece) for key, piece in pieces}
    assert kinds == {"type": str, "messages": list, "pending": str}
    assert decode_pieces(pieces) == decode_frames(frame)[0][0][2] == record


def test_an_integer_beyond_64_bits_is_read_back_exactly():
    """``orjson`` reads an integer outside 64 bits as a float: a payload holding one is read by ``json``,
    whole or a piece at a time (a state or a tool's output may carry one)."""
    record = {"type": "commit", "state": {"big": -9223372036854775809, "huge": 2 ** 70, "id": "x" + "1" * 30},
              "messages": [{"n": 18446744073709551616} for _ in range(SPLIT_ITEMS + 1)]}
    frame, pieces = encode_pieces(record)
    assert decode_frames(frame)[0][0][2] == record
    assert decode_pieces(pieces) == record
    assert type(decode_pieces(pieces)["state"]["huge"]) is int
