"""The model boundary: what a provider receives and how it reports what it produces.

Providers are plugins (``awaken/models/providers.py``): ``model = "<provider>:<model>"`` names one
registered under the ``awaken.models`` entry-point group; ``scripted`` and ``openai`` are built in.

A provider implements ``Model.stream(request, out)``: it reads ``request`` (history, tools, system
prompt, context) and calls ``out``'s synchronous methods as chunks arrive. No async generators sit on the
delta path: one call per chunk, straight into the run's step builder.

Failures raise ``ModelFailure`` with a classified code (``MODEL_ERROR``, ``MODEL_UNAVAILABLE``,
``MODEL_RATE_LIMITED``, ``MODEL_TIMEOUT``). A cancellation leaves nothing behind: the provider
closes its upstream request as the ``Cancelled`` unwinds.
"""

from __future__ import annotations

from typing import Any, Protocol

import attrs

from awaken.core.messages import Message, Usage


@attrs.frozen
class ToolSpec:
    """What the model is told about a tool: its name, description and JSON-schema parameters."""

    name: str
    description: str
    parameters: dict[str, Any]


@attrs.frozen
class ContextEntry:
    """One piece of context a client sent with a run (AG-UI ``context``): what it is, and its value."""

    description: str
    value: str


@attrs.frozen
class ModelRequest:
    """What a model is asked: the agent's system prompt, the thread's history and the tools it may call.

    Fields added later come after ``tools`` with a default and ``kw_only=True`` (for example a
    ``context`` tuple), so providers that do not read them and callers that do not set them keep working.
    """

    system_prompt: str
    messages: tuple[Message, ...]
    tools: tuple[ToolSpec, ...] = ()
    #: context entries the client sent with this run, to be shown to the model beside the system prompt
    context: tuple[ContextEntry, ...] = attrs.field(default=(), kw_only=True)
    #: the thread's agent state as the run sees it (the client's shared state included)
    state: dict[str, Any] = attrs.field(factory=dict, kw_only=True)


class ModelOutput(Protocol):
    """Where a provider reports its stream. Every method is synchronous and cheap."""

    def text(self, delta: str) -> None: ...

    def reasoning(self, delta: str) -> None: ...

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        """A fragment of tool call ``index``; the first fragment of a call carries its id and name."""

    def usage(self, usage: Usage) -> None: ...


class Model(Protocol):
    async def stream(self, request: ModelRequest, out: ModelOutput) -> None: ...

    async def aclose(self) -> None: ...
