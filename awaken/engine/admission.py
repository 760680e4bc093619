"""Admission: the thread claim, the registry of active runs, and everything that can refuse a
request before a byte is sent.

``RunApplication.admit`` claims the thread (one active run per thread: ``THREAD_BUSY``), reads its
committed view once, lets the adapter build the ``RunRequest`` from it, and prepares the run
against that same view: a fresh run (its record is written beside its first step, see
``commit.write_start``), a resume (its decisions are validated here, applied when it streams), or
new input superseding a waiting run (the only write before the stream starts, ``superseded``).
On exit a run that never reached a committed outcome is committed ``interrupted``.

The registry (``active``) is what ``stop`` and a shutdown act on: ``stop(thread_id)`` cancels the
thread's run with ``Cause.STOPPED`` and returns its committed status. A run whose outcome could
not be committed in time stays in the registry until ``reconcile_forever``, a task of the server's
nursery, has committed it: meanwhile its thread answers ``THREAD_BUSY`` while the store is only slow,
and ``STORE_UNAVAILABLE`` (runs, stop, delete) once the store refused the commit
(``outcome_refused``): waiting for another run would not help then, the store has to answer.

Limits per principal (``[limits]``, ``limits.py``): before anything else ``admit`` takes a slot for
the caller from ``limiter`` or raises ``RateLimited``; every wire and transport admits here, so this
one check covers them all. The slot is given back when the run ends or starts waiting (``execute``),
and given back with its start uncounted when admission refuses the request for another reason.

The claim itself goes through the ledger's ``ThreadClaims`` (``awaken/engine/claims.py``): the registry
refuses a second run of this process at once, then the claims refuse a thread another server process
holds (an embedded ledger's ``LocalClaims`` always agree). A run's claim is released when its
outcome is committed, before its response ends. ``stop`` of a thread another process holds asks
that process (``request_stop``) and waits until the thread is free.

Ownership: a thread belongs to the subject that started it (written with its first run). ``admit``
is where runs check it, for every protocol and transport: a caller the thread is not visible to
(``access.may_see``, the one rule) gets ``UnknownThread``, exactly what a thread that does not exist gives the
read routes, before anything else is said about it (not even ``THREAD_BUSY``). ``owner_of`` answers
the same question for the routes that are not runs (``awaken/engine/access.py``).

New input for a busy thread. What ``admit`` does with a request for a thread whose run is streaming
is the agent's choice (``[agents.<id>] on_new_input``): ``reject`` (the default) refuses it with
``THREAD_BUSY``; ``interrupt`` stops the running turn for ``superseded`` (its answer so far committed,
marked cut off) and admits the request once that is committed; ``enqueue`` admits it once the running
turn has ended (the request waits; its message is committed when its own run starts, after the
turn before it). A thread another server process runs on still answers ``THREAD_BUSY``.

Hosting. ``launch`` admits a run and executes it as a task of the server-owned nursery that
``hosting()`` opens (``cli.serve`` and the test server hold it open around hypercorn): a run is
owned by the server, not by the connection that asked for it, and streams into its broadcast
(``rundata.Broadcast``: the streams' ``RunBroadcast``) for whoever watches. With no ``hosting()``
open, ``launch`` opens a nursery of its own for the run: no engine entry point takes a nursery.
Whether a connection that goes away takes its run along is the connection's decision (``exchange``:
the agent's ``on_disconnect``). Leaving ``hosting()`` interrupts every run still in it for ``shutdown``.

Draining. A graceful shutdown first calls ``drain(seconds)``: admission refuses every new run with
``SERVER_DRAINING`` (503, ``Retry-After``), and the active runs get ``seconds`` to complete, start
waiting (a committed state another process or a restart resumes) or reach their next step boundary,
where they stop, committed ``interrupted`` for ``shutdown``; what still runs then is interrupted
for ``shutdown`` at once.
"""

from __future__ import annotations

import contextlib
import logging
import math
from collections.abc import AsyncIterator, Callable

import attrs
import orjson
import trio

from awaken.core.errors import AwakenError, InputRejected, ServerDraining, StoreUnavailable, UnknownThread
from awaken.core.messages import Message
from awaken.core.principal import Principal
from awaken.engine.access import may_see
from awaken.engine.agents import Agent, AgentRegistry
from awaken.engine.branching import fork_history, fork_seq
from awaken.engine.commit import write
from awaken.engine.dedup import admission_view
from awaken.engine.limits import RunLimiter, Slot
from awaken.engine.outcome import FINAL_COMMIT_TIMEOUT, interrupt
from awaken.engine.policy import superseded
from awaken.engine.reconcile import settle_late
from awaken.engine.run import AdmittedRun
from awaken.engine.rundata import Broadcast, RunSpec
from awaken.engine.state import Cause, RunState, RunStatus
from awaken.ledger.interface import Commit, Fork, Ledger, PendingCall, ThreadView
from awaken.models import ToolSpec
from awaken.runtime.flag import Flag
from awaken.runtime.tuning import OFF_LOOP_MESSAGES
from awaken.telemetry import tracing
from awaken.telemetry.metrics import ServerMetrics
from awaken.telemetry.tracing import Timelines
from awaken.tools import ToolRegistry
from awaken.wires.protocol import Asks, ForkAt, RunRequest, ToolDecision, new_id

log = logging.getLogger("awaken.engine")

#: every hosted run's task is named this (trio would build a string per task from the function's name)
RUN_TASK = "awaken.engine.admission.run"


class Handoff:
    """A run admitted in the server's nursery for a request that waits for it (``RunApplication.start``):
    the admitted run or the refusal, handed to the request; what ``nursery.start`` does, without the
    nursery of its own per request. A request cancelled while it waits abandons the run: its admission
    ends without starting it."""

    __slots__ = ("_lot", "abandoned", "error", "handed", "run")

    def __init__(self) -> None:
        self.run: AdmittedRun | None = None
        self.error: BaseException | None = None
        self.abandoned = False
        #: the run or the refusal was handed over (``started`` or ``failed``)
        self.handed = False
        self._lot = trio.lowlevel.ParkingLot()

    def started(self, run: AdmittedRun) -> None:
        self.run = run
        self.handed = True
        self._lot.unpark_all()

    def failed(self, error: BaseException) -> None:
        self.error = error
        self.handed = True
        self._lot.unpark_all()

    async def wait(self) -> AdmittedRun:
        try:
            while not self.handed:
                await self._lot.park()
        except trio.Cancelled:
            self.abandoned = True
            raise
        error, self.error = self.error, None
        if error is not None:
            # the raised error's traceback holds this frame and the caller's, which hold this handoff: a
            # handoff that kept the error too made each refusal a reference cycle (its frames, the
            # request's and the refused run's objects waited for a full collection)
            try:
                raise error
            finally:
                del error
        assert self.run is not None
        return self.run


class Admission:
    """``RunApplication.admit``'s async context: entering admits the request (or raises, having changed
    nothing), leaving commits the outcome of a run that reached none. Once entered it holds the run,
    the caller's slot and the run's trace, nothing of the request."""

    __slots__ = ("_app", "_request", "_run", "_slot", "_trace")

    def __init__(self, app: RunApplication, thread_id: str, agent_id: str | None,
                 build: Callable[[ThreadView], RunRequest], asks: Asks | None, principal: Principal) -> None:
        self._app = app
        self._request: tuple[str, str | None, Callable[[ThreadView], RunRequest], Asks | None, Principal] | None = (
            thread_id, agent_id, build, asks, principal)
        self._run: AdmittedRun | None = None
        self._slot: Slot | None = None
        self._trace: tracing.Span | None = None

    async def __aenter__(self) -> AdmittedRun:
        assert self._request is not None, "an admission is entered once"
        thread_id, agent_id, build, asks, principal = self._request
        self._request = None
        app = self._app
        run, slot = await app._reserve(thread_id, agent_id, principal)
        # the run's trace: its root spans the admission (recorded once it is decided: ``admitted``,
        # ``refused``) and the execution, to the committed outcome
        trace = tracing.run(run.agent.id, run.agent.config.description, thread_id, principal.subject,
                            app.timelines, current=True)
        try:
            await app._decide(run, build, asks, principal, trace)
        except BaseException as exc:
            tracing.refused(trace, run.status.value, exc)  # refused: the trace says why
            await app._finish(run, slot, trace, admitted=False)
            raise
        self._run, self._slot, self._trace = run, slot, trace
        return run

    async def __aexit__(self, *exc_info: object) -> None:
        assert self._run is not None and self._slot is not None and self._trace is not None
        await self._app._finish(self._run, self._slot, self._trace, admitted=True)


class RunApplication:
    """The only execution authority: admits runs, keeps the active ones, stops them."""

    def __init__(self, ledger: Ledger, agents: AgentRegistry, tools: ToolRegistry,
                 limiter: RunLimiter | None = None, metrics: ServerMetrics | None = None,
                 timelines: Timelines | None = None) -> None:
        self.ledger = ledger
        #: the server's metrics (None: nothing is counted): each admitted run's ``RunState`` reports to them
        self.metrics = metrics
        #: where the runs' timelines are kept for the console (None: nowhere)
        self.timelines = timelines
        #: the caps per principal (``[limits]``): the first thing ``admit`` checks
        self.limiter = limiter or RunLimiter()
        self.agents = agents
        self.tools = tools
        self._active: dict[str, AdmittedRun] = {}
        self._late_send, self._late_receive = trio.open_memory_channel[AdmittedRun](math.inf)
        self.claims = ledger.claims()
        #: threads being deleted: no run is admitted on them meanwhile (and the tokens of their claims)
        self._deleting: set[str] = set()
        self._deleting_tokens: set[str] = set()
        self.claims.live_tokens(
            lambda: frozenset(r.claim_token for r in self._active.values()) | frozenset(self._deleting_tokens))
        self._host: trio.Nursery | None = None
        #: a shutdown began (``drain``): no run is admitted any more
        self.draining = False

    @property
    def hosting_runs(self) -> bool:
        """Whether runs execute in the server's own nursery (``hosting`` is open)."""
        return self._host is not None

    @contextlib.asynccontextmanager
    async def hosting(self) -> AsyncIterator[None]:
        """Hold the server-owned nursery that ``launch`` runs in; on exit every run still active is
        interrupted for ``shutdown`` (and its outcome committed) before this returns."""
        async with trio.open_nursery() as nursery:
            self._host = nursery
            try:
                yield
            finally:
                self._host = None
                for run in list(self._active.values()):
                    run.cancel(Cause.SHUTDOWN)

    @contextlib.asynccontextmanager
    async def launch(self, thread_id: str, agent_id: str | None, build: Callable[[ThreadView], RunRequest],
                     broadcast: Callable[[AdmittedRun], Broadcast], asks: Asks | None = None, *,
                     principal: Principal) -> AsyncIterator[AdmittedRun]:
        """Admit a request (raising ``InputRejected``/``StoreUnavailable`` having changed nothing, as
        ``admit``) and execute the run into ``broadcast(run)`` as a task of the server's nursery
        (``hosting``); yields the admitted run once it is streaming; its broadcast closes after its
        outcome is committed. When no ``hosting`` is open the engine opens a nursery of its own for
        the run, and leaving this waits until the run ended."""
        args = (thread_id, agent_id, build, broadcast, asks, principal)
        if self._host is not None:
            yield await self.start(thread_id, agent_id, build, broadcast, asks, principal=principal)
            return
        refused: AwakenError | None = None
        async with trio.open_nursery() as own:
            try:
                run = await own.start(self._hosted, *args, own)
            except AwakenError as exc:  # a refusal leaves the nursery as itself, not in an exception group
                refused = exc
            else:
                yield run
        if refused is not None:
            raise refused

    async def start(self, thread_id: str, agent_id: str | None, build: Callable[[ThreadView], RunRequest],
                    broadcast: Callable[[AdmittedRun], Broadcast], asks: Asks | None = None, *,
                    principal: Principal) -> AdmittedRun:
        """``launch`` in a server that hosts runs (``hosting`` is open): the run is a task of the server's
        nursery, so the caller holds nothing open for it (a context held per stream cost about 1.5 KB).
        Admission runs in that task too and is handed back (``Handoff``), as ``nursery.start`` would."""
        assert self._host is not None, "start needs hosting(); launch works without it"
        handoff = Handoff()
        self._host.start_soon(self._hosted, thread_id, agent_id, build, broadcast, asks, principal, self._host, handoff,
                              name=RUN_TASK)
        return await handoff.wait()

    async def _hosted(self, thread_id: str, agent_id: str | None, build: Callable[[ThreadView], RunRequest],
                      broadcast: Callable[[AdmittedRun], Broadcast], asks: Asks | None,
                      principal: Principal, nursery: trio.Nursery,
                      task_status: trio.TaskStatus[AdmittedRun] | Handoff = trio.TASK_STATUS_IGNORED) -> None:
        """Admit the request and execute its run, a task of ``nursery`` (which hosts its first write too)."""
        handoff = task_status if isinstance(task_status, Handoff) else None
        try:
            async with self.admit(thread_id, agent_id, build, asks, principal=principal) as run:
                if handoff is not None and handoff.abandoned:
                    return  # the request went while it was admitted: the run never starts (nothing was written)
                run.broadcast = out = broadcast(run)
                # this frame lives as long as the run: the request's callbacks and asked ids go now
                build = broadcast = asks = None  # type: ignore[assignment]
                # the run goes on at once: its request's watcher holds the frames until the request's
                # task, woken here, attaches its transport at the run's first checkpoint (a model's first
                # await, or the scripted model's right after its first delta) and sends them together;
                # a socket's request takes them as they come (``Transport.early``)
                task_status.started(run)
                handoff = task_status = None  # type: ignore[assignment]  # handed: not kept for the run's life
                try:
                    await run.execute(out.sink, nursery)
                except Exception:  # never: execute commits every failure; a bug must not take the server down
                    log.exception("run %s: unexpected error", run.run_id)
                finally:
                    out.close()
        except BaseException as exc:
            if handoff is None or handoff.handed:
                raise
            # refused before the run was handed over: the error is the waiting request's, as from
            # ``nursery.start`` (a cancellation is the server's nursery closing: the request hears why)
            handoff.failed(exc.with_traceback(None) if isinstance(exc, Exception)
                           else ServerDraining("the server is shutting down and starts no new run"))
            if not isinstance(exc, Exception):
                raise

    @property
    def active_count(self) -> int:
        """How many runs are active (admitted and not yet settled)."""
        return len(self._active)

    def runs(self) -> list[AdmittedRun]:
        """The runs active in this process now (executing, or with an outcome not yet committed)."""
        return list(self._active.values())

    def is_active(self, thread_id: str) -> bool:
        return thread_id in self._active

    def active(self, thread_id: str) -> AdmittedRun | None:
        """The run that holds ``thread_id`` now, if any."""
        return self._active.get(thread_id)

    async def owner_of(self, thread_id: str) -> tuple[bool, str | None]:
        """``(exists, owner)`` of a thread: committed, or being started by an active run right now (here,
        or on another process of a shared ledger: its run relay knows)."""
        run = self._active.get(thread_id)
        if run is not None and run.owner_known:
            return True, run.owner
        thread = await self.ledger.get_thread(thread_id)
        if thread is not None:
            return True, thread.owner
        if run is not None:  # admission is still reading the thread: whoever asks next sees it soon
            return True, run.owner
        relay = self.ledger.relay()  # a shared ledger: a run another process started a moment ago
        if relay is not None:
            # its relay names it once its first batch is staged (milliseconds after its claim)
            with trio.move_on_after(REMOTE_STOP_GRACE):
                while True:
                    if (elsewhere := await relay.find(thread_id)) is not None:
                        return True, elsewhere.owner
                    holder = await self.claims.holder(thread_id)
                    if holder is None or holder == self.claims.process_id:
                        break
                    await trio.sleep(REMOTE_POLL_SECONDS)
        return False, None

    def admit(
        self, thread_id: str, agent_id: str | None, build: Callable[[ThreadView], RunRequest],
        asks: Asks | None = None, *, principal: Principal,
    ) -> Admission:
        """Admit a request or raise ``InputRejected``/``StoreUnavailable`` having changed nothing.

        The thread is reserved first; then its committed view is read once and handed to ``build``
        (the adapter's pure dedup: replayed history out, new input and decisions in); then the run is
        prepared against that same view. A fresh run costs one ledger read and one write before its
        first byte. With ``asks`` (the ids ``build`` will ask about) the read is bounded: the
        thread's latest ``history_messages`` (the agent's history budget), its pending calls and the
        answers for those ids (``dedup.admission_view``), so its cost does not grow with the thread. On exit, a run that never reached a committed outcome is committed ``interrupted``.

        A thread ``principal`` may not see raises ``UnknownThread``; a new thread will belong to
        ``principal.subject``. A caller over a ``[limits]`` cap gets ``RateLimited`` before anything
        is looked at; a thread whose last outcome waits for the store gets ``StoreUnavailable``.

        An async context (``async with app.admit(...) as run``): entering admits, leaving commits the
        outcome of a run that reached none. It is a small object, not a generator's frame, because it
        lives as long as the run.
        """
        return Admission(self, thread_id, agent_id, build, asks, principal)

    async def _reserve(self, thread_id: str, agent_id: str | None, principal: Principal) -> tuple[AdmittedRun, Slot]:
        """The caller's caps and the thread's place in this process: the run that holds it from now on
        (and its slot), or the refusal (nothing held)."""
        if self.draining:
            raise ServerDraining("the server is shutting down and starts no new run; send it again in a few "
                                 "seconds (to this server once it is back, or to another one)")
        agent = self.agents.get(agent_id)
        # the caller's caps come first: refusing costs nothing and says nothing about the thread
        slot = self.limiter.acquire(principal)
        waited: AdmittedRun | None = None
        while thread_id in self._active or thread_id in self._deleting:
            slot.refund()
            exists, owner = await self.owner_of(thread_id)
            if exists and not may_see(principal, owner):
                raise UnknownThread(f"no thread {thread_id!r}")
            holder = self._active.get(thread_id)
            if holder is not None and holder.unsettled is not None and holder.outcome_refused:
                raise StoreUnavailable(
                    f"thread {thread_id!r}: the outcome of run {holder.run_id!r} could not be committed (the "
                    "ledger is failing); the thread takes new input once it is committed: retry when /readyz is 200")
            if holder is not None and holder.unsettled is not None:
                if holder.reconciling or holder is waited:
                    raise InputRejected(
                        f"thread {thread_id!r}: the outcome of run {holder.run_id!r} is still being committed; "
                        "retry in a few seconds", code="THREAD_BUSY")
                # the run has ended and its outcome's own commit is under way (a client that stopped a stream
                # and sends again at once): it is waited for as a run that ends, within that commit's bound
                waited = holder
                with trio.move_on_after(FINAL_COMMIT_TIMEOUT + 1):
                    await holder.settled()
            elif holder is None or agent.config.on_new_input == "reject":
                raise InputRejected(
                    f"thread {thread_id!r} already has an active run; send the next input when it ends",
                    code="THREAD_BUSY",
                )
            else:
                await self._make_way(holder, agent.config.on_new_input)
            if self.draining:
                raise ServerDraining("the server is shutting down and starts no new run; send it again in a "
                                     "few seconds (to this server once it is back, or to another one)")
            slot = self.limiter.acquire(principal)
        run = AdmittedRun(self.ledger, self.tools, agent, thread_id, release=self._release,
                          reconcile=self.reconcile)
        run.owner = principal.subject
        if self.metrics is not None:
            run.runstate.metrics = self.metrics.run(run, principal.subject)
        run.principal = principal
        run.slot = slot
        self._active[thread_id] = run
        return run, slot

    async def _decide(self, run: AdmittedRun, build: Callable[[ThreadView], RunRequest], asks: Asks | None,
                      principal: Principal, trace: tracing.Span) -> None:
        """Admit ``run`` (reserved by ``_reserve``) or raise: the thread's claim, its committed view read
        once, the request ``build`` makes of it, the run prepared against that same view."""
        thread_id, agent = run.thread_id, run.agent
        if not await self.claims.claim(thread_id, run.claim_token):
            held = await self.ledger.get_thread(thread_id)
            if held is not None and not may_see(principal, held.owner):
                raise UnknownThread(f"no thread {thread_id!r}")  # nothing is said about others' threads
            raise InputRejected(
                f"thread {thread_id!r} already has an active run on another server process; "
                "send the next input when it ends",
                code="THREAD_BUSY",
            )
        run.claimed = True
        if asks is None:
            view = await self.ledger.thread_view(thread_id)
        else:
            view = await admission_view(self.ledger, thread_id, asks.message_ids, asks.calls,
                                        agent.config.history_messages)
        if view.thread is not None:
            run.owner = view.thread.owner
        run.owner_known = True
        if not may_see(principal, run.owner):
            raise UnknownThread(f"no thread {thread_id!r}")
        # the work of ``build`` and ``prepare`` grows with the messages the thread does not hold
        # (they are decoded and stamped); a replayed history's are set lookups
        fresh = len(asks.message_ids) - len(view.known_ids or ()) if asks is not None else 0
        request = await trio.to_thread.run_sync(build, view) if fresh >= OFF_LOOP_MESSAGES else build(view)
        await prepare(run, request, view, self.agents, off_loop=len(request.inputs) >= OFF_LOOP_MESSAGES)
        tracing.admitted(trace, run.run_id, resumed=run.resumed)

    @staticmethod
    async def _finish(run: AdmittedRun, slot: Slot, trace: tracing.Span, *, admitted: bool) -> None:
        """The end of an admission: the caller's slot given back (refunded when refused: the request
        started no run), and a run that reached no committed outcome committed ``interrupted``."""
        if admitted:
            slot.release()
        else:
            slot.refund()
        run.abandon()
        try:
            await interrupt(run)
        finally:
            await run.settle()
            tracing.ended(trace, run.status.value)

    async def _make_way(self, holder: AdmittedRun, on_new_input: str) -> None:
        """New input for a thread ``holder`` runs on, by the agent's ``on_new_input``: ``interrupt`` stops
        the running turn (committed ``interrupted``, cause ``superseded``, its answer so far kept as cut
        off), ``enqueue`` lets it end; either way this returns once it has settled and left the thread
        (admission then looks again: another request may have taken the thread meanwhile)."""
        if on_new_input == "interrupt":
            holder.cancel(Cause.SUPERSEDED)
        await holder.settled()

    async def stop(self, thread_id: str) -> RunStatus | None:
        """Stop the thread's active run (``Cause.STOPPED``) and wait for its committed outcome.

        Returns the status the run ended with (``interrupted``, or the outcome it reached first), or
        None when nothing runs on the thread. A waiting run is not active: nothing runs for it. A run
        another server process holds is stopped there (``ThreadClaims.request_stop``); this waits
        until that process released the thread and returns the run's committed status (still
        ``running`` if it did not stop within the wait).
        """
        run = self._active.get(thread_id)
        if run is not None and run.unsettled is not None and run.outcome_refused:
            raise StoreUnavailable(f"thread {thread_id!r}: nothing runs, but the outcome of run {run.run_id!r} "
                                   "could not be committed yet (the ledger is failing)")
        if run is not None:
            run.cancel(Cause.STOPPED)
            return await run.settled()
        if await self.claims.request_stop(thread_id) is None:
            return None
        with trio.move_on_after(FINAL_COMMIT_TIMEOUT + REMOTE_STOP_GRACE):
            # the holder's release is a row in the database: look until it is gone
            while True:
                if await self.claims.holder(thread_id) is None:
                    break
                await trio.sleep(REMOTE_POLL_SECONDS)
        runs = await self.ledger.list_runs(thread_id)
        return runs[-1].status if runs else None

    async def stop_local(self, thread_id: str) -> None:
        """Another process asked to stop this thread's run (a no-op when it is not running here)."""
        run = self._active.get(thread_id)
        if run is not None:
            run.cancel(Cause.STOPPED)
            await run.settled()

    async def delete(self, thread_id: str) -> bool:
        """Delete the thread from the ledger (False: there was none), holding it so that no run is
        admitted meanwhile. Raises ``InputRejected`` ``THREAD_BUSY`` while a run is active on it, and
        ``StoreUnavailable`` while a run's outcome on it waits for the store."""
        holder = self._active.get(thread_id)
        if holder is not None and holder.unsettled is not None and holder.outcome_refused:
            raise StoreUnavailable(f"thread {thread_id!r}: the outcome of run {holder.run_id!r} could not be "
                                   "committed yet (the ledger is failing); retry when /readyz is 200")
        if thread_id in self._active or thread_id in self._deleting:
            raise InputRejected(f"thread {thread_id!r} has an active run; stop it first (POST /v1/threads/{{id}}/stop)",
                                code="THREAD_BUSY")
        self._deleting.add(thread_id)
        token = new_id("claim")
        self._deleting_tokens.add(token)
        try:
            # the thread is claimed for the delete, so no process admits a run on it meanwhile
            if not await self.claims.claim(thread_id, token):
                raise InputRejected(f"thread {thread_id!r} has an active run on another server process; stop it "
                                    "first (POST /v1/threads/{id}/stop)", code="THREAD_BUSY")
            try:
                return await self.ledger.delete_thread(thread_id)
            finally:
                with trio.move_on_after(FINAL_COMMIT_TIMEOUT, shield=True):
                    await self.claims.release(thread_id, token)
        finally:
            self._deleting.discard(thread_id)
            self._deleting_tokens.discard(token)

    async def drain(self, seconds: float, cut: trio.Event | None = None) -> None:
        """A graceful shutdown's first part: from now on no run is admitted (``SERVER_DRAINING``); each
        active run may finish, start waiting, or reach its next step boundary, where it is interrupted
        for ``shutdown``, for up to ``seconds`` (or until ``cut`` is set); then every run still active
        is interrupted for ``shutdown``. Returns once their outcomes are committed (each bounded as any
        final commit is: one the store does not take stays with the reconciler)."""
        self.draining = True
        for run in list(self._active.values()):
            run.drain()
        with trio.move_on_after(seconds):
            async with trio.open_nursery() as nursery:
                if cut is not None:
                    async def cut_short() -> None:
                        await cut.wait()
                        nursery.cancel_scope.cancel()

                    nursery.start_soon(cut_short)
                while self._active:
                    await next(iter(self._active.values())).settled()
                nursery.cancel_scope.cancel()
        for run in list(self._active.values()):
            run.cancel(Cause.SHUTDOWN)
        with trio.move_on_after(FINAL_COMMIT_TIMEOUT + 1):
            for run in list(self._active.values()):
                await run.settled()

    def shutting_down(self) -> None:
        """The server is shutting down: a run cancelled from now on is interrupted for ``shutdown``."""
        for run in list(self._active.values()):
            run.blame(Cause.SHUTDOWN)

    def reconcile(self, run: AdmittedRun) -> None:
        """Hand a run whose outcome is not committed yet to ``reconcile_forever``."""
        self._late_send.send_nowait(run)

    async def reconcile_forever(self) -> None:
        """Commit late outcomes as the store answers (the server's nursery runs this until shutdown)."""
        async with trio.open_nursery() as nursery:
            async for run in self._late_receive:
                nursery.start_soon(settle_late, run)

    async def _release(self, run: AdmittedRun) -> None:
        if self._active.get(run.thread_id) is run:
            del self._active[run.thread_id]
        if run.claimed:
            run.claimed = False
            with trio.move_on_after(FINAL_COMMIT_TIMEOUT, shield=True):
                await self.claims.release(run.thread_id, run.claim_token)


# a request carrying at least ``OFF_LOOP_MESSAGES`` messages is turned into its run off the event loop
# (``awaken.runtime.tuning``: the off-loop policy)
#: how long ``stop`` waits, beyond a final commit's bound, for another process to free the thread
REMOTE_STOP_GRACE = 3.0
#: how often ``stop`` looks whether another process freed the thread
REMOTE_POLL_SECONDS = 0.05


async def prepare(run: AdmittedRun, request: RunRequest, view: ThreadView, agents: AgentRegistry, *,
                  off_loop: bool = False) -> None:
    """Everything that can refuse the request happens here, before any byte is sent (with
    ``off_loop``, a large input is stamped with its run id in a worker thread); the run's frozen part
    (``RunSpec``) is made here, once.

    A fresh run's record and input are written by ``execute`` beside its first step; a resume only
    validates its decisions here (``execute`` applies them, so a slow tool never delays the response
    head). Only superseding a waiting run writes before the stream starts.

    A request that forks (``request.fork``: a regenerate, which needs no new input, or an edit) is a
    fresh run on a new branch: its history is the active path up to the fork point, and a waiting run
    on the path it leaves is closed as superseded first (its calls are never executed later).
    """
    state = dict(view.thread.state) if view.thread else {}
    client_state = request.state is not None and request.state != state
    if client_state:  # the client's state differs from the committed one: it is committed first
        state = dict(request.state or {})
    history = list(view.messages)
    pending = list(view.pending)
    if request.replay or request.decisions:
        spec = RunSpec(request, run.agent, run.thread_id, state=state, client_state=client_state)
        if request.replay:
            spec = _prepare_replay(run, spec)
        else:
            spec = await _prepare_resume(run, spec, pending, history, agents)
        run.admitted(attrs.evolve(spec, history=tuple(history)))
    elif request.inputs or request.fork is not None:
        fork = None
        if request.fork is not None:  # a regenerate or an edit: the run starts from the path up to the fork
            fork, history = await _forked(run, request.fork, view)
        if pending:
            closed = await _supersede(run, pending)
            if fork is None:  # closed on the path the run continues (a fork leaves that path behind)
                history.extend(closed)
        # a fresh run: its record and input are written while the first step streams (its spec made once)
        run.start = Flag()
        run_id = request.run_id or new_id("run")
        if off_loop:
            history.extend(await trio.to_thread.run_sync(_stamped, request.inputs, run_id))
        else:
            history.extend(_stamped(request.inputs, run_id))
        run.admitted(RunSpec(request, run.agent, run.thread_id, run_id, new_id("msg"), tuple(history), state,
                             client_state, offered_client_tools(run.agent, request.tools), fork=fork))
    else:
        raise InputRejected("the request carries no new input: every message is already committed",
                            code="NO_NEW_INPUT")


def _prepare_replay(run: AdmittedRun, spec: RunSpec) -> RunSpec:
    """A request that only repeats committed decisions: nothing runs and nothing is written; its
    stream starts and finishes (the committed status it reports is the thread's, unchanged)."""
    run.runstate.replayed()
    return attrs.evolve(spec, run_id=spec.request.run_id or new_id("run"), replay=True)


def offered_client_tools(agent: Agent, declared: tuple[ToolSpec, ...]) -> tuple[ToolSpec, ...]:
    """The declared tools that become the run's client tools: a declaration naming one of the
    agent's own tools never replaces it (for a server tool it is how the page renders its gate)."""
    if not declared:
        return ()
    own = agent.tool_names
    return tuple(t for t in declared if t.name not in own)


async def _forked(run: AdmittedRun, at: ForkAt, view: ThreadView) -> tuple[Fork, list[Message]]:
    """The ledger's ``Fork`` for a run on a new branch, and the committed history it starts from (the
    active path up to the fork point). Reads only; nothing is written before the run's first write."""
    if not run.ledger.supports_branches:
        raise InputRejected(f"this server's ledger ({type(run.ledger).__name__}) does not keep branches: a "
                            f"{at.reason} needs one that does", code="BRANCHES_UNSUPPORTED")
    if view.thread is None:
        raise InputRejected(f"message {at.message_id!r} is not on the thread's active path; nothing to {at.reason}",
                            code="UNKNOWN_MESSAGE")
    budget = run.agent.config.history_messages
    after = await fork_seq(run.ledger, view, at, budget)
    return Fork(after, at.reason), list(await fork_history(run.ledger, view, after, budget))


def _stamped(inputs: tuple[Message, ...] | list[Message], run_id: str) -> list[Message]:
    """The new input messages as the run's history holds them: carrying the run's id."""
    return [attrs.evolve(m, run_id=run_id) for m in inputs]


async def _supersede(run: AdmittedRun, pending: list[PendingCall]) -> tuple[Message, ...]:
    """New input while a run waits: its open calls are closed as cancelled, the run interrupted (the
    waiting run's change, from the table). Returns the committed closing results."""
    run_id = pending[0].run_id
    waiting = RunState()
    waiting.metrics = run.runstate.metrics  # it leaves ``waiting``
    waiting.resumed()
    change = waiting.change(RunStatus.INTERRUPTED, cause=Cause.SUPERSEDED)
    committed = await write(
        run.ledger, run.thread_id, run_id, change,
        Commit(status=RunStatus.INTERRUPTED, messages=superseded(pending, run_id),
               resolved=tuple(p.tool_call_id for p in pending)),
    )
    waiting.committed(change)
    return committed


def _check_edited(run: AdmittedRun, call: PendingCall, arguments: str) -> None:
    """Edited arguments replace the model's only if they satisfy the tool's parameters."""
    tools = run.tools
    problem = "the tool is not available" if call.name not in tools else tools.check_arguments(
        call.name, orjson.loads(arguments))
    if problem is not None:
        raise InputRejected(f"editedArgs for tool call {call.tool_call_id!r} ({call.name}) do not match "
                            f"its parameters: {problem}", code="INVALID_RESUME")


async def _prepare_resume(run: AdmittedRun, spec: RunSpec, pending: list[PendingCall], history: list[Message],
                          agents: AgentRegistry) -> RunSpec:
    if not pending:
        raise InputRejected("a tool result or decision arrived but nothing on this thread is waiting",
                            code="NO_PENDING_RUN")
    by_id = {p.tool_call_id: p for p in pending}
    decided: dict[str, ToolDecision] = {}
    for decision in spec.request.decisions:
        call = by_id.get(decision.tool_call_id)
        if call is None:
            raise InputRejected(
                f"tool call {decision.tool_call_id!r} is not pending; pending: {', '.join(by_id)}",
                code="TOOL_CALL_NOT_PENDING",
            )
        if call.kind == "client" and decision.kind in ("approve", "deny"):
            raise InputRejected(
                f"tool call {decision.tool_call_id!r} waits for the client's result, not an approval",
                code="TOOL_CALL_NOT_PENDING",
            )
        if decision.arguments is not None:
            _check_edited(run, call, decision.arguments)
        decided[call.tool_call_id] = decision
    run_id = pending[0].run_id
    record = await run.ledger.get_run(run_id)
    if record is None or record.status is not RunStatus.WAITING:
        raise InputRejected("the waiting run is gone", code="NO_PENDING_RUN")
    tracing.waiting_since(record.updated_at)  # the wait at its gates ends now
    run.runstate.resumed()
    return attrs.evolve(
        spec,
        # The run continues under the agent that started it, whichever route the decision came by.
        agent=agents.get(record.agent_id),
        run_id=run_id,
        resumed=True,
        usage=record.usage,
        steps_done=record.steps,
        client_tools=record.tools,
        answer_message_id=next((m.id for m in history if m.run_id == run_id and m.role == "assistant"),
                               new_id("msg")),
        decided=tuple((p, decided[p.tool_call_id]) for p in pending if p.tool_call_id in decided),
        remaining=tuple(p for p in pending if p.tool_call_id not in decided),
    )
