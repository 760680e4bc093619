"""Regenerate and edit as the wires read them (issue 33), sans-IO: parsed bodies against a committed view,
out come ``RunRequest``s with a ``ForkAt`` (or the refusal), without a server or a ledger.

AI SDK: the bodies ``useChat`` (ai 6 and 7) posts for ``regenerate()`` and ``sendMessage({text,
messageId})`` (see tests/http/test_branches.py). AG-UI: the documented ``forwardedProps`` keys.
"""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from awaken.core.errors import InputRejected
from awaken.core.messages import Message, TextPart
from awaken.ledger.interface import ThreadRecord, ThreadView
from awaken.wires.agui.adapter import PROTOCOL as AGUI
from awaken.wires.agui.request import NO_BRANCHING, Branching, parse_run_input, scan_run_input
from awaken.wires.aisdk.adapter import PROTOCOL as AISDK
from awaken.wires.aisdk.request import parse_chat_request, scan_chat_request
from awaken.wires.protocol import ForkAt, RunRequest
from tests.builders import agui_body, aisdk_user, run_request_outcome, user

JSON = "application/json"


def committed(*messages: tuple[str, str, str]) -> ThreadView:
    """A whole-history view of ``(id, role, text)`` messages, seqs 1, 2, …"""
    held = tuple(Message(mid, role, (TextPart(text),), run_id="run_a" if role == "assistant" else None, seq=i)
                 for i, (mid, role, text) in enumerate(messages, 1))
    return ThreadView(ThreadRecord("t", 0, last_seq=len(held)), held, ())


VIEW = committed(("u1", "user", "one"), ("a1", "assistant", 'You said: "one".'), ("u2", "user", "two"),
                 ("a2", "assistant", 'You said: "two".'))
A1 = {"id": "a1", "role": "assistant", "parts": [{"type": "text", "text": 'You said: "one".'}]}


def aisdk_outcome(body: dict[str, Any], view: ThreadView = VIEW, *, scanned: bool = True) -> Any:
    parse = scan_chat_request if scanned else parse_chat_request
    return run_request_outcome(AISDK, parse(orjson.dumps({"id": "t", **body}), JSON), view)


def agui_outcome(messages: list[dict[str, Any]], view: ThreadView = VIEW, *, scanned: bool = True, **extra: Any) -> Any:
    parse = scan_run_input if scanned else parse_run_input
    return run_request_outcome(AGUI, parse(orjson.dumps(agui_body("t", "r9", messages, **extra)), JSON), view)


# -- AI SDK ----------------------------------------------------------------------------------------


@pytest.mark.parametrize("scanned", [True, False])
def test_regenerate_forks_after_the_user_message_before_the_answer(scanned):
    """``regenerate()`` (no ``messageId``): the messages end with u2; the run keeps u2 and needs no input."""
    body = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u2", "two")], "trigger": "regenerate-message"}
    assert aisdk_outcome(body, scanned=scanned) == RunRequest("t", None, fork=ForkAt("u2", True, "regenerate"))


def test_regenerate_of_a_named_message():
    """``regenerate({messageId})``: an assistant message sliced off (the request ends before it), one still in
    the request (the fork is before it), a user message (kept)."""
    sliced = {"messages": [aisdk_user("u1", "one")], "trigger": "regenerate-message", "messageId": "a1"}
    assert aisdk_outcome(sliced).fork == ForkAt("u1", True, "regenerate")
    inside = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u2", "two")], "trigger": "regenerate-message",
              "messageId": "a1"}
    assert aisdk_outcome(inside).fork == ForkAt("u1", True, "regenerate")
    named = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u2", "two")], "trigger": "regenerate-message",
             "messageId": "u2"}
    assert aisdk_outcome(named).fork == ForkAt("u2", True, "regenerate")


def test_a_regenerate_with_nothing_to_regenerate_or_with_new_input():
    nothing = aisdk_outcome({"messages": [], "trigger": "regenerate-message"})
    assert nothing[:2] == ("refused", "NO_NEW_INPUT")
    fresh = aisdk_outcome({"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u3", "new")], "trigger": "regenerate-message"})
    assert fresh == RunRequest("t", None, (Message("u3", "user", (TextPart("new"),)),))


def test_send_message_with_a_message_id_is_an_edit():
    """``sendMessage({text: "three", messageId: "u2"})``: u2 with its new content is the input of a run that
    continues from the message before it."""
    body = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u2", "three")], "trigger": "submit-message",
            "messageId": "u2"}
    assert aisdk_outcome(body) == RunRequest("t", None, (Message("u2", "user", (TextPart("three"),)),),
                                     fork=ForkAt("u2", False, "edit"))


def test_a_message_id_naming_an_assistant_message_or_a_new_one_is_no_edit():
    continued = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u3", "more")], "trigger": "submit-message",
                 "messageId": "a1"}
    assert aisdk_outcome(continued) == RunRequest("t", None, (Message("u3", "user", (TextPart("more"),)),))
    unknown = {"messages": [aisdk_user("u1", "one"), A1, aisdk_user("u3", "more")], "trigger": "submit-message",
               "messageId": "u3"}
    assert aisdk_outcome(unknown).fork is None


def test_message_id_is_parsed():
    parsed = scan_chat_request(orjson.dumps({"id": "t", "messages": [], "messageId": "a1"}), JSON)
    assert parsed.message_id == "a1"
    with pytest.raises(InputRejected) as refused:
        scan_chat_request(orjson.dumps({"id": "t", "messages": [], "messageId": 3}), JSON)
    assert refused.value.code == "INVALID_REQUEST"


# -- AG-UI -----------------------------------------------------------------------------------------


@pytest.mark.parametrize(("props", "expected"), [
    (None, NO_BRANCHING), ({}, NO_BRANCHING), ({"awaken": {}}, NO_BRANCHING),
    ({"awaken": {"regenerate": True}}, Branching(regenerate=True)), ({"awaken": {"edit": True}}, Branching(edit=True)),
    ({"awaken": {"regenerate": False, "edit": True}}, Branching(edit=True)),
])
def test_the_documented_forwarded_props(props, expected):
    assert parse_run_input(orjson.dumps(agui_body("t", "r", [user("u1", "x")], forwardedProps=props)),
                           JSON).branching == expected


@pytest.mark.parametrize(("props", "code"), [
    ({"x": 1}, "UNSUPPORTED_FIELD"), ({"awaken": {}, "x": 1}, "UNSUPPORTED_FIELD"),
    ({"awaken": {"fork": True}}, "UNSUPPORTED_FIELD"), ({"awaken": True}, "INVALID_REQUEST"),
    ({"awaken": {"edit": 1}}, "INVALID_REQUEST"), ([], "INVALID_REQUEST"),
])
def test_every_other_forwarded_prop_is_refused(props, code):
    with pytest.raises(InputRejected) as refused:
        scan_run_input(orjson.dumps(agui_body("t", "r", [user("u1", "x")], forwardedProps=props)), JSON)
    assert refused.value.code == code


AG_A1 = {"id": "a1", "role": "assistant", "content": 'You said: "one".'}
REGENERATE = {"forwardedProps": {"awaken": {"regenerate": True}}}
EDIT = {"forwardedProps": {"awaken": {"edit": True}}}


@pytest.mark.parametrize("scanned", [True, False])
def test_agui_regenerate_forks_after_the_last_user_message(scanned):
    outcome = agui_outcome([user("u1", "one"), AG_A1, user("u2", "two")], scanned=scanned, **REGENERATE)
    assert outcome == RunRequest("t", None, (), (), "r9", fork=ForkAt("u2", True, "regenerate"))
    # the answer still in the request: its question is the fork point all the same
    assert agui_outcome([user("u1", "one"), AG_A1], **REGENERATE).fork == ForkAt("u1", True, "regenerate")
    assert agui_outcome([], **REGENERATE)[:2] == ("refused", "NO_NEW_INPUT")


@pytest.mark.parametrize("scanned", [True, False])
def test_agui_edit_is_opt_in(scanned):
    """With the flag the first committed user message with other content is an edit (later new messages are
    input after it); without it the committed message wins."""
    messages = [user("u1", "one"), AG_A1, user("u2", "three"), user("u5", "and more")]
    assert agui_outcome(messages, scanned=scanned, **EDIT) == RunRequest(
        "t", None, (Message("u2", "user", (TextPart("three"),)), Message("u5", "user", (TextPart("and more"),))),
        (), "r9", fork=ForkAt("u2", False, "edit"))
    assert agui_outcome(messages, scanned=scanned) == RunRequest("t", None, (Message("u5", "user", (TextPart("and more"),)),),
                                                         (), "r9")
    unchanged = [user("u1", "one"), AG_A1, user("u2", "two"), user("u5", "next")]
    assert agui_outcome(unchanged, **EDIT).fork is None
    assert AGUI.asks(scan_run_input(orjson.dumps(agui_body("t", "r", messages, **EDIT)), JSON)) is None
