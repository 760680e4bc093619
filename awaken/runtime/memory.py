"""The process's memory: how glibc's allocator is set up, and handing freed memory back.

A burst of large request bodies or of slow clients' buffers leaves the server with hundreds of MB it
no longer uses. glibc keeps freed memory for reuse unless told otherwise:

* ``tune()`` (called once by ``awaken serve``) fixes ``M_MMAP_THRESHOLD`` at 1 MiB and
  ``M_TRIM_THRESHOLD`` at 4 MiB. By default glibc raises the mmap threshold up to 32 MiB after each
  large block is freed, so that after the first large body, bodies, joined frame batches and their
  HTTP chunk copies come from the heap and stay there once freed; with a fixed threshold each block
  of 1 MiB or more is its own mapping, returned when freed. Below it (a 684 KB replayed history) a
  block comes from the heap, whose top keeps up to 4 MiB free between trims: a fresh mapping per
  body costs its page faults each time (0.35 ms to join a 684 KB body, against 0.02 ms from the heap).
* ``request_trim()`` asks the trimmer task (``run_trims``, hosted by the server) to run
  ``malloc_trim(0)`` in a worker thread: it returns the free pages inside glibc's heaps (the main one
  and the per-thread arenas where bodies are parsed off the loop). It is asked for when the last
  large request body in flight is parsed and when a stream whose client was too slow is dropped;
  neither waits for it. Each ask says how many bytes were freed, and a trim starts once the asks
  since the last one add up to ``TRIM_WORTH``: returning the few hundred KB of one replayed history
  would only have the next request fault the same pages in again (0.2 ms for a 684 KB body), while a
  burst's hundreds of MB are returned at once. At most ``TRIM_WORTH`` freed bytes wait for a trim.

Both are no-ops where the C library is not glibc. ``AWAKEN_NO_MALLOC_TRIM=1`` turns trims off
(``python -m bench.slowclients`` measures what it returns).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from typing import Any

import trio

from awaken.runtime.tuning import MMAP_THRESHOLD, TRIM_DELAY, TRIM_THRESHOLD, TRIM_WORTH

log = logging.getLogger("awaken.runtime.memory")

#: glibc's ``mallopt`` parameter number of ``M_MMAP_THRESHOLD``
M_MMAP_THRESHOLD = -3
#: glibc's ``mallopt`` parameter number of ``M_TRIM_THRESHOLD``
M_TRIM_THRESHOLD = -1


def _libc() -> Any:
    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name) if name else None
        return libc if libc is not None and hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt") else None
    except OSError:
        return None


_LIBC = _libc()
_TRIM = _LIBC is not None and not os.environ.get("AWAKEN_NO_MALLOC_TRIM")


def tune() -> None:
    """Fix glibc's mmap and trim thresholds (see the module docstring); once per process, before serving."""
    if _LIBC is None:
        return
    if not _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.warning("mallopt(M_MMAP_THRESHOLD) was refused: freed large blocks may stay in the heap")
    if not _LIBC.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD):
        log.warning("mallopt(M_TRIM_THRESHOLD) was refused")




class _Trims:
    #: set to ask the process's trimmer task for a trim; None while no trimmer runs
    wake: trio.Event | None = None
    count = 0
    #: bytes the asks since the last trim said were freed
    freed = 0


def request_trim(freed: int) -> None:
    """Say that ``freed`` bytes were just freed; once the asks since the last trim add up to
    ``TRIM_WORTH``, the trimmer (``run_trims``) is woken. Returns at once; nothing happens without a
    trimmer."""
    _Trims.freed += freed
    if _Trims.wake is not None and _Trims.freed >= TRIM_WORTH:
        _Trims.wake.set()


async def run_trims() -> None:
    """The process's trimmer: until cancelled, run ``malloc_trim(0)`` in a worker thread whenever asked.

    A trim starts ``TRIM_DELAY`` seconds after the first ask; asks that arrive meanwhile or while it
    runs are folded into it or into one more after it: a hundred streams dropped at once cost one or
    two trims, and what the last of them freed is still returned. No request ever waits for a trim
    (a trim walks the heap: milliseconds on a large one). One trimmer serves the process; a second
    one started meanwhile only waits."""
    if not _TRIM or _Trims.wake is not None:
        await trio.sleep_forever()
    wake = _Trims.wake = trio.Event()
    try:
        while True:
            await wake.wait()
            # after a pause: the request that asked is answering its client meanwhile (a trim competes
            # with it for the CPU), and the asks of a burst are folded into one trim after it
            await trio.sleep(TRIM_DELAY)
            wake = _Trims.wake = trio.Event()
            _Trims.freed = 0
            with trio.CancelScope(shield=True):
                await trio.to_thread.run_sync(_LIBC.malloc_trim, 0)
            _Trims.count += 1
    finally:
        _Trims.wake = None
