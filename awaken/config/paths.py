"""Relative paths in a config file mean the file's directory, never the working directory.

``awaken serve --config elsewhere/config.toml`` and ``awaken ledger copy --from a/config.toml`` read
the same files whatever directory they are started from. ``resolve(data, directory)`` rewrites a
config file's tables (as read, before the environment's ``AWAKEN_*`` settings go over them and before
they are checked) so that every file option is absolute, and ``default_ledger_path`` does the same for
the default ledger path when neither the file nor the environment names one:

* ``[ledger] path`` of the ``sqlite`` and ``files`` backends (the default ``./var/awaken.db`` too,
  when the file names none); a plugin backend's path, a DSN or ``:memory:`` is left as written;
* ``[auth.jwt] public_key_file``;
* ``[mcp_servers.<name>] cwd`` of a stdio server; one without ``cwd`` starts in the file's directory,
  so its ``command`` and ``args`` may name files beside the config.

Tool modules (``[tools] plugins``) are imported from the file's directory (``awaken.tools.plugins``).
A value from the environment (``AWAKEN_LEDGER__PATH``) is the process's to interpret: it has no file,
so a relative one follows the working directory.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

#: the ledger backends whose ``path`` is a file or a directory on this machine
FILE_BACKENDS = frozenset({"sqlite", "files"})
#: the ledger path of a file that names none (``LedgerConfig.path``'s default)
DEFAULT_LEDGER_PATH = "./var/awaken.db"


def _absolute(value: Any, directory: Path) -> Any:
    """``value`` against ``directory`` when it is a relative path (anything else as it is)."""
    if not isinstance(value, str) or not value or value == ":memory:" or "://" in value:
        return value
    path = Path(value).expanduser()
    return value if path.is_absolute() else str(directory / path)


def _table(data: dict[str, Any], key: str) -> dict[str, Any] | None:
    table = data.get(key)
    return table if isinstance(table, dict) else None


def resolve(data: dict[str, Any], directory: Path) -> dict[str, Any]:
    """``data`` (a config file's top-level tables) with its file options absolute against ``directory``
    (changed in place and returned). Values of the wrong type are left for the checks to name."""
    ledger = _table(data, "ledger")
    if ledger is not None and ledger.get("backend", "sqlite") in FILE_BACKENDS and "path" in ledger:
        ledger["path"] = _absolute(ledger["path"], directory)
    auth = _table(data, "auth")
    jwt = _table(auth, "jwt") if auth is not None else None
    if jwt is not None and "public_key_file" in jwt:
        jwt["public_key_file"] = _absolute(jwt["public_key_file"], directory)
    for server in (_table(data, "mcp_servers") or {}).values():
        if isinstance(server, dict) and server.get("transport") == "stdio":
            server["cwd"] = _absolute(server.get("cwd", "."), directory)
    return data


def default_ledger_path(data: dict[str, Any], directory: Path) -> dict[str, Any]:
    """``data`` (the file's tables with the environment's settings over them) with the default ledger
    path made absolute against ``directory`` when neither the file nor the environment names one."""
    ledger = data.setdefault("ledger", {})
    if isinstance(ledger, dict) and ledger.get("backend", "sqlite") in FILE_BACKENDS and "path" not in ledger:
        ledger["path"] = _absolute(DEFAULT_LEDGER_PATH, directory)
    return data
