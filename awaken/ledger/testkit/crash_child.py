"""The crash-test child: writes the crash workload to a ledger until it is killed.

Usage: ``python -m awaken.ledger.testkit.crash_child FACTORY ROOT [torn] [delete]`` where ``FACTORY`` is a ledger
factory as ``module:name`` (importable through ``PYTHONPATH``). It opens the factory's ledger under ``ROOT`` (recovering whatever the previous child left), prints
``READY``, then runs one Trio task per thread of ``CRASH_THREADS``, each starting runs and committing
their steps (``CRASH_K`` messages each, ids ``<run>-<step>-<k>``) in a loop. After every
acknowledged ``start_run``/``commit`` it prints ``ACK <thread> <run> <seq>`` (seq = the step's last
message) and flushes, so the parent knows exactly which commits the ledger promised to keep.

With ``delete``, two more tasks each write a whole run on a fresh thread and delete it, over and
over (announcing ``DELETING``/``DELETED``), so kills land in the middle of deletes too.

With ``torn``, every ``os.pwrite`` writes only half of its buffer and then pauses a millisecond, so a
kill often lands in the middle of a file-ledger record and the next open must cut a torn tail.
"""

from __future__ import annotations

import os
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import trio

from awaken.ledger.interface import Ledger
from awaken.ledger.testkit.harness import (
    CRASH_K,
    CRASH_STEPS,
    CRASH_THREADS,
    crash_commit,
    resolve_factory,
    run_record,
    step_ids,
    user,
)


def ack(thread_id: str, run_id: str, seq: int) -> None:
    sys.stdout.buffer.write(f"ACK {thread_id} {run_id} {seq}\n".encode())
    sys.stdout.buffer.flush()


async def worker(ledger: Ledger, thread_id: str) -> None:
    while True:
        run_id = uuid.uuid4().hex[:16]
        inputs = [user(i, "input", run_id) for i in step_ids(run_id, 0, CRASH_K)]
        record = run_record(run_id, thread_id, created_at=int(time.time() * 1000))
        out = await ledger.start_run(record, inputs)
        ack(thread_id, run_id, out[-1].seq)
        for step in range(1, CRASH_STEPS + 1):
            out = await ledger.commit(thread_id, run_id, crash_commit(run_id, thread_id, step))
            ack(thread_id, run_id, out[-1].seq)


def say(line: str) -> None:
    sys.stdout.buffer.write(f"{line}\n".encode())
    sys.stdout.buffer.flush()


async def deleter(ledger: Ledger, name: str) -> None:
    """Write a whole crash-workload run on a fresh thread, then delete the thread; again and again.
    ``DELETING <thread>`` is printed before ``delete_thread`` is called, ``DELETED <thread>`` after it
    returned."""
    while True:
        run_id = uuid.uuid4().hex[:16]
        thread_id = f"gone/{name}-{run_id}"
        inputs = [user(i, "input", run_id) for i in step_ids(run_id, 0, CRASH_K)]
        out = await ledger.start_run(run_record(run_id, thread_id, created_at=int(time.time() * 1000)), inputs)
        ack(thread_id, run_id, out[-1].seq)
        for step in range(1, CRASH_STEPS + 1):
            out = await ledger.commit(thread_id, run_id, crash_commit(run_id, thread_id, step))
            ack(thread_id, run_id, out[-1].seq)
        say(f"DELETING {thread_id}")
        await ledger.delete_thread(thread_id)
        say(f"DELETED {thread_id}")


async def main(factory: str, root: str, deletes: bool) -> None:
    ledger = resolve_factory(factory)(Path(root))
    await ledger.open()
    say("READY")
    async with trio.open_nursery() as nursery:
        for thread_id in CRASH_THREADS:
            nursery.start_soon(worker, ledger, thread_id)
        if deletes:
            for name in ("α", "b"):
                nursery.start_soon(deleter, ledger, name)


def tear_writes() -> None:
    real = os.pwrite

    def half_pwrite(fd: int, data: Any, offset: int) -> int:
        written = real(fd, bytes(data[: max(1, len(data) // 2)]), offset)
        time.sleep(0.001)
        return written

    os.pwrite = half_pwrite


if __name__ == "__main__":
    flags = set(sys.argv[3:])
    if "torn" in flags:
        tear_writes()
    trio.run(main, sys.argv[1], sys.argv[2], "delete" in flags)
