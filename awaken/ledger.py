"""The Ledger interface: the storage plugin boundary and the only history authority.

A backend stores threads, messages (per-thread sequence, client-supplied id, role, parts, run id),
runs (status, agent, timestamps, error code, usage) and pending tool calls. Backends live in
``storage_backends/`` or in any package registering a class under the ``awaken.ledgers`` entry-point
group; ``open_ledger`` picks one by the name in ``config.toml``.

Semantics every backend promises (the conformance suite in ``tests/test_ledger_conformance.py``
checks them):

* **Atomic commits.** ``start_run`` and ``commit`` are each one transaction: after a crash or a
  ``trio.Cancelled`` during the call, either all of it is visible on reopen or none of it is.
* **Acknowledged means durable.** Once ``commit`` returns, the data survives a process kill.
* **Per-thread order.** Messages get ``seq`` 1, 2, 3… per thread in commit order; ids are unique per
  thread (a duplicate id in a commit raises ``ValueError`` and commits nothing).
* **Recovery.** ``open`` marks runs left ``running`` by a dead process as ``interrupted``.
* **Errors.** Any failure to reach the store raises ``StoreUnavailable``; nothing partial is left.
  A caller's mistake raises ``ValueError`` and writes nothing: a duplicate message id, a commit to
  a run that does not exist (or belongs to another thread), a pending call id that is already
  pending, an ``import_thread`` onto an existing thread (``DuplicateRun`` for a taken run id).
* ``aclose`` is idempotent.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

import attrs

from .errors import ConfigError
from .messages import Message, Usage
from .runstate import RunStatus


@attrs.frozen
class ThreadRecord:
    thread_id: str
    created_at: int
    state: dict[str, Any] = attrs.field(factory=dict)
    last_seq: int = 0


@attrs.frozen
class RunRecord:
    run_id: str
    thread_id: str
    agent_id: str
    status: RunStatus
    created_at: int
    updated_at: int
    error_code: str | None = None
    error_message: str | None = None
    usage: Usage = Usage()
    steps: int = 0
    #: why an ``interrupted`` run stopped (``runstate.Cause`` value), None for every other status
    cause: str | None = None


PendingKind = Literal["approval", "client"]


@attrs.frozen
class PendingCall:
    """A tool call the run waits on: a permission gate (``approval``) or a client-executed tool."""

    tool_call_id: str
    run_id: str
    thread_id: str
    name: str
    arguments: str
    kind: PendingKind
    message_id: str


@attrs.frozen
class Commit:
    """Everything one step (or one status change) writes, applied in a single transaction.

    ``messages`` are appended to the thread; ``pending`` calls are added and ``resolved`` call ids
    removed; ``state`` (when not None) replaces the thread's agent state; ``usage`` is added to the
    run's totals; ``status`` becomes the run's status (with ``error_code``/``error_message``).
    """

    status: RunStatus
    messages: tuple[Message, ...] = ()
    pending: tuple[PendingCall, ...] = ()
    resolved: tuple[str, ...] = ()
    state: dict[str, Any] | None = None
    usage: Usage = Usage()
    steps: int = 0
    error_code: str | None = None
    error_message: str | None = None
    #: why the run was interrupted (``runstate.Cause`` value); stored with the status
    cause: str | None = None


@attrs.frozen
class ThreadView:
    """What a run needs to start on a thread: the thread (None if new), its whole committed
    history, and the pending calls of its waiting run (empty if none)."""

    thread: ThreadRecord | None
    messages: tuple[Message, ...]
    pending: tuple[PendingCall, ...]

    def message_ids(self) -> frozenset[str]:
        """Every committed message id (what an adapter drops as replayed history)."""
        return frozenset(m.id for m in self.messages)

    def answered_calls(self) -> frozenset[str]:
        """Every tool call id with a committed result, under whatever message id it was committed."""
        return frozenset(m.tool_result.tool_call_id for m in self.messages if m.tool_result is not None)


class DuplicateRun(ValueError):
    """``start_run`` was given a run id the ledger already holds."""


class Ledger(abc.ABC):
    """The storage plugin boundary. All methods are async and safe to call from many Trio tasks."""

    @abc.abstractmethod
    async def open(self) -> None:
        """Open (creating if needed) the store and recover runs left ``running`` by a crash."""

    @abc.abstractmethod
    async def aclose(self) -> None:
        """Release the store. Idempotent."""

    @abc.abstractmethod
    async def ping(self) -> None:
        """Return if the store answers; raise ``StoreUnavailable`` if not."""

    async def probe_write(self) -> None:
        """Return if the store can commit now (``/readyz``); raise ``StoreUnavailable`` if not.
        Backends override it with a real write; the default only pings."""
        await self.ping()

    @abc.abstractmethod
    async def get_thread(self, thread_id: str) -> ThreadRecord | None:
        """The thread, or None if nothing was ever committed to it."""

    @abc.abstractmethod
    async def committed_ids(self, thread_id: str, ids: Sequence[str]) -> set[str]:
        """The subset of ``ids`` already committed as messages of ``thread_id`` (for dedup)."""

    @abc.abstractmethod
    async def start_run(self, run: RunRecord, inputs: Sequence[Message]) -> list[Message]:
        """Create the thread if needed, record ``run`` and append ``inputs``, atomically.

        Returns the inputs with their ``seq``. Raises ``DuplicateRun`` if the run id is taken.
        """

    @abc.abstractmethod
    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        """Apply one ``Commit`` atomically; return the appended messages with their ``seq``."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None."""

    @abc.abstractmethod
    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        """Every run of the thread, oldest first."""

    @abc.abstractmethod
    async def waiting_run(self, thread_id: str) -> RunRecord | None:
        """The thread's run in status ``waiting``, if any (at most one exists)."""

    @abc.abstractmethod
    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        """The thread's pending tool calls, in the order they were committed.

        The engine keeps at most one run per thread with pending calls (its waiting run) and
        resolves every call before the run leaves ``waiting``.
        """

    @abc.abstractmethod
    async def read_messages(self, thread_id: str, after_seq: int, limit: int) -> list[Message]:
        """Up to ``limit`` messages with ``seq > after_seq``, oldest first."""

    async def thread_view(self, thread_id: str) -> ThreadView:
        """The thread, its history and its pending calls, read consistently.

        The default composes the single reads; a backend overrides it to answer in one round trip
        (this is on the path to a run's first delta).
        """
        thread = await self.get_thread(thread_id)
        if thread is None:
            return ThreadView(None, (), ())
        messages = await self.read_messages(thread_id, 0, thread.last_seq + 1)
        pending = await self.pending_calls(thread_id)
        return ThreadView(thread, tuple(messages), tuple(pending))

    @abc.abstractmethod
    async def list_threads(self) -> list[ThreadRecord]:
        """Every thread (used by ``awaken ledger copy``)."""

    @abc.abstractmethod
    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
    ) -> None:
        """Write a whole thread as copied from another ledger (keeping ids and seqs), atomically."""


LEDGER_GROUP = "awaken.ledgers"
_BUILTIN = {
    "sqlite": "storage_backends.sqlite_ledger:SqliteLedger",
    "files": "storage_backends.file_ledger:FileLedger",
}


def known_backends() -> dict[str, EntryPoint]:
    """Backend name -> where its class lives: the built-ins, then every registered entry point."""
    found = {name: EntryPoint(name=name, value=value, group=LEDGER_GROUP) for name, value in _BUILTIN.items()}
    found.update((ep.name, ep) for ep in entry_points(group=LEDGER_GROUP))
    return found


def ledger_class(name: str) -> type[Ledger]:
    """Resolve a backend name from config to its class; unknown names raise ``ConfigError``."""
    backends = known_backends()
    if name not in backends:
        raise ConfigError(
            f"ledger.backend: unknown backend {name!r}; known backends: {', '.join(sorted(backends))}"
        )
    return backends[name].load()
