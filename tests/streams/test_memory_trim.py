"""A trim is run for a burst's freed memory, not for one request's (``awaken.runtime.memory``).

``malloc_trim`` hands glibc's free pages back to the system, and the next request faults them in
again: worth it after a burst (hundreds of MB freed), not after each replayed history (a few hundred
KB). Asks say how much they freed; a trim starts once the asks since the last one add up to
``TRIM_WORTH``.
"""

from __future__ import annotations

import pytest
import trio

from awaken.runtime import memory
from awaken.transports.body import LargeBodies

pytestmark = pytest.mark.skipif(not memory._TRIM, reason="no glibc malloc_trim here (or trims turned off)")


async def test_a_trim_waits_until_the_freed_bytes_add_up():
    async with trio.open_nursery() as nursery:
        nursery.start_soon(memory.run_trims)
        while memory._Trims.wake is None:  # the trimmer is up
            await trio.lowlevel.checkpoint()
        memory._Trims.freed = 0  # what earlier tests in this process freed
        before = memory._Trims.count
        bodies = LargeBodies(cap=4, threshold=256 * 1024)
        for _ in range(3):  # three replayed histories of 684 KB, one after another
            bodies.take()
            bodies.give_back(684 * 1024)
        wake = memory._Trims.wake
        assert wake is not None and not wake.is_set()  # the trimmer was not asked to run
        for _ in range(2):  # a burst: two bodies of 8 MB in flight at once, then freed
            bodies.take()
        bodies.give_back(memory.TRIM_WORTH)
        assert not wake.is_set()  # one is still in flight
        bodies.give_back(memory.TRIM_WORTH)
        assert wake.is_set()
        with trio.fail_after(30):
            while memory._Trims.count == before:
                await trio.sleep(0.01)
        assert memory._Trims.freed == 0  # what the trim returned no longer counts towards the next
        nursery.cancel_scope.cancel()
