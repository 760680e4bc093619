"""A resume payload is exactly the interrupt's ``responseSchema`` (issue 26, finding 8).

``editedArgs`` must be an object when present and ``reason`` a string when present: ``null`` is not
"absent". A payload that breaks this is refused as malformed input (``INVALID_RESUME``, one
``RUN_ERROR``) and changes nothing: the call stays pending, and a correct resume then runs it.
"""

from __future__ import annotations

from typing import Any

import pytest

from awaken.core.errors import InputRejected
from awaken.wires.agui.interrupts import ResumeEntry, decision
from tests.builders import call_ids, ledger_view, post_agui, types
from tests.wire.test_agui_interrupts import (
    GUARDED,
    approve,
    calc,
    interrupted,
    refusal,
    v1,
)

MALFORMED = [
    {"approved": True, "editedArgs": None},
    {"approved": False, "editedArgs": None},
    {"approved": True, "reason": None},
    {"approved": False, "reason": None},
]


@pytest.mark.parametrize("payload", MALFORMED, ids=[str(p) for p in MALFORMED])
async def test_a_null_edited_args_or_reason_is_refused_and_changes_nothing(client, server, payload):
    (cid,) = call_ids(await interrupted(client, "t-null", calc("1 + 1")))
    before = await ledger_view(server.ctx.ledger, "t-null")
    entry = {"interruptId": f"int_{cid}", "status": "resolved", "payload": payload}
    events = await post_agui(client, v1("t-null", "r2", [], resume=[entry]), GUARDED)
    assert refusal(events) == "INVALID_RESUME"
    assert events[0]["message"].startswith(f"resume entry 'int_{cid}': payload.")
    assert await ledger_view(server.ctx.ledger, "t-null") == before
    # the call is still waiting: a well-formed resume runs it
    events = await post_agui(client, v1("t-null", "r2", [], resume=[approve(f"int_{cid}")]), GUARDED)
    assert types(events)[-1] == "RUN_FINISHED" and "TOOL_CALL_RESULT" in types(events)


@pytest.mark.parametrize(("payload", "what"), [
    ({"approved": True, "editedArgs": None}, "payload.editedArgs must be an object"),
    ({"approved": True, "reason": None}, "payload.reason must be a string"),
])
def test_decision_reads_null_as_present(payload: dict[str, Any], what: str) -> None:
    with pytest.raises(InputRejected) as info:
        decision(ResumeEntry("int_c1", "resolved", payload), "c1")
    assert info.value.code == "INVALID_RESUME" and info.value.message == f"resume entry 'int_c1': {what}"
