"""A run another server process streams, as a broadcast in this one (``awaken.ledger.relay``).

``relayed_broadcast`` finds the run on a thread through the ledger's relay and returns this process's
copy of its broadcast: a ``RunBroadcast`` with the run's key, fed the run's events from the first on,
in order, by one task per run (``follow``) for as long as the run streams. Its channels encode those
events as the run's own process does, so the positions are the same: a ``Last-Event-ID`` from either
process resumes on the other. Several watchers of the run on this process share that one copy.

The copy ends as the run does: with the run's terminal event and end; with ``OWNER_DIED`` when the
process running it died (its lease lapsed); with ``STORE_UNAVAILABLE`` when the database stays away
for ``STORE_GRACE_SECONDS`` or lost part of the run: never a hang.
"""

from __future__ import annotations

import logging

import trio

from awaken.core import events as ev
from awaken.core.errors import StoreUnavailable
from awaken.ledger.relay import Batch, RunRelay
from awaken.streams.broadcast import RunBroadcast

log = logging.getLogger("awaken.streams.relayed")

#: how long a follower waits for a notification before it reads anyway (and learns of a dead owner)
POLL_SECONDS = 0.5
#: how long the database may be away before a relayed run's watchers get ``STORE_UNAVAILABLE``
STORE_GRACE_SECONDS = 3.0


async def relayed_broadcast(relay: RunRelay, thread_id: str, limit: int) -> RunBroadcast | None:
    """This process's copy of the run another process streams on ``thread_id`` (None when none does).
    Raises ``StoreUnavailable``."""
    found = await relay.find(thread_id)
    if found is None:
        return None
    mirror = relay.following.get(found.key)
    if mirror is not None:
        return mirror
    mirror = RunBroadcast(found.key, thread_id, limit, found.owner)
    relay.following[found.key] = mirror
    try:
        after = apply(mirror, await relay.read(found.key, 0), 0)
    except BaseException:
        relay.following.pop(found.key, None)
        raise
    if mirror.closed:
        relay.following.pop(found.key, None)
    else:
        relay.spawn(follow, relay, mirror, after)
    return mirror


def apply(mirror: RunBroadcast, batch: Batch, after: int) -> int:
    """Feed ``mirror`` the events of ``batch`` after sequence number ``after``; returns the last one fed.
    Closes ``mirror`` when the batch says the run ended."""
    for seq, event in batch.events:
        if seq <= after:
            continue
        if seq != after + 1:
            if mirror.channels:  # a watcher's stream would skip events: end it, coded
                end(mirror, ev.RunFailed("STORE_UNAVAILABLE", "part of this run's stream was lost on its way "
                                         "between server processes; read the thread's history"))
                return after
            mirror.lost()  # joined late: channels start at the run's next step boundary
        mirror.sink(event)
        after = seq
    if batch.lost is not None:
        end(mirror, ev.RunFailed(*batch.lost))
    elif batch.ended:
        mirror.close()
    return after


def end(mirror: RunBroadcast, event: ev.AgentEvent) -> None:
    if not mirror.closed:
        mirror.sink(event)
        mirror.close()


async def follow(relay: RunRelay, mirror: RunBroadcast, after: int) -> None:
    """Feed ``mirror`` the run's events as they are staged, until the run ends."""
    failing_since: float | None = None
    try:
        while not mirror.closed:
            await relay.wait(mirror.key, after, POLL_SECONDS)
            try:
                batch = await relay.read(mirror.key, after)
            except StoreUnavailable as exc:
                now = trio.current_time()
                failing_since = now if failing_since is None else failing_since
                if now - failing_since >= STORE_GRACE_SECONDS:
                    end(mirror, ev.RunFailed("STORE_UNAVAILABLE", f"this run's stream could not be read: {exc.message}"))
                    return
                await trio.sleep(POLL_SECONDS)
                continue
            failing_since = None
            after = apply(mirror, batch, after)
    finally:
        if relay.following.get(mirror.key) is mirror:
            del relay.following[mirror.key]
        mirror.close()
