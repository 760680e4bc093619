"""The run relay: a streaming run's events carried to watchers on other server processes.

A ledger shared by several processes (Postgres) stores who holds a thread (``ThreadClaims``); what a
run streams lives in its own process's broadcast. ``RunRelay`` carries those ``AgentEvent``s through
the store the deployment already runs, so a rejoin on any process gets the run: the process that runs
it ``publish``es every event (synchronously: buffered, written in batches by ``serve``) and ``end``s
the run once its broadcast closes; another process ``find``s the run a thread streams and ``read``s
its events by sequence number (from 1: the run's ``RunStarted``), waiting for more with ``wait``.

An embedded ledger (SQLite, files) is owned by one process: ``Ledger.relay()`` is None and nothing of
this runs. ``streams/relayed.py`` turns a relayed run into a broadcast in the watching process.

Events travel as JSON (``event_to_json``/``event_from_json``): the event's type and its attrs fields,
messages as the ledger writes them (``message_to_json``).
"""

from __future__ import annotations

import abc
import typing
from typing import Any

import attrs
import cattrs

from awaken.core import events as ev
from awaken.core.messages import Message, message_from_json, message_to_json

#: every AgentEvent class by name (the relay's type tag)
EVENT_TYPES: dict[str, type] = {t.__name__: t for t in typing.get_args(ev.AgentEvent)}
_converter = cattrs.Converter()
_converter.register_unstructure_hook(Message, message_to_json)
_converter.register_structure_hook(Message, lambda d, _t: message_from_json(d))


def event_to_json(event: ev.AgentEvent) -> list[Any]:
    """``[type name, fields]``: what ``event_from_json`` makes the same event of."""
    return [type(event).__name__, _converter.unstructure(event)]


def event_from_json(data: list[Any]) -> ev.AgentEvent:
    name, fields = data
    return _converter.structure(fields, EVENT_TYPES[name])


@attrs.frozen
class RelayedRun:
    """A run that streams on another process: its key (the run id, its positions' prefix), thread and
    the subject who started it (None without authentication)."""

    key: str
    thread_id: str
    owner: str | None


@attrs.frozen
class Batch:
    """What ``read`` found: ``(sequence number, event)`` pairs, oldest first (a gap where the byte bound
    dropped some), and whether the run has ended (``ended``: its process ended it; ``lost``: the coded
    reason it ended without that, when the process that ran it died)."""

    events: list[tuple[int, ev.AgentEvent]]
    ended: bool = False
    lost: tuple[str, str] | None = None


class RunRelay(abc.ABC):
    """One process's side of the relay (a ledger shared by processes provides one: ``Ledger.relay``)."""

    #: the relayed runs this process follows now, by key (``streams.relayed`` keeps them here)
    following: dict[str, Any]

    @abc.abstractmethod
    def publish(self, run_key: str, thread_id: str, owner: str | None, event: ev.AgentEvent) -> None:
        """Stage ``event`` of a run of this process (never blocks, never raises: written in batches)."""

    @abc.abstractmethod
    def end(self, run_key: str) -> None:
        """The run's broadcast closed: what it published is followed by its end."""

    @abc.abstractmethod
    async def find(self, thread_id: str) -> RelayedRun | None:
        """The run another process streams on ``thread_id`` now, or None (raises ``StoreUnavailable``)."""

    @abc.abstractmethod
    async def read(self, run_key: str, after: int) -> Batch:
        """The run's events after sequence number ``after`` (raises ``StoreUnavailable``)."""

    @abc.abstractmethod
    async def wait(self, run_key: str, after: int, seconds: float) -> None:
        """Return once the run may hold events after ``after``, or after ``seconds``."""

    @abc.abstractmethod
    async def serve(self, *, task_status: Any = None) -> None:
        """Write staged batches, wake waiters and clean up ended runs until cancelled; the tasks that
        follow relayed runs run in its nursery (``spawn``)."""

    @abc.abstractmethod
    def spawn(self, fn: Any, *args: Any) -> None:
        """Start ``fn(*args)`` in ``serve``'s nursery."""
