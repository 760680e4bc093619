"""One visibility rule (issue 27 item 4): ``access.may_see`` decides whether a principal may see a thread,
as a pure table; ``visible_thread`` applies it to a thread id; every engine and stream entry point takes
the principal as a required argument, so a caller that forgets it fails instead of seeing everything."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from awaken.core.errors import UnknownThread
from awaken.core.principal import ANONYMOUS, Principal
from awaken.engine import RunApplication
from awaken.engine.access import may_see, sees_every_thread, visible_thread
from awaken.streams.exchange import exchange
from awaken.streams.rejoin import watch_thread

ROOT = Path(__file__).resolve().parents[2]

ALICE = Principal("alice", "user")
BOB = Principal("bob", "user")
OPS = Principal("ops", "admin")
NOBODY = Principal(None, "user")  # a user token without a subject sees no thread, an unowned one neither

#: (principal, owner of the thread) -> may see it
TABLE = [
    (ALICE, "alice", True),
    (ALICE, "bob", False),
    (ALICE, None, False),      # a thread created before auth was on: an admin's only
    (BOB, "alice", False),
    (OPS, "alice", True),
    (OPS, None, True),
    (ANONYMOUS, "alice", True),  # [auth] mode = "none": a single-user server sees everything
    (ANONYMOUS, None, True),
    (NOBODY, None, False),
    (NOBODY, "alice", False),
]


@pytest.mark.parametrize(("principal", "owner", "sees"), TABLE)
def test_the_visibility_rule(principal, owner, sees):
    assert may_see(principal, owner) is sees


def test_who_sees_every_thread():
    assert [sees_every_thread(p) for p in (ALICE, OPS, ANONYMOUS, NOBODY)] == [False, True, True, False]


class Owners:
    """What ``visible_thread`` asks of the engine: ``owner_of``."""

    def __init__(self, threads: dict[str, str | None]) -> None:
        self.threads = threads

    async def owner_of(self, thread_id: str) -> tuple[bool, str | None]:
        return (thread_id in self.threads, self.threads.get(thread_id))


async def test_visible_thread_is_404_alike_for_a_missing_thread_and_anothers():
    app = Owners({"t-alice": "alice", "t-old": None})
    await visible_thread(app, ALICE, "t-alice")
    await visible_thread(app, OPS, "t-old")
    for principal, thread in ((ALICE, "t-missing"), (BOB, "t-alice"), (ALICE, "t-old"), (OPS, "t-missing")):
        with pytest.raises(UnknownThread) as refused:
            await visible_thread(app, principal, thread)
        assert (refused.value.code, refused.value.message, refused.value.status) == (
            "UNKNOWN_THREAD", f"no thread {thread!r}", 404)


def test_the_principal_is_a_required_argument_of_every_engine_and_stream_entry_point():
    for entry in (RunApplication.admit, RunApplication.launch, exchange, watch_thread, visible_thread):
        parameter = inspect.signature(entry).parameters["principal"]
        assert parameter.default is inspect.Parameter.empty, entry.__qualname__


def test_a_caller_that_passes_no_principal_is_a_type_error():
    def build(view):  # noqa: ANN001, ANN202
        raise AssertionError("never reached")

    with pytest.raises(TypeError, match="principal"):
        RunApplication.admit(object(), "t1", None, build)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="principal"):
        exchange(object(), object(), object(), object(), "application/json", None)  # type: ignore[call-arg]
    with pytest.raises(TypeError, match="principal"):
        watch_thread(object(), object(), "t1")  # type: ignore[call-arg]


def test_one_function_decides_visibility():
    """The principal carries no rule of its own, and nothing but ``access`` spells one out."""
    assert not hasattr(Principal, "may_see") and not hasattr(Principal, "is_admin")
    defined, called_as_method = [], []
    for path in (ROOT / "awaken").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node.name in ("may_see", "visible_thread"):
                defined.append(f"{path.relative_to(ROOT)}:{node.name}")
            if isinstance(node, ast.Attribute) and node.attr in ("may_see", "is_admin"):
                called_as_method.append(f"{path.relative_to(ROOT)}:{node.lineno}")
    assert sorted(defined) == ["awaken/engine/access.py:may_see", "awaken/engine/access.py:visible_thread"]
    assert called_as_method == []
