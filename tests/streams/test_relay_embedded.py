"""One process pays nothing for the run relay (issue 29 item 6): with an embedded ledger (SQLite,
files) ``Ledger.relay()`` is None, a run's broadcast carries no relay, the claims upkeep starts no relay
task, and a rejoin on a thread where nothing runs never looks for a run on another process."""

from __future__ import annotations

from pathlib import Path

import pytest

from awaken.ledger import relay as relay_module
from awaken.streams import rejoin
from tests.builders import Frames, agui_body, held, is_type, live_server, make_config, release, user


@pytest.mark.parametrize("backend", ["sqlite", "files"])
async def test_an_embedded_ledger_runs_no_relay_code(tmp_path: Path, backend: str,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    def never(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("relay code ran for an embedded ledger")

    monkeypatch.setattr(rejoin, "relayed_broadcast", never)
    monkeypatch.setattr(rejoin, "_relayed", never)
    monkeypatch.setattr(relay_module, "event_to_json", never)
    async with live_server(make_config(tmp_path, backend=backend)) as server:
        assert server.ctx.ledger.relay() is None
        async with server.client() as client:
            body = agui_body("t-one", "r-one", [user("u1", held(f"one-{backend}", 3))])
            async with client.stream("POST", "/v1/ag-ui", json=body) as response:
                frames = Frames(response)
                await frames.until(is_type("TEXT_MESSAGE_CONTENT"))
                assert server.ctx.app.active("t-one").broadcast.relay is None
                assert (await client.get("/v1/ag-ui/threads/t-idle/stream")).status_code == 204
                await release(server, f"one-{backend}")
                assert is_type("RUN_FINISHED")((await frames.rest())[-1][1])
