"""The server's own metric instruments write exactly what prometheus-client's would for the same events."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest

from awaken.telemetry.metrics import LATENCY_BUCKETS, Family

LABELS = st.sampled_from([("a", "x"), ("a", "y"), ("b", "x")])
EVENTS = st.lists(st.tuples(LABELS, st.floats(min_value=0, max_value=20, allow_nan=False)), max_size=40)


def without_created(text: bytes) -> list[str]:
    """The exposition's lines but prometheus-client's ``_created`` timestamps (ours keep none)."""
    return [line for line in text.decode().splitlines() if "_created" not in line]


@settings(max_examples=60, deadline=None)
@given(EVENTS, EVENTS, st.lists(st.sampled_from([1, -1]), max_size=20))
def test_counters_histograms_and_gauges_render_as_prometheus_clients_own(counted, observed, moves):
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    counter = Family("things", "counter", "Things.", ("kind", "way"))
    histogram = Family("seconds", "histogram", "Seconds.", ("kind", "way"), LATENCY_BUCKETS)
    gauge = Family("open", "gauge", "Open.", ())

    class Ours:
        def collect(self):
            yield from (counter.collect(), histogram.collect(), gauge.collect())

    ours.register(Ours())
    their_counter = Counter("things", "Things.", ("kind", "way"), registry=theirs)
    their_histogram = Histogram("seconds", "Seconds.", ("kind", "way"), registry=theirs, buckets=LATENCY_BUCKETS)
    their_gauge = Gauge("open", "Open.", registry=theirs)
    for labels, amount in counted:
        counter.labels(*labels).inc(amount)
        their_counter.labels(*labels).inc(amount)
    for labels, value in observed:
        histogram.labels(*labels).observe(value)
        their_histogram.labels(*labels).observe(value)
    for move in moves:
        (gauge.inc if move > 0 else gauge.dec)()
        (their_gauge.inc if move > 0 else their_gauge.dec)()
    assert without_created(generate_latest(ours)) == without_created(generate_latest(theirs))
