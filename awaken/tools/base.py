"""What a server tool is: ``Tool``, the ``ToolContext`` of a call, ``ToolError`` and ``ToolText``
(re-exported by ``awaken.tools``, where the registry that runs them lives)."""

from __future__ import annotations

import json
import os
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

import attrs
import trio

from awaken.core.events import ToolProgress
from awaken.core.principal import Principal
from awaken.models import ToolSpec


class ToolError(Exception):
    """Raised by a tool for a failure the model should see as the result text."""


class MissingSecret(ToolError):
    """``ctx.secret(name)`` found neither ``name`` nor ``name_FILE`` in the server's environment."""


#: the largest progress payload (its JSON text) one ``ctx.progress`` sends
MAX_PROGRESS_BYTES = 64 * 1024


@attrs.define
class ToolContext:
    """What a tool call may know and touch.

    ``state`` is the thread's agent state, a private copy the tool may change (committed with the
    step). ``principal`` is who asked for the run (None only for a context built outside a run);
    ``settings`` the tool's ``[tools.<name>]`` table as its ``settings_class`` (None: it declares
    none). The registry fills ``tool_name`` and ``settings`` before each call; the engine gives
    ``tool_call_id`` and the stream ``progress`` writes to.
    """

    thread_id: str
    run_id: str
    state: dict[str, Any]
    principal: Principal | None = attrs.field(default=None, kw_only=True)
    tool_call_id: str = attrs.field(default="", kw_only=True)
    tool_name: str = attrs.field(default="", kw_only=True)
    settings: Any = attrs.field(default=None, kw_only=True)
    #: where ``progress`` sends its events (the run's stream); None: progress goes nowhere
    emit: Callable[[ToolProgress], None] | None = attrs.field(default=None, kw_only=True, repr=False)
    #: the environment ``secret`` reads (the server's own unless a test gives another)
    environ: Mapping[str, str] = attrs.field(factory=lambda: os.environ, kw_only=True, repr=False)
    #: set when the call returned: a late ``progress`` (from a task the tool left behind) is dropped
    finished: bool = attrs.field(default=False, kw_only=True, repr=False)

    @property
    def subject(self) -> str | None:
        """The user who asked (None: anonymous, or no principal)."""
        return self.principal.subject if self.principal is not None else None

    @property
    def role(self) -> str | None:
        """``admin``, ``user`` or ``anonymous`` (None: no principal)."""
        return self.principal.role if self.principal is not None else None

    def secret(self, name: str) -> str:
        """The secret ``name`` from the server's environment: the variable ``name``, or the contents of
        the file the variable ``name_FILE`` names (trailing newline removed).

        Raises ``MissingSecret`` (a ``ToolError``: the model sees the text, the call fails) when
        neither is set, naming the variable to set; nothing else is read.
        """
        value = self.environ.get(name)
        if value:
            return value
        if file := self.environ.get(f"{name}_FILE"):
            try:
                with open(file, encoding="utf-8") as f:
                    return f.read().rstrip("\r\n")
            except OSError as exc:
                raise MissingSecret(f"the secret {name} could not be read from {name}_FILE: "
                                    f"{exc.strerror}") from None
        raise MissingSecret(f"the secret {name} is not set: the server's environment has no {name} "
                            f"(nor {name}_FILE)")

    def progress(self, data: Any) -> None:
        """Stream ``data`` (any JSON value, at most ``MAX_PROGRESS_BYTES`` as JSON) to the run's clients
        now, as progress of this call: AG-UI gets a ``CUSTOM`` event ``tool_progress``, the AI SDK a
        preliminary ``tool-output-available`` (the result replaces it). Best-effort and never stored:
        a late watcher may miss it, history never has it. Callable from a sync tool's worker thread.

        Raises ``ValueError`` for data that is not JSON or is too large."""
        try:
            size = len(json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode())
        except (TypeError, ValueError, RecursionError) as exc:
            raise ValueError(f"tool progress must be JSON: {type(exc).__name__}") from None
        if size > MAX_PROGRESS_BYTES:
            raise ValueError(f"tool progress is {size} bytes as JSON; at most {MAX_PROGRESS_BYTES}")
        try:
            trio.lowlevel.current_task()
        except RuntimeError:  # a sync tool's worker thread: hand it to the run's loop
            trio.from_thread.run_sync(self._send, data)
        else:
            self._send(data)

    def _send(self, data: Any) -> None:
        if self.emit is not None and not self.finished:
            self.emit(ToolProgress(self.tool_call_id, self.tool_name, data))


@attrs.frozen
class Tool:
    name: str
    description: str
    parameters: dict[str, Any]
    call: Callable[[dict[str, Any], ToolContext], Awaitable[Any]]
    #: ``server`` (built-ins and plugins) or ``mcp``
    kind: str = "server"
    #: the gate when the agent's ``permissions`` names none (None: the agent's ``default_permission``)
    permission: str | None = None
    #: the attrs (or dataclass) class ``[tools.<name>]`` is validated into (None: the tool takes none)
    settings_class: type | None = None
    #: the validated settings every call's ``ctx.settings`` carries
    settings: Any = None
    #: environment variables the tool reads with ``ctx.secret``: start-up warns about unset ones
    secrets: tuple[str, ...] = ()
    #: what the server awaits when it closes (a class tool's ``aclose``: its shared clients); None: nothing
    close: Callable[[], Awaitable[None]] | None = None

    @property
    def spec(self) -> ToolSpec:
        return ToolSpec(self.name, self.description, self.parameters)


@attrs.frozen
class ToolText:
    """A tool's result that is already the text the model should see."""

    text: str
