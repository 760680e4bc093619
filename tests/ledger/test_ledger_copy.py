"""`awaken ledger copy`: the whole history moves between backends and a waiting run resumes there."""

from __future__ import annotations

import sys
import tomllib

import orjson
import trio

from awaken.config import load_config
from awaken.engine.state import RunStatus
from awaken.ledger.copy import copy_ledger
from awaken.ledger.interface import ALL_OWNERS, Commit
from awaken.ledger.registry import build_ledger
from awaken.ledger.testkit.harness import opened, run_record, user
from tests.builders import ROOT, agui_body, live_server, make_config, post_agui, types
from tests.ledger_harness import file_ledger, sqlite_ledger


def _write_config(path, ledger_backend: str, ledger_path) -> None:
    text = (ROOT / "config.toml").read_text()
    text = text.replace('backend = "sqlite"', f'backend = "{ledger_backend}"')
    text = text.replace('path = "./var/awaken.db"', f'path = "{ledger_path}"')
    path.write_text(text)
    assert tomllib.loads(path.read_text())["ledger"]["backend"] == ledger_backend


async def test_a_thread_moves_from_sqlite_to_files_and_resumes_over_http(tmp_path):
    """Issue 5.5: copy verifies counts; the waiting run resumes on the file ledger and finishes."""
    sqlite_config = make_config(tmp_path / "a")
    async with live_server(sqlite_config) as server, server.client() as client:
        first = await post_agui(client, agui_body("moving", "r1", [
            {"id": "u1", "role": "user", "content": '/call calculator {"expression": "6*7"}'}]),
            path="/v1/ag-ui/agents/guarded")
        await post_agui(client, agui_body("other", "r2", [{"id": "u1", "role": "user", "content": "hello"}]))
    call_id = next(e["toolCallId"] for e in first if e["type"] == "TOOL_CALL_START")
    assert types(first)[-1] == "RUN_FINISHED"

    a, b = tmp_path / "a.toml", tmp_path / "b.toml"
    _write_config(a, "sqlite", tmp_path / "a" / "awaken.db")
    _write_config(b, "files", tmp_path / "b" / "ledger")
    copy = await trio.run_process([sys.executable, "-m", "awaken", "ledger", "copy", "--from", str(a), "--to", str(b)],
                                  capture_stdout=True, capture_stderr=True, check=False)
    assert copy.returncode == 0, copy.stderr.decode()
    assert copy.stdout.decode().strip() == (
        "copied and verified 2 threads, 2 runs, 4 messages, 1 pending calls")
    again = await trio.run_process([sys.executable, "-m", "awaken", "ledger", "copy", "--from", str(a), "--to", str(b)],
                                   capture_stdout=True, capture_stderr=True, check=False)
    assert again.returncode == 1
    assert "already exists in the destination ledger" in again.stderr.decode()

    files_config = make_config(tmp_path / "b", backend="files")
    async with live_server(files_config) as server, server.client() as client:
        before = (await client.get("/v1/ag-ui/threads/moving/messages")).json()["items"]
        resumed = await post_agui(client, agui_body("moving", "r3", [
            {"id": "u1", "role": "user", "content": '/call calculator {"expression": "6*7"}'},
            *before[1:],
            {"id": "t1", "role": "tool", "toolCallId": call_id, "content": "ok"},
        ]), path="/v1/ag-ui/agents/guarded")
        runs = await server.ctx.ledger.list_runs("moving")
        after = (await client.get("/v1/ag-ui/threads/moving/messages")).json()["items"]
    assert [m["role"] for m in before] == ["user", "assistant"]
    assert types(resumed)[:2] == ["RUN_STARTED", "TOOL_CALL_RESULT"] and types(resumed)[-1] == "RUN_FINISHED"
    assert [(r.run_id, r.status) for r in runs] == [("r1", "completed")]
    assert [m["role"] for m in after] == ["user", "assistant", "tool", "assistant"]
    assert after[-1]["content"] == 'Here is what the tools said: calculator returned {"result":42}.'


async def test_a_second_process_cannot_open_a_live_sqlite_ledger(tmp_path):
    """One process owns a ledger: opening it again (a second `awaken serve`, or `ledger copy` from a
    running server) would recover the live runs as interrupted. It is refused, and nothing changes."""
    config = make_config(tmp_path / "a")
    a = tmp_path / "a.toml"
    b = tmp_path / "b.toml"
    _write_config(a, "sqlite", tmp_path / "a" / "awaken.db")
    _write_config(b, "files", tmp_path / "b" / "ledger")
    async with live_server(config) as server, server.client() as client:
        await post_agui(client, agui_body("t", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))
        copy = await trio.run_process(
            [sys.executable, "-m", "awaken", "ledger", "copy", "--from", str(a), "--to", str(b)],
            capture_stdout=True, capture_stderr=True, check=False)
        runs = await server.ctx.ledger.list_runs("t")
    assert copy.returncode == 1
    assert "is in use by another process (stop it first)" in copy.stderr.decode()
    assert [r.status for r in runs] == ["completed"]


async def test_copy_keeps_owners_titles_and_listing_order(tmp_path):
    """Issue 13.5: owners travel with their threads, and the destination lists the same summaries in
    the same order (updated_at is copied, not reset), in both directions."""
    async with opened(sqlite_ledger, tmp_path / "a") as source:
        for n, owner in enumerate(["alice", None, "bob", "alice"]):
            await source.start_run(run_record(f"r{n}", f"t{n}"), [user("u1", f"thread {n}")], owner=owner)
        await source.commit("t0", "r0", Commit(RunStatus.COMPLETED))
        listing = await source.list_thread_summaries(ALL_OWNERS, limit=10)
        async with opened(file_ledger, tmp_path / "b") as files:
            report = await copy_ledger(source, files)
            assert report.threads == 4
            assert await files.list_thread_summaries(ALL_OWNERS, limit=10) == listing
            assert [t.owner for t in await files.list_threads()] == ["alice", None, "bob", "alice"]
            async with opened(sqlite_ledger, tmp_path / "c") as back:
                await copy_ledger(files, back)
                assert await back.list_thread_summaries(ALL_OWNERS, limit=10) == listing


# -- paths follow the config file; copies that would do nothing, or harm, are refused ---------------------


async def _awaken(cwd, *args: str) -> tuple[int, str, str]:
    """``awaken ARGS`` run from ``cwd``: (exit code, stdout, stderr)."""
    done = await trio.run_process([sys.executable, "-m", "awaken", *args], cwd=cwd, capture_stdout=True,
                                  capture_stderr=True, check=False)
    return done.returncode, done.stdout.decode(), done.stderr.decode()


def _configs(tmp_path):
    """``a/config.toml`` (SQLite at ``./var/awaken.db``) and ``b/config.toml`` (files at ``./ledger``), both
    relative, and a third directory to run the command from."""
    a, b, elsewhere = tmp_path / "a", tmp_path / "b", tmp_path / "elsewhere"
    for d in (a, b, elsewhere):
        d.mkdir()
    _write_config(a / "config.toml", "sqlite", "./var/awaken.db")
    _write_config(b / "config.toml", "files", "./ledger")
    return a, b, elsewhere


async def _one_thread(config_file) -> None:
    """One committed thread in the ledger ``config_file`` names (its path read as the server reads it)."""
    ledger = build_ledger(load_config(config_file, environ={}))
    await ledger.open()
    try:
        await ledger.start_run(run_record("r1", "t1"), [user("u1", "hello")], owner=None)
        await ledger.commit("t1", "r1", Commit(RunStatus.COMPLETED))
    finally:
        await ledger.aclose()


async def test_relative_paths_in_config_files_follow_the_file_from_any_working_directory(tmp_path):
    a, b, elsewhere = _configs(tmp_path)
    await _one_thread(a / "config.toml")
    assert (a / "var" / "awaken.db").is_file()  # beside its config, not in the test's working directory
    code, out, err = await _awaken(elsewhere, "ledger", "copy", "--from", "../a/config.toml", "--to", "../b/config.toml")
    assert code == 0, err
    assert out.strip() == "copied and verified 1 threads, 1 runs, 1 messages, 0 pending calls"
    assert (b / "ledger").is_dir() and list(elsewhere.iterdir()) == []  # nothing created where it ran
    code, out, err = await _awaken(elsewhere, "config", "check", "--config", "../b/config.toml")
    assert code == 0, err
    assert orjson.loads(out)["ledger"]["path"] == str(b / "ledger")  # what `serve` would open


async def test_copy_refuses_a_source_ledger_that_does_not_exist_and_creates_nothing(tmp_path):
    a, b, elsewhere = _configs(tmp_path)
    code, out, err = await _awaken(elsewhere, "ledger", "copy", "--from", "../a/config.toml", "--to", "../b/config.toml")
    assert (code, out) == (1, "")
    assert err.strip() == (f"awaken: ledger copy refused: the source ledger does not exist: sqlite at {a}/var/awaken.db "
                           "(relative paths in a config file are read from that file's directory); nothing was "
                           "copied or created")
    assert [p for d in (a, b, elsewhere) for p in d.iterdir()] == [a / "config.toml", b / "config.toml"]


async def test_copy_refuses_an_empty_source_into_an_empty_destination(tmp_path):
    a, b, elsewhere = _configs(tmp_path)
    (a / "var").mkdir()
    ledger = build_ledger(load_config(a / "config.toml", environ={}))
    await ledger.open()  # an existing ledger with no thread in it
    await ledger.aclose()
    code, _, err = await _awaken(elsewhere, "ledger", "copy", "--from", "../a/config.toml", "--to", "../b/config.toml")
    assert code == 1
    assert err.strip() == (f"awaken: ledger copy refused: the source ledger (sqlite at {a}/var/awaken.db) holds no "
                           "thread, and the destination holds none either: nothing to copy (does --from name the "
                           "config whose ledger holds the history?)")


async def test_copy_into_the_source_itself_is_refused(tmp_path):
    a, _, elsewhere = _configs(tmp_path)
    await _one_thread(a / "config.toml")
    same = elsewhere / "same.toml"  # another file naming the same ledger by another path
    _write_config(same, "sqlite", str(a / "var" / ".." / "var" / "awaken.db"))
    code, _, err = await _awaken(elsewhere, "ledger", "copy", "--from", "../a/config.toml", "--to", "same.toml")
    assert code == 1
    assert err.strip() == (f"awaken: ledger copy refused: the destination is the source ledger itself (sqlite at "
                           f"{a}/var/awaken.db): a ledger cannot be copied into itself; name another ledger in --to")
