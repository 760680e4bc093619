"""Hardening, the engine's side: no run outlives its thread claim (issue 12, finding 1).

A final commit the store cannot take in time is not given up: the thread stays busy (``THREAD_BUSY``
with a retry hint), the failure is logged, and the reconciler commits the outcome once the store
answers, and only then frees the thread.
"""

from __future__ import annotations

import logging
import os

import attrs
import pytest
import trio
import trio.testing

from awaken.core import events as ev
from awaken.core.errors import ConfigError, InputRejected
from awaken.core.principal import ANONYMOUS
from awaken.engine import outcome
from awaken.engine.state import RunStatus
from awaken.http import app as server_module
from awaken.ledger.registry import build_ledger
from tests.builders import agui_body, held, live_server, make_config, post_agui
from tests.engine.test_engine_runs import ask, engine, run_once


async def test_a_final_commit_the_store_cannot_take_in_time_keeps_the_thread_busy_until_it_is_committed(
        tmp_path, monkeypatch, caplog):
    monkeypatch.setattr(outcome, "FINAL_COMMIT_TIMEOUT", 0.05)
    caplog.set_level(logging.WARNING, logger="awaken.engine")
    async with engine(tmp_path) as ctx, trio.open_nursery() as server:
        server.start_soon(ctx.app.reconcile_forever)
        store_answers = trio.Event()
        real_commit = ctx.ledger.commit

        async def slow_commit(thread_id, run_id, commit):  # noqa: ANN001, ANN202 - the ledger's signature
            if commit.status is RunStatus.INTERRUPTED:
                await store_answers.wait()
            return await real_commit(thread_id, run_id, commit)

        monkeypatch.setattr(ctx.ledger, "commit", slow_commit)
        with trio.CancelScope() as connection:  # the client goes away after the first delta

            def sink(event: object) -> None:
                if isinstance(event, ev.TextDelta):
                    connection.cancel()

            async with ctx.app.admit("t1", None, ask("t1", "/words 50", run_id="r1"), principal=ANONYMOUS) as run:
                await run.execute(sink)
        assert ctx.app.is_active("t1")
        assert (await ctx.ledger.get_run("r1")).status is RunStatus.RUNNING
        assert any("r1" in r.getMessage() and "stays busy" in r.getMessage() for r in caplog.records)
        with pytest.raises(InputRejected) as refused:
            async with ctx.app.admit("t1", None, ask("t1", "next"), principal=ANONYMOUS):
                pass
        assert refused.value.code == "THREAD_BUSY" and "retry" in refused.value.message
        assert len(await ctx.ledger.list_runs("t1")) == 1

        store_answers.set()
        with trio.fail_after(5):
            assert await run.settled() is RunStatus.INTERRUPTED
        record = await ctx.ledger.get_run("r1")
        assert (record.status, record.error_message) == (RunStatus.INTERRUPTED, "the client disconnected")
        assert not ctx.app.is_active("t1")
        _, status = await run_once(ctx.app, "t1", ask("t1", "next"))
        assert status is RunStatus.COMPLETED
        server.cancel_scope.cancel()


async def stopped_while_committing(client, ledger, monkeypatch, thread_id: str,  # noqa: ANN001 - test objects
                                   first: list[dict]) -> trio.Event:
    """Hold ``ledger``'s ``interrupted`` commits until the returned event is set; start run ``r1`` on
    ``thread_id``, go once its first delta arrived, and return once the run is committing ``interrupted``."""
    store_answers, attempted = trio.Event(), trio.Event()
    real_commit = ledger.commit

    async def held_commit(thread_id, run_id, commit):  # noqa: ANN001, ANN202 - the ledger's signature
        if commit.status is RunStatus.INTERRUPTED:
            attempted.set()
            await store_answers.wait()
        return await real_commit(thread_id, run_id, commit)

    monkeypatch.setattr(ledger, "commit", held_commit)
    async with client.stream("POST", "/v1/ag-ui", json=agui_body(thread_id, "r1", first)) as response:
        async for chunk in response.aiter_bytes():  # the run holds after its first delta
            if b"TEXT_MESSAGE_CONTENT" in chunk:
                break
    with trio.fail_after(10):
        await attempted.wait()  # the client is gone: the run is committing `interrupted`
    return store_answers


async def test_a_disconnected_run_whose_final_commit_is_slow_never_runs_beside_the_next_run_on_its_thread(
        tmp_path, monkeypatch, caplog):
    """Finding 1 over HTTP: the client goes while its run streams and the store is too slow to take the
    run's final commit in time. The thread stays busy (``THREAD_BUSY``, retry hint) until the outcome
    is committed: never a second run beside a run left ``running``."""
    monkeypatch.setattr(outcome, "FINAL_COMMIT_TIMEOUT", 0.05)
    caplog.set_level(logging.WARNING, logger="awaken.engine")
    async with live_server(make_config(tmp_path)) as srv, srv.client() as client:
        ledger = srv.ctx.ledger
        first = [{"id": "m1", "role": "user", "content": held("zombie")}]
        store_answers = await stopped_while_committing(client, ledger, monkeypatch, "z", first)
        with trio.fail_after(10):  # the final commit has given up waiting (and said so)
            while not any("r1" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING):
                await trio.sleep(0.01)
        second = await post_agui(client, agui_body("z", "r2", [*first, {"id": "m2", "role": "user", "content": "hi"}]))
        assert second[-1]["type"] == "RUN_ERROR", [e["type"] for e in second]
        assert second[-1]["code"] == "THREAD_BUSY" and "retry" in second[-1]["message"]
        assert [r.run_id for r in await ledger.list_runs("z")] == ["r1"]
        assert any("r1" in r.getMessage() for r in caplog.records if r.levelno >= logging.WARNING)

        store_answers.set()
        with trio.fail_after(10):
            while (await ledger.get_run("r1")).status is RunStatus.RUNNING:
                await trio.sleep(0.02)
        record = await ledger.get_run("r1")
        assert (record.status, record.error_message) == (RunStatus.INTERRUPTED, "the client disconnected")
        third = await post_agui(client, agui_body("z", "r3", [*first, {"id": "m3", "role": "user", "content": "hi"}]))
        assert third[-1]["type"] == "RUN_FINISHED"


async def test_new_input_sent_as_the_client_stops_its_stream_waits_for_the_interrupted_commit(tmp_path, monkeypatch):
    """A page that stops a stream and sends again at once (useChat's edit of a message): the first run's
    ``interrupted`` outcome is being committed when the new input arrives. The new input waits for that
    commit, as for a run that ends, and its run starts: no ``THREAD_BUSY``."""
    async with live_server(make_config(tmp_path)) as srv, srv.client() as client:
        ledger = srv.ctx.ledger
        first = [{"id": "m1", "role": "user", "content": held("stopped")}]
        store_answers = await stopped_while_committing(client, ledger, monkeypatch, "s", first)
        answers: list[list[dict]] = []

        async def send_again() -> None:
            answers.append(await post_agui(client, agui_body("s", "r2", [*first, {"id": "m2", "role": "user",
                                                                                  "content": "again"}])))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(send_again)
            await trio.testing.wait_all_tasks_blocked()
            assert answers == []  # admitted nowhere yet: it waits for the first run's outcome
            store_answers.set()
        assert answers[0][-1]["type"] == "RUN_FINISHED", answers[0][-1]
        assert [(r.run_id, r.status) for r in await ledger.list_runs("s")] == [
            ("r1", RunStatus.INTERRUPTED), ("r2", RunStatus.COMPLETED)]


# -- the store: readiness, a vanished file, durability (findings 8 and 10) -------------------------


async def test_readyz_is_503_and_runs_refuse_once_the_sqlite_file_is_deleted(tmp_path, monkeypatch):
    monkeypatch.setattr(server_module, "READY_CACHE_SECONDS", 0.0)
    async with live_server(make_config(tmp_path)) as srv, srv.client() as client:
        first = await post_agui(client, agui_body("t1", "r1", [{"id": "m1", "role": "user", "content": "hi"}]))
        assert first[-1]["type"] == "RUN_FINISHED"
        assert (await client.get("/readyz")).status_code == 200
        os.unlink(tmp_path / "awaken.db")
        response = await client.get("/readyz")
        assert response.status_code == 503 and response.json()["error"]["code"] == "STORE_UNAVAILABLE"
        again = await post_agui(client, agui_body("t1", "r2", [{"id": "m1", "role": "user", "content": "hi"},
                                                               {"id": "m2", "role": "user", "content": "more"}]))
        assert again[-1]["type"] == "RUN_ERROR" and again[-1]["code"] == "STORE_UNAVAILABLE"


def test_sqlite_durability_is_a_config_choice_defaulting_to_full(tmp_path):
    from storage_backends.sqlite_ledger import SqliteLedger

    assert SqliteLedger(str(tmp_path / "a.db")).synchronous == "full"
    assert SqliteLedger(str(tmp_path / "a.db"), synchronous="normal").synchronous == "normal"
    with pytest.raises(ConfigError, match="synchronous"):
        build_ledger(attrs.evolve(make_config(tmp_path), ledger=attrs.evolve(
            make_config(tmp_path).ledger, options={"synchronous": "off"})))


async def test_the_sqlite_ledger_runs_with_the_synchronous_mode_it_was_given(tmp_path):
    from storage_backends.sqlite_ledger import SqliteLedger

    # "full" is SQLite's NORMAL (1) plus the group commit's fsync of the WAL before every acknowledgement
    for mode, grouped in (("full", True), ("normal", False)):
        ledger = SqliteLedger(str(tmp_path / f"{mode}.db"), synchronous=mode)
        await ledger.open()
        try:
            assert await ledger._call(lambda db: db.conn.execute("PRAGMA synchronous").fetchone()[0]) == 1
            assert (ledger.group is not None) == grouped
        finally:
            await ledger.aclose()
