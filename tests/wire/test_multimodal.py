"""Multimodal input: text and image parts reach the model (the scripted model's ``/parts`` says what it
got), other media fail closed naming the part, images are bounded, and history returns what was sent.
(The OpenAI-compatible provider's image_url mapping: test_openai_provider.py.)"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from awaken.core import media
from tests.builders import agui_body, aisdk_text, parse_sse, post_agui, types, user
from tests.builders import agui_text as text_of

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()
URL = "https://example.com/cat.png"


def image_data(value: str = PNG, mime: str = "image/png") -> dict[str, Any]:
    return {"type": "image", "source": {"type": "data", "value": value, "mimeType": mime}}


def image_url(url: str = URL) -> dict[str, Any]:
    return {"type": "image", "source": {"type": "url", "value": url}}


async def test_agui_text_and_images_reach_the_model_and_history_returns_them(client):
    content = [{"type": "text", "text": "/parts\nwhat is this?"}, image_data(), image_url()]
    events = await post_agui(client, agui_body("mm-1", "r1", [user("u1", content)]))
    assert types(events)[-1] == "RUN_FINISHED"
    assert text_of(events) == (f'You sent: text "what is this?"; image image/png inline 48 bytes; '
                               f"image image/* {URL}.")
    items = (await client.get("/v1/ag-ui/threads/mm-1/messages")).json()["items"]
    assert items[0] == user("u1", content)


async def test_ai_sdk_image_file_parts_reach_the_model(client):
    data_url = f"data:image/png;base64,{PNG}"
    parts = [{"type": "text", "text": "/parts\nlook"}, {"type": "file", "mediaType": "image/png", "url": data_url}]
    response = await client.post("/v1/ai-sdk/chat", json={"id": "mm-2", "messages": [
        {"id": "u1", "role": "user", "parts": parts}]})
    assert aisdk_text(parse_sse(response.content)) == 'You sent: text "look"; image image/png inline 48 bytes.'
    items = (await client.get("/v1/ai-sdk/threads/mm-2/messages")).json()["items"]
    assert items[0]["parts"] == parts


@pytest.mark.parametrize("kind", ["audio", "video", "document", "binary"])
async def test_other_media_fail_closed_naming_the_part(client, server, kind):
    part = ({"type": "binary", "mimeType": "audio/wav", "data": "AAAA"} if kind == "binary"
            else {"type": kind, "source": {"type": "data", "value": "AAAA", "mimeType": "audio/wav"}})
    events = await post_agui(client, agui_body("mm-3", "r1", [user("u1", [{"type": "text", "text": "hi"}, part])]))
    assert types(events) == ["RUN_ERROR"]
    assert events[0]["code"] == "UNSUPPORTED_CONTENT"
    assert events[0]["message"].startswith(f"messages[0].content[1]: {kind} content is not supported")
    assert await server.ctx.ledger.get_thread("mm-3") is None


async def test_an_inline_image_over_the_bound_is_refused(client, server, monkeypatch):
    monkeypatch.setattr(media, "MAX_IMAGE_BYTES", 16)
    events = await post_agui(client, agui_body("mm-4", "r1", [user("u1", [image_data()])]))
    assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "CONTENT_TOO_LARGE")]
    assert events[0]["message"] == "messages[0].content[0]: the image is larger than 16 bytes"
    assert await server.ctx.ledger.get_thread("mm-4") is None


async def test_too_many_images_or_a_too_long_url_are_refused(client):
    many = await post_agui(client, agui_body("mm-5", "r1", [user("u1", [image_url()] * (media.MAX_IMAGES + 1))]))
    assert many[0]["code"] == "CONTENT_TOO_LARGE" and "more than 16 images" in many[0]["message"]
    long = await post_agui(client, agui_body("mm-5", "r1", [user("u1", [image_url(URL + "x" * media.MAX_URL_CHARS)])]))
    assert long[0]["code"] == "CONTENT_TOO_LARGE" and "longer than 8192" in long[0]["message"]


async def test_inline_data_that_is_not_base64_is_invalid(client):
    events = await post_agui(client, agui_body("mm-6", "r1", [user("u1", [image_data("not base64!")])]))
    assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", "INVALID_REQUEST")]
