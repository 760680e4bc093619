"""The file ledger over HTTP when its disk is full: coded RUN_ERROR, no partial commit, history intact."""

from __future__ import annotations

import errno
import os

from tests.builders import agui_body, live_server, make_config, post_agui, types


def _fail_writes(real):  # noqa: ANN001, ANN202 - wraps os.pwrite
    def pwrite(fd: int, data: bytes, offset: int) -> int:
        real(fd, data[: len(data) // 2], offset)  # a torn half reaches the file, then the disk is full
        raise OSError(errno.ENOSPC, "No space left on device")

    return pwrite


async def test_disk_full_gives_store_unavailable_and_commits_nothing(tmp_path, monkeypatch):
    """Issue 5.6: a store that cannot be written (disk full, simulated) gives a coded RUN_ERROR on
    runs and no partial commit; what was committed before still pages back (never a false empty
    thread), and the next run after the disk frees up commits normally."""
    config = make_config(tmp_path, backend="files")
    async with live_server(config) as server, server.client() as client:
        await post_agui(client, agui_body("t", "r1", [{"id": "u1", "role": "user", "content": "first"}]))
        before = (await client.get("/v1/ag-ui/threads/t/messages")).json()
        with monkeypatch.context() as patch:
            patch.setattr(os, "pwrite", _fail_writes(os.pwrite))
            events = await post_agui(client, agui_body("t", "r2", [{"id": "u2", "role": "user", "content": "x"}]))
            during = await client.get("/v1/ag-ui/threads/t/messages")
        assert (events[-1]["type"], events[-1]["code"]) == ("RUN_ERROR", "STORE_UNAVAILABLE")
        assert "RUN_FINISHED" not in types(events)
        assert during.status_code == 200 and during.json() == before
        after = await post_agui(client, agui_body("t", "r3", [{"id": "u3", "role": "user", "content": "again"}]))
        history = (await client.get("/v1/ag-ui/threads/t/messages")).json()["items"]
        runs = await server.ctx.ledger.list_runs("t")
    assert types(after)[-1] == "RUN_FINISHED"
    assert [m["id"] for m in history][:2] == ["u1", before["items"][1]["id"]]
    assert [m["role"] for m in history] == ["user", "assistant", "user", "assistant"]
    assert [r.run_id for r in runs] == ["r1", "r3"]
