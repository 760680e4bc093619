"""A ledger's worker-thread calls, combined (``awaken.ledger.serial``): each call's outcome is the one a
hop of its own gives, in arrival order, never beside another call; the calls queued while a hop runs
share the next; cancellation withdraws a call not yet in the thread."""

from __future__ import annotations

import contextvars
import threading

import trio
import trio.testing
from hypothesis import given, settings
from hypothesis import strategies as st

from awaken.ledger.serial import SerialCalls

WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


class Boom(Exception):
    pass


def held_in_thread() -> tuple[threading.Event, threading.Event]:
    """(entered, release): a call that sets ``entered`` and waits for ``release`` holds its hop open."""
    return threading.Event(), threading.Event()


async def hold_hop(calls: SerialCalls, nursery: trio.Nursery, log: list[str]) -> threading.Event:
    """Start a call that holds its hop until the returned event is set; return once it is in the thread."""
    entered, release = held_in_thread()

    def held() -> str:
        entered.set()
        release.wait(10)
        log.append("held")
        return "held"

    nursery.start_soon(calls.run, held)
    await trio.to_thread.run_sync(entered.wait, 10)
    return release


async def test_calls_queued_while_a_hop_runs_share_the_next_hop() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1), per_hop=64)
    log: list[str] = []
    results: dict[str, object] = {}

    async def one(name: str) -> None:
        results[name] = await calls.run(lambda: log.append(name) or name.upper())

    async with trio.open_nursery() as nursery:
        release = await hold_hop(calls, nursery, log)
        for name in ("a", "b", "c"):  # one after another: they queue in this order
            nursery.start_soon(one, name)
            await trio.testing.wait_all_tasks_blocked()
        assert len(calls._waiting) == 3
        release.set()
    assert log == ["held", "a", "b", "c"]
    assert results == {"a": "A", "b": "B", "c": "C"}
    assert (calls.hops, calls.calls) == (2, 4)


async def test_a_hop_carries_at_most_per_hop_calls() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1), per_hop=2)
    log: list[str] = []

    async def one(name: str) -> None:
        await calls.run(lambda: log.append(name))

    async with trio.open_nursery() as nursery:
        release = await hold_hop(calls, nursery, log)
        for name in "abcde":
            nursery.start_soon(one, name)
            await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert log == ["held", *"abcde"]
    assert (calls.hops, calls.calls) == (4, 6)  # held; a b; c d; e


async def test_each_call_gets_its_own_exception() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1))
    outcomes: dict[str, str] = {}

    def fails(name: str) -> str:
        raise Boom(name)

    async def one(name: str, fn) -> None:
        try:
            outcomes[name] = await calls.run(fn)
        except Boom as exc:
            outcomes[name] = f"raised {exc}"

    async with trio.open_nursery() as nursery:
        release = await hold_hop(calls, nursery, [])
        nursery.start_soon(one, "ok1", lambda: "fine")
        nursery.start_soon(one, "bad", lambda: fails("bad"))
        nursery.start_soon(one, "ok2", lambda: "also fine")
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert outcomes == {"ok1": "fine", "bad": "raised bad", "ok2": "also fine"}


async def test_each_call_runs_in_its_callers_context() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1))
    seen: dict[str, str] = {}

    async def one(name: str) -> None:
        WHO.set(name)
        seen[name] = await calls.run(WHO.get)

    async with trio.open_nursery() as nursery:
        release = await hold_hop(calls, nursery, [])
        for name in ("x", "y"):
            nursery.start_soon(one, name)
        await trio.testing.wait_all_tasks_blocked()
        release.set()
    assert seen == {"x": "x", "y": "y"}


async def test_a_call_cancelled_before_its_hop_never_runs() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1))
    log: list[str] = []
    cancelled: list[bool] = []

    scopes: list[trio.CancelScope] = []

    async def withdrawn() -> None:
        with trio.CancelScope() as scope:
            scopes.append(scope)
            await calls.run(lambda: log.append("withdrawn"))
        cancelled.append(scope.cancelled_caught)

    async with trio.open_nursery() as nursery:
        release = await hold_hop(calls, nursery, log)
        nursery.start_soon(withdrawn)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(calls.run, lambda: log.append("kept"))
        await trio.testing.wait_all_tasks_blocked()
        scopes[0].cancel()
        await trio.testing.wait_all_tasks_blocked()
        assert len(calls._waiting) == 1
        release.set()
    assert log == ["held", "kept"]
    assert cancelled == [True]


async def test_a_call_cancelled_before_it_starts_never_runs_and_blocks_nothing() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1))
    log: list[str] = []
    with trio.CancelScope() as scope:
        scope.cancel()
        await calls.run(lambda: log.append("cancelled"))
    assert scope.cancelled_caught
    with trio.fail_after(5):
        assert await calls.run(lambda: log.append("next") or "ran") == "ran"
    assert log == ["next"]


async def test_a_call_in_its_hop_finishes_and_its_caller_sees_the_cancellation() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1))
    log: list[str] = []
    entered, release = held_in_thread()
    returned: list[object] = []

    def held() -> str:
        entered.set()
        release.wait(10)
        log.append("held")
        return "held"

    async def leader() -> None:
        returned.append(await calls.run(held))
        await trio.lowlevel.checkpoint()  # where its caller sees the cancellation

    async with trio.open_nursery() as outer:
        with trio.CancelScope() as scope:
            async with trio.open_nursery() as inner:
                inner.start_soon(leader)
                await trio.to_thread.run_sync(entered.wait, 10)
                outer.start_soon(calls.run, lambda: log.append("next"))  # queued, its caller not cancelled
                await trio.testing.wait_all_tasks_blocked()
                scope.cancel()  # the leader is in the thread: its call finishes
                release.set()
    assert scope.cancelled_caught
    assert returned == ["held"]
    assert log == ["held", "next"]  # the queued call was handed the next hop


async def test_per_hop_one_gives_every_call_its_own_hop() -> None:
    calls = SerialCalls(trio.CapacityLimiter(1), per_hop=1)
    async with trio.open_nursery() as nursery:
        for i in range(5):
            nursery.start_soon(calls.run, lambda i=i: i)
    assert calls.hops == 0  # the plain path: ``trio.to_thread.run_sync`` itself, not counted


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.booleans(), st.integers(0, 3)), min_size=1, max_size=25),
       st.integers(1, 8))
def test_combined_calls_give_what_one_hop_each_gives(plan: list[tuple[bool, int]], per_hop: int) -> None:
    """Whatever arrives when: every call's outcome is the one a hop per call gives, every call runs
    exactly once, and no two calls ever overlap in the thread."""

    def run(per: int) -> tuple[list[object], list[int]]:
        order: list[int] = []
        inside = [0]

        def call(i: int, fails: bool) -> int:
            inside[0] += 1
            assert inside[0] == 1, "two calls at once"
            order.append(i)
            inside[0] -= 1
            if fails:
                raise Boom(i)
            return i * 10

        async def main() -> list[object]:
            calls = SerialCalls(trio.CapacityLimiter(1), per_hop=per)
            out: list[object] = [None] * len(plan)

            async def one(i: int, fails: bool, passes: int) -> None:
                for _ in range(passes):  # arrivals spread over scheduler passes
                    await trio.lowlevel.checkpoint()
                try:
                    out[i] = await calls.run(lambda: call(i, fails))
                except Boom as exc:
                    out[i] = f"boom {exc}"

            async with trio.open_nursery() as nursery:
                for i, (fails, passes) in enumerate(plan):
                    nursery.start_soon(one, i, fails, passes)
            return out

        return trio.run(main), order

    plain = run(1)
    combined = run(per_hop + 1)
    assert combined[0] == plain[0]
    assert sorted(combined[1]) == sorted(plain[1]) == list(range(len(plan)))
