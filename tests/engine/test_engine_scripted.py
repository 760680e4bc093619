"""The scripted model's directives and the calculator's safety, without a server.

CONTRACT §2 (the scripted model: deterministic, offline, never loops) and §2.1 (its directives and the
demo tools: ``calculator`` with no ``eval``).
"""

from __future__ import annotations

import json

import pytest
import trio
import trio.testing

from awaken.core.errors import ModelFailure
from awaken.core.messages import Message, TextPart, ToolResultPart, Usage
from awaken.models import ModelRequest
from awaken.models.scripted import ScriptedModel, parse_script
from awaken.tools import ToolContext, ToolError, ToolRegistry
from awaken.tools.builtins import BUILTINS, evaluate
from tests.builders import user_message


class Recorder:
    """A ``ModelOutput`` that records every call in order."""

    def __init__(self) -> None:
        self.calls: list[tuple] = []
        self.used: Usage | None = None

    def text(self, delta: str) -> None:
        self.calls.append(("text", delta))

    def reasoning(self, delta: str) -> None:
        self.calls.append(("reasoning", delta))

    def tool_call(self, index: int, *, call_id: str | None, name: str | None, arguments: str) -> None:
        self.calls.append(("tool", index, call_id, name, arguments))

    def usage(self, usage: Usage) -> None:
        self.used = usage

    def joined(self, kind: str) -> str:
        return "".join(c[1] for c in self.calls if c[0] == kind)

    def kinds(self) -> list[str]:
        return [c[0] for c in self.calls]


def result(call_id: str, name: str, content: str, status: str = "ok") -> Message:
    return Message(f"tr_{call_id}", "tool", (ToolResultPart(call_id, name, content, status),))


async def stream(*history: Message) -> Recorder:
    out = Recorder()
    await ScriptedModel().stream(ModelRequest("system", tuple(history)), out)
    return out


# -- directives ------------------------------------------------------------------------------------


async def test_without_a_directive_it_quotes_the_input_in_word_deltas():
    """CONTRACT §2.1: a short deterministic sentence that quotes the input, in small deltas."""
    out = await stream(user_message("Hello there"))
    assert out.calls == [("text", "You "), ("text", "said: "), ("text", '"Hello '), ("text", 'there".')]
    assert out.used == Usage(2, 4)


async def test_it_answers_the_newest_user_text():
    """CONTRACT §2.1: directives and the quote come from the newest user message."""
    out = await stream(user_message("first", id="u1"), Message("a1", "assistant", (TextPart("x"),)), user_message("second", id="u2"))
    assert out.joined("text") == 'You said: "second".'


async def test_call_directive_streams_the_arguments_in_fragments():
    """CONTRACT §2.1: ``/call TOOL {json}`` calls the tool in the first step; arguments arrive in fragments."""
    args = '{"expression": "2 + 3 * 4"}'
    out = await stream(user_message(f"/call calculator {args}"))
    assert out.kinds() == ["tool"] * 4
    (_, index, call_id, name, first), *rest = out.calls
    assert (index, name) == (0, "calculator") and call_id.startswith("call_")
    assert all(c[1:4] == (0, None, None) for c in rest)
    assert first + "".join(c[4] for c in rest) == args
    assert out.joined("text") == ""


async def test_several_call_lines_are_several_calls_in_one_step():
    """CONTRACT §2.1: several ``/call`` lines = several calls in one step (indices 0, 1, …)."""
    out = await stream(user_message('/call calculator {"expression": "1"}\n/call current_time\nplease'))
    starts = [c for c in out.calls if c[2] is not None]
    assert [(c[1], c[3]) for c in starts] == [(0, "calculator"), (1, "current_time")]
    assert starts[1][4] == "{}"
    assert starts[0][2] != starts[1][2]


async def test_after_the_results_it_answers_with_each_result_and_stops():
    """CONTRACT §2.1: once the results are in, one sentence including each result; never another call."""
    history = (user_message('/call calculator {"expression": "6*7"}\n/call current_time {}'),
               Message("a1", "assistant", ()),
               result("c1", "calculator", '{"result":42}'),
               result("c2", "current_time", "invalid arguments: x", "error"))
    out = await stream(*history)
    assert out.kinds() == ["text"] * len(out.calls)
    assert out.joined("text") == ('Here is what the tools said: calculator returned {"result":42}; '
                                  "current_time failed: invalid arguments: x.")


async def test_think_streams_reasoning_before_the_answer():
    """CONTRACT §2.1: ``/think TEXT`` streams TEXT as reasoning before the answer."""
    out = await stream(user_message("/think step by step\nWhy?"))
    assert out.kinds() == ["reasoning"] * 3 + ["text"] * 3
    assert out.joined("reasoning") == "step by step"
    assert out.joined("text") == 'You said: "Why?".'


async def test_think_is_not_repeated_after_tool_results():
    """CONTRACT §2.1 (never loops): reasoning belongs to the first step only."""
    out = await stream(user_message('/think hmm\n/call current_time {}'), result("c1", "current_time", "{}"))
    assert "reasoning" not in out.kinds()


@pytest.mark.parametrize("n", [1, 7, 50])
async def test_words_answers_with_exactly_n_one_word_deltas(n):
    """CONTRACT §2.1: ``/words N`` — exactly N words, one word per text delta."""
    out = await stream(user_message(f"/words {n}"))
    assert len(out.calls) == n and out.kinds() == ["text"] * n
    assert len(out.joined("text").split()) == n


async def test_delay_waits_before_each_delta(autojump_clock):
    """CONTRACT §2.1: ``/delay MS`` waits MS milliseconds before each delta."""
    start = trio.current_time()
    out = await stream(user_message("/delay 250\n/words 4"))
    assert len(out.calls) == 4
    assert trio.current_time() - start == pytest.approx(1.0)


async def test_fail_raises_a_classified_error_after_the_first_delta():
    """CONTRACT §2.1: ``/fail`` — the model fails with a classified error after its first delta."""
    out = Recorder()
    with pytest.raises(ModelFailure) as info:
        await ScriptedModel().stream(ModelRequest("s", (user_message("/fail\nboom"),)), out)
    assert info.value.code == "MODEL_ERROR"
    assert out.calls == [("text", "You ")]


def test_directive_parsing():
    """CONTRACT §2.1: directives are whole lines; other lines are the quoted text."""
    script = parse_script("/delay 5\nhello\n/words 3\n/think a b\n/call f {\"x\": 1}\n/fail\n/delay soon")
    assert (script.delay_ms, script.words, script.think, script.calls, script.fail) == (
        5.0, 3, "a b", (("f", '{"x": 1}'),), True)
    assert script.text == "hello\n/delay soon"
    assert parse_script("/words many").words is None


async def test_directives_may_share_a_line():
    """Several directives on one line each take effect (the console's input is one line): the line is
    split before each word naming a directive; a line starting with text stays text."""
    script = parse_script('/hold g1 /words 3 /delay 5 /think a b\n/call f {"x": 1} /call g {}\nsay /words 9')
    assert (script.hold, script.words, script.delay_ms, script.think, script.calls, script.text) == (
        "g1", 3, 5.0, "a b", (("f", '{"x": 1}'), ("g", "{}")), "say /words 9")
    out = Recorder()
    await ScriptedModel().stream(ModelRequest("s", (user_message("/think hm /words 2"),)), out)
    assert (out.joined("reasoning"), out.joined("text")) == ("hm", "alpha bravo")



async def test_hold_streams_one_delta_then_waits_for_release():
    """``/hold NAME``: the first delta, then nothing until a run says ``/release NAME``; then the rest."""
    model = ScriptedModel()
    held = Recorder()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(model.stream, ModelRequest("system", (user_message("/hold g1\n/words 3"),)), held)
        await trio.testing.wait_all_tasks_blocked()
        assert held.joined("text") == "alpha "
        await trio.testing.wait_all_tasks_blocked()
        assert held.joined("text") == "alpha "  # still held
        releaser = Recorder()
        await model.stream(ModelRequest("system", (user_message("/release g1"),)), releaser)
        assert releaser.kinds() and "text" in releaser.kinds()
    assert held.joined("text") == "alpha bravo charlie"
    # an open gate stays open: a later hold on it passes at once
    again = Recorder()
    await model.stream(ModelRequest("system", (user_message("/hold g1\n/words 2"),)), again)
    assert again.joined("text") == "alpha bravo"
    assert (parse_script("/hold a b\n/release c").hold, parse_script("/hold a b\n/release c").release) == ("a b", "c")

# -- the calculator --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("expression", "value"),
    [("2 + 3 * 4", 14), ("(2 + 3) * 4", 20), ("7 / 2", 3.5), ("8 / 2", 4), ("7 // 2", 3), ("7 % 4", 3),
     ("2 ** 10", 1024), ("-3 + +1", -2), ("0.1 + 0.2", 0.30000000000000004), ("2 ** -1", 0.5)],
)
def test_calculator_evaluates_arithmetic(expression, value):
    """CONTRACT §2.1: ``calculator`` evaluates arithmetic."""
    result = evaluate(expression)
    assert result == value and type(result) is type(value)


@pytest.mark.parametrize(
    "expression",
    [
        "__import__('os').system('true')",
        "x + 1",
        "abs(-1)",
        "(1).real",
        "().__class__",
        "'a' * 3",
        "[1, 2]",
        "True + 1",
        "1j * 1",
        "1 if 1 else 2",
        "lambda: 1",
        "1 < 2",
        "not 1",
        "1 and 2",
        "~1",
        "1 << 2",
        "a := 1",
    ],
)
def test_calculator_rejects_anything_but_arithmetic(expression):
    """CONTRACT §2.1: no ``eval`` — names, calls, attributes and non-numbers are refused."""
    with pytest.raises(ToolError):
        evaluate(expression)


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("2 ** 100000", "exponent too large"),
        ("9 ** 9 ** 9", "exponent too large"),
        ("(10 ** 1000) ** 1000", "the result is too large"),
        ("((10 ** 1000) ** 1000) ** 1000", "the result is too large"),
        ("10 ** 1000 * 10 ** 1000 * 10 ** 1000 * 10 ** 1000 * 10 ** 1000", "the result is too large"),
        ("10 ** 1000 / 3", "the result is too large"),
        ("2.0 ** 1000 * 2.0 ** 1000", "the result is not a finite number"),
        ("1 / 0", "division by zero"),
        ("0 ** -1", "division by zero"),
        ("1 +", "not an arithmetic expression"),
        ("1" * 501, "expression longer than 500 characters"),
    ],
)
def test_calculator_refuses_huge_or_broken_expressions_quickly(expression, message):
    """CONTRACT §2.1: a huge power or result is refused before it is computed (nothing blocks the loop)."""
    with pytest.raises(ToolError, match=message):
        evaluate(expression)


async def run_tool(name: str, arguments: str) -> tuple[str, bool]:
    outcome = await ToolRegistry(BUILTINS).execute(name, arguments, ToolContext("t", "r", {}))
    return outcome.content, outcome.ok


async def test_tool_errors_are_results_the_model_sees():
    """CONTRACT §2.1: bad arguments and tool failures are error results, never a failed run."""
    assert await run_tool("calculator", '{"expression": "6 * 7"}') == ('{"result":42}', True)
    assert await run_tool("calculator", '{"expression": "x"}') == ("unsupported element in expression: Name", False)
    assert await run_tool("calculator", "{not json") == ("invalid arguments: not JSON (Expecting property name "
                                                         "enclosed in double quotes)", False)
    assert await run_tool("calculator", '{"expr": "1"}') == (
        "invalid arguments: arguments: 'expression' is a required property", False)
    assert await run_tool("calculator", '{"expression": 5}') == ("invalid arguments: expression: 5 is not of type "
                                                                 "'string'", False)
    assert await run_tool("nope", "{}") == ("unknown tool 'nope'", False)


async def test_set_state_changes_only_the_tool_context_copy():
    """CONTRACT §2.1: ``set_state`` changes the thread's agent state (the engine commits the copy)."""
    ctx = ToolContext("t", "r", {"a": 1})
    outcome = await ToolRegistry(BUILTINS).execute("set_state", '{"key": "b", "value": [1, {"c": null}]}', ctx)
    assert (outcome.ok, json.loads(outcome.content)) == (True, {"key": "b", "value": [1, {"c": None}]})
    assert ctx.state == {"a": 1, "b": [1, {"c": None}]}
