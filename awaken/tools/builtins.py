"""The built-in server tools: ``calculator``, ``current_time`` and ``set_state`` (CONTRACT §2.1)."""

from __future__ import annotations

import ast
import datetime
import math
import operator
from typing import Any

from awaken.tools import Tool, ToolContext, ToolError

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_UNARY = {ast.UAdd: operator.pos, ast.USub: operator.neg}
_MAX_EXPONENT = 1000
_MAX_LENGTH = 500
#: the largest integer (in bits) any step may produce: ~1200 decimal digits, well under the 4300-digit
#: limit of int -> str, and small enough that no operation on such operands takes noticeable time
_MAX_BITS = 4096


def evaluate(expression: str) -> int | float:
    """Evaluate arithmetic (numbers, + - * / // % **, parentheses) without ``eval``.

    Raises ``ToolError`` for anything else, a division by zero, or an oversized power.
    """
    if len(expression) > _MAX_LENGTH:
        raise ToolError(f"expression longer than {_MAX_LENGTH} characters")
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError:
        raise ToolError(f"not an arithmetic expression: {expression!r}") from None

    def walk(node: ast.AST) -> int | float:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and type(node.value) in (int, float):
            return node.value
        if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
            left, right = walk(node.left), walk(node.right)
            if isinstance(node.op, ast.Pow) and abs(right) > _MAX_EXPONENT:
                raise ToolError("exponent too large")
            # a small exponent on a big base is still a huge power: bound it before computing it
            if (isinstance(node.op, ast.Pow) and isinstance(left, int) and isinstance(right, int) and right > 0
                    and (abs(left).bit_length() - 1) * right > _MAX_BITS):
                raise ToolError("the result is too large")
            try:
                value = _BINARY[type(node.op)](left, right)
            except ZeroDivisionError:
                raise ToolError("division by zero") from None
            except OverflowError:
                raise ToolError("the result is too large") from None
            if isinstance(value, int) and value.bit_length() > _MAX_BITS:
                raise ToolError("the result is too large")
            return value
        if isinstance(node, ast.UnaryOp) and type(node.op) in _UNARY:
            return _UNARY[type(node.op)](walk(node.operand))
        raise ToolError(f"unsupported element in expression: {type(node).__name__}")

    value = walk(tree)
    if isinstance(value, float) and not math.isfinite(value):
        raise ToolError("the result is not a finite number")
    if isinstance(value, float) and value.is_integer() and abs(value) < 2**53:
        return int(value)
    return value


async def _calculator(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"result": evaluate(args["expression"])}


async def _current_time(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    return {"iso": datetime.datetime.now(datetime.UTC).isoformat(timespec="seconds")}


async def _set_state(args: dict[str, Any], ctx: ToolContext) -> dict[str, Any]:
    ctx.state[args["key"]] = args["value"]
    return {"key": args["key"], "value": args["value"]}


CALCULATOR = Tool(
    name="calculator",
    description="Evaluate an arithmetic expression (numbers, + - * / // % ** and parentheses).",
    parameters={
        "type": "object",
        "properties": {"expression": {"type": "string", "description": "e.g. (2 + 3) * 4"}},
        "required": ["expression"],
        "additionalProperties": False,
    },
    call=_calculator,
)

CURRENT_TIME = Tool(
    name="current_time",
    description="The current UTC time as an ISO 8601 string.",
    parameters={"type": "object", "properties": {}, "additionalProperties": False},
    call=_current_time,
)

SET_STATE = Tool(
    name="set_state",
    description="Set one key of the thread's shared agent state to a JSON value.",
    parameters={
        "type": "object",
        "properties": {"key": {"type": "string", "minLength": 1}, "value": {}},
        "required": ["key", "value"],
        "additionalProperties": False,
    },
    call=_set_state,
)

BUILTINS: tuple[Tool, ...] = (CALCULATOR, CURRENT_TIME, SET_STATE)
