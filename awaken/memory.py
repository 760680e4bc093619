"""The process's memory: how glibc's allocator is set up, and handing freed memory back.

A burst of large request bodies or of slow clients' buffers leaves the server with hundreds of MB it
no longer uses. glibc keeps freed memory for reuse unless told otherwise:

* ``tune()`` (called once by ``awaken serve``) fixes ``M_MMAP_THRESHOLD`` at 256 KiB. By default
  glibc raises that threshold up to 32 MiB after each large block is freed, so that after the first
  large body, bodies, joined frame batches and their HTTP chunk copies come from the heap and stay
  there once freed; with a fixed threshold each of them is its own mapping, returned when freed.
* ``trim()`` runs ``malloc_trim(0)`` in a worker thread: it returns the free pages inside glibc's
  heaps (the main one and the per-thread arenas where bodies are parsed off the loop). It is called
  when the last large request body in flight is parsed and when a stream whose client was too slow
  is dropped.

Both are no-ops where the C library is not glibc. ``AWAKEN_NO_MALLOC_TRIM=1`` turns ``trim()`` off
(``python -m bench.slowclients`` measures what it returns).
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
from typing import Any

import trio

log = logging.getLogger("awaken.memory")

#: glibc's ``mallopt`` parameter number of ``M_MMAP_THRESHOLD``
M_MMAP_THRESHOLD = -3
#: blocks at least this large are mapped on their own (and unmapped when freed)
MMAP_THRESHOLD = 256 * 1024


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
    """Fix glibc's mmap threshold (see the module docstring); once per process, before serving."""
    if _LIBC is not None and not _LIBC.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD):
        log.warning("mallopt(M_MMAP_THRESHOLD) was refused: freed large blocks may stay in the heap")


class _Trims:
    running = False
    again = False
    count = 0


async def trim() -> None:
    """Hand the free pages of every malloc heap back to the system (in a worker thread).

    Calls that arrive while a trim runs are folded into one more trim after it: a hundred streams
    dropped at once cost two trims, and what the last of them freed is still returned."""
    if not _TRIM:
        return
    if _Trims.running:
        _Trims.again = True
        return
    _Trims.running = True
    try:
        with trio.CancelScope(shield=True):
            while True:
                _Trims.again = False
                await trio.to_thread.run_sync(_LIBC.malloc_trim, 0)
                _Trims.count += 1
                if not _Trims.again:
                    break
    finally:
        _Trims.running = False
