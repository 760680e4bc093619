"""A first live round trip: the default agent answers over AG-UI and history pages it back."""

from tests.builders import agui_body, post_agui, types


async def test_default_agent_answers_and_history_pages_back(client):
    """CONTRACT §2.1/§3: the scripted default answers by quoting the input; history returns it."""
    events = await post_agui(client, agui_body("t1", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))
    assert types(events)[0] == "RUN_STARTED" and types(events)[-1] == "RUN_FINISHED"
    text = "".join(e["delta"] for e in events if e["type"] == "TEXT_MESSAGE_CONTENT")
    assert text == 'You said: "hi".'
    page = (await client.get("/v1/ag-ui/threads/t1/messages")).json()
    assert [m["role"] for m in page["items"]] == ["user", "assistant"]
    assert page["items"][1]["content"] == text
