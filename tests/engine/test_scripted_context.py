"""The scripted model's ``/context`` directive answers with the run's context entries (issue 14)."""

from __future__ import annotations

from awaken.core.messages import Message, TextPart
from awaken.models import ContextEntry, ModelRequest
from awaken.models.scripted import ScriptedModel


class Out:
    def __init__(self) -> None:
        self.texts: list[str] = []

    def text(self, delta: str) -> None:
        self.texts.append(delta)

    def reasoning(self, delta: str) -> None:
        raise AssertionError("no reasoning expected")

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        raise AssertionError("no tool call expected")

    def usage(self, usage) -> None:
        pass


async def answer(context: tuple[ContextEntry, ...]) -> str:
    out = Out()
    request = ModelRequest("", (Message("u1", "user", (TextPart("/context"),)),), context=context)
    await ScriptedModel().stream(request, out)
    return "".join(out.texts)


async def test_context_answers_with_every_entry_in_order():
    entries = (ContextEntry("user name", "Ada"), ContextEntry("favourite colour", "teal"))
    assert await answer(entries) == "Context: user name = Ada; favourite colour = teal."


async def test_context_without_entries_says_none():
    assert await answer(()) == "Context: none."
