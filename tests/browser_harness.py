"""The browser harness: headless Chromium running pages built with the real client libraries.

``BrowserRunner.start()`` launches ``tests/browser/runner.mjs`` (Node, playwright-core, Debian's
``/usr/bin/chromium``), which bundles ``tests/browser/pages/`` with esbuild (cached by input hash),
serves them on their own origin (``http://localhost:<port>``) and takes commands over a small JSON
control server. One runner serves a whole test module (the ``browser`` fixture in conftest.py); each
test drives a ``Tab`` and points its page at a live Awaken server on ``http://127.0.0.1:<port>``
whose ``cors_origins`` is the pages' origin (the ``cross_origin_server`` fixture), so every request
a page makes is a cross-origin one, as for a real app.

Tests wait for page conditions (``Tab.wait_for``: a JS predicate polled every animation frame in the
page), never for fixed times. Pages publish their state as ``window.__state``; screenshots go to
``SCREENSHOTS`` (``tests/browser/.out/screenshots``, or ``$AWAKEN_SCREENSHOTS``).
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import attrs
import httpx
import orjson

ROOT = Path(__file__).resolve().parent.parent
BROWSER_DIR = ROOT / "tests" / "browser"
RUNNER = BROWSER_DIR / "runner.mjs"
OUT = BROWSER_DIR / ".out"
SCREENSHOTS = Path(os.environ.get("AWAKEN_SCREENSHOTS", OUT / "screenshots"))
CHROMIUM = os.environ.get("AWAKEN_CHROMIUM", "/usr/bin/chromium")


class BrowserError(Exception):
    """The runner refused a command or a page condition was not met in time (message says which)."""


@attrs.define
class BrowserRunner:
    """A running ``runner.mjs``: its control URL and the origin its pages are served from."""

    process: subprocess.Popen
    control: str
    pages_origin: str
    log: Path

    @classmethod
    def start(cls) -> BrowserRunner:
        """Start the runner (blocking: build the pages, launch Chromium); fails loudly when the
        browser or the npm packages are missing."""
        if not Path(CHROMIUM).exists():
            raise RuntimeError(f"{CHROMIUM} is missing: install Debian's chromium package (.ci/run does)")
        if not (BROWSER_DIR / "node_modules" / "playwright-core").is_dir():
            raise RuntimeError("tests/browser/node_modules is missing: run npm ci --prefix tests/browser")
        OUT.mkdir(parents=True, exist_ok=True)
        log = OUT / "runner.log"
        with log.open("wb") as stderr:
            process = subprocess.Popen(["node", str(RUNNER), str(SCREENSHOTS)], cwd=BROWSER_DIR,
                                       stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=stderr)
        assert process.stdout is not None
        line = process.stdout.readline()
        if not line:
            process.wait(10)
            raise RuntimeError(f"the browser runner did not start: {log.read_text()}")
        hello = orjson.loads(line)
        return cls(process, hello["control"], hello["pages"], log)

    def stop(self) -> None:
        try:
            httpx.post(self.control, json={"op": "quit"}, timeout=10)
        except httpx.HTTPError:
            pass
        assert self.process.stdin is not None
        self.process.stdin.close()
        try:
            self.process.wait(15)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        finally:
            assert self.process.stdout is not None
            self.process.stdout.close()

    def tab(self, name: str) -> Tab:
        """A named tab (opened on first use, reused by later tests in the module)."""
        return Tab(self, name)


@attrs.define
class Tab:
    runner: BrowserRunner
    name: str

    async def command(self, op: str, **args: Any) -> Any:
        async with httpx.AsyncClient(timeout=60) as client:
            response = await client.post(self.runner.control, json={"op": op, "tab": self.name, **args})
        answer = response.json()
        if not answer["ok"]:
            raise BrowserError(f"{op} {args}: {answer['error']}")
        return answer["value"]

    async def open(self, page: str, **query: str) -> None:
        """Navigate to ``tests/browser/pages/<page>.html?<query>`` on the pages' origin."""
        await self.command("open", path=f"{page}.html?{urlencode(query)}")

    async def reload(self) -> None:
        await self.command("reload")

    async def click(self, selector: str) -> None:
        await self.command("click", selector=selector)

    async def fill(self, selector: str, value: str) -> None:
        await self.command("fill", selector=selector, value=value)

    async def select(self, selector: str, value: str) -> None:
        await self.command("select", selector=selector, value=value)

    async def press(self, key: str) -> None:
        """Press ``key`` on the focused element (``"Tab"``, ``"Shift+Tab"``, ``"Enter"``, ``"Space"``)."""
        await self.command("press", key=key)

    async def wait_for(self, predicate: str, arg: Any = None, within: float = 15) -> Any:
        """Wait until the JS function ``predicate(arg)`` is truthy in the page; return its value.
        ``within``: the seconds the page has (the runner's deadline; its error shows the page state)."""
        return await self.command("waitFor", predicate=predicate, arg=arg, timeout=int(within * 1000))

    async def wait_for_state(self, predicate: str, within: float = 15) -> dict[str, Any]:
        """Wait until ``predicate(window.__state)`` holds; return that state."""
        source = f"() => {{ const s = window.__state; return s && ({predicate})(s) ? s : null; }}"
        try:
            return await self.wait_for(source, within=within)
        except BrowserError as exc:  # say what the page held instead
            held = await self.state()
            raise BrowserError(f"{exc}\nthe page's state then: {orjson.dumps(held).decode()[-3000:]}") from None

    async def state(self) -> Any:
        return await self.command("eval", expression="window.__state")

    async def text(self, selector: str) -> str:
        """What a person reads in the element: its innerText, one line per non-blank line."""
        text = await self.command("text", selector=selector)
        return "\n".join(line.strip() for line in text.splitlines() if line.strip())

    async def screenshot(self, name: str) -> Path:
        return Path(await self.command("screenshot", name=name))

    async def page_errors(self) -> list[str]:
        """Uncaught exceptions in the page since its last navigation."""
        return [p for p in await self.command("problems") if p.startswith("pageerror:")]

    async def console_errors(self) -> list[str]:
        return [p for p in await self.command("problems") if p.startswith("console.error:")]


async def read_history(client: httpx.AsyncClient, path: str, branch: int | None = None) -> list[dict[str, Any]]:
    """Every committed message at a history route (``…/threads/{id}/messages``), page by page: the
    active path, or the path of ``branch`` (``?branch=N``)."""
    items: list[dict[str, Any]] = []
    cursor = ""
    also = {} if branch is None else {"branch": branch}
    while True:
        response = await client.get(path, params={"limit": 3, **also, **({"cursor": cursor} if cursor else {})})
        assert response.status_code == 200, response.text
        page = response.json()
        if not page["items"]:
            return items
        for item in page["items"]:
            known = [i for i, m in enumerate(items) if m["id"] == item["id"]]
            if known:
                items[known[0]] = item
            else:
                items.append(item)
        cursor = page["cursor"]


async def server_history(server: Any, protocol: str, thread: str, headers: dict[str, str] | None = None,
                         branch: int | None = None) -> list[dict[str, Any]]:
    """Every committed message of ``thread`` at the server's ``protocol`` history route (``ag-ui`` or ``ai-sdk``):
    the active path, or the path of ``branch``."""
    async with server.client(**({"headers": headers} if headers else {})) as client:
        return await read_history(client, f"/v1/{protocol}/threads/{thread}/messages", branch)


async def send(tab: Tab, text: str) -> None:
    """Type ``text`` into a test page's ``#input`` and press ``#send``."""
    await tab.fill("#input", text)
    await tab.click("#send")


async def settled(tab: Tab, predicate: str, *, idle: str = "s.status === 'ready'") -> dict[str, Any]:
    """The page's state once ``predicate(state)`` holds and no run is going (``idle``), with no error shown."""
    state = await tab.wait_for_state(f"s => {idle} && ({predicate})(s)")
    assert state["errors"] == []
    return state
