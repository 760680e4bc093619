"""``[server] workers = N``: N server processes on one listening address, one Trio loop each.

``awaken serve`` with ``workers > 1`` becomes a small supervisor: it binds the address once, then
starts N ``awaken serve --worker-fd FD`` children that inherit the listening socket (the kernel hands
each new connection to whichever worker accepts first) and serve it with hypercorn's trio worker
(``bind = fd://FD``), each with its own ledger connection, claims and lease. SIGINT/SIGTERM are
passed on to the workers, which drain and shut down gracefully (a second signal, passed on too, cuts
their drains short) while the supervisor waits for every one of them to exit; a worker that dies otherwise is started again
(its runs are interrupted by the others once its lease lapses, see ``storage_backends/postgres_claims``).

Only a ledger shared by processes may have several workers (``awaken.ledger.registry.check_workers``).
"""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
from collections.abc import AsyncIterator

import trio

#: seconds before a worker that died is started again
RESTART_DELAY = 1.0


def listening_socket(bind: str, backlog: int) -> socket.socket:
    host, _, port = bind.rpartition(":")
    host = host.strip("[]")
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, int(port)))
    sock.listen(backlog)
    sock.set_inheritable(True)
    return sock


async def supervise(config_path: str, bind: str, workers: int, backlog: int) -> None:
    """Run ``workers`` worker processes on ``bind`` until SIGINT/SIGTERM, restarting any that dies."""
    sock = listening_socket(bind, backlog)
    host, port = sock.getsockname()[:2]
    stopping = trio.Event()
    procs: list[trio.Process] = []

    async def worker(n: int) -> None:
        while not stopping.is_set():
            proc = await trio.lowlevel.open_process(
                [sys.executable, "-m", "awaken", "serve", "--config", config_path, "--bind", f"{host}:{port}",
                 "--worker-fd", str(sock.fileno())],
                pass_fds=(sock.fileno(),), stdin=subprocess.DEVNULL,
            )
            procs.append(proc)
            try:
                await proc.wait()
            finally:
                procs.remove(proc)
            if not stopping.is_set():
                print(f"awaken: worker {n} (pid {proc.pid}) exited with {proc.returncode}; starting it again",
                      file=sys.stderr, flush=True)
                with trio.move_on_after(RESTART_DELAY):
                    await stopping.wait()

    async def forward(signals: AsyncIterator[int]) -> None:
        # every signal goes to every worker: the first starts their drains, a second cuts them short
        async for signum in signals:
            stopping.set()
            for proc in list(procs):
                proc.send_signal(signum)

    with sock, trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as outer:
            outer.start_soon(forward, signals)
            async with trio.open_nursery() as nursery:  # until every worker exited once stopping
                for n in range(workers):
                    nursery.start_soon(worker, n)
                print(f"awaken: supervising {workers} worker processes on {host}:{port}", flush=True)
            outer.cancel_scope.cancel()
