"""``Flag``: waited for as a ``trio.Event``, and no event made unless a task waits; ``Wakeup``: one task woken."""

from __future__ import annotations

import trio
import trio.testing

from awaken.runtime.flag import Flag, Wakeup


async def test_a_flag_wakes_its_waiters_once_set_and_a_later_wait_returns_at_once():
    flag = Flag()
    woken: list[int] = []

    async def waiter(n: int) -> None:
        await flag.wait()
        woken.append(n)

    async with trio.open_nursery() as nursery:
        for n in range(3):
            nursery.start_soon(waiter, n)
        await trio.testing.wait_all_tasks_blocked()
        assert woken == [] and not flag.is_set()
        flag.set()
        flag.set()  # a second set changes nothing
    assert sorted(woken) == [0, 1, 2] and flag.is_set()
    with trio.fail_after(1):
        await flag.wait()


async def test_a_flag_nobody_waits_for_makes_no_event():
    flag = Flag()
    flag.set()
    assert flag.is_set() and flag._event is None
    waited = Flag()

    async def wait() -> None:
        await waited.wait()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(wait)
        await trio.testing.wait_all_tasks_blocked()
        assert isinstance(waited._event, trio.Event)
        waited.set()
    assert waited._event is None  # let go once set: its waiters held it


async def test_a_cancelled_waiter_leaves_the_flag_usable():
    flag = Flag()
    with trio.move_on_after(0.01):
        await flag.wait()
    flag.set()
    with trio.fail_after(1):
        await flag.wait()


async def test_a_wakeup_wakes_its_one_waiter_and_is_false_when_nobody_waits():
    wakeup = Wakeup()
    woken: list[str] = []

    async def waiter() -> None:
        await wakeup.wait()
        woken.append("woken")

    assert not wakeup
    wakeup.wake()  # nobody waits: nothing happens, nothing is remembered
    async with trio.open_nursery() as nursery:
        nursery.start_soon(waiter)
        await trio.testing.wait_all_tasks_blocked()
        assert wakeup and woken == []
        wakeup.wake()
    assert woken == ["woken"] and not wakeup


async def test_a_second_waiter_on_a_wakeup_is_a_bug():
    wakeup = Wakeup()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wakeup.wait)
        await trio.testing.wait_all_tasks_blocked()
        try:
            await wakeup.wait()
        except RuntimeError as exc:
            assert "one task at a time" in str(exc)
        else:
            raise AssertionError("a second waiter was let in")
        wakeup.wake()


async def test_a_cancelled_wait_on_a_wakeup_leaves_it_usable():
    wakeup = Wakeup()
    with trio.CancelScope() as scope:
        scope.cancel()
        await wakeup.wait()
    assert scope.cancelled_caught and not wakeup
    async with trio.open_nursery() as nursery:
        nursery.start_soon(wakeup.wait)
        await trio.testing.wait_all_tasks_blocked()
        wakeup.wake()
