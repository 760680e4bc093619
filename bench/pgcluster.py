"""A throwaway PostgreSQL cluster for the bench: ``initdb`` into a temporary directory, a free port.

The same approach as ``tests/pg_cluster.py``: Debian's server binaries (``/usr/lib/postgresql/*/bin``
when they are not on PATH), run as the current user, or as ``postgres`` through ``setpriv`` when the
bench runs as root. The superuser ``awaken`` logs in with a password over TCP (``scram-sha-256``; the
servers read it from the variable named by ``options.password_env``) and without one over the unix
socket in the temporary directory, which is how the bench creates one database per server. ``fsync``
stays on (the default): the bench measures what a deployment pays per commit.
"""

from __future__ import annotations

import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from dataclasses import dataclass, field
from pathlib import Path

#: the variable the bench's servers read the password from (``options.password_env``)
PASSWORD_ENV = "AWAKEN_BENCH_PG_PASSWORD"
PASSWORD = "awaken-bench-secret"
USER = "awaken"


def pg_bin(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    for version_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (version_dir / name).exists():
            return str(version_dir / name)
    return None


def available() -> tuple[bool, str]:
    """Whether the bench can start a cluster (server binaries and the ``postgres`` extra)."""
    missing = [b for b in ("initdb", "pg_ctl") if pg_bin(b) is None]
    if missing:
        return False, f"{', '.join(missing)} not found (apt-get install postgresql)"
    try:
        import psycopg  # noqa: F401

        from storage_backends.postgres_ledger import PostgresLedger  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "skip postgres"
        return False, f"the postgres ledger does not import ({type(exc).__name__}: {exc}): pip install -e '.[postgres]'"
    return True, "ok"


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@dataclass
class PgCluster:
    """One cluster for the whole bench run; ``start`` then ``database(name)`` per server, ``stop`` at the end."""

    tmp: str = ""
    port: int = 0
    run_as: list[str] = field(default_factory=list)
    started: bool = False

    @property
    def data_dir(self) -> str:
        return f"{self.tmp}/data"

    def _pg_ctl(self, *args: str) -> None:
        subprocess.run([*self.run_as, str(pg_bin("pg_ctl")), "-D", self.data_dir, "-l", f"{self.tmp}/server.log",
                        *args], check=True, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)

    def start(self, max_connections: int = 300) -> None:
        self.tmp = tempfile.mkdtemp(prefix="awaken-bench-pg-")
        if os.geteuid() == 0:  # the server refuses to run as root: hand the directory to `postgres`
            account = pwd.getpwnam("postgres")
            os.chown(self.tmp, account.pw_uid, account.pw_gid)
            self.run_as = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--init-groups"]
        pwfile = f"{self.tmp}/pw"
        with open(pwfile, "w") as f:
            f.write(PASSWORD)
        if self.run_as:
            os.chown(pwfile, account.pw_uid, account.pw_gid)
        subprocess.run([*self.run_as, str(pg_bin("initdb")), "-D", self.data_dir, "-U", USER, f"--pwfile={pwfile}",
                        "--auth-local=trust", "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
                       check=True, stdout=subprocess.DEVNULL)
        self.port = _free_port()
        with open(f"{self.data_dir}/postgresql.conf", "a") as conf:
            conf.write(f"\nport = {self.port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{self.tmp}'\n"
                       f"max_connections = {max_connections}\nshared_buffers = 64MB\n")
        self._pg_ctl("start", "-w", "-t", "60")
        self.started = True
        os.environ[PASSWORD_ENV] = PASSWORD  # inherited by the server subprocesses

    def database(self, name: str) -> str:
        """A new empty database ``name``; returns its DSN (no password in it)."""
        import psycopg
        from psycopg import sql

        with psycopg.connect(host=self.tmp, port=self.port, user=USER, dbname="postgres", autocommit=True) as conn:
            conn.execute(sql.SQL("DROP DATABASE IF EXISTS {}").format(sql.Identifier(name)))
            conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)))
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{name}"

    def stop(self) -> None:
        if self.started:
            try:
                self._pg_ctl("stop", "-m", "fast", "-w")
            except subprocess.CalledProcessError:
                pass
            self.started = False
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
