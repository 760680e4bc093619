"""The console's timelines (``awaken.telemetry.tracing``): one store per server, a run's spans packed as
their JSON once its execution ended, the store bounded in runs and in bytes, a resumed run's spans after
its earlier execution's; the HTTP view of a waiting run and its resume."""

from __future__ import annotations

import orjson

from awaken.telemetry import tracing
from tests.builders import agui_body, call, call_ids, live_server, make_config, post_agui, user


def execution(store: tracing.Timelines, thread_id: str, run_id: str, *, resumed: bool = False,
              end: bool = True) -> tracing.Span:
    """One execution's spans as admission and a step make them: the root, admission, a step and its
    model call; ended (packed) unless ``end`` is false."""
    root = tracing.run("assistant", "", thread_id, "alice", store).open()
    with tracing.admission():
        pass
    tracing.identify(root, run_id, resumed=resumed)
    with tracing.step(1), tracing.chat("scripted") as chat:
        tracing.chat_result(chat, 3, 2, False)
    if end:
        tracing.ended(root, "completed")
    return root


def test_an_ended_runs_spans_are_kept_as_their_json_and_read_the_same():
    store = tracing.Timelines()
    root = execution(store, "t1", "r1", end=False)
    timeline = store.get("t1", "r1")
    assert timeline is root.timeline and len(timeline.spans) == 4 and timeline.packed == b""
    root.set("awaken.run.status", "completed")
    root.close()
    live = orjson.loads(orjson.dumps(timeline.as_json()))  # as the threads API sends it (tuples are lists)
    timeline.pack()
    assert timeline.spans == [] and timeline.packed_count == 4
    assert timeline.as_json() == live
    assert [s["name"] for s in live["spans"]] == ["invoke_agent assistant", "awaken.admission", "awaken.step 1",
                                                  "chat scripted"]
    assert store.size == len(timeline.packed)


def test_a_timeline_with_a_span_still_open_is_not_packed():
    store = tracing.Timelines()
    root = execution(store, "t1", "r1", end=False)
    step = tracing.step(2).open()  # a span of the run still open (the run's root is the current span)
    root.timeline.pack()
    assert len(root.timeline.spans) == 5 and root.timeline.packed == b""
    step.close()
    tracing.ended(root, "completed")
    assert root.timeline.spans == [] and root.timeline.packed_count == 5


def test_the_store_keeps_the_newest_runs_within_its_byte_bound():
    one = tracing.Timelines()
    execution(one, "t0", "r0")
    store = tracing.Timelines(limit=100, limit_bytes=3 * one.size + 100)  # about three runs' packed spans
    sizes = [len(execution(store, f"t{i}", f"r{i}").timeline.packed) for i in range(10)]
    kept = [i for i in range(10) if store.get(f"t{i}", f"r{i}") is not None]
    assert kept == list(range(10 - len(kept), 10)) and len(kept) == 3  # the newest
    assert store.size == sum(sizes[-3:]) <= store.limit_bytes < sum(sizes[-4:])
    dropped = one.get("t0", "r0")
    one.clear()
    assert one.size == 0 and dropped is not None and dropped.key is None


def test_the_store_keeps_at_most_its_run_count():
    store = tracing.Timelines(limit=2)
    for i in range(3):
        execution(store, "t", f"r{i}")
    assert (store.get("t", "r0"), len(store)) == (None, 2)


def test_a_resumed_executions_spans_follow_the_packed_ones_of_the_run():
    store = tracing.Timelines()
    first = execution(store, "t1", "r1")
    before = store.get("t1", "r1").as_json()["spans"]
    second = execution(store, "t1", "r1", resumed=True)
    timeline = store.get("t1", "r1")
    assert second.timeline is timeline is first.timeline and len(store) == 1
    spans = timeline.as_json()["spans"]
    assert spans[:4] == before and [s["kind"] for s in spans[4:]] == ["run", "admission", "step", "model"]
    assert spans[4]["attributes"]["resumed"] is True
    assert timeline.spans == [] and timeline.packed_count == 8 and store.size == len(timeline.packed)


def test_a_renamed_run_is_kept_under_its_new_id_only():
    store = tracing.Timelines()
    root = execution(store, "t1", "r-client", end=False)
    tracing.identify(root, "r-fresh", resumed=False)  # what ``renamed`` does for the current run
    tracing.ended(root, "completed")
    assert store.get("t1", "r-client") is None and store.get("t1", "r-fresh") is root.timeline
    assert len(store) == 1 and store.size == len(root.timeline.packed)


def test_a_run_with_no_store_keeps_nothing():
    root = execution(tracing.Timelines(), "t1", "r1")
    bare = tracing.run("assistant", "", "t2", None).open()
    tracing.identify(bare, "r2", resumed=False)
    tracing.ended(bare, "completed")
    assert bare.timeline.key is None and root.timeline.key == ("t1", "r1")


async def test_a_waiting_runs_timeline_is_packed_its_resume_joins_it_and_each_server_keeps_its_own(tmp_path):
    config = make_config(tmp_path)
    async with live_server(config) as server, server.client() as client:
        events = await post_agui(client, agui_body("t-w", "r-w", [user("u1", call("calculator", expression="1"))]),
                                 "/v1/ag-ui/agents/guarded")
        (cid,) = call_ids(events)
        kept = server.ctx.timelines.get("t-w", "r-w")
        assert kept is not None and kept.spans == [] and kept.packed_count == 6  # ended waiting: packed
        resume = agui_body("t-w", "r-w2", [user("u1", "x"), {"id": "d1", "role": "tool", "toolCallId": cid,
                                                             "content": "approved"}])
        assert (await post_agui(client, resume, "/v1/ag-ui/agents/guarded"))[-1]["type"] == "RUN_FINISHED"
        (run,) = (await client.get("/v1/threads/t-w")).json()["runs"]
        assert run["status"] == "completed" and kept.spans == []
        kinds = [s["kind"] for s in run["timeline"]["spans"]]
        # the execution that ended waiting, then the resume's (each in the order its spans started)
        assert (kinds[0], sorted(kinds[:6])) == ("run", sorted(["run", "admission", "step", "model", "commit", "commit"]))
        assert (kinds[6], sorted(kinds[6:])) == ("run", sorted(["run", "admission", "gate", "tool", "commit", "step",
                                                                 "model", "commit"]))
    async with live_server(config) as other, other.client() as client:
        assert len(other.ctx.timelines) == 0
        assert (await client.get("/v1/threads/t-w")).json()["runs"][0]["timeline"] is None
