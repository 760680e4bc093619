"""The listen backlog: ``[server] backlog`` is what the kernel queues on the server's listening socket,
with one process and with ``workers`` (the socket the supervisor listens on)."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys

import httpx
import trio

from tests.builders import ROOT


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _listen_backlog(port: int) -> int:
    """The backlog of the socket listening on ``port``, as ``ss`` reads it (Send-Q of a LISTEN row)."""
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True, check=True).stdout
    rows = [line.split() for line in out.splitlines() if line.strip()]
    assert len(rows) == 1, out
    return int(rows[0][2])


async def _serve_and_read_backlog(tmp_path, extra: str) -> int:
    cfg = tmp_path / "c.toml"
    text = (ROOT / "config.toml").read_text().replace("./var/awaken.db", str(tmp_path / "a.db"))
    cfg.write_text(text.replace("\nbacklog = 2048\n", f"\n{extra}\n", 1) if extra else text)
    port = _free_port()
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "awaken", "serve", "--config", str(cfg), "--bind", f"127.0.0.1:{port}"],
        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env={**os.environ, "PYTHONUNBUFFERED": "1"})
    try:
        async with httpx.AsyncClient() as client:
            for _ in range(150):
                try:
                    if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                        break
                except httpx.TransportError:
                    await trio.sleep(0.1)
        return _listen_backlog(port)
    finally:
        proc.send_signal(signal.SIGTERM)
        with trio.fail_after(15):
            await proc.wait()


async def test_the_server_listens_with_a_backlog_of_2048_by_default(tmp_path):
    somaxconn = int(await trio.Path("/proc/sys/net/core/somaxconn").read_text())
    assert await _serve_and_read_backlog(tmp_path, "") == min(2048, somaxconn)


async def test_server_backlog_sets_the_listen_backlog(tmp_path):
    assert await _serve_and_read_backlog(tmp_path, "backlog = 77") == 77
