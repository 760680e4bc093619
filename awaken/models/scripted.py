"""The scripted model: deterministic, offline, the default and the test workhorse (CONTRACT §2.1).

It reads directives from the lines of the newest user text:

* ``/call TOOL {json}`` — call TOOL with those arguments in the first step (one line per call);
  once the results are in, answer with a sentence quoting each result, and stop.
* ``/think TEXT`` — stream TEXT as reasoning before the answer.
* ``/words N`` — answer with exactly N words, one word per text delta.
* ``/delay MS`` — wait MS milliseconds before each delta.
* ``/fail`` — fail with ``MODEL_ERROR`` after the first delta.
* ``/parts`` — answer with what the newest user message carried, part by part: ``text "…"`` (the
  text without directives), ``image <mime> inline <n> bytes`` or ``image <mime> <url>``.
* ``/hold NAME`` — after the first delta, wait until a run on this server says ``/release NAME`` (at once
  if one already has); ``/release NAME`` opens that gate, then answers as usual. Tests use it to keep a
  run streaming, whatever the machine's load, until they have seen what they wait for.
* ``/state`` — answer with the thread's state as the run sees it: ``State: <compact JSON>.``
* ``/context`` — answer with the run's context entries: ``Context: <description> = <value>; ...``
  (``Context: none.`` when the run has none).

A directive starts a line, and several may share one: ``/hold g1 /words 3`` is ``/hold g1`` and
``/words 3`` (a line is split before each word that names a directive, when the line starts with one).

Without a directive it answers ``You said: "<input>".`` in one-word deltas. It never loops: a
history whose newest user message already has tool results after it always gets a final answer.

``ScriptedProvider`` is what the ``awaken.models`` entry point ``scripted`` names: it takes no model
name and no settings, and one ``ScriptedModel`` serves every agent.
"""

from __future__ import annotations

import uuid
from collections.abc import Awaitable, Iterator
from typing import ClassVar

import attrs
import orjson
import trio

from awaken.core.errors import ModelFailure
from awaken.core.media import describe_image
from awaken.core.messages import ImagePart, Message, TextPart, ToolResultPart, Usage
from awaken.models import ModelOutput, ModelRequest

_WORDS = ("alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india", "juliet")
_ARG_FRAGMENT = 8
#: without a delay, yield to the scheduler every this many deltas so a long answer cannot hog the loop
_CHECKPOINT_EVERY = 64
#: and, after the first delta, step aside this many scheduler passes before the second, as a model
#: that streams over the network waits for its next token: the request's task attaches its transport
#: (pass 1) and the writer that wakes sends the first frames (pass 2) before the rest is generated.
#: With one pass, trio's batch order (reversed half the time) put the whole answer's generation
#: before the first write (``bench/REPORT.md``, 2026-12-03 close)
_FIRST_DELTA_PASSES = 3


@attrs.frozen
class Script:
    """The directives parsed from one user text."""

    text: str
    calls: tuple[tuple[str, str], ...] = ()
    think: str | None = None
    words: int | None = None
    delay_ms: float = 0.0
    fail: bool = False
    hold: str | None = None
    release: str | None = None
    context: bool = False
    state: bool = False
    parts: bool = False


#: the words that name a directive
DIRECTIVES = frozenset({"/call", "/think", "/words", "/delay", "/fail", "/parts", "/hold", "/release", "/context",
                        "/state"})


def directive_lines(text: str) -> Iterator[str]:
    """The lines of ``text``, a line that starts with a directive split before each further word that
    names one (``/hold g1 /words 3`` -> ``/hold g1``, ``/words 3``); other lines as they are."""
    for line in text.splitlines():
        words = line.split()
        if not words or words[0] not in DIRECTIVES or not any(w in DIRECTIVES for w in words[1:]):
            yield line
            continue
        start = 0
        for i in range(1, len(words) + 1):
            if i == len(words) or words[i] in DIRECTIVES:
                yield " ".join(words[start:i])
                start = i


def parse_script(text: str) -> Script:
    calls: list[tuple[str, str]] = []
    think = None
    words = None
    delay = 0.0
    fail = False
    parts = False
    gates: dict[str, str] = {}
    context = False
    state = False
    plain: list[str] = []
    for line in directive_lines(text):
        stripped = line.strip()
        head, _, rest = stripped.partition(" ")
        rest = rest.strip()
        if head == "/call" and rest:
            name, _, args = rest.partition(" ")
            calls.append((name, args.strip() or "{}"))
        elif head == "/think":
            think = rest
        elif head == "/words" and rest.isdigit():
            words = int(rest)
        elif head == "/delay":
            try:
                delay = max(0.0, float(rest))
            except ValueError:
                plain.append(stripped)
        elif head == "/fail":
            fail = True
        elif stripped == "/parts":
            parts = True
        elif head in ("/hold", "/release") and rest:
            gates[head] = rest
        elif head == "/context":
            context = True
        elif head == "/state":
            state = True
        else:
            plain.append(line)
    return Script("\n".join(plain).strip(), tuple(calls), think, words, delay, fail, gates.get("/hold"),
                  gates.get("/release"), context, state, parts)


def describe_parts(message: Message) -> str:
    """``/parts``: what ``message`` carried, part by part."""
    said = []
    for part in message.parts:
        if isinstance(part, TextPart):
            text = parse_script(part.text).text
            if text:
                said.append(f'text "{text}"')
        elif isinstance(part, ImagePart):
            said.append(describe_image(part))
    return "You sent: " + "; ".join(said) + "."


def _count_words(messages: tuple[Message, ...]) -> int:
    """The words of ``messages``' text (the scripted model's prompt usage); a message of one text part,
    the common case, is counted without joining its parts."""
    total = 0
    for m in messages:
        parts = m.parts
        if len(parts) == 1 and type(parts[0]) is TextPart:
            total += len(parts[0].text.split())
        else:
            total += len(m.text.split())
    return total


async def _report_usage(out: ModelOutput, history: tuple[Message, ...], emitted: int) -> None:
    """Report the usage after a checkpoint: the deltas already emitted are written to their clients
    before the model counts the words of a long history (a step of this task that would otherwise
    delay them, half the time, by the whole count)."""
    await trio.lowlevel.checkpoint()
    out.usage(Usage(_count_words(history), emitted))


class ScriptedModel:
    """``model = "scripted"``. One instance serves every run; its only state is the ``/hold`` gates."""

    def __init__(self) -> None:
        #: ``/hold`` gates by name; an opened gate stays open
        self._gates: dict[str, trio.Event] = {}

    def _gate(self, name: str) -> trio.Event:
        return self._gates.setdefault(name, trio.Event())

    def open_gate(self, name: str) -> None:
        """Open gate ``name`` as a run saying ``/release NAME`` would, without a run (for a caller that
        holds the ledger itself, where a releasing run could not commit)."""
        self._gate(name).set()

    async def aclose(self) -> None:
        return None

    async def stream(self, request: ModelRequest, out: ModelOutput) -> None:
        history = request.messages
        last_user = next((i for i in range(len(history) - 1, -1, -1) if history[i].role == "user"), None)
        user_text = history[last_user].text if last_user is not None else ""
        script = parse_script(user_text)
        after = history[last_user + 1 :] if last_user is not None else ()
        results = [m.tool_result for m in after if m.tool_result is not None]
        pacer = _Pacer(script.delay_ms / 1000.0)
        emitted = 0
        if script.release:
            self.open_gate(script.release)
        calling = bool(script.calls) and not results
        thinking = script.think if script.think and not (results and script.calls) else ""
        answer = "" if calling else _answer(script, request, results, last_user, user_text)
        # the reasoning, then the answer, one word a delta; inline, not a helper coroutine: a paced run
        # waits here, and every frame on its stack stays alive with it
        for reasoning, delta in _deltas(thinking, answer):
            await pacer.tick()
            if reasoning:
                out.reasoning(delta)
            else:
                out.text(delta)
            emitted += 1
            if script.hold and emitted == 1:
                await self._gate(script.hold).wait()
            if script.fail:
                raise ModelFailure("the scripted model failed as asked by /fail", code="MODEL_ERROR")
        if calling:
            for index, (name, args) in enumerate(script.calls):
                call_id = f"call_{uuid.uuid4().hex[:16]}"
                fragments = [args[i : i + _ARG_FRAGMENT] for i in range(0, len(args), _ARG_FRAGMENT)] or ["{}"]
                for n, fragment in enumerate(fragments):
                    await pacer.tick()
                    out.tool_call(
                        index, call_id=call_id if n == 0 else None, name=name if n == 0 else None, arguments=fragment
                    )
                    emitted += 1
        await _report_usage(out, history, emitted)


def _answer(script: Script, request: ModelRequest, results: list[ToolResultPart], last_user: int | None,
            user_text: str) -> str:
    """The text the model answers with (no tool call asked for, or their results are in)."""
    history = request.messages
    if results:
        said = "; ".join(f"{r.name} returned {r.content}" if r.status == "ok" else f"{r.name} failed: {r.content}"
                         for r in results)
        return f"Here is what the tools said: {said}."
    if script.parts and last_user is not None:
        return describe_parts(history[last_user])
    if script.context:
        return context_answer(request)
    if script.state:
        return f"State: {orjson.dumps(request.state, option=orjson.OPT_SORT_KEYS).decode()}."
    if script.words is not None:
        return " ".join(_WORDS[i % len(_WORDS)] for i in range(script.words))
    return f'You said: "{script.text or user_text.strip()}".'


def context_answer(request: ModelRequest) -> str:
    """What ``/context`` answers: every context entry of the run, in order."""
    if not request.context:
        return "Context: none."
    return "Context: " + "; ".join(f"{c.description} = {c.value}" for c in request.context) + "."


def _deltas(reasoning: str, answer: str) -> Iterator[tuple[bool, str]]:
    """``(True, word)`` for each word of ``reasoning``, then ``(False, word)`` for each of ``answer``: one
    delta per word, each keeping its following space, so the deltas join back to the text.

    Lazy: a paced stream holds its answer once, not one string per word it has yet to send."""
    text, is_reasoning = reasoning, True
    while True:
        start = 0
        while start < len(text):
            end = text.find(" ", start)
            end = len(text) if end < 0 else end + 1
            yield is_reasoning, text[start:end]
            start = end
        if not is_reasoning:
            return
        text, is_reasoning = answer, False


class _Pacer:
    """What is awaited before each delta: the delay, or now and then a checkpoint."""

    def __init__(self, delay: float) -> None:
        self.delay = delay
        self.count = 0

    def tick(self) -> Awaitable[None]:
        """To be awaited at once: trio's own sleep or checkpoint, or nothing (a plain function, so no
        frame of its own stays on the stack of a run waiting out its delay)."""
        if self.delay > 0:
            return trio.sleep_until(trio.current_time() + self.delay)  # noqa: ASYNC105 (the caller awaits it)
        self.count += 1
        if self.count == 2:
            return _step_aside(_FIRST_DELTA_PASSES)
        if self.count % _CHECKPOINT_EVERY == 0:
            return trio.lowlevel.checkpoint()  # noqa: ASYNC105 (the caller awaits it)
        return _NOW


async def _step_aside(passes: int) -> None:
    """``passes`` checkpoints: the tasks woken so far run before the caller goes on."""
    for _ in range(passes):
        await trio.lowlevel.checkpoint()


class _Now:
    """An awaitable that is done at once (no checkpoint)."""

    __slots__ = ()

    def __await__(self) -> Iterator[None]:
        return iter(())  # a new iterator each time: one instance serves every await


_NOW = _Now()


@attrs.frozen
class ScriptedConfig:
    """The scripted model has no settings: ``[providers.scripted]`` and an agent's ``provider`` table
    must be empty."""


class ScriptedProvider:
    """``model = "scripted"``: one ``ScriptedModel`` for every agent (so ``/hold`` gates are per server)."""

    config_class: ClassVar[type] = ScriptedConfig
    takes_model_name: ClassVar[bool] = False

    def __init__(self) -> None:
        self._model = ScriptedModel()

    def model(self, name: str, config: ScriptedConfig) -> ScriptedModel:
        return self._model
