"""A throwaway PostgreSQL cluster for the tests: ``initdb`` into a temporary directory, a free port.

One cluster serves a whole pytest session (``cluster()`` starts it on first use; the session
fixture in ``conftest.py`` stops it). It runs as an unprivileged user: the current one, or
``postgres`` when the tests run as root (CI), through ``setpriv``. The superuser ``awaken`` logs in
with a password over TCP (``scram-sha-256``, the way a real deployment does) and without one over
the unix socket in the temporary directory (how the harness creates databases).

Child processes (the crash child, ``awaken`` commands) find the running cluster through the
``AWAKEN_TEST_PG`` environment variable (``host port socket_dir``) and never start their own.
``dsn_for(root)`` gives every ledger root its own schema of one test database, created on first
use, so a ledger opened again on the same root (reopen tests, crash children) finds its data, and
tests stay apart.
"""

from __future__ import annotations

import atexit
import hashlib
import os
import pwd
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import attrs
import psycopg
from psycopg import sql

#: the superuser's password, read by the backend from the variable named by ``password_env``
PASSWORD_ENV = "AWAKEN_TEST_PG_PASSWORD"
PASSWORD = "awaken-test-secret"
USER = "awaken"
_ENV = "AWAKEN_TEST_PG"


def pg_bin(name: str) -> str:
    """The path of a PostgreSQL server binary: on PATH, else Debian's ``/usr/lib/postgresql/*/bin``."""
    found = shutil.which(name)
    if found:
        return found
    for version_dir in sorted(Path("/usr/lib/postgresql").glob("*/bin"), reverse=True):
        if (version_dir / name).exists():
            return str(version_dir / name)
    raise RuntimeError(f"{name} is not installed (apt-get install postgresql)")


@attrs.define
class Cluster:
    host: str
    port: int
    socket_dir: str
    data_dir: str | None = None  # set only in the process that started it
    run_as: list[str] = attrs.field(factory=list)

    def dsn(self, database: str) -> str:
        return f"postgresql://{USER}@{self.host}:{self.port}/{database}"

    def admin(self, database: str = "postgres") -> psycopg.Connection:
        """A superuser connection over the unix socket (no password), autocommit."""
        return psycopg.connect(host=self.socket_dir, port=self.port, user=USER, dbname=database, autocommit=True)

    def pg_ctl(self, *args: str) -> None:
        assert self.data_dir is not None, "only the process that started the cluster controls it"
        subprocess.run(
            [*self.run_as, pg_bin("pg_ctl"), "-D", self.data_dir, "-l", f"{self.data_dir}/server.log", *args],
            check=True,
            stdout=subprocess.DEVNULL,
        )

    def stop(self) -> None:
        self.pg_ctl("stop", "-m", "immediate", "-w")

    def start(self) -> None:
        self.pg_ctl("start", "-w", "-t", "60")


_cluster: Cluster | None = None
_tmp: str | None = None


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _init(tmp: str) -> Cluster:
    """``initdb`` a cluster in ``tmp`` (its data in ``tmp/data``) on a free port, and start it."""
    run_as: list[str] = []
    if os.geteuid() == 0:  # the server refuses to run as root: hand the directory to `postgres`
        account = pwd.getpwnam("postgres")
        os.chown(tmp, account.pw_uid, account.pw_gid)
        run_as = ["setpriv", f"--reuid={account.pw_uid}", f"--regid={account.pw_gid}", "--init-groups"]
    data = f"{tmp}/data"
    pwfile = f"{tmp}/pw"
    with open(pwfile, "w") as f:
        f.write(PASSWORD)
    if run_as:
        os.chown(pwfile, account.pw_uid, account.pw_gid)
    subprocess.run(
        [*run_as, pg_bin("initdb"), "-D", data, "-U", USER, f"--pwfile={pwfile}", "--auth-local=trust",
         "--auth-host=scram-sha-256", "-E", "UTF8", "--locale=C", "--no-sync"],
        check=True, stdout=subprocess.DEVNULL,
    )
    port = _free_port()
    with open(f"{data}/postgresql.conf", "a") as conf:
        # fsync is off for speed: the tests kill clients, never the machine (a client's death only
        # ever aborts its open transaction, which is what the crash test checks)
        conf.write(
            f"\nport = {port}\nlisten_addresses = '127.0.0.1'\nunix_socket_directories = '{tmp}'\n"
            "fsync = off\nfull_page_writes = off\nmax_connections = 200\nshared_buffers = 32MB\n"
        )
    cluster = Cluster("127.0.0.1", port, tmp, data, run_as)
    cluster.start()
    return cluster


def _start() -> Cluster:
    global _tmp
    tmp = tempfile.mkdtemp(prefix="awaken-pg-")
    _tmp = tmp
    cluster = _init(tmp)
    os.environ[_ENV] = f"{cluster.host} {cluster.port} {cluster.socket_dir}"
    os.environ[PASSWORD_ENV] = PASSWORD
    atexit.register(stop_cluster)
    return cluster


@contextmanager
def private_cluster() -> Iterator[Cluster]:
    """A cluster of its own, not the session's: for a test that stops and restarts Postgres under
    running servers (they log in as ``USER`` with ``PASSWORD`` from ``PASSWORD_ENV``, which is set)."""
    tmp = tempfile.mkdtemp(prefix="awaken-pg-own-")
    try:
        own = _init(tmp)
        os.environ[PASSWORD_ENV] = PASSWORD
        try:
            yield own
        finally:
            subprocess.run([*own.run_as, pg_bin("pg_ctl"), "-D", str(own.data_dir), "stop", "-m", "immediate", "-w"],
                           check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def cluster() -> Cluster:
    """The session's cluster: the one a parent process started, or a new one."""
    global _cluster
    if _cluster is None:
        found = os.environ.get(_ENV)
        if found:
            host, port, socket_dir = found.split(" ", 2)
            _cluster = Cluster(host, int(port), socket_dir)
        else:
            _cluster = _start()
    return _cluster


def stop_cluster() -> None:
    """Stop and remove the cluster this process started (idempotent)."""
    global _cluster, _tmp
    if _cluster is not None and _cluster.data_dir is not None:
        subprocess.run([*_cluster.run_as, pg_bin("pg_ctl"), "-D", _cluster.data_dir, "stop", "-m", "immediate", "-w"],
                       check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        os.environ.pop(_ENV, None)
        _cluster = None
    if _tmp is not None:
        shutil.rmtree(_tmp, ignore_errors=True)
        _tmp = None


#: the one test database; every ledger root gets a schema of its own in it (cheap to create, no
#: copy of a template database per test)
DATABASE = "awaken_test"


def schema_for(root: Path | str) -> str:
    """The schema of a ledger root (created if missing): the same root always names the same one."""
    name = "t_" + hashlib.sha256(str(Path(root).resolve()).encode()).hexdigest()[:24]
    c = cluster()
    with c.admin() as conn:
        if conn.execute("SELECT 1 FROM pg_database WHERE datname = %s", (DATABASE,)).fetchone() is None:
            try:
                conn.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(DATABASE)))
            except psycopg.errors.DuplicateDatabase:
                pass
    with c.admin(DATABASE) as conn:
        conn.execute(sql.SQL("CREATE SCHEMA IF NOT EXISTS {}").format(sql.Identifier(name)))
    return name


def dsn_for(root: Path | str) -> str:
    """A DSN whose tables live in the root's own schema (``search_path`` set at connect)."""
    return f"{cluster().dsn(DATABASE)}?options=-csearch_path%3D{schema_for(root)}"


def admin_in(root: Path | str) -> psycopg.Connection:
    """A superuser connection working in the root's schema."""
    schema = schema_for(root)  # creates the database and the schema on first use
    conn = cluster().admin(DATABASE)
    conn.execute(sql.SQL("SET search_path TO {}").format(sql.Identifier(schema)))
    return conn
