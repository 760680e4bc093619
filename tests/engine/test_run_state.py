"""``RunState``, the one object that changes a run's status, cause and settled flag (``awaken/engine/state.py``):
pure and exact. Every legal transition is allowed and recorded once committed; every illegal one
raises ``IllegalTransition`` and changes nothing; crash recovery's change comes from the same table.
"""

from __future__ import annotations

import itertools

import pytest

from awaken.engine.state import (
    RECOVERY_CAUSES,
    TERMINAL,
    TRANSITIONS,
    Cause,
    Change,
    IllegalTransition,
    RunState,
    RunStatus,
    describe,
    recovery,
)

#: the legal (from, to) pairs, written out: adding or removing one must break these tests
LEGAL = {
    (RunStatus.RUNNING, RunStatus.RUNNING), (RunStatus.RUNNING, RunStatus.WAITING),
    (RunStatus.RUNNING, RunStatus.COMPLETED), (RunStatus.RUNNING, RunStatus.FAILED),
    (RunStatus.RUNNING, RunStatus.INTERRUPTED),
    (RunStatus.WAITING, RunStatus.RUNNING), (RunStatus.WAITING, RunStatus.WAITING),
    (RunStatus.WAITING, RunStatus.INTERRUPTED),
}


def state_in(status: RunStatus) -> RunState:
    """A run state brought to ``status`` by legal moves only."""
    state = RunState()
    if status is RunStatus.WAITING:
        state.resumed()
    elif status is not RunStatus.RUNNING:
        cause = Cause.STOPPED if status is RunStatus.INTERRUPTED else None
        state.committed(state.change(status, cause=cause))
    assert state.status is status
    return state


def snapshot(state: RunState) -> tuple:
    return state.status, state.cause, state.outcome, state.refused, state.settled


def cause_for(status: RunStatus) -> Cause | None:
    return Cause.CLIENT_GONE if status is RunStatus.INTERRUPTED else None


def test_the_table_is_exactly_the_legal_pairs_and_the_terminal_statuses_lead_nowhere():
    assert {(a, b) for a, targets in TRANSITIONS.items() for b in targets} == LEGAL
    assert TERMINAL == {RunStatus.COMPLETED, RunStatus.FAILED, RunStatus.INTERRUPTED}


def test_a_fresh_run_state_is_running_with_no_cause_nothing_pending_and_not_settled():
    assert snapshot(RunState()) == (RunStatus.RUNNING, None, None, False, False)


@pytest.mark.parametrize(("current", "new"), sorted(LEGAL))
def test_every_legal_transition_gives_its_change_and_happens_only_once_committed(current, new):
    state = state_in(current)
    cause = cause_for(new)
    change = state.change(new, cause=cause)
    assert change == Change(current, new, cause, None, describe(cause) if cause else None)
    assert state.status is current  # asking changes nothing
    state.committed(change)
    assert state.status is new


@pytest.mark.parametrize(("current", "new"), sorted(set(itertools.product(RunStatus, RunStatus)) - LEGAL))
def test_every_illegal_transition_is_refused_and_changes_nothing(current, new):
    state = state_in(current)
    before = snapshot(state)
    with pytest.raises(IllegalTransition, match=f"from {current.value} to {new.value}"):
        state.change(new, cause=cause_for(new))
    assert snapshot(state) == before


@pytest.mark.parametrize("current", [RunStatus.RUNNING, RunStatus.WAITING])
def test_an_interruption_needs_a_cause_and_nothing_else_takes_one_or_an_error_code(current):
    state = state_in(current)
    before = snapshot(state)
    with pytest.raises(IllegalTransition, match="without a cause"):
        state.change(RunStatus.INTERRUPTED)
    with pytest.raises(IllegalTransition, match="with a cause"):
        state.change(RunStatus.RUNNING, cause=Cause.STOPPED)
    with pytest.raises(IllegalTransition, match="with an error code"):
        state.change(RunStatus.INTERRUPTED, cause=Cause.STOPPED, error_code="X")
    assert snapshot(state) == before


def test_an_interruption_says_its_cause_in_words_and_a_failure_keeps_its_code_and_message():
    state = RunState()
    assert state.change(RunStatus.INTERRUPTED, cause=Cause.SHUTDOWN) == Change(
        RunStatus.RUNNING, RunStatus.INTERRUPTED, Cause.SHUTDOWN, None, "the server shut down")
    assert state.change(RunStatus.FAILED, error_code="MODEL_ERROR", error_message="bad") == Change(
        RunStatus.RUNNING, RunStatus.FAILED, None, "MODEL_ERROR", "bad")


def test_a_change_made_from_another_status_cannot_be_committed():
    state = RunState()
    stale = state.change(RunStatus.WAITING)
    state.committed(state.change(RunStatus.COMPLETED))
    state2 = RunState()
    state2.committed(state2.change(RunStatus.WAITING))
    with pytest.raises(IllegalTransition, match="run is waiting, not running"):
        state2.committed(stale)
    assert state2.status is RunStatus.WAITING


def test_the_first_cause_recorded_wins_and_without_one_an_interruption_means_the_client_went():
    state = RunState()
    assert state.interrupt_cause is Cause.CLIENT_GONE
    state.blame(Cause.SHUTDOWN)
    state.blame(Cause.STOPPED)
    assert (state.cause, state.interrupt_cause) == (Cause.SHUTDOWN, Cause.SHUTDOWN)


def test_a_decided_outcome_is_pending_until_committed():
    state = RunState()
    change = state.decide(RunStatus.INTERRUPTED, cause=Cause.STOPPED)
    assert (state.status, state.outcome) == (RunStatus.RUNNING, change)
    with pytest.raises(IllegalTransition, match="already has an outcome pending"):
        state.decide(RunStatus.FAILED, error_code="X", error_message="y")
    with pytest.raises(IllegalTransition, match="cannot settle"):
        state.settle()
    state.store_refused()
    assert state.refused
    state.committed(change)
    assert (state.status, state.outcome) == (RunStatus.INTERRUPTED, None)


def test_only_a_terminal_status_is_an_outcome_and_only_a_pending_failure_is_reworded():
    state = RunState()
    with pytest.raises(IllegalTransition, match="waiting is not an outcome"):
        state.decide(RunStatus.WAITING)
    with pytest.raises(IllegalTransition, match="only a pending failure"):
        state.redecide("STORE_UNAVAILABLE", "x")
    with pytest.raises(IllegalTransition, match="no outcome is pending"):
        state.store_refused()
    state.decide(RunStatus.FAILED, error_code="MODEL_ERROR", error_message="bad")
    assert state.redecide("STORE_UNAVAILABLE", "bad (and the failure could not be committed)") == Change(
        RunStatus.RUNNING, RunStatus.FAILED, None, "STORE_UNAVAILABLE", "bad (and the failure could not be committed)")
    assert snapshot(state)[:2] == (RunStatus.RUNNING, None)


def test_an_abandoned_outcome_leaves_the_status_and_the_run_can_settle():
    state = RunState()
    state.decide(RunStatus.COMPLETED)
    state.abandon_outcome()
    assert (state.status, state.outcome) == (RunStatus.RUNNING, None)
    state.settle()
    assert state.settled


def test_an_outcome_found_in_the_store_is_taken_if_the_table_allows_it():
    state = RunState()
    state.decide(RunStatus.INTERRUPTED, cause=Cause.STOPPED)
    state.found(RunStatus.INTERRUPTED, Cause.STOPPED)
    assert (state.status, state.outcome) == (RunStatus.INTERRUPTED, None)
    waiting = state_in(RunStatus.WAITING)
    with pytest.raises(IllegalTransition, match="from waiting to completed"):
        waiting.found(RunStatus.COMPLETED, None)
    assert waiting.status is RunStatus.WAITING


def test_settling_happens_once_calls_back_once_and_freezes_the_state():
    calls: list[str] = []
    state = RunState(lambda: calls.append("settled"))
    state.committed(state.change(RunStatus.COMPLETED))
    state.settle()
    state.settle()
    assert (state.settled, calls) == (True, ["settled"])
    before = snapshot(state)
    for attempt in (lambda: state.change(RunStatus.COMPLETED), lambda: state.resumed(), lambda: state.replayed(),
                    lambda: state.committed(Change(RunStatus.COMPLETED, RunStatus.COMPLETED))):
        with pytest.raises(IllegalTransition, match="settled"):
            attempt()
    assert snapshot(state) == before


def test_a_replay_completes_at_once_and_a_resume_starts_waiting():
    replay = RunState()
    replay.replayed()
    assert replay.status is RunStatus.COMPLETED
    resume = RunState()
    resume.resumed()
    assert resume.status is RunStatus.WAITING
    with pytest.raises(IllegalTransition, match="cannot be resumed from waiting"):
        resume.resumed()
    with pytest.raises(IllegalTransition, match="from waiting to completed"):
        resume.replayed()
    assert resume.status is RunStatus.WAITING


@pytest.mark.parametrize("cause", sorted(RECOVERY_CAUSES))
def test_crash_recovery_writes_the_tables_interruption_of_a_running_run(cause):
    change = recovery(cause)
    assert change == Change(RunStatus.RUNNING, RunStatus.INTERRUPTED, cause, None, describe(cause))
    assert change == RunState().change(RunStatus.INTERRUPTED, cause=cause)  # the same as a live run's
    assert change.cause_value == cause.value


def test_crash_recovery_interrupts_only_for_a_process_that_is_gone():
    assert RECOVERY_CAUSES == {Cause.SERVER_RESTART, Cause.OWNER_DIED}
    for cause in set(Cause) - RECOVERY_CAUSES:
        with pytest.raises(IllegalTransition, match="crash recovery"):
            recovery(cause)


def test_crash_recovery_follows_the_table(monkeypatch):
    from awaken.engine import state as runstate

    table = dict(TRANSITIONS)
    table[RunStatus.RUNNING] = table[RunStatus.RUNNING] - {RunStatus.INTERRUPTED}
    monkeypatch.setattr(runstate, "TRANSITIONS", table)
    with pytest.raises(IllegalTransition, match="from running to interrupted"):
        recovery(Cause.SERVER_RESTART)


def test_the_server_restart_cause_has_one_spelling():
    import awaken.ledger.interface as interface

    assert not hasattr(interface, "RESTART_CAUSE")
    assert recovery(Cause.SERVER_RESTART).cause_value == "server_restart"


def test_only_the_run_state_assigns_a_runs_status_cause_or_settled_flag():
    """Read from the source: outside ``state.py`` no engine or backend module assigns an attribute
    named ``status``, ``cause``, ``settled``, ``outcome`` or ``refused`` (the engine asks ``RunState``)."""
    import ast

    from tests.builders import ROOT

    owned = {"status", "cause", "settled", "outcome", "refused"}
    found = []
    for top in ("awaken/engine", "storage_backends"):
        for path in sorted((ROOT / top).rglob("*.py")):
            if path == ROOT / "awaken/engine/state.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                targets = (node.targets if isinstance(node, ast.Assign)
                           else [node.target] if isinstance(node, ast.AugAssign | ast.AnnAssign) else [])
                found += [f"{path.relative_to(ROOT)}:{node.lineno} .{t.attr}" for t in targets
                          if isinstance(t, ast.Attribute) and t.attr in owned]
    assert found == []
