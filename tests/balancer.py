"""A real load balancer for the tests: Debian's HAProxy in front of several ``awaken serve`` processes.

``haproxy_config`` writes the settings ``docs/deploying.md`` ("Several hosts behind a load balancer")
gives a deployer: round robin with no stickiness, no request buffering (``no option
http-buffer-request``), long client/server timeouts for streams that run or wait quietly,
``timeout tunnel`` for upgraded WebSockets, ``option http-server-close`` so each request is balanced on
its own, and a health check on ``/readyz``. ``balancer`` runs HAProxy in the foreground on a free port
and yields its URL once it answers.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import AsyncIterator, Sequence
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

from tests.builders import free_port

HAPROXY = shutil.which("haproxy") or "/usr/sbin/haproxy"


def haproxy_config(port: int, servers: Sequence[str]) -> str:
    """HAProxy's configuration for ``servers`` (``host:port`` each) behind ``127.0.0.1:port``."""
    lines = [
        "global",
        "    maxconn 4096",
        "defaults",
        "    mode http",
        "    timeout connect 5s",
        "    timeout client  1h",
        "    timeout server  1h",
        "    timeout tunnel  1h",
        "    option http-server-close",
        "    no option http-buffer-request",
        "frontend awaken",
        f"    bind 127.0.0.1:{port}",
        "    default_backend awaken",
        "backend awaken",
        "    balance roundrobin",
        "    option httpchk GET /readyz",
        *(f"    server s{i} {address} check inter 1s" for i, address in enumerate(servers)),
    ]
    return "\n".join(lines) + "\n"


@asynccontextmanager
async def balancer(servers: Sequence[str], workdir: Path) -> AsyncIterator[str]:
    """HAProxy in front of ``servers`` (``http://host:port`` URLs); yields its URL; stopped on exit."""
    port = free_port()
    config = workdir / "haproxy.cfg"
    config.write_text(haproxy_config(port, [s.removeprefix("http://") for s in servers]))
    log = workdir / "haproxy.log"
    with log.open("wb") as out:
        proc = await trio.lowlevel.open_process([HAPROXY, "-f", str(config), "-db"], stdout=out,
                                                stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    try:
        async with httpx.AsyncClient() as client:
            with trio.fail_after(15):
                while True:
                    try:
                        if (await client.get(f"{url}/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        assert proc.poll() is None, f"haproxy exited: {log.read_text()}"
                        await trio.sleep(0.05)
        yield url
    finally:
        proc.terminate()
        with trio.fail_after(10):
            await proc.wait()
