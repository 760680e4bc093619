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

import hashlib
import json
import struct
import sys
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs

import attrs
import pytest
import trio
from hypercorn.config import Config as HypercornConfig
from hypercorn.trio import serve

from awaken.config import load_config
from tests.browser_harness import Tab, read_history
from tests.builders import agui_body, live_server, post_agui, release, types, user

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


# -- the browser apps ------------------------------------------------------------------------------------


async def build_app(name: str) -> Path:
    """``npm run build`` in ``examples/<name>`` (its own esbuild); the ``dist/`` it wrote. A build is
    reused while its inputs (``src/``, ``build.mjs``, ``package-lock.json``) are the same."""
    folder = EXAMPLES / name
    if not (folder / "node_modules" / "esbuild").is_dir():
        raise RuntimeError(f"examples/{name}/node_modules is missing: run npm ci --prefix examples/{name}")
    digest = hashlib.sha256()
    for file in sorted([*(folder / "src").rglob("*"), folder / "build.mjs", folder / "package-lock.json"]):
        if file.is_file():
            digest.update(str(file.relative_to(folder)).encode() + b"\0" + file.read_bytes() + b"\0")
    stamp = folder / "dist" / ".inputs"
    if not (stamp.is_file() and stamp.read_text() == digest.hexdigest()):
        await trio.run_process(["node", "build.mjs"], cwd=folder, capture_stdout=True)
        stamp.write_text(digest.hexdigest())
    return folder / "dist"


def static(dist: Path) -> Handler:
    kinds = {".html": "text/html; charset=utf-8", ".js": "text/javascript", ".css": "text/css"}

    def handler(path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        file = (dist / path.lstrip("/")).resolve()
        if not file.is_relative_to(dist.resolve()) or not file.is_file():
            return 404, "text/plain", b"not found"
        return 200, kinds.get(file.suffix, "application/octet-stream"), file.read_bytes()

    return handler


@asynccontextmanager
async def app_and_server(name: str, tmp_path: Path) -> AsyncIterator[tuple[str, Any]]:
    """The example app built and served on its origin, and a live server from the example's own
    config.toml that allows that origin (the ledger under ``tmp_path``)."""
    dist = await build_app(name)
    async with http_server(static(dist)) as (origin, _):
        config = load_config(EXAMPLES / name / "config.toml", environ={})
        config = attrs.evolve(config, server=attrs.evolve(config.server, cors_origins=[origin]),
                              ledger=attrs.evolve(config.ledger, path=str(tmp_path / "awaken.db")))
        async with live_server(config) as server:
            yield origin, server


async def check_screenshot(tab: Tab, name: str) -> None:
    """A screenshot of the page as it is, checked to be the page: a PNG of the viewport's width with
    enough in it not to be blank."""
    data = (await tab.screenshot(f"example-{name}")).read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 900 and height >= 700
    assert len(data) > 20_000, f"{name}: the screenshot looks blank ({len(data)} bytes)"


def usechat_answer(state: dict[str, Any]) -> str:
    message = state["messages"][-1]
    return "".join(p["text"] for p in message["parts"] if p["type"] == "text") if message["role"] == "assistant" else ""


CHAT = "s => s.status === 'ready' && s.error === null"


@pytest.mark.slow
@pytest.mark.timeout(180)  # the first build of an app after a change takes a while
async def test_the_usechat_example(browser, tmp_path):
    """History on open, an approval answered by a button, a tool the browser runs, and a reload mid-run
    that rejoins the run (resume: true) and shows it to its end."""
    thread = "example-usechat"
    async with app_and_server("usechat", tmp_path) as (origin, server):
        tab = browser.tab("example-usechat")
        await tab.command("open", path=f"{origin}/index.html?server={server.base_url}&thread={thread}")

        async def chat(predicate: str) -> dict[str, Any]:
            return await tab.wait_for(f"() => {{ const s = window.__chat; return s && ({predicate})(s) ? s : null; }}")

        async def say(text: str) -> None:
            await tab.fill("input[name=text]", text)
            await tab.click("button[type=submit]")

        await chat(CHAT)
        await say('/call calculator {"expression": "6*7"}')
        await tab.wait_for("() => document.querySelector('.tool[data-tool=calculator] button.approve')")
        await check_screenshot(tab, "usechat-approval")
        await tab.click(".tool[data-tool=calculator] button.approve")
        state = await chat(f"{CHAT} && s.messages.length === 2 && s.messages[1].parts.at(-1).type === 'text'")
        assert usechat_answer(state) == 'Here is what the tools said: calculator returned {"result":42}.'

        await say("/call get_browser_info {}")
        state = await chat(f"{CHAT} && s.messages.length === 4 && s.messages[3].parts.at(-1).type === 'text'")
        info = await tab.command("eval", expression="JSON.stringify({timeZone: Intl.DateTimeFormat()"
                                                    ".resolvedOptions().timeZone, language: navigator.language})")
        assert usechat_answer(state) == f"Here is what the tools said: get_browser_info returned {info}."

        await say("/hold example-usechat /words 12")
        await chat("s => s.status === 'streaming' && s.messages.length === 6 && s.messages[5].parts.length > 1")
        await tab.reload()  # the history is read again and the run, still held, is rejoined
        await chat("s => s.status === 'streaming' && s.messages.length === 6")
        await release(server, "example-usechat")
        state = await chat(f"{CHAT} && s.messages.length === 6 && s.messages[5].parts.at(-1).state === 'done'")
        assert len(usechat_answer(state).split()) == 12
        async with server.client() as client:
            assert state["messages"] == await read_history(client, f"/v1/ai-sdk/threads/{thread}/messages")
        await check_screenshot(tab, "usechat-after-reload")
        assert await tab.page_errors() == []


@pytest.mark.slow
@pytest.mark.timeout(180)  # the first build of an app after a change takes a while
async def test_the_copilotkit_example(browser, tmp_path):
    """On /v1/copilotkit: a frontend tool the page answers, an approval (useHumanInTheLoop over the server's
    gated calculator), and the history after a reload; its stylesheet and fonts come from its own build."""
    thread = "example-copilotkit"
    async with app_and_server("copilotkit", tmp_path) as (origin, server):
        tab = browser.tab("example-copilotkit")
        await tab.command("open", path=f"{origin}/index.html?server={server.base_url}&thread={thread}")

        async def copilot(predicate: str) -> dict[str, Any]:
            return await tab.wait_for(f"() => {{ const s = window.__copilot; return s && ({predicate})(s) ? s : null; }}")

        async def say(text: str) -> None:
            await tab.fill("[data-testid=copilot-chat-textarea]", text)
            await tab.click("[data-testid=copilot-send-button]")

        def answered(n: int) -> str:
            return (f"s => s.ready && !s.running && s.messages.length === {n} "
                    "&& s.messages.at(-1).role === 'assistant' && s.messages.at(-1).content")

        await copilot("s => s.ready")
        await tab.fill("#color", "orange")
        await say('/call pick_color {"question": "Which color?"}')
        state = await copilot(answered(4))
        assert state["messages"][-1]["content"] == 'Here is what the tools said: pick_color returned {"color":"orange"}.'

        await say('/call calculator {"expression": "6*7"}')
        await tab.wait_for("() => document.querySelector('.tool-call[data-tool=calculator] button.approve')")
        await check_screenshot(tab, "copilotkit-approval")
        await tab.click(".tool-call[data-tool=calculator] button.approve")
        state = await copilot("s => !s.running && s.messages.at(-1).role === 'assistant' "
                              "&& (s.messages.at(-1).content || '').includes('returned')")
        assert state["messages"][-1]["content"] == 'Here is what the tools said: calculator returned {"result":42}.'
        before = await tab.text("[data-testid=copilot-message-list]")

        await tab.reload()
        state = await copilot(answered(len(state["messages"])))
        # the same conversation; the gated call now shows the server's committed result where, live, it
        # showed the person's answer to the gate
        assert '→ {"approved":true}' in before
        assert await tab.text("[data-testid=copilot-message-list]") == before.replace(
            '→ {"approved":true}', '→ {"result":42}')
        async with server.client() as client:
            assert state["messages"] == await read_history(client, f"/v1/ag-ui/threads/{thread}/messages")
        await check_screenshot(tab, "copilotkit-after-reload")
        fonts = await tab.command("eval", expression="[...document.fonts].filter(f => f.family.includes('KaTeX')).length")
        assert fonts > 0  # the stylesheet that names them was loaded from the build
        assert await tab.page_errors() == []
