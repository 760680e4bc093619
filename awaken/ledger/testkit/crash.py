"""The crash test, importable: SIGKILL a writer at random instants, reopen, check the ledger is whole.

A backend's test module runs it with ``from awaken.ledger.testkit.crash import *`` and a ``ledger_factory``
fixture (a module-level factory: the child process imports it by name). The child
(``awaken.ledger.testkit.crash_child``) is spawned again and again on the same ledger (so the
history grows across crashes) and killed with SIGKILL at a random moment: during start-up and
recovery (0–400 ms after spawn), while committing (0–80 ms after it opened the ledger), or right
after its N-th acknowledged commit. After each kill the test reopens the ledger and checks, with
``harness.check_crash_ledger``, that every acknowledged commit is present, no step is partly
visible, seqs are gapless, no run is left ``running``, and runs, usage, pending calls and state agree
with the committed steps. Half of the children tear their ``os.pwrite`` writes (see ``crash_child``),
so a backend writing that way has its torn-tail recovery exercised under real kills (the
``after_crashes`` fixture lets a backend check its own store afterwards). ``AWAKEN_CRASH_KILLS``
(default 60) and ``AWAKEN_CRASH_SEED`` tune a run; a failure names the seed that reproduces it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest
import trio

from awaken.ledger.interface import ALL_OWNERS
from awaken.ledger.testkit.harness import LedgerFactory, check_crash_ledger, factory_reference, opened

KILLS = int(os.environ.get("AWAKEN_CRASH_KILLS", "60"))
SEED = int(os.environ.get("AWAKEN_CRASH_SEED", str(random.randrange(1 << 30))))


@pytest.fixture
def crash_kills() -> int:
    """How many times the crash test kills the writer (``AWAKEN_CRASH_KILLS``, default 60); a slow
    backend's test module may override it with a smaller number."""
    return KILLS


@pytest.fixture
def after_crashes() -> Callable[[Path, int], None] | None:
    """A backend's own check of its store after all the kills (``root``, number of kills), or None.

    A test module overrides this fixture to add one (the file ledger checks that torn tails were cut).
    """
    return None


async def run_and_kill(
    factory: LedgerFactory,
    root: Path,
    mode: str,
    rng: random.Random,
    torn: bool,
    deletes: dict[str, set[str]] | None = None,
) -> list[tuple[str, str, int]]:
    """Spawn the child, SIGKILL it as ``mode`` says, return the commits it acknowledged. With
    ``deletes`` (``{"DELETING": set(), "DELETED": set()}``) the child also deletes threads, and the
    threads it announced are added to those sets; in ``after-acks`` mode the kill then also waits for
    one more acknowledged delete, so every backend, however slow, has its deletes exercised."""
    path = os.pathsep.join(p for p in sys.path if p)
    env = {**os.environ, "PYTHONPATH": path, "PYTHONIOENCODING": "utf-8"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, "-m", "awaken.ledger.testkit.crash_child", factory_reference(factory), str(root),
         *(["torn"] if torn else []), *(["delete"] if deletes is not None else [])],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        env=env,
    )
    assert proc.stdout is not None and proc.stderr is not None
    acks: list[tuple[str, str, int]] = []
    errors = bytearray()
    ready = trio.Event()
    enough = trio.Event()
    wanted = rng.randint(1, 40)
    deleted = trio.Event()
    if deletes is None:
        deleted.set()

    async def read_stdout() -> None:
        buffer = b""
        async for chunk in proc.stdout:  # type: ignore[union-attr]
            buffer += chunk
            *lines, buffer = buffer.split(b"\n")
            for line in lines:
                if line == b"READY":
                    ready.set()
                elif line.startswith(b"ACK "):
                    thread_id, run_id, seq = line[4:].decode().rsplit(" ", 2)
                    acks.append((thread_id, run_id, int(seq)))
                    if len(acks) >= wanted:
                        enough.set()
                elif deletes is not None and line.startswith((b"DELETING ", b"DELETED ")):
                    word, thread_id = line.decode().split(" ", 1)
                    deletes[word].add(thread_id)
                    if word == "DELETED":
                        deleted.set()
        assert buffer == b"" or not buffer.startswith(b"ACK"), "a partial ACK line is not an acknowledgement"

    async def read_stderr() -> None:
        async for chunk in proc.stderr:  # type: ignore[union-attr]
            errors.extend(chunk)

    async with trio.open_nursery() as nursery:
        nursery.start_soon(read_stdout)
        nursery.start_soon(read_stderr)
        with trio.move_on_after(30):
            if mode == "startup":
                await trio.sleep(rng.uniform(0, 0.4))
            elif mode == "running":
                await ready.wait()
                await trio.sleep(rng.uniform(0, 0.08))
            else:
                await enough.wait()
                await deleted.wait()
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    await proc.stdout.aclose()
    await proc.stderr.aclose()
    assert proc.returncode == -signal.SIGKILL, (
        f"the child died on its own:\n{errors.decode(errors='replace')}"
    )
    return acks


@pytest.mark.slow  # child processes killed at random instants
@pytest.mark.timeout(300)
async def test_sigkill_at_random_instants_loses_nothing_acknowledged(
    ledger_factory: LedgerFactory,
    tmp_path: Path,
    after_crashes: Callable[[Path, int], None] | None,
    crash_kills: int,
) -> None:
    """After SIGKILL at any instant, reopening shows every acknowledged commit, no partial step, gapless
    seqs and no run left running (each recovered with cause ``server_restart``); ``crash_kills`` kills (60 by
    default), on one growing ledger."""
    rng = random.Random(f"{SEED}-{factory_reference(ledger_factory)}")
    root = tmp_path / "store"
    root.mkdir()
    all_acks: list[tuple[str, str, int]] = []
    modes = ("startup", "running", "after-acks")
    started = time.monotonic()
    kills_with_work = 0
    counts: dict[str, int] = {}
    for n in range(crash_kills):
        torn = n % 2 == 1  # half of the children tear their os.pwrite writes
        acks = await run_and_kill(ledger_factory, root, modes[n % len(modes)], rng, torn)
        all_acks.extend(acks)
        kills_with_work += bool(acks)
        async with opened(ledger_factory, root) as ledger:
            try:
                counts = await check_crash_ledger(ledger, all_acks)
            except AssertionError as exc:
                raise AssertionError(f"after kill {n + 1} (AWAKEN_CRASH_SEED={SEED}): {exc}") from exc
    elapsed = time.monotonic() - started
    print(f"{factory_reference(ledger_factory)}: {crash_kills} kills in {elapsed:.1f}s, "
          f"{len(all_acks)} acknowledged commits, {counts}")
    if crash_kills >= 10:
        assert kills_with_work >= crash_kills // 3, "too few kills landed while the child was committing"
    if after_crashes is not None:
        after_crashes(root, crash_kills)


@pytest.fixture
def crash_delete_kills(crash_kills: int) -> int:
    """How many kills the delete crash test makes (a third of ``crash_kills``, at least 10)."""
    return max(10, crash_kills // 3)


@pytest.mark.slow  # child processes killed at random instants
@pytest.mark.timeout(300)
async def test_sigkill_mid_delete_leaves_the_thread_wholly_present_or_wholly_gone(
    ledger_factory: LedgerFactory, tmp_path: Path, crash_delete_kills: int
) -> None:
    """While a child writes threads and deletes them, SIGKILL at random instants: on reopen every thread
    whose delete returned is gone (its messages, runs and listing row), a thread killed mid-delete is
    either gone or whole (every acknowledged commit, no partial step), and the rest is as the crash test
    requires."""
    rng = random.Random(f"{SEED}-delete-{factory_reference(ledger_factory)}")
    root = tmp_path / "store"
    root.mkdir()
    all_acks: list[tuple[str, str, int]] = []
    deletes: dict[str, set[str]] = {"DELETING": set(), "DELETED": set()}
    modes = ("running", "after-acks")
    for n in range(crash_delete_kills):
        all_acks.extend(await run_and_kill(ledger_factory, root, modes[n % 2], rng, False, deletes))
        async with opened(ledger_factory, root) as ledger:
            try:
                present = {t.thread_id for t in await ledger.list_threads()}
                listed = {s.thread_id for s in (await ledger.list_thread_summaries(ALL_OWNERS, limit=100_000)).items}
                assert listed == present, "the listing and the threads disagree"
                assert not deletes["DELETED"] & present, "a deleted thread is back"
                gone_runs = {run_id for thread_id, run_id, _ in all_acks if thread_id in deletes["DELETED"]}
                for run_id in gone_runs:
                    assert await ledger.get_run(run_id) is None, f"run {run_id} of a deleted thread remains"
                for thread_id in deletes["DELETED"] | (deletes["DELETING"] - present):
                    assert await ledger.read_messages(thread_id, 0, 10) == [], thread_id
                    assert await ledger.list_runs(thread_id) == [], thread_id
                required = [a for a in all_acks if a[0] not in deletes["DELETING"] or a[0] in present]
                await check_crash_ledger(ledger, required)
            except AssertionError as exc:
                raise AssertionError(f"after kill {n + 1} (AWAKEN_CRASH_SEED={SEED}): {exc}") from exc
    assert deletes["DELETED"], "no delete was acknowledged: the test did not exercise deletion"
