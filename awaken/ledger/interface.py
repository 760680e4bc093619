"""The Ledger interface: the storage plugin boundary and the only history authority.

A backend stores threads, messages (per-thread sequence, client-supplied id, role, parts, run id),
runs (status, agent, timestamps, error code, usage) and pending tool calls. Backends live in
``storage_backends/`` or in any package registering a class under the ``awaken.ledgers`` entry-point
group; ``open_ledger`` picks one by the name in ``config.toml``.

Semantics every backend promises (the importable conformance suite ``awaken.ledger.testkit.conformance``
and crash test ``awaken.ledger.testkit.crash`` check them; a backend's own tests run both with one import
and one ``ledger_factory`` fixture):

* **Atomic commits.** ``start_run`` and ``commit`` are each one transaction: after a crash or a
  ``trio.Cancelled`` during the call, either all of it is visible on reopen or none of it is.
* **Acknowledged means durable.** Once ``commit`` returns, the data survives a process kill.
* **Per-thread order.** Messages get ``seq`` 1, 2, 3… per thread in commit order, across all of its
  branches; ids are unique per **path** (a duplicate id on the path a commit extends raises
  ``ValueError`` and commits nothing).
* **Branches.** A thread's history is a tree of branches (``Branch``): every message is stored on one
  branch, branch 0 is implicit, ``start_run(..., fork=Fork(...))`` starts a run on a new branch that
  keeps the active path up to a message, and makes it the thread's ``active_branch``. Nothing is ever
  renumbered, rewritten or deleted by a fork: every branch's path stays readable
  (``read_messages(..., branch=N)``). Every "is it committed" question (``committed_ids``,
  ``admission_facts``, ``thread_view``, ``answered_calls``) and ``ThreadSummary.message_count`` answer
  for the **active path**; a thread that never branched (path ``[(0, ∞)]``) costs what it always did.
* **Recovery.** ``open`` commits runs left ``running`` by a dead process as ``interrupted`` with
  cause ``server_restart``: exactly the fields of ``awaken.engine.state.recovery(Cause.SERVER_RESTART)``
  (status, cause, the cause in words, no error code), the run state's table, not the backend, decides them.
* **Causes.** A run's ``cause`` (why it was interrupted) is stored with its status by ``commit``
  and returned by ``get_run``/``list_runs``.
* **Errors.** Any failure to reach the store raises ``StoreUnavailable``; nothing partial is left.
  A caller's mistake raises ``ValueError`` and writes nothing: a duplicate message id, a commit to
  a run that does not exist (or belongs to another thread), a pending call id that is already
  pending, an ``import_thread`` onto an existing thread (``DuplicateRun`` for a taken run id).
* **Listing.** Every thread has an owner (or None), a title, the agent of its latest run, an
  ``updated_at`` moved by every ``start_run``/``commit`` and a message count, kept cheap to list:
  ``list_thread_summaries`` pages them newest first by keyset, ``thread_summary`` answers for one.
* **Deletion.** ``delete_thread`` removes a thread wholly, atomically, and frees its id.
* ``aclose`` is idempotent.
"""

from __future__ import annotations

import abc
import base64
import enum
import functools
import inspect
import json
import sys
import time
from collections.abc import AsyncIterator, Collection, Iterable, Sequence
from collections.abc import Set as AbstractSet
from importlib.metadata import EntryPoint, entry_points
from typing import Any, Literal

import attrs

from awaken.core.errors import ConfigError
from awaken.core.messages import Message, Usage
from awaken.engine.claims import LocalClaims, ThreadClaims
from awaken.engine.state import RunStatus
from awaken.ledger.relay import RunRelay
from awaken.models import ToolSpec


@attrs.frozen
class ThreadRecord:
    thread_id: str
    created_at: int
    state: dict[str, Any] = attrs.field(factory=dict)
    last_seq: int = 0
    #: the subject that started the thread; None for threads created without authentication
    #: (visible to admins only)
    owner: str | None = None
    #: the branch whose path history routes, admission, the model and the dedup see by default
    active_branch: int = 0


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
    #: tools the client declared for this run (AG-UI ``tools``): stored with the run so a resume,
    #: also after a restart, still offers them and knows a call to one is the client's
    tools: tuple[ToolSpec, ...] = ()
    #: the branch the run's messages go to (set by the ledger at ``start_run``: the thread's active
    #: branch, or the new branch of a fork; the value passed in is ignored)
    branch: int = 0


def tools_to_json(tools: tuple[ToolSpec, ...]) -> list[dict[str, Any]]:
    """A run's tools as JSON (what a backend stores)."""
    return [{"name": t.name, "description": t.description, "parameters": t.parameters} for t in tools]


def tools_from_json(data: Any) -> tuple[ToolSpec, ...]:
    return tuple(ToolSpec(t["name"], t["description"], t["parameters"]) for t in data or ())


#: the ``max_seq`` of a path's last range: everything on that branch
MAX_SEQ = sys.maxsize

BranchReason = Literal["root", "regenerate", "edit"]


@attrs.frozen
class Branch:
    """One branch of a thread's history.

    Branch 0 exists for every thread (implicitly: a thread that never branched stores no branch row).
    Branch ``b > 0`` keeps the path of its ``parent`` up to and including the message ``fork_seq``
    (0: keeps nothing) and continues with its own messages, whose seqs are all above ``fork_seq``. The
    parent is the branch that holds the message ``fork_seq`` (branch 0 when ``fork_seq`` is 0).
    """

    branch: int  # 0, 1, 2 … in creation order
    parent: int | None  # None for branch 0
    fork_seq: int  # the last message of the parent's path this branch keeps (0: none)
    created_at: int  # ms since the epoch (branch 0: the thread's created_at)
    run_id: str | None = None  # the run that started it (None: branch 0, or imported)
    reason: str = "root"  # "root" (branch 0), "regenerate", "edit"


@attrs.frozen
class Fork:
    """Start a run on a new branch: keep the active path up to and including seq ``after_seq``."""

    after_seq: int
    reason: str  # "regenerate" | "edit"


#: a path: ``(branch, max_seq)`` ranges, oldest first; a message is on it iff some range holds its
#: branch and its seq is at most that range's ``max_seq``
BranchPath = tuple[tuple[int, int], ...]

#: the path of a thread that never branched (every message)
ROOT_PATH: BranchPath = ((0, MAX_SEQ),)


def branch_path(branches: Sequence[Branch], branch: int) -> BranchPath:
    """The path of ``branch`` among a thread's ``branches``: ``(branch, max_seq)`` ranges, oldest first,
    the last one ``(branch, MAX_SEQ)``. Walks up: ``(b, ∞)``, ``(parent(b), fork_seq(b))``, … to branch 0.
    An unknown branch (or a broken chain of parents) raises ``ValueError``."""
    by_number = {b.branch: b for b in branches}
    if branch == 0:
        return ROOT_PATH
    if branch not in by_number:
        raise ValueError(f"no branch {branch!r} on the thread")
    ranges = [(branch, MAX_SEQ)]
    current = by_number[branch]
    while current.branch != 0:
        parent = current.parent
        if parent is None or parent >= current.branch or (parent != 0 and parent not in by_number):
            raise ValueError(f"branch {current.branch} has no valid parent ({parent!r})")
        ranges.append((parent, current.fork_seq))
        if parent == 0:
            break
        current = by_number[parent]
    return tuple(reversed(ranges))


def check_fork(fork: Fork) -> None:
    """A ``Fork`` a backend may take: ``after_seq`` a non-negative int, ``reason`` regenerate or edit
    (``ValueError`` otherwise, before anything is read or written)."""
    if isinstance(fork.after_seq, bool) or not isinstance(fork.after_seq, int) or fork.after_seq < 0:
        raise ValueError(f"a fork's after_seq is a seq of the active path or 0, not {fork.after_seq!r}")
    if fork.reason not in ("regenerate", "edit"):
        raise ValueError(f'a fork\'s reason is "regenerate" or "edit", not {fork.reason!r}')


def forked_branch(thread_id: str, number: int, active_path: BranchPath, fork: Fork, run: RunRecord,
                  held: int | None) -> Branch:
    """The branch ``number`` a run's ``fork`` creates on a thread whose active path is ``active_path``:
    its parent is the branch ``held`` that holds the message at ``fork.after_seq`` (None: no message has
    that seq), branch 0 for a fork that keeps nothing. A fork after a message off the active path raises
    ``ValueError`` (the backend writes nothing)."""
    parent = 0
    if fork.after_seq:
        if held is None or dict(active_path).get(held, -1) < fork.after_seq:
            raise ValueError(f"cannot fork thread {thread_id!r} after seq {fork.after_seq}: "
                             "no message of its active path has that seq")
        parent = held
    return Branch(number, parent, fork.after_seq, run.created_at, run.run_id, fork.reason)


def on_path(message: Message, path: BranchPath) -> bool:
    """Whether ``message`` (its ``branch`` and ``seq``) is on ``path``."""
    return any(message.branch == branch and message.seq <= max_seq for branch, max_seq in path)


def path_of(path: BranchPath, messages: Iterable[Message]) -> list[Message]:
    """The messages of ``messages`` on ``path``, in the order given."""
    if path == ROOT_PATH:
        return [m for m in messages if m.branch == 0]
    limits = dict(path)
    return [m for m in messages if m.seq <= limits.get(m.branch, -1)]


class BranchesUnsupported(ValueError):
    """A branch operation (``fork``, a branch other than 0) asked of a backend that does not keep
    branches yet."""


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


#: the empty set of ids, made once: each ``frozenset()`` is a new 216-byte object (what a view of a new
#: thread held for its run's whole life)
NO_IDS: frozenset[str] = frozenset()


@attrs.frozen
class ThreadView:
    """What a run needs to start on a thread: the thread (None if new), its committed history, and
    the pending calls of its waiting run (empty if none).

    ``thread_view`` gives the whole history. Admission's view (``awaken.engine.dedup.admission_view``,
    from the ledger's ``admission_facts``) gives a bounded **tail** (the latest messages) and the dedup
    answers only for the ids the request carries: ``known_ids`` (which of them are committed) and
    ``known_answered`` (which of its tool call ids have a committed result). Either way
    ``message_ids``/``answered_calls`` answer every question an adapter asks about the request's own
    ids the same.
    """

    thread: ThreadRecord | None
    messages: tuple[Message, ...]
    pending: tuple[PendingCall, ...]
    #: a tail view: of the asked message ids, those committed (None: ``messages`` is the whole history)
    known_ids: AbstractSet[str] | None = None
    #: a tail view: of the asked tool call ids, those with a committed result
    known_answered: frozenset[str] | None = None

    def message_ids(self) -> AbstractSet[str]:
        """The committed message ids an adapter may ask about (what it drops as replayed history)."""
        if self.known_ids is not None:
            return self.known_ids
        return frozenset(m.id for m in self.messages)

    def answered_calls(self) -> frozenset[str]:
        """The tool call ids with a committed result (under whatever message id it was committed)
        that an adapter may ask about."""
        if self.known_answered is not None:
            return self.known_answered
        return answered_in(self.messages)


@attrs.frozen
class AdmissionFacts:
    """What a ledger knows of a thread at admission (``Ledger.admission_facts``): facts only; what
    they mean for a request is the engine's decision (``awaken.engine.dedup``)."""

    #: the thread, None when nothing was ever committed to it
    thread: ThreadRecord | None
    #: its latest messages, oldest first (at most the ``tail`` asked for)
    tail: tuple[Message, ...]
    #: its pending calls, in the order they were committed
    pending: tuple[PendingCall, ...]
    #: of the ids asked about, those that are committed message ids of the thread
    committed: AbstractSet[str]


#: the facts of a thread nothing was ever committed to
NO_THREAD = AdmissionFacts(None, (), (), NO_IDS)


def answered_in(messages: Iterable[Message]) -> frozenset[str]:
    """The tool call ids ``messages`` hold a result for."""
    return frozenset(m.tool_result.tool_call_id for m in messages if m.tool_result is not None)


def model_window(messages: Sequence[Message], budget: int) -> tuple[Message, ...]:
    """The latest at most ``budget`` of ``messages`` for a model, never starting with a tool result
    cut off from its call (leading tool results of the window are dropped with their call)."""
    start = max(0, len(messages) - budget)
    if start:
        while start < len(messages) and messages[start].role == "tool":
            start += 1
    return tuple(messages[start:])


class AllOwners(enum.Enum):
    """The owner filter of a listing that shows every thread (an admin's)."""

    ALL = "all"


ALL_OWNERS = AllOwners.ALL
#: whose threads a listing shows: one subject's, the unowned ones (None), or everyone's (``ALL_OWNERS``)
OwnerFilter = str | None | AllOwners

#: a thread title is its first user text, whitespace collapsed, at most this many characters
TITLE_LIMIT = 100


def thread_title(messages: Iterable[Message]) -> str | None:
    """The title a thread gets from ``messages``: the first non-blank user text, trimmed, or None."""
    for m in messages:
        if m.role == "user":
            text = " ".join(m.text.split())
            if text:
                return text[:TITLE_LIMIT]
    return None


@attrs.frozen
class RunSummary:
    """The outcome of a thread's latest run (the last of ``list_runs``)."""

    run_id: str
    status: RunStatus
    cause: str | None = None
    error_code: str | None = None


@attrs.frozen
class ThreadSummary:
    """One row of a thread listing; times in ms since the epoch."""

    thread_id: str
    title: str | None  # the first user text, trimmed (``thread_title``); None before there is one
    agent_id: str | None  # the agent of the thread's latest run
    created_at: int
    updated_at: int  # the last write to the thread (a run started or a step committed)
    message_count: int
    last_run: RunSummary | None
    waiting: bool  # pending tool calls exist: the thread waits on a person or a client
    owner: str | None


@attrs.frozen
class ThreadPage:
    """A page of a listing, most recently updated first; ``cursor`` asks for the next (None: no more)."""

    items: tuple[ThreadSummary, ...]
    cursor: str | None


def encode_cursor(updated_at: int, thread_id: str) -> str:
    """The opaque cursor after the thread ``(updated_at, thread_id)`` of a listing."""
    raw = json.dumps([updated_at, thread_id], separators=(",", ":")).encode("utf-8", "surrogatepass")
    return base64.urlsafe_b64encode(raw).decode("ascii").rstrip("=")


def decode_cursor(cursor: str) -> tuple[int, str]:
    """``(updated_at, thread_id)`` of a cursor; anything not made by ``encode_cursor`` raises ValueError."""
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4))
        updated_at, thread_id = json.loads(raw.decode("utf-8", "surrogatepass"))
    except (ValueError, TypeError, UnicodeDecodeError):
        raise ValueError("the cursor is not one this listing returned") from None
    if type(updated_at) is not int or not isinstance(thread_id, str):
        raise ValueError("the cursor is not one this listing returned")
    return updated_at, thread_id


def check_limit(limit: int) -> None:
    if isinstance(limit, bool) or not isinstance(limit, int) or limit < 1:
        raise ValueError(f"a listing limit must be a positive integer, not {limit!r}")


class DuplicateRun(ValueError):
    """``start_run`` was given a run id the ledger already holds."""


class Ledger(abc.ABC):
    """The storage plugin boundary. All methods are async and safe to call from many Trio tasks."""

    #: whether several server processes may open this ledger at once (``[server] workers > 1``); a
    #: backend that says so stores its thread claims where every process sees them (``claims``)
    shared_by_processes: bool = False

    #: whether the backend keeps branches. A subclass whose ``start_run``, ``read_messages`` or
    #: ``import_thread`` does not take ``fork``/``branch``/``branches`` keeps working unchanged for threads
    #: that never branch (its methods are wrapped by ``__init_subclass__``), and refuses every branch
    #: operation with ``BranchesUnsupported``: a fork is never silently ignored.
    supports_branches: bool = True

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        wrapped = False
        for name, keyword, wrap in (("start_run", "fork", _refusing_fork), ("read_messages", "branch", _root_only),
                                    ("import_thread", "branches", _unbranched_import)):
            method = cls.__dict__.get(name)
            if method is not None and keyword not in inspect.signature(method).parameters:
                setattr(cls, name, wrap(method))
                wrapped = True
        if wrapped:
            cls.supports_branches = False

    def claims(self) -> ThreadClaims:
        """Who may run on a thread now. An embedded ledger (one process owns it) keeps the default:
        the server's own registry of active runs decides (``LocalClaims``)."""
        return LocalClaims()

    def relay(self) -> RunRelay | None:
        """What carries a streaming run to watchers on other processes (``awaken.ledger.relay``). An
        embedded ledger keeps the default: one process, nothing to carry."""
        return None

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
    async def start_run(
        self, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *, fork: Fork | None = None
    ) -> list[Message]:
        """Create the thread if needed, record ``run`` and append ``inputs``, atomically.

        A new thread belongs to ``owner`` (the authenticated subject, None without authentication);
        an existing thread keeps its owner (the caller checks it). Returns the inputs with their
        ``seq`` and ``branch``. Raises ``DuplicateRun`` if the run id is taken, ``ValueError`` (nothing
        written) if an input's id is already on the path it extends.

        Without ``fork`` the run's branch is the thread's active branch and the inputs are appended to
        it. With ``fork``, in the same transaction: ``fork.after_seq`` must be 0 or the seq of a message
        on the active path (else ``ValueError``, nothing written; also for a thread that does not
        exist); branch ``max + 1`` is created with parent the branch holding ``after_seq`` (0 when it is
        0), ``fork_seq = after_seq``, ``run_id = run.run_id`` and ``reason = fork.reason``; it becomes the
        thread's active branch; the run is recorded on it and the inputs are appended to it.
        """

    @abc.abstractmethod
    async def commit(self, thread_id: str, run_id: str, commit: Commit) -> list[Message]:
        """Apply one ``Commit`` atomically; return the appended messages with their ``seq`` and
        ``branch``. The messages go to the run's branch (``RunRecord.branch``), whichever is active."""

    @abc.abstractmethod
    async def get_run(self, run_id: str) -> RunRecord | None:
        """The run, or None."""

    @abc.abstractmethod
    async def list_runs(self, thread_id: str) -> list[RunRecord]:
        """Every run of the thread, oldest first."""

    @abc.abstractmethod
    async def pending_calls(self, thread_id: str) -> list[PendingCall]:
        """The thread's pending tool calls, in the order they were committed.

        The engine keeps at most one run per thread with pending calls (its waiting run) and
        resolves every call before the run leaves ``waiting``.
        """

    @abc.abstractmethod
    async def read_messages(
        self, thread_id: str, after_seq: int, limit: int, branch: int | None = None
    ) -> list[Message]:
        """Up to ``limit`` messages of the path of ``branch`` (None: the thread's active branch) with
        ``seq > after_seq``, oldest first. A branch the thread does not have raises ``ValueError``
        (an unknown thread reads ``[]``)."""

    async def list_branches(self, thread_id: str) -> list[Branch]:
        """Every branch of the thread, branch 0 first (``[]`` for an unknown thread).

        The default answers for a backend that does not keep branches: a thread has branch 0 only."""
        thread = await self.get_thread(thread_id)
        if thread is None:
            return []
        return [Branch(0, None, 0, thread.created_at)]

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

    async def committed_ids(self, thread_id: str, ids: Collection[str]) -> frozenset[str]:
        """Which of ``ids`` are committed message ids of the thread.

        A backend answers from an index, reading no message body (this is on the path to a run's
        first delta, once per message a client replays). The default reads the whole history.
        """
        wanted = frozenset(ids)
        if not wanted:
            return frozenset()
        found: set[str] = set()
        async for page in self._pages(thread_id):
            found.update(m.id for m in page if m.id in wanted)
        return frozenset(found)

    async def admission_facts(self, thread_id: str, ids: AbstractSet[str], tail: int) -> AdmissionFacts:
        """What admission reads (``awaken.engine.dedup`` decides what it means): the thread, its latest
        ``tail`` messages, its pending calls, and which of ``ids`` are committed message ids of the
        thread. Its cost does not grow with the thread's length.

        The default composes ``get_thread``, ``read_messages``, ``pending_calls`` and
        ``committed_ids``; a backend overrides it to answer in one round trip.
        """
        thread = await self.get_thread(thread_id)
        if thread is None:
            return NO_THREAD
        messages = tuple(await self._path_tail(thread, tail)) if tail > 0 else ()
        pending = tuple(await self.pending_calls(thread_id))
        return AdmissionFacts(thread, messages, pending, await self.committed_ids(thread_id, ids))

    async def answered_calls(self, thread_id: str, call_ids: Collection[str]) -> frozenset[str]:
        """Which of ``call_ids`` have a committed tool result in the thread, under any message id.
        This reads the history (admission asks only about a call that is neither pending nor answered
        under the engine's result id nor in the tail: a decision for a call not waiting, or a client
        tool answered under the client's own message id, replayed over another protocol)."""
        return await self._answered_by_scan(thread_id, call_ids)

    async def _path_tail(self, thread: ThreadRecord, tail: int) -> list[Message]:
        """The latest ``tail`` messages of the thread's active path, by windows of seqs that widen until
        they hold enough (one read for a thread that never branched)."""
        width = tail
        while True:
            after = max(0, thread.last_seq - width)
            window = await self.read_messages(thread.thread_id, after, thread.last_seq + 1)
            if len(window) >= tail or after == 0:
                return window[max(0, len(window) - tail):]
            width *= 2

    async def _pages(self, thread_id: str, size: int = 500) -> AsyncIterator[list[Message]]:
        after = 0
        while True:
            page = await self.read_messages(thread_id, after, size)
            if not page:
                return
            yield page
            after = page[-1].seq

    async def _answered_by_scan(self, thread_id: str, call_ids: Collection[str]) -> frozenset[str]:
        wanted = frozenset(call_ids)
        found: set[str] = set()
        async for page in self._pages(thread_id):
            found |= answered_in(page) & wanted
        return frozenset(found)

    @abc.abstractmethod
    async def list_threads(self) -> list[ThreadRecord]:
        """Every thread (used by ``awaken ledger copy``)."""

    @abc.abstractmethod
    async def thread_summary(self, thread_id: str) -> ThreadSummary | None:
        """The listing row of one thread, or None if it does not exist."""

    @abc.abstractmethod
    async def list_thread_summaries(
        self, owner: OwnerFilter, agent: str | None = None, cursor: str | None = None, limit: int = 50
    ) -> ThreadPage:
        """Up to ``limit`` threads of ``owner`` (and of ``agent`` if given), most recently updated first
        (ties by thread id, descending), after ``cursor`` (a previous page's).

        Keyset-paged on ``(updated_at, thread_id)``: paging never repeats a thread, and never skips one
        that was not updated meanwhile (an updated thread moves to the first page). The cost of a page
        does not grow with the number of threads. A bad cursor or limit raises ``ValueError``.
        """

    @abc.abstractmethod
    async def delete_thread(self, thread_id: str) -> bool:
        """Remove the thread and everything of it (messages, runs, pending calls, state) atomically:
        after a crash it is wholly present or wholly gone. Returns False if there was no such thread.
        Afterwards the id can start a new thread. (The caller refuses while a run is active.)"""

    @abc.abstractmethod
    async def import_thread(
        self,
        thread: ThreadRecord,
        runs: Sequence[RunRecord],
        messages: Sequence[Message],
        pending: Sequence[PendingCall],
        updated_at: int | None = None,
        branches: Sequence[Branch] = (),
    ) -> None:
        """Write a whole thread as copied from another ledger (keeping ids, seqs and owner), atomically.

        ``updated_at`` is the source's (its ``thread_summary``); None takes the latest of the thread's
        creation, its runs' ``updated_at`` and its messages' ``created_at``.

        ``branches`` are the source's ``list_branches`` (empty, or only branch 0: a thread that never
        branched); the thread's ``active_branch``, every message's ``branch`` and every run's ``branch``
        are kept. A message or run on a branch not given, a branch whose parent or ``fork_seq`` is
        not one of the thread's, an active branch not given, or an id repeated on one path raises
        ``ValueError`` and writes nothing (``check_import_branches``)."""


def _refusing_fork(start_run: Any) -> Any:
    @functools.wraps(start_run)
    async def start(self: Ledger, run: RunRecord, inputs: Sequence[Message], owner: str | None = None, *,
                    fork: Fork | None = None) -> list[Message]:
        if fork is not None:
            raise BranchesUnsupported(f"the {type(self).__name__} ledger does not keep branches: it cannot fork")
        return await start_run(self, run, inputs, owner)

    return start


def _root_only(read_messages: Any) -> Any:
    @functools.wraps(read_messages)
    async def read(self: Ledger, thread_id: str, after_seq: int, limit: int,
                   branch: int | None = None) -> list[Message]:
        if branch not in (None, 0):
            raise BranchesUnsupported(f"the {type(self).__name__} ledger does not keep branches: no branch {branch}")
        return await read_messages(self, thread_id, after_seq, limit)

    return read


def _unbranched_import(import_thread: Any) -> Any:
    @functools.wraps(import_thread)
    async def imported(self: Ledger, thread: ThreadRecord, runs: Sequence[RunRecord], messages: Sequence[Message],
                       pending: Sequence[PendingCall], updated_at: int | None = None,
                       branches: Sequence[Branch] = ()) -> None:
        if (any(b.branch for b in branches) or thread.active_branch or any(m.branch for m in messages)
                or any(r.branch for r in runs)):
            raise BranchesUnsupported(f"the {type(self).__name__} ledger does not keep branches: the thread "
                                      f"{thread.thread_id!r} has branches")
        return await import_thread(self, thread, runs, messages, pending, updated_at)

    return imported


def check_import_branches(thread: ThreadRecord, runs: Sequence[RunRecord], messages: Sequence[Message],
                          branches: Sequence[Branch]) -> list[Branch]:
    """The branches of an imported thread, checked (see ``Ledger.import_thread``): branch 0 first, then
    the others in order; raises ``ValueError`` for an inconsistent tree. Pure: every backend's
    ``import_thread`` calls it before writing."""
    others = sorted((b for b in branches if b.branch != 0), key=lambda b: b.branch)
    tree = [Branch(0, None, 0, thread.created_at), *others]
    numbers = [b.branch for b in tree]
    if len(set(numbers)) != len(numbers) or any(n < 0 for n in numbers):
        raise ValueError(f"import of thread {thread.thread_id!r}: a branch number repeats or is negative")
    known = set(numbers)
    seqs = {m.seq: m for m in messages}
    for b in others:
        if b.parent is None or b.parent not in known or b.parent >= b.branch or (b.fork_seq == 0 and b.parent):
            raise ValueError(f"import of thread {thread.thread_id!r}: branch {b.branch} has no valid parent")
        if any(m.branch == b.branch and m.seq <= b.fork_seq for m in messages):
            raise ValueError(f"import of thread {thread.thread_id!r}: a message of branch {b.branch} is not "
                             f"after its fork (seq {b.fork_seq})")
        if b.fork_seq < 0 or b.fork_seq > thread.last_seq or (
                b.fork_seq and (b.fork_seq not in seqs or seqs[b.fork_seq].branch != b.parent)):
            raise ValueError(f"import of thread {thread.thread_id!r}: branch {b.branch} forks at seq {b.fork_seq}, "
                             f"not a message of branch {b.parent}")
    if thread.active_branch not in known:
        raise ValueError(f"import of thread {thread.thread_id!r}: its active branch {thread.active_branch} is not given")
    if any(m.branch not in known for m in messages) or any(r.branch not in known for r in runs):
        raise ValueError(f"import of thread {thread.thread_id!r}: a message or run is on a branch not given")
    if others:
        for b in tree:
            ids = [m.id for m in path_of(branch_path(tree, b.branch), messages)]
            if len(set(ids)) != len(ids):
                raise ValueError(f"import of thread {thread.thread_id!r}: a message id repeats on branch {b.branch}'s path")
    return tree


LEDGER_GROUP = "awaken.ledgers"


def known_backends() -> dict[str, EntryPoint]:
    """Backend name -> where its class lives: every entry point of the ``awaken.ledgers`` group
    (the built-in ``sqlite`` and ``files`` are registered there by Awaken's own package metadata)."""
    return {ep.name: ep for ep in entry_points(group=LEDGER_GROUP)}


def ledger_class(name: str) -> type[Ledger]:
    """Resolve a backend name from config to its class; unknown names raise ``ConfigError``."""
    backends = known_backends()
    if name not in backends:
        raise ConfigError(
            f"ledger.backend: unknown backend {name!r}; known backends: {', '.join(sorted(backends))}"
        )
    try:
        return backends[name].load()
    except ImportError as exc:  # e.g. postgres without its extra: pip install 'awaken[postgres]'
        raise ConfigError(f"ledger.backend: the {name} backend cannot be loaded: {exc}") from None


def imported_updated_at(thread: ThreadRecord, runs: Sequence[RunRecord], messages: Sequence[Message]) -> int:
    """The ``updated_at`` of an imported thread whose source did not say."""
    return max([thread.created_at, *(r.updated_at for r in runs), *(m.created_at for m in messages)])


def last_run_of(runs: Iterable[RunRecord]) -> RunRecord | None:
    """The last of ``runs`` in ``list_runs`` order (by ``created_at``, then insertion order)."""
    latest: RunRecord | None = None
    for run in runs:
        if latest is None or run.created_at >= latest.created_at:
            latest = run
    return latest


def run_summary(run: RunRecord | None) -> RunSummary | None:
    return None if run is None else RunSummary(run.run_id, run.status, run.cause, run.error_code)


class WriteClock:
    """A ledger's clock for ``updated_at``: wall-clock ms, but strictly increasing per ledger, so the
    newest write is always listed first (ties cannot hide the order of two writes)."""

    def __init__(self, last: int = 0) -> None:
        self.last = last

    def advance_to(self, seen: int) -> None:
        self.last = max(self.last, seen)

    def now(self) -> int:
        self.last = max(int(time.time() * 1000), self.last + 1)
        return self.last
