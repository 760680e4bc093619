"""Tools written the documented ways (docs/tools.md), for the tests of the tools API: functions, a class
with settings, a tool that streams progress and one that waits for a test's event (to be cancelled)."""

from __future__ import annotations

import threading
from typing import Literal

import attrs
import trio

from awaken.tools import ToolContext, tool


def whoami(ctx: ToolContext) -> dict:
    """Who asks, where: the caller's subject and role, the thread, the run and the state's keys."""
    return {"subject": ctx.subject, "role": ctx.role, "thread": ctx.thread_id, "run": ctx.run_id,
            "call": ctx.tool_call_id, "state": sorted(ctx.state)}


@attrs.frozen
class GreeterSettings:
    greeting: str
    punctuation: Literal["!", "."] = "!"


class Greeter:
    """Greet someone in the configured way."""

    settings_class = GreeterSettings

    def __init__(self, settings: GreeterSettings) -> None:
        self.settings = settings

    async def __call__(self, name: str, ctx: ToolContext) -> str:
        """
        Args:
            name: whom to greet
        """
        assert ctx.settings is self.settings
        return f"{self.settings.greeting}, {name}{self.settings.punctuation}"


@tool(secrets=["TOOLKIT_TOKEN"])
def token_length(ctx: ToolContext) -> int:
    """How long the configured token is (it reads a secret)."""
    return len(ctx.secret("TOOLKIT_TOKEN"))


async def count_up(to: int, ctx: ToolContext) -> dict:
    """Count from 1 to ``to``, telling the client each number as progress."""
    for n in range(1, to + 1):
        ctx.progress({"counted": n})
        await trio.lowlevel.checkpoint()
    return {"done": to}


def count_up_in_a_thread(to: int, ctx: ToolContext) -> dict:
    """The same, as a sync tool (it runs in a worker thread)."""
    for n in range(1, to + 1):
        ctx.progress({"counted": n})
    return {"done": to}


#: what ``wait_here`` saw: ``started`` is set once it waits; ``cancelled`` once a cancellation ended it
waiting = {"started": trio.Event(), "release": trio.Event(), "cancelled": False}


def reset_waiting() -> None:
    waiting.update(started=trio.Event(), release=trio.Event(), cancelled=False)


async def wait_here(ctx: ToolContext) -> str:
    """Wait until the test releases it (it is meant to be stopped)."""
    waiting["started"].set()
    try:
        await waiting["release"].wait()
    except trio.Cancelled:
        waiting["cancelled"] = True
        raise
    return "released"


#: what ``block_here`` waits for (a plain thread event: the tool runs in a worker thread)
blocking = {"started": threading.Event(), "release": threading.Event(), "returned": threading.Event()}


def reset_blocking() -> None:
    blocking.update(started=threading.Event(), release=threading.Event(), returned=threading.Event())


def block_here(ctx: ToolContext) -> str:
    """Block its worker thread until the test releases it (it is meant to be stopped first)."""
    blocking["started"].set()
    blocking["release"].wait(30)
    blocking["returned"].set()
    return "released"
