"""A client that replays the whole history (HttpAgent does, every turn) over a long thread (issue 18).

Dedup of a replayed history does not decode the message bodies the server already holds: a replayed
message the thread holds is read for its id, role and tool call id only (its content is the client's
copy, not the server's truth, and is neither decoded nor refused); new messages are validated in full.
"""

from __future__ import annotations

from typing import Any

import pytest

from awaken.wires.agui import request as agui_request
from tests.builders import agui_body, agui_text, post_agui, types, user


def assistant(events: list[dict[str, Any]]) -> dict[str, Any]:
    mid = next(e["messageId"] for e in events if e["type"] == "TEXT_MESSAGE_START")
    return {"id": mid, "role": "assistant", "content": agui_text(events)}


async def messages_of(client, thread_id: str) -> list[dict[str, Any]]:
    return (await client.get(f"/v1/ag-ui/threads/{thread_id}/messages")).json()["items"]


async def test_a_replayed_message_the_thread_holds_is_not_refused_for_its_content(server):
    """The client's copy of a committed message may not be what the server would accept as input
    (here an audio part): the replay is admitted, the server keeps its own copy; the same content in a
    new message is refused ``UNSUPPORTED_CONTENT`` and commits nothing."""
    async with server.client() as client:
        first = await post_agui(client, agui_body("t-r", "r1", [user("u1", "/words 2")]))
        assert types(first)[-1] == "RUN_FINISHED"
        mangled = user("u1", [{"type": "audio", "source": {"type": "url", "value": "https://x.test/a.mp3"}}])
        replay = await post_agui(client, agui_body("t-r", "r2", [mangled, assistant(first), user("u2", "/words 2")]))
        assert types(replay)[-1] == "RUN_FINISHED"
        held = await messages_of(client, "t-r")
        assert [m["id"] for m in held if m["role"] == "user"] == ["u1", "u2"]
        assert held[0]["content"] == "/words 2"  # the server's copy, not the replayed one
        refused = await post_agui(client, agui_body("t-r", "r3", [mangled, user("u3", mangled["content"])]))
        assert [(e["type"], e.get("code")) for e in refused] == [("RUN_ERROR", "UNSUPPORTED_CONTENT")]
        assert "messages[1].content[0]" in refused[0]["message"]
        assert len(await messages_of(client, "t-r")) == len(held)


async def test_dedup_of_a_replayed_history_decodes_only_the_new_messages(server, monkeypatch: pytest.MonkeyPatch):
    """A replay of a 40-message thread plus one new message decodes one message."""
    decoded: list[str] = []
    real = agui_request.decode_message

    def counting(raw, i, message_id, role, tool_call_id):
        decoded.append(message_id)
        return real(raw, i, message_id, role, tool_call_id)

    async with server.client() as client:
        held: list[dict[str, Any]] = []
        for n in range(20):
            held.append(user(f"u{n}", "/words 1"))
            events = await post_agui(client, agui_body("t-long", f"r{n}", [held[-1]]))
            held.append(assistant(events))
        monkeypatch.setattr(agui_request, "decode_message", counting)
        events = await post_agui(client, agui_body("t-long", "r-last", [*held, user("u-new", "/words 2")]))
    assert types(events)[-1] == "RUN_FINISHED" and len(agui_text(events).split()) == 2
    assert decoded == ["u-new"]
