"""The run's data: what every engine module reads of an admitted run. Every other run module imports
this one, and it imports none of them.

* ``RunSpec`` — the frozen part, fixed at admission: the request, the agent, the ids, the history as
  admission read it, the client's tools, what kind of run it is (fresh, resumed, replay) and a
  resume's decided and remaining calls. A fresh run's id may be replaced once, when the ledger
  refuses one the client reused (``commit.write_start``): the spec is then replaced, never edited.
* ``Progress`` — the changing part: the history as committed so far, the thread's state, usage and
  steps done. Only ``commit`` changes it (the first write, and ``apply`` of each step's commit), and
  the run's end (``outcome``: the answer cut off by it); the step loop names the step streaming now.
* ``RunState`` (``state.py``) — the status, the cause, the settled flag: changed only by that object.
* ``Broadcast`` — what the engine needs of the stream a run feeds (``awaken.streams`` implements it).
* ``RunBase`` — one admitted run's data as the step loop, the tool policy and the commits see it;
  ``run.AdmittedRun`` adds its execution and its stopping.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

import attrs

from awaken.core.errors import AwakenError
from awaken.core.messages import Message, Usage
from awaken.core.principal import Principal
from awaken.engine.limits import UNLIMITED, Slot
from awaken.engine.state import Cause, Change, RunState, RunStatus
from awaken.ledger.interface import Fork, PendingCall
from awaken.models import ToolSpec
from awaken.runtime.flag import Flag
from awaken.wires.protocol import RunRequest, ToolDecision, new_id

if TYPE_CHECKING:
    from awaken.engine.agents import Agent
    from awaken.ledger.interface import Ledger
    from awaken.tools import ToolRegistry


class Broadcast(Protocol):
    """What the engine needs of the stream a run feeds: a sink for its events, closed at its end."""

    def sink(self, event: Any) -> None: ...

    def close(self) -> None: ...


@attrs.frozen
class RunSpec:
    """The frozen part of a run, as admission prepared it."""

    request: RunRequest
    agent: Agent
    thread_id: str
    #: the run's id ("" until admission gave it one)
    run_id: str = ""
    #: the id of the answer's first assistant message
    answer_message_id: str = ""
    #: the committed history admission read (a superseded run's closing results included), then the
    #: run's new input (carrying the run's id; not committed yet for a fresh run)
    history: tuple[Message, ...] = ()
    #: the thread's state at admission (the client's, when it sent one that differs: ``client_state``)
    state: dict[str, Any] = attrs.field(factory=dict)
    client_state: bool = False
    #: tools the client declared for this run (stored with its record; a call to one waits)
    client_tools: tuple[ToolSpec, ...] = ()
    resumed: bool = False
    #: the request only repeated committed decisions: the stream starts and finishes, nothing runs
    replay: bool = False
    #: a resume's decided calls, in pending order (applied when the stream starts), and the others
    decided: tuple[tuple[PendingCall, ToolDecision], ...] = ()
    remaining: tuple[PendingCall, ...] = ()
    #: a resumed run's usage and steps as committed
    usage: Usage = attrs.field(factory=Usage)
    steps_done: int = 0
    #: a fresh run on a new branch (a regenerate, an edit): its first write forks the thread with it
    fork: Fork | None = None


class Streaming(Protocol):
    """The model step a run is streaming now (``steps.StepBuilder``), as the run's early end sees it."""

    def partial(self, run_id: str, reason: str) -> Message | None:
        """What the step streamed so far (text and reasoning), marked incomplete for ``reason``; None
        when it streamed neither."""
        ...


@attrs.define
class Progress:
    """The changing part of a run: what it committed so far."""

    history: list[Message]
    state: dict[str, Any]
    usage: Usage
    steps_done: int
    #: the model step streaming now (None between steps): its answer so far is what an early end
    #: commits (``outcome.commit_final``)
    streaming: Streaming | None = None
    #: the cut-off answer an early end commits with the run's outcome (kept for the reconciler)
    closing: tuple[Message, ...] = ()

    @classmethod
    def of(cls, spec: RunSpec) -> Progress:
        return cls(list(spec.history), dict(spec.state), spec.usage, spec.steps_done)


#: the spec of a run not admitted yet: no run id, no request, no history
UNADMITTED = RunSpec(RunRequest("", None), None, "")  # type: ignore[arg-type]


class RunBase:
    """One admitted run's data: its spec (frozen), its progress (changing, by ``commit`` only), its
    state (``RunState``), and the first write of a fresh run (``start``)."""

    __slots__ = ("__weakref__", "_settled", "agent", "broadcast", "claim_token", "claimed", "ledger", "owner",
                 "owner_known", "principal", "progress", "runstate", "slot", "spec", "start", "start_error",
                 "thread_id", "tools")

    def __init__(self, ledger: Ledger, tools: ToolRegistry, agent: Agent, thread_id: str) -> None:
        self.ledger = ledger
        self.tools = tools
        #: the agent and the thread (the spec's, from admission on: they never change)
        self.agent = agent
        self.thread_id = thread_id
        #: the frozen part (``UNADMITTED`` until admission prepared it: ``admitted``)
        self.spec = UNADMITTED
        self.progress = Progress.of(UNADMITTED)
        self._settled = Flag()
        self.runstate = RunState(self._settled.set)
        #: this run's claim on the thread (``ThreadClaims``): its token, and whether it is held
        self.claim_token = new_id("claim")
        self.claimed = False
        #: set once a fresh run's record and input are written (None: nothing to write, e.g. a resume)
        self.start: Flag | None = None
        self.start_error: AwakenError | None = None
        #: the run's output for every watcher (set by ``RunApplication.launch``; None when executed bare)
        self.broadcast: Broadcast | None = None
        #: the thread's owner (None: unowned), known once admission read the thread: its stored owner,
        #: or for a new thread the subject starting it (written with the run's first write)
        self.owner: str | None = None
        self.owner_known = False
        #: who asked for the run (set by admission; what a tool's context says of the caller)
        self.principal: Principal | None = None
        #: the run's place among its caller's executing runs (``[limits]``), given back when it ends or waits
        self.slot: Slot = UNLIMITED

    async def step_boundary(self) -> None:
        """A step was committed and another would follow (where a draining server stops a run:
        ``AdmittedRun.step_boundary``)."""

    def admitted(self, spec: RunSpec) -> None:
        """Admission prepared the run: its frozen part, and its progress from it."""
        self.spec = spec
        self.progress = Progress.of(spec)

    # -- read-only views of the parts ---------------------------------------------------------

    @property
    def request(self) -> RunRequest:
        return self.spec.request

    @property
    def run_id(self) -> str:
        return self.spec.run_id

    @property
    def answer_message_id(self) -> str:
        return self.spec.answer_message_id

    @property
    def client_tools(self) -> tuple[ToolSpec, ...]:
        return self.spec.client_tools

    @property
    def resumed(self) -> bool:
        return self.spec.resumed

    @property
    def replay(self) -> bool:
        return self.spec.replay

    @property
    def history(self) -> list[Message]:
        return self.progress.history

    @property
    def state(self) -> dict[str, Any]:
        return self.progress.state

    @property
    def usage(self) -> Usage:
        return self.progress.usage

    @property
    def steps_done(self) -> int:
        return self.progress.steps_done

    @property
    def status(self) -> RunStatus:
        """The run's committed status, as far as this process wrote it."""
        return self.runstate.status

    @property
    def cause(self) -> Cause:
        """Why the run would be interrupted now: the recorded cause, else the client went away."""
        return self.runstate.interrupt_cause

    @property
    def unsettled(self) -> Change | None:
        """A terminal outcome decided but not yet committed (the store was too slow or failed)."""
        return self.runstate.outcome

    @property
    def outcome_refused(self) -> bool:
        """The store refused the last attempt to commit ``unsettled`` (a full disk, a failing ledger), as
        opposed to being slow with it: the thread answers ``STORE_UNAVAILABLE`` until it is committed."""
        return self.runstate.refused

    async def started(self) -> bool:
        """Wait until the run record is written; False if it could not be."""
        if self.start is not None:
            await self.start.wait()
        return self.start_error is None

