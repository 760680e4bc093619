"""The denial grammar (issue 14, CONTRACT §9 "Gates"): a tool message at a permission gate denies when it
carries ``error`` or its content is an explicit refusal; every other content allows."""

from __future__ import annotations

import pytest

from awaken.wires.denial import GateAnswer, read_gate_answer


@pytest.mark.parametrize("content", [
    '{"approved": false}', '{"approved":false,"note":"x"}', "false", " false ",
    "deny", "denied", "Reject", "REJECTED", "no", "No.", "cancel", "cancelled", "canceled", "  denied! ",
    '"denied"', '"No"', "'no'",
])
def test_explicit_refusals_deny(content):
    assert read_gate_answer(content) == GateAnswer(True, "")


def test_an_objects_reason_is_the_denials_reason():
    assert read_gate_answer('{"approved": false, "reason": " too risky "}') == GateAnswer(True, "too risky")
    assert read_gate_answer('{"approved": false, "reason": 3}') == GateAnswer(True, "")


def test_error_denies_with_the_error_text_as_reason():
    assert read_gate_answer("ignored", "not now") == GateAnswer(True, "not now")
    assert read_gate_answer("the content", "") == GateAnswer(True, "the content")
    assert read_gate_answer('{"approved": true}', "x") == GateAnswer(True, "x")


@pytest.mark.parametrize("content", [
    "", "yes", "ok", "approve", '{"approved": true}', "true", "{}", '{"approved": "false"}', "[false]", "0",
    "null", "no thanks", "I deny nothing", '{"result": "denied"}', "nope",
])
def test_every_other_content_allows(content):
    assert read_gate_answer(content) == GateAnswer(False, "")
