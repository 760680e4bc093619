"""The examples under ``examples/`` run (issue 31 item 3), so they cannot rot.

* ``python-tool``: its ``config.toml`` loads ``weather_tool.py`` from beside it, and the tool answers
  through a live server, its HTTP calls going to a local stand-in for Open-Meteo (no network).
* ``python-client``: the script streams a run from a live server and prints what it read.
* ``usechat`` and ``copilotkit``: each app is built with its own esbuild (``npm run build`` in its folder,
  after ``npm ci``), served from ``http://localhost:<port>`` and driven in headless Chromium against a live
  server on ``http://127.0.0.1:<port>`` (another origin), one browser session per app covering what its
  README promises; screenshots are checked for what they show.
"""

from __future__ import annotations

import json
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import attrs
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from awaken.config import load_config
from tests.builders import agui_body, live_server, post_agui, types, user

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples"

Handler = Callable[[str, dict[str, list[str]]], tuple[int, str, bytes]]


@asynccontextmanager
async def http_server(handler: Handler) -> AsyncIterator[tuple[str, list[tuple[str, dict[str, list[str]]]]]]:
    """Serve ``handler(path, query) -> (status, content type, body)`` for GETs on 127.0.0.1; yields the
    base URL (``http://localhost:<port>``: another origin than a server on 127.0.0.1) and the requests seen."""
    seen: list[tuple[str, dict[str, list[str]]]] = []

    async def app(scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            while (await receive())["type"] != "lifespan.shutdown":
                await send({"type": "lifespan.startup.complete"})
            await send({"type": "lifespan.shutdown.complete"})
            return
        query = parse_qs(scope["query_string"].decode())
        seen.append((scope["path"], query))
        status, kind, body = handler(scope["path"], query)
        await send({"type": "http.response.start", "status": status,
                    "headers": [(b"content-type", kind.encode()), (b"cache-control", b"no-store")]})
        await send({"type": "http.response.body", "body": body})

    config = HypercornConfig()
    config.bind = ["127.0.0.1:0"]
    config.accesslog = None
    config.errorlog = None
    async with trio.open_nursery() as nursery:
        binds = await nursery.start(partial(serve, app, config))  # type: ignore[arg-type]
        yield binds[0].replace("127.0.0.1", "localhost"), seen
        nursery.cancel_scope.cancel()


# -- python-tool ----------------------------------------------------------------------------------------

PLACES = {"Oslo": {"name": "Oslo", "latitude": 59.91, "longitude": 10.75, "country": "Norway"}}


def open_meteo(path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
    """A stand-in for Open-Meteo's geocoding and forecast endpoints."""
    if path == "/v1/search":
        place = PLACES.get(query["name"][0])
        return 200, "application/json", json.dumps({"results": [place]} if place else {}).encode()
    if path == "/v1/forecast" and query["current"] == ["temperature_2m,wind_speed_10m"]:
        return 200, "application/json", json.dumps({
            "current": {"time": "2026-12-02T12:00", "temperature_2m": -3.5, "wind_speed_10m": 11.2},
            "current_units": {"temperature_2m": "°C", "wind_speed_10m": "km/h"},
        }).encode()
    return 404, "text/plain", b"not found"


async def test_the_python_tool_example_calls_its_http_api(tmp_path):
    async with http_server(open_meteo) as (api, seen):
        config = load_config(EXAMPLES / "python-tool" / "config.toml", environ={})
        tools = attrs.evolve(config.tools, settings={"weather": {"geocoding_url": f"{api}/v1/search",
                                                                 "forecast_url": f"{api}/v1/forecast"}})
        config = attrs.evolve(config, tools=tools,
                              ledger=attrs.evolve(config.ledger, path=str(tmp_path / "awaken.db")))
        async with live_server(config) as server, server.client() as client:
            events = await post_agui(client, agui_body("w1", "r1", [user("u1", '/call weather {"city": "Oslo"}')]))
            missing = await post_agui(client, agui_body("w2", "r2", [user("u1", '/call weather {"city": "Nowhere"}')]))
    progress = [e["value"]["data"] for e in events if e["type"] == "CUSTOM"]
    assert progress == [{"step": "geocoding", "city": "Oslo"}, {"step": "forecast", "place": "Oslo"}]
    (result,) = [e for e in events if e["type"] == "TOOL_CALL_RESULT"]
    assert json.loads(result["content"]) == {
        "place": "Oslo", "country": "Norway", "time": "2026-12-02T12:00", "temperature": -3.5,
        "temperature_unit": "°C", "wind_speed": 11.2, "wind_speed_unit": "km/h"}
    assert types(events)[-1] == "RUN_FINISHED"
    assert seen[:2] == [("/v1/search", {"name": ["Oslo"], "count": ["1"]}),
                        ("/v1/forecast", {"latitude": ["59.91"], "longitude": ["10.75"],
                                          "current": ["temperature_2m,wind_speed_10m"]})]
    (error,) = [e for e in missing if e["type"] == "TOOL_CALL_RESULT"]
    assert error["content"] == "no place called 'Nowhere' was found"


# -- python-client -----------------------------------------------------------------------------------------


async def test_the_python_client_script_streams_a_run_and_reads_the_thread(server):
    script = EXAMPLES / "python-client" / "client.py"
    done = await trio.run_process(
        [sys.executable, str(script), "--server", server.base_url, "--thread", "py1",
         '/call calculator {"expression": "6*7"}'], capture_stdout=True, capture_stderr=True)
    assert done.stdout.decode().splitlines() == [
        "[calling calculator]",
        '[calculator returned {"result":42}]',
        'Here is what the tools said: calculator returned {"result":42}.',
        "-- run ended: finished",
        "-- thread py1:",
        'user: /call calculator {"expression": "6*7"}',
        "assistant: calculator",
        'tool: {"result":42}',
        'assistant: Here is what the tools said: calculator returned {"result":42}.',
    ]
