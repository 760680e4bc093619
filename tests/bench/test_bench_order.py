"""The benchmark's interleaving: every endpoint runs once a round, none twice in a row, each in every place
about equally often, and a run repeats its orders."""

from __future__ import annotations

from collections import Counter
from itertools import pairwise

from bench.measure import turn_orders


def test_each_round_runs_every_endpoint_once_and_none_twice_in_a_row() -> None:
    for count in (1, 2, 3, 5):
        sequence = [k for order in turn_orders(count, 300) for k in order]
        assert len(sequence) == 300 * count
        for start in range(0, len(sequence), count):
            assert sorted(sequence[start:start + count]) == list(range(count))
        if count > 1:
            assert all(a != b for a, b in pairwise(sequence))


def test_each_endpoint_takes_every_place_and_follows_every_other_about_equally() -> None:
    rounds, count = 1200, 4
    orders = list(turn_orders(count, rounds))
    places = Counter((k, place) for order in orders for place, k in enumerate(order))
    sequence = [k for order in orders for k in order]
    follows = Counter(pairwise(sequence))
    assert set(places) == {(k, p) for k in range(count) for p in range(count)}
    assert max(places.values()) < 1.25 * rounds / count and min(places.values()) > 0.75 * rounds / count
    pairs = len(sequence) - 1
    assert set(follows) == {(a, b) for a in range(count) for b in range(count) if a != b}
    expected = pairs / (count * (count - 1))
    assert max(follows.values()) < 1.25 * expected and min(follows.values()) > 0.75 * expected


def test_a_run_repeats_its_orders() -> None:
    assert list(turn_orders(4, 50)) == list(turn_orders(4, 50))
    assert list(turn_orders(4, 50)) != list(turn_orders(4, 50, seed=1))
