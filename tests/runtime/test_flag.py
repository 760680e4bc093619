"""``Flag``: waited for as a ``trio.Event``, and no event made unless a task waits."""

from __future__ import annotations

import trio
import trio.testing

from awaken.runtime.flag import Flag


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
