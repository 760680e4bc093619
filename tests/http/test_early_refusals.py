"""A request refused before its body arrived leaves its connection usable (issue 26 item 7, finding 12).

httpx and other clients send a request's head and its body apart. A route that answers from the head
alone (404, 405, 401, 403 for a Host or an origin, 413 for a declared length, 415 for a media type)
answered, and then the connection sometimes never answered again: hypercorn closes a connection whose
request body has not arrived when its answer ends, and under quart-trio that close was cancelled
half-way, leaving a connection neither closed nor read. Now such an answer says ``Connection: close``
and the connection is closed after it; an answer given once the body was read keeps it alive.

Each case here sends the head alone over a raw socket, reads the whole answer (it cannot depend on the
body, which has not been sent), then sends the body: the connection must end cleanly (EOF), and a
second request on a fresh connection is answered. A body sent with its head keeps the connection
usable for a second request (or the answer says ``Connection: close`` and the server closes it).
"""

from __future__ import annotations

import orjson
import pytest
import trio

from awaken.streams.exchange import MAX_BODY
from tests.builders import LiveServer, agui_body, live_server, make_config

KEY = "early-key-0123456789abcdef"
BODY = orjson.dumps(agui_body("early", "r1", [{"id": "u1", "role": "user", "content": "hi"}]))

#: (name, method, path, extra head lines, declared length or None for len(BODY), status, code in the body)
CASES = [
    ("404 quart", "POST", "/v1/nowhere", [], None, 404, b'"NOT_FOUND"'),
    ("404 runtime", "POST", "/v1/copilotkit/nowhere", [], None, 404, b'"not_found"'),
    ("405 quart", "POST", "/v1/agents", [], None, 405, b'"METHOD_NOT_ALLOWED"'),
    ("405 run route", "PUT", "/v1/ag-ui", [], None, 405, b'"METHOD_NOT_ALLOWED"'),
    ("403 host", "POST", "/v1/ag-ui", ["host: rebind.evil.example"], None, 403, b'"HOST_NOT_ALLOWED"'),
    ("403 origin", "POST", "/v1/ag-ui", ["origin: http://evil.example"], None, 403, b'"ORIGIN_NOT_ALLOWED"'),
    ("413", "POST", "/v1/copilotkit/agent/assistant/run", [], MAX_BODY + 1, 413, b'"invalid_request"'),
    ("415", "POST", "/v1/copilotkit/agent/assistant/run", ["content-type: text/plain"], None, 415,
     b'"unsupported_media_type"'),
]


def port_of(server: LiveServer) -> int:
    return int(server.base_url.rpartition(":")[2])


def head(server: LiveServer, method: str, path: str, extra: list[str], length: int) -> bytes:
    lines = [f"{method} {path} HTTP/1.1"]
    if not any(line.startswith("host:") for line in extra):
        lines.append(f"host: 127.0.0.1:{port_of(server)}")
    if not any(line.startswith("content-type:") for line in extra):
        lines.append("content-type: application/json")
    lines += [*extra, f"content-length: {length}", "", ""]
    return "\r\n".join(lines).encode()


async def read_answer(stream: trio.SocketStream) -> tuple[int, dict[bytes, bytes], bytes]:
    """One whole HTTP/1.1 answer: status, headers (lower-case names), body (content-length or chunked)."""
    data = b""
    with trio.fail_after(10):
        while b"\r\n\r\n" not in data:
            chunk = await stream.receive_some(65536)
            assert chunk, f"the connection ended before an answer: {data!r}"
            data += chunk
        raw_head, _, rest = data.partition(b"\r\n\r\n")
        status_line, *header_lines = raw_head.split(b"\r\n")
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(b":") for line in header_lines)}
        if b"content-length" in headers:
            while len(rest) < int(headers[b"content-length"]):
                chunk = await stream.receive_some(65536)
                assert chunk
                rest += chunk
            body = rest
        else:
            assert headers.get(b"transfer-encoding") == b"chunked"
            while not rest.endswith(b"0\r\n\r\n"):
                chunk = await stream.receive_some(65536)
                assert chunk
                rest += chunk
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                size = int(size_line, 16)
                if size == 0:
                    break
                body, rest = body + rest[:size], rest[size + 2:]
    return int(status_line.split()[1]), headers, body


async def ends_cleanly(stream: trio.SocketStream) -> None:
    """The server closes the connection: EOF (a reset, once the client wrote after the close, counts too)."""
    with trio.fail_after(10):
        try:
            while chunk := await stream.receive_some(65536):
                raise AssertionError(f"bytes after a Connection: close answer: {chunk!r}")
        except trio.BrokenResourceError:
            pass


async def healthy(server: LiveServer) -> None:
    async with server.client() as client:
        assert (await client.get("/healthz")).status_code == 200


@pytest.fixture
async def tokens_server(tmp_path, monkeypatch):
    monkeypatch.setenv("AWAKEN_TEST_EARLY_KEY", KEY)
    config = make_config(tmp_path, auth={"mode": "tokens", "tokens": [
        {"name": "web", "env": "AWAKEN_TEST_EARLY_KEY", "role": "user", "subject": "alice"}]})
    async with live_server(config) as srv:
        yield srv


async def refused_before_its_body(server: LiveServer, method: str, path: str, extra: list[str],
                                  length: int | None, status: int, code: bytes) -> None:
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(server))
    await stream.send_all(head(server, method, path, extra, len(BODY) if length is None else length))
    got, headers, body = await read_answer(stream)  # answered from the head alone
    assert got == status
    assert code in body, body
    assert headers[b"connection"] == b"close"
    try:
        await stream.send_all(BODY)  # the body, after the answer
    except trio.BrokenResourceError:
        pass
    await ends_cleanly(stream)
    await stream.aclose()
    await healthy(server)


@pytest.mark.parametrize(("name", "method", "path", "extra", "length", "status", "code"), CASES,
                         ids=[case[0] for case in CASES])
async def test_an_answer_before_the_body_closes_the_connection_cleanly(server, name, method, path, extra, length,
                                                                       status, code):
    await refused_before_its_body(server, method, path, extra, length, status, code)


async def test_a_401_before_the_body_closes_the_connection_cleanly(tokens_server):
    await refused_before_its_body(tokens_server, "POST", "/v1/ag-ui", [], None, 401, b'"UNAUTHENTICATED"')


@pytest.mark.parametrize(("name", "method", "path", "extra", "length", "status", "code"),
                         [case for case in CASES if case[4] is None], ids=[c[0] for c in CASES if c[4] is None])
async def test_a_refusal_with_its_body_sent_leaves_the_connection_usable(server, name, method, path, extra,
                                                                         length, status, code):
    """Head and body sent together (apart as two writes): the next request on the connection is answered,
    or the answer said ``Connection: close`` and the server closed the connection."""
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(server))
    await stream.send_all(head(server, method, path, extra, len(BODY)))
    await stream.send_all(BODY)
    got, headers, body = await read_answer(stream)
    assert (got, code in body) == (status, True)
    if headers.get(b"connection") == b"close":
        await ends_cleanly(stream)
    else:
        await stream.send_all(f"GET /v1/agents HTTP/1.1\r\nhost: 127.0.0.1:{port_of(server)}\r\n\r\n".encode())
        assert (await read_answer(stream))[0] == 200
    await stream.aclose()


async def test_a_body_read_before_the_answer_keeps_the_connection_alive(server):
    """A run request whose body was read: its connection serves the next request (no needless close)."""
    stream = await trio.open_tcp_stream("127.0.0.1", port_of(server))
    await stream.send_all(head(server, "POST", "/v1/copilotkit", [], len(b'{"method": "info"}')))
    await stream.send_all(b'{"method": "info"}')
    got, headers, _ = await read_answer(stream)
    assert (got, b"connection" in headers) == (200, False)
    await stream.send_all(f"GET /v1/agents HTTP/1.1\r\nhost: 127.0.0.1:{port_of(server)}\r\n\r\n".encode())
    assert (await read_answer(stream))[0] == 200
    await stream.aclose()
