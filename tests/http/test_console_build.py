"""The console's committed build is exactly what its sources produce, and the package serves it."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONSOLE = ROOT / "console"
STATIC = ROOT / "awaken" / "http" / "console" / "static"


def test_committed_build_is_what_the_sources_produce(tmp_path):
    if not (CONSOLE / "node_modules" / "esbuild").is_dir():
        raise RuntimeError("console/node_modules is missing: run npm ci --prefix console")
    node = shutil.which("node")
    assert node, "node is needed to rebuild the console"
    subprocess.run([node, "build.mjs", str(tmp_path)], cwd=CONSOLE, check=True, capture_output=True)
    built = sorted(p.name for p in tmp_path.iterdir())
    assert built == sorted(p.name for p in STATIC.iterdir()) == ["console.css", "console.js", "index.html"]
    for name in built:
        assert (tmp_path / name).read_bytes() == (STATIC / name).read_bytes(), (
            f"awaken/http/console/static/{name} is not what console/ builds: run npm run build --prefix console")


async def test_console_is_served_from_the_package(client):
    page = await client.get("/console")
    assert page.status_code == 200
    assert page.headers["content-type"] == "text/html; charset=utf-8"
    assert page.text == (STATIC / "index.html").read_text()
    script = await client.get("/console/console.js?v=x")
    assert script.headers["content-type"] == "text/javascript; charset=utf-8"
    assert script.content == (STATIC / "console.js").read_bytes()
    assert (await client.get("/console/")).text == page.text
    for missing in ("/console/nope.js", "/console/..%2Fserver.py", "/console/__init__.py"):
        assert (await client.get(missing)).status_code == 404, missing
