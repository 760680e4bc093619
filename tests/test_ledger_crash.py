"""Crash safety: SIGKILL a writer at random instants, reopen, and check the ledger is whole.

For each backend, ``tests/crash_child.py`` is spawned again and again on the same ledger (so the
history grows across crashes) and killed with SIGKILL at a random moment: during start-up and
recovery (0–400 ms after spawn), while committing (0–80 ms after it opened the ledger), or right
after its N-th acknowledged commit. After each kill the test reopens the ledger and checks, with
``ledger_harness.check_crash_ledger``, that every acknowledged commit is present, no step is partly
visible, seqs are gapless, no run is left ``running``, and runs, usage, pending calls and state agree
with the committed steps. Half of the file-ledger children tear their writes (see ``crash_child.py``),
so cutting torn tails at open is exercised under real kills. ``AWAKEN_CRASH_KILLS`` (default 60) and
``AWAKEN_CRASH_SEED`` tune a run; a failure names the seed that reproduces it.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import trio

from tests.ledger_harness import BACKENDS, check_crash_ledger, opened

REPO = Path(__file__).resolve().parent.parent
CHILD = Path(__file__).resolve().parent / "crash_child.py"
KILLS = int(os.environ.get("AWAKEN_CRASH_KILLS", "60"))
SEED = int(os.environ.get("AWAKEN_CRASH_SEED", str(random.randrange(1 << 30))))


async def run_and_kill(
    backend: str, root: Path, mode: str, rng: random.Random, torn: bool
) -> list[tuple[str, str, int]]:
    """Spawn the child, SIGKILL it as ``mode`` says, return the commits it acknowledged."""
    env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONIOENCODING": "utf-8"}
    proc = await trio.lowlevel.open_process(
        [sys.executable, str(CHILD), backend, str(root), *(["torn"] if torn else [])],
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
        proc.send_signal(signal.SIGKILL)
        await proc.wait()
    await proc.stdout.aclose()
    await proc.stderr.aclose()
    assert proc.returncode == -signal.SIGKILL, (
        f"the child died on its own:\n{errors.decode(errors='replace')}"
    )
    return acks


@pytest.mark.slow  # hundreds of child processes killed at random instants
@pytest.mark.timeout(300)
@pytest.mark.parametrize("backend", list(BACKENDS))
async def test_sigkill_at_random_instants_loses_nothing_acknowledged(backend: str, tmp_path: Path) -> None:
    """After SIGKILL at any instant, reopening shows every acknowledged commit, no partial step, gapless
    seqs and no run left running (at least 50 kills per backend, on one growing ledger)."""
    rng = random.Random(f"{SEED}-{backend}")
    root = tmp_path / "store"
    root.mkdir()
    all_acks: list[tuple[str, str, int]] = []
    modes = ("startup", "running", "after-acks")
    started = time.monotonic()
    kills_with_work = 0
    counts: dict[str, int] = {}
    for n in range(KILLS):
        torn = backend == "files" and n % 2 == 1  # half of the file-ledger children tear their writes
        acks = await run_and_kill(backend, root, modes[n % len(modes)], rng, torn)
        all_acks.extend(acks)
        kills_with_work += bool(acks)
        async with opened(backend, root) as ledger:
            try:
                counts = await check_crash_ledger(ledger, all_acks)
            except AssertionError as exc:
                raise AssertionError(f"after kill {n + 1} (AWAKEN_CRASH_SEED={SEED}): {exc}") from exc
    elapsed = time.monotonic() - started
    print(f"{backend}: {KILLS} kills in {elapsed:.1f}s, {len(all_acks)} acknowledged commits, {counts}")
    assert KILLS < 50 or kills_with_work >= KILLS // 3, "too few kills landed while the child was committing"
    if backend == "files" and KILLS >= 50:
        assert _torn_tails(root), "no kill tore a record: the torn-tail recovery was not exercised"


def _torn_tails(root: Path) -> list[Path]:
    torn = root / "ledger" / "torn"
    return list(torn.iterdir()) if torn.exists() else []
