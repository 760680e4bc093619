"""The run relay when Postgres goes away (issue 29 item 5): Postgres stopped (``pg_ctl stop -m fast``)
while process B's watcher follows a run held on process A, then started again. B's watcher gets a coded
end (``RUN_ERROR STORE_UNAVAILABLE``), not a hang; while Postgres is away ``/readyz`` says so on both
processes; once it is back both answer ready again and run new turns, neither restarted; the held run
goes on to its committed end. A SIGKILLed owner is ``tests/ledger/test_relay.py``.

The servers use a cluster of this test's own (``pg_cluster.private_cluster``), not the session's, which
other tests use meanwhile.
"""

from __future__ import annotations

import contextlib
from pathlib import Path

import httpx
import pytest
import trio

from awaken.streams.relayed import STORE_GRACE_SECONDS
from tests import pg_cluster
from tests.builders import Frames, agui_body, agui_text, held, is_type, post_agui, types, user
from tests.ledger.test_ledger_postgres import write_config
from tests.ledger.test_relay import rest
from tests.ledger.test_scaleout import awaken_serve, release_on

pytestmark = [pytest.mark.slow, pytest.mark.timeout(150)]

#: longer than the outage: no process takes the other for dead meanwhile (that is the SIGKILL test's case)
LEASE = 30
#: how long a call waits for a pooled connection before StoreUnavailable (the default 5 s made each of
#: the watcher's reads and each /readyz wait that long while Postgres was away)
CONNECT_TIMEOUT = 1


async def ready(client: httpx.AsyncClient, url: str) -> int:
    return (await client.get(f"{url}/readyz")).status_code


async def test_postgres_stopped_mid_run_ends_watchers_with_a_code_and_the_servers_recover(tmp_path: Path) -> None:
    with pg_cluster.private_cluster() as own:
        config = tmp_path / "pg.toml"
        write_config(config, "postgres", own.dsn("postgres"),
                     f'{{ password_env = "{pg_cluster.PASSWORD_ENV}", lease_seconds = {LEASE}, '
                     f'connect_timeout = {CONNECT_TIMEOUT} }}')
        async with (awaken_serve(config, tmp_path / "a.log") as a, awaken_serve(config, tmp_path / "b.log") as b,
                    httpx.AsyncClient(base_url=a.url, timeout=30) as on_a,
                    httpx.AsyncClient(base_url=b.url, timeout=30) as on_b):
            async with contextlib.AsyncExitStack() as stack:
                body = agui_body("t-pg", "r-pg", [user("u1", held("g", 4))])
                origin = Frames(await stack.enter_async_context(on_a.stream("POST", "/v1/ag-ui", json=body)))
                await origin.until(is_type("TEXT_MESSAGE_CONTENT"))
                watching = await stack.enter_async_context(on_b.stream("GET", "/v1/ag-ui/threads/t-pg/stream"))
                assert watching.status_code == 200
                watcher = Frames(watching)
                await watcher.until(is_type("TEXT_MESSAGE_CONTENT"))

                own.pg_ctl("stop", "-m", "fast", "-w")
                with trio.fail_after(CONNECT_TIMEOUT * 2 + STORE_GRACE_SECONDS + 5):  # a read or two, the grace
                    tail = await rest(watcher)
                assert tail[-1][1] == {"type": "RUN_ERROR", "code": "STORE_UNAVAILABLE",
                                       "message": tail[-1][1]["message"]}, tail
                assert "RUN_FINISHED" not in str(tail)
                assert [await ready(on_a, a.url), await ready(on_b, b.url)] == [503, 503]

                own.start()
                with trio.fail_after(30):
                    while [await ready(on_a, a.url), await ready(on_b, b.url)] != [200, 200]:
                        await trio.sleep(0.2)
                await release_on(a, "g")  # the held run goes on to its end on A, committed
                with trio.fail_after(20):
                    origin_tail = await rest(origin)
                assert origin_tail[-1][1]["type"] == "RUN_FINISHED", origin_tail
            assert a.proc.poll() is None and b.proc.poll() is None  # neither was restarted
            for client, thread in [(on_a, "t-after-a"), (on_b, "t-after-b")]:
                events = await post_agui(client, agui_body(thread, f"r-{thread}", [user(f"u-{thread}", "again")]))
                assert types(events)[-1] == "RUN_FINISHED" and agui_text(events) == 'You said: "again".', events
            items = (await on_b.get("/v1/ag-ui/threads/t-pg/messages")).json()["items"]
            assert [m["id"] for m in items][:1] == ["u1"] and items[-1]["role"] == "assistant", items
