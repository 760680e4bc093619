"""Image parts get the same checks on both wires (issue 26, finding 6).

An image reaches the model only as inline data with an ``image/*`` media type (a valid type/subtype
token) or as an ``http(s)`` or ``data:image/*`` URL. Anything else is refused before execution with one
coded error and nothing committed: on AG-UI a single ``RUN_ERROR``, on the AI SDK an ``error`` part.
``awaken.core.media.check_image`` is the one check both parsers call.
"""

from __future__ import annotations

import base64
from typing import Any

import pytest

from awaken.core import media
from awaken.core.errors import InputRejected
from awaken.core.messages import ImagePart
from tests.builders import agui_body, aisdk_kinds, aisdk_text, parse_sse, post_agui

PNG = base64.b64encode(b"\x89PNG\r\n\x1a\n" + bytes(range(40))).decode()

#: (AG-UI image part, code): the finding's inputs, in both AG-UI shapes
AGUI_REFUSED = [
    ({"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "text/html"}}, "UNSUPPORTED_CONTENT"),
    ({"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "../../etc/passwd"}}, "INVALID_REQUEST"),
    ({"type": "image", "source": {"type": "url", "value": "javascript:alert(1)"}}, "UNSUPPORTED_CONTENT"),
    ({"type": "image", "source": {"type": "url", "value": "file:///etc/passwd"}}, "UNSUPPORTED_CONTENT"),
    ({"type": "image", "source": {"type": "url", "value": "data:text/html;base64,PGI+"}}, "UNSUPPORTED_CONTENT"),
    ({"type": "image", "source": {"type": "url", "value": "https://x.test/a.png", "mimeType": "text/html"}},
     "UNSUPPORTED_CONTENT"),
    ({"type": "image", "url": "javascript:alert(1)"}, "UNSUPPORTED_CONTENT"),
    ({"type": "image", "url": "https://x.test/a.png", "mimeType": "../../etc/passwd"}, "INVALID_REQUEST"),
]

#: (AI SDK file part, code)
AISDK_REFUSED = [
    ({"type": "file", "mediaType": "../../etc/passwd", "url": f"data:image/png;base64,{PNG}"}, "INVALID_REQUEST"),
    ({"type": "file", "mediaType": "image/png", "url": "javascript:alert(1)"}, "UNSUPPORTED_CONTENT"),
    ({"type": "file", "mediaType": "image/png", "url": "file:///etc/passwd"}, "UNSUPPORTED_CONTENT"),
    ({"type": "file", "mediaType": "image/png", "url": "data:text/html;base64,PGI+"}, "UNSUPPORTED_CONTENT"),
    ({"type": "file", "mediaType": "image/../../etc/passwd", "url": "https://x.test/a.png"}, "INVALID_REQUEST"),
]


def _ids(cases: list[tuple[dict[str, Any], str]]) -> list[str]:
    out = []
    for part, _ in cases:
        source = part.get("source", part)
        out.append(f"{source.get('mimeType') or part.get('mediaType') or ''}|{source.get('value') or part.get('url')}"[:40])
    return out


@pytest.mark.parametrize(("part", "code"), AGUI_REFUSED, ids=_ids(AGUI_REFUSED))
async def test_agui_refuses_an_image_that_is_not_an_image(client, server, part, code):
    message = {"id": "u1", "role": "user", "content": [{"type": "text", "text": "/parts\nlook"}, part]}
    events = await post_agui(client, agui_body("img-agui", "r1", [message]))
    assert [(e["type"], e["code"]) for e in events] == [("RUN_ERROR", code)]
    assert events[0]["message"].startswith("messages[0].content[1]: ")
    assert await server.ctx.ledger.get_thread("img-agui") is None


@pytest.mark.parametrize(("part", "code"), AISDK_REFUSED, ids=_ids(AISDK_REFUSED))
async def test_aisdk_refuses_an_image_that_is_not_an_image(client, server, part, code):
    parts = [{"type": "text", "text": "/parts\nlook"}, part]
    response = await client.post("/v1/ai-sdk/chat", json={"id": "img-sdk", "messages": [
        {"id": "u1", "role": "user", "parts": parts}]})
    chunks = parse_sse(response.content)
    assert response.status_code == 200
    assert aisdk_kinds(chunks) == ["error", "finish", "[DONE]"]
    assert chunks[0]["errorText"].startswith(f"{code}: messages[0].parts[1]: ")
    assert chunks[1] == {"type": "finish", "finishReason": "error"}
    assert await server.ctx.ledger.get_thread("img-sdk") is None


async def test_real_images_still_pass_on_both_wires(client):
    content = [{"type": "text", "text": "/parts\nlook"},
               {"type": "image", "source": {"type": "data", "value": PNG, "mimeType": "IMAGE/PNG"}},
               {"type": "image", "source": {"type": "url", "value": f"data:image/webp;base64,{PNG}"}},
               {"type": "image", "source": {"type": "url", "value": "HTTPS://x.test/a.png", "mimeType": "image/png"}}]
    events = await post_agui(client, agui_body("img-ok", "r1", [{"id": "u1", "role": "user", "content": content}]))
    assert events[-1]["type"] == "RUN_FINISHED"
    parts = [{"type": "text", "text": "/parts\nlook"},
             {"type": "file", "mediaType": "image/svg+xml", "url": f"data:image/svg+xml;base64,{PNG}"},
             {"type": "file", "mediaType": "image/png", "url": f"data:image/png;name=a.png;base64,{PNG}"}]
    response = await client.post("/v1/ai-sdk/chat", json={"id": "img-ok2", "messages": [
        {"id": "u1", "role": "user", "parts": parts}]})
    assert aisdk_text(parse_sse(response.content)) == (
        'You sent: text "look"; image image/svg+xml inline 48 bytes; image image/png inline 48 bytes.')


@pytest.mark.parametrize(("url", "mime", "code"), [
    ("javascript:alert(1)", None, "UNSUPPORTED_CONTENT"),
    ("file:///etc/passwd", None, "UNSUPPORTED_CONTENT"),
    ("data:text/html;base64,PGI+", None, "UNSUPPORTED_CONTENT"),
    ("data:;base64,PGI+", None, "INVALID_REQUEST"),
    ("data:image/png;x<y;base64,PGI+", None, "INVALID_REQUEST"),
    ("https://", None, "INVALID_REQUEST"),
    ("https://x.test/a b.png", None, "INVALID_REQUEST"),
    ("https://x.test/a.png", "text/html", "UNSUPPORTED_CONTENT"),
    ("https://x.test/a.png", "image/", "INVALID_REQUEST"),
    ("https://x.test/a.png", "image/png\n", "INVALID_REQUEST"),
])
def test_the_shared_check(url: str, mime: str | None, code: str) -> None:
    with pytest.raises(InputRejected) as info:
        media.check_image(ImagePart(url, mime), "here")
    assert info.value.code == code and info.value.message.startswith("here: ")
