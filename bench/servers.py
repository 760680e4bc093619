"""Server subprocesses under test: Awaken (one per storage backend) and the floor, pinned to CPU 0.

The load generator pins itself to CPU 1 (``pin_self``); each server is started through
``taskset -c 0`` when it exists (else ``sched_setaffinity`` in the child). ``ServerProcess`` reads
the server's resident memory and CPU time from ``/proc/<pid>``.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

import trio

from .client import ClientError, HttpConnection

REPO = Path(__file__).resolve().parent.parent
SERVER_CPU = 0
CLIENT_CPU = 1


def can_pin() -> bool:
    return hasattr(os, "sched_setaffinity") and (os.cpu_count() or 1) >= 2


def pin_self() -> str:
    """Pin the load generator to CPU 1 (and so every thread it starts). Returns a description."""
    if not can_pin():
        return "not pinned (fewer than 2 CPUs or no sched_setaffinity)"
    os.sched_setaffinity(0, {CLIENT_CPU})
    how = "taskset -c 0" if shutil.which("taskset") else "sched_setaffinity(0)"
    return f"servers on CPU {SERVER_CPU} ({how}), load generator on CPU {CLIENT_CPU}"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def file_backend_available() -> tuple[bool, str]:
    try:
        from storage_backends.files import FileLedger  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "skip this backend"
        return False, f"storage_backends/files/ does not import: {type(exc).__name__}: {exc}"
    return True, "ok"


#: the bench's own agent whose runs outlive their connection (``memory per detached run``)
DETACHED_AGENT = "bench_detached"
DETACHED_TABLE = (f'\n[agents.{DETACHED_AGENT}]\nmodel = "scripted"\ntools = []\n'
                  'on_disconnect = "continue"\n')


def awaken_config(backend: str, data_dir: Path, *, dsn: str | None = None, workers: int = 1,
                  lease_seconds: float | None = None) -> str:
    """The repo's config.toml with its ``[ledger]`` table pointed at ``data_dir`` (for Postgres: at ``dsn``,
    the password in the environment) and ``[server] workers`` set (a minimal config if the repo's cannot be
    used)."""
    if backend == "postgres":
        assert dsn is not None, "a postgres server needs a DSN"
        from .pgcluster import PASSWORD_ENV

        ledger = (f'[ledger]\nbackend = "postgres"\npath = "{dsn}"\n'
                  f'options = {{ password_env = "{PASSWORD_ENV}", pool_size = 8'
                  + (f", lease_seconds = {lease_seconds:g}" if lease_seconds else "") + " }\n")
    else:
        path = data_dir / ("awaken.db" if backend == "sqlite" else "ledger")
        ledger = f'[ledger]\nbackend = "{backend}"\npath = "{path}"\noptions = {{}}\n'
    try:
        text = (REPO / "config.toml").read_text()
        new = re.sub(r"(?ms)^\[ledger\]\s*$.*?(?=^\[)", ledger + "\n", text, count=1)
        new = re.sub(r"(?m)^workers\s*=\s*\d+\s*$", f"workers = {workers}", new, count=1)
        if tomllib.loads(new).get("server", {}).get("workers", 1) != workers:
            raise tomllib.TOMLDecodeError("workers not set")
        if new != text and "[agents.guarded]" in new and f"[agents.{DETACHED_AGENT}]" not in new:
            return new + DETACHED_TABLE
    except (OSError, tomllib.TOMLDecodeError):
        pass
    tools = '["calculator", "current_time", "set_state"]'
    return (f'default_agent = "assistant"\n\n[server]\nworkers = {workers}\n\n{ledger}\n'
            f'[agents.assistant]\nmodel = "scripted"\ntools = {tools}\ndefault_permission = "allow"\n\n'
            f'[agents.guarded]\nmodel = "scripted"\ntools = {tools}\ndefault_permission = "ask"\n'
            + DETACHED_TABLE)


@dataclass
class ServerProcess:
    name: str
    argv: list[str]
    log_path: Path
    port: int = 0
    proc: subprocess.Popen | None = None
    extra_env: dict[str, str] = field(default_factory=dict)
    #: pinned to CPU 0 (every server but the scale-out ones, which may use every CPU)
    pinned: bool = True
    #: the working directory, first on the server's import path (``python -m`` puts it before PYTHONPATH):
    #: the source tree whose ``awaken`` it runs
    cwd: Path = REPO

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def pid(self) -> int:
        assert self.proc is not None
        return self.proc.pid

    def spawn(self) -> None:
        argv = list(self.argv)
        preexec = None
        if can_pin() and self.pinned:
            if shutil.which("taskset"):
                argv = ["taskset", "-c", str(SERVER_CPU)] + argv
            else:
                def preexec() -> None:
                    os.sched_setaffinity(0, {SERVER_CPU})
        elif can_pin():
            def preexec() -> None:  # the load generator is pinned to CPU 1: the server may use every CPU
                os.sched_setaffinity(0, set(range(os.cpu_count() or 1)))
        self.log_path.parent.mkdir(parents=True, exist_ok=True)
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
                                         cwd=self.cwd, env=self.env(), preexec_fn=preexec)

    def env(self) -> dict[str, str]:
        """The server's environment: this one, with ``cwd`` and this repository first on PYTHONPATH (the
        bench's own modules, for a tree without them) and ``extra_env`` over it."""
        env = dict(os.environ)
        paths = dict.fromkeys((str(self.cwd), str(REPO), env.get("PYTHONPATH", "")))
        env["PYTHONPATH"] = os.pathsep.join(p for p in paths if p)
        env.update(self.extra_env)
        return env

    async def start(self, *, limit_s: float = 30.0) -> None:
        self.spawn()
        assert self.proc is not None
        with trio.move_on_after(limit_s):
            while True:
                if self.proc.poll() is not None:
                    raise RuntimeError(f"{self.name} exited with {self.proc.returncode} at start-up:\n"
                                       + self.log_tail())
                if await self.healthy():
                    return
                await trio.sleep(0.05)
        await self.stop()
        raise RuntimeError(f"{self.name} did not answer GET /healthz within {limit_s:g} s:\n{self.log_tail()}")

    async def healthy(self) -> bool:
        conn = HttpConnection("127.0.0.1", self.port)
        try:
            with trio.move_on_after(1):
                await conn.connect()
                status, _ = await conn.get_status("/healthz")
                return status == 200
        except (OSError, ClientError, trio.BrokenResourceError):
            return False
        finally:
            await conn.aclose()
        return False

    def log_tail(self, lines: int = 15) -> str:
        try:
            return "\n".join(self.log_path.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    async def stop(self, *, limit_s: float = 10.0) -> int | None:
        """SIGTERM, wait (a profiled server writes its stats on the way out), then SIGKILL."""
        if self.proc is None or self.proc.poll() is not None:
            return None if self.proc is None else self.proc.returncode
        self.proc.send_signal(signal.SIGTERM)
        with trio.move_on_after(limit_s):
            while self.proc.poll() is None:
                await trio.sleep(0.05)
        if self.proc.poll() is None:
            self.proc.kill()
            await trio.to_thread.run_sync(self.proc.wait)
        return self.proc.returncode

    def rss_kb(self) -> int:
        """Resident set size (VmRSS) in KiB."""
        with open(f"/proc/{self.pid}/status") as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
        raise RuntimeError("no VmRSS")

    def cpu_seconds(self) -> float:
        """CPU time of the whole process (every thread): nanoseconds from schedstat, else clock ticks."""
        return process_cpu_seconds(self.pid)

    def sched(self) -> tuple[float, float]:
        """``process_sched`` summed over the process and its children (``[server] workers`` > 1)."""
        run = wait = 0.0
        for pid in process_tree(self.pid):
            try:
                r, w = process_sched(pid)
            except OSError:
                continue  # a process that just ended
            run, wait = run + r, wait + w
        return run, wait

    def signal(self, signum: int) -> None:
        assert self.proc is not None
        self.proc.send_signal(signum)


def process_tree(pid: int) -> list[int]:
    """``pid`` and its descendants (``/proc/<pid>/task/*/children``)."""
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        try:
            for task in os.listdir(f"/proc/{p}/task"):
                with open(f"/proc/{p}/task/{task}/children") as f:
                    todo.extend(int(c) for c in f.read().split())
        except OSError:
            pass
    return out


def process_cpu_seconds(pid: int | str = "self") -> float:
    return process_sched(pid)[0]


def process_sched(pid: int | str = "self") -> tuple[float, float]:
    """``(seconds on a CPU, seconds runnable but waiting for one)`` summed over the process's threads
    (``/proc/<pid>/task/*/schedstat``). A large wait means other work shared the CPU."""
    try:
        run = wait = 0
        for task in os.listdir(f"/proc/{pid}/task"):
            try:
                with open(f"/proc/{pid}/task/{task}/schedstat") as f:
                    fields = f.read().split()
                run += int(fields[0])
                wait += int(fields[1])
            except (FileNotFoundError, ProcessLookupError, IndexError, ValueError):
                pass  # a thread that just ended
        if run:
            return run / 1e9, wait / 1e9
    except OSError:
        pass
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 0.0


def awaken_server(name: str, backend: str, data_dir: Path, log_dir: Path, *, profile_dir: Path | None = None,
                  dsn: str | None = None, workers: int = 1, pinned: bool = True,
                  lease_seconds: float | None = None, tree: Path | None = None) -> ServerProcess:
    """An Awaken server on ``backend``, running the source tree ``tree`` (default: this repository's)."""
    data_dir.mkdir(parents=True, exist_ok=True)
    config_path = data_dir / "config.toml"
    config_path.write_text(awaken_config(backend, data_dir, dsn=dsn, workers=workers,
                                           lease_seconds=lease_seconds))
    port = free_port()
    bind = f"127.0.0.1:{port}"
    if profile_dir is None:
        argv = [sys.executable, "-m", "awaken", "serve", "--config", str(config_path), "--bind", bind]
    else:
        argv = [sys.executable, "-m", "bench.profiled", str(profile_dir), "serve", "--config", str(config_path),
                "--bind", bind]
    return ServerProcess(name, argv, log_dir / f"{name}.log", port, pinned=pinned, cwd=tree or REPO)


def peer_server(log_dir: Path) -> ServerProcess:
    """The peer (``bench/peer.py``): pydantic-ai's AG-UI app on uvicorn, pinned like every server."""
    port = free_port()
    return ServerProcess("peer", [sys.executable, "-m", "bench.peer", "--bind", f"127.0.0.1:{port}"],
                         log_dir / "peer.log", port)


def floor_server(log_dir: Path, *, backlog: int | None = None, name: str = "floor") -> ServerProcess:
    port = free_port()
    argv = [sys.executable, "-m", "bench.floor", "--bind", f"127.0.0.1:{port}"]
    if backlog is not None:
        argv += ["--backlog", str(backlog)]
    return ServerProcess(name, argv, log_dir / f"{name.replace(' ', '-')}.log", port)
