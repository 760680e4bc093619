"""Limits per principal (``[limits]``): how many runs one caller may have executing at once, and how
many it may start in any minute.

``RunLimiter.acquire(principal)`` is the one check. ``RunApplication.admit`` calls it before it looks
at anything else of the request, so every wire (AG-UI, AI SDK, the CopilotKit routes), every
transport (SSE, WebSocket) and every kind of run (fresh, resumed) is limited by it. It returns a
``Slot`` or raises ``RateLimited`` (``RATE_LIMITED``, the seconds to wait in ``retry_after`` and in
the message); the caller turns that into HTTP 429 or the protocol's refusal stream.

* Who: the caps apply to the principals whose role is in ``[limits] roles`` (by default ``user``:
  authenticated callers that are not admins; admins and the anonymous caller of ``[auth] mode =
  "none"``, the developer on their own machine, are unlimited unless listed). Callers are counted
  per subject (every anonymous request is one caller). Counts live in this process: with
  ``[server] workers = N`` each process counts its own.
* Concurrency (``max_concurrent_runs``): a slot is held while the run executes and given back the
  moment it ends or starts waiting (a waiting run is committed state and holds no slot; its resume
  takes one while it runs). The wait suggested is ``BUSY_RETRY_SECONDS``: when a run ends is unknown.
* Rate (``runs_per_minute``): the starts of admitted runs over a sliding 60 s window (a log of at
  most ``runs_per_minute`` instants per caller). A request that admission refuses afterwards (a busy
  thread, nothing new to run) gives its start back. The wait is until the oldest start leaves the window.

``0`` turns a cap off. The clock is injectable (``clock``, ``trio.current_time`` by default) so tests
move the window without sleeping.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Callable

import attrs
import trio

from awaken.core.errors import RateLimited
from awaken.core.principal import Principal

#: the window of ``runs_per_minute``, in seconds
WINDOW_SECONDS = 60.0
#: how often (in slots given back or refused) callers that went quiet are dropped
SWEEP_EVERY = 1024
#: the ``Retry-After`` of a refusal for too many runs at once (when one ends cannot be known)
BUSY_RETRY_SECONDS = 1


@attrs.frozen
class Limits:
    """The caps (``[limits]``; ``awaken.config.LimitsConfig`` is what config.toml structures into)."""

    max_concurrent_runs: int = 8
    runs_per_minute: int = 60
    roles: frozenset[str] = frozenset({"user"})


@attrs.define
class _Caller:
    """One subject's counts: runs executing now, and the instants of its starts in the window."""

    active: int = 0
    starts: deque[float] = attrs.field(factory=deque)


class Slot:
    """What ``acquire`` gave one run: its place among the caller's executing runs and its start in
    the window. ``release`` (idempotent) gives the place back; ``refund`` also takes the start back."""

    __slots__ = ("_caller", "_key", "_limiter", "_released", "_start")

    def __init__(self, limiter: RunLimiter | None, key: str, caller: _Caller | None, start: float | None) -> None:
        self._limiter = limiter
        self._key = key
        self._caller = caller
        self._start = start
        self._released = limiter is None

    def release(self) -> None:
        """The run ended or waits: its place is free (a no-op after the first call)."""
        if self._released:
            return
        self._released = True
        assert self._limiter is not None and self._caller is not None
        self._caller.active -= 1
        self._limiter._forget_if_idle(self._key, self._caller)

    def refund(self) -> None:
        """The request was refused after all: free its place and take its start out of the window."""
        if self._limiter is None or self._caller is None:
            return
        if self._start is not None:
            try:
                self._caller.starts.remove(self._start)
            except ValueError:  # already out of the window
                pass
            self._start = None
        self.release()
        self._limiter._forget_if_idle(self._key, self._caller)


#: the slot of a caller no cap applies to
UNLIMITED = Slot(None, "", None, None)


class RunLimiter:
    """The counts of every limited caller in this process, and the one decision on them."""

    def __init__(self, limits: Limits | None = None, clock: Callable[[], float] = trio.current_time) -> None:
        self.limits = limits or Limits()
        self.clock = clock
        self._callers: dict[str, _Caller] = {}
        self._acquired = 0

    def applies_to(self, principal: Principal) -> bool:
        limits = self.limits
        return principal.role in limits.roles and (limits.max_concurrent_runs > 0 or limits.runs_per_minute > 0)

    def acquire(self, principal: Principal) -> Slot:
        """A slot for one run of ``principal``, or ``RateLimited`` having counted nothing."""
        if not self.applies_to(principal):
            return UNLIMITED
        limits = self.limits
        key = principal.subject if principal.subject is not None else ""
        caller = self._callers.get(key) or _Caller()
        now = self.clock()
        starts = caller.starts
        while starts and starts[0] <= now - WINDOW_SECONDS:
            starts.popleft()
        if 0 < limits.max_concurrent_runs <= caller.active:
            self._forget_if_idle(key, caller)
            raise RateLimited(
                f"too many runs at once: {caller.active} are executing for this caller "
                f"(limits.max_concurrent_runs = {limits.max_concurrent_runs}); retry in {BUSY_RETRY_SECONDS} s, "
                "or when one of them ends", retry_after=BUSY_RETRY_SECONDS)
        if 0 < limits.runs_per_minute <= len(starts):
            wait = max(1, math.ceil(starts[0] + WINDOW_SECONDS - now))
            self._forget_if_idle(key, caller)
            raise RateLimited(
                f"too many new runs: {len(starts)} were started by this caller in the last minute "
                f"(limits.runs_per_minute = {limits.runs_per_minute}); retry in {wait} s", retry_after=wait)
        caller.active += 1
        start = None
        if limits.runs_per_minute > 0:
            starts.append(now)
            start = now
        self._callers[key] = caller
        return Slot(self, key, caller, start)

    def executing(self, principal: Principal) -> int:
        """How many runs of ``principal`` hold a slot now (0 for a caller no cap applies to)."""
        caller = self._callers.get(principal.subject if principal.subject is not None else "")
        return caller.active if caller is not None else 0

    def _forget_if_idle(self, key: str, caller: _Caller) -> None:
        """Drop a caller with nothing executing and nothing left in the window (no entry per past caller)."""
        if caller.active == 0 and self._callers.get(key) is caller and (
                not caller.starts or self.clock() - caller.starts[-1] >= WINDOW_SECONDS):
            del self._callers[key]
        self._acquired += 1
        if self._acquired % SWEEP_EVERY == 0:  # callers that went quiet with starts in the window
            now = self.clock()
            for idle in [k for k, c in self._callers.items()
                         if c.active == 0 and (not c.starts or now - c.starts[-1] >= WINDOW_SECONDS)]:
                del self._callers[idle]
