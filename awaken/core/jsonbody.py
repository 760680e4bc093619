"""What every protocol's request parser checks first: the content type and a JSON-object body,
and the bounds every JSON value the server keeps must stay within.

Sans-IO: bytes and a header value in, a dict out, or an ``InputRejected`` with its catalogue code
(``UNSUPPORTED_MEDIA_TYPE``, ``INVALID_JSON``, ``INVALID_REQUEST``, ``NESTING_TOO_DEEP``,
``TOO_MANY_MESSAGES``, ``BODY_TOO_LARGE``).

Bounds: no JSON value the server accepts or commits nests deeper than ``MAX_DEPTH`` (every
serialiser on the way out, orjson's 255 levels included, can then write it back), and a request
carries at most ``MAX_MESSAGES`` messages (a request's work is bounded before it starts).

A body is not decoded at all when it holds more than ``MAX_CONTAINERS`` ``{`` and ``[`` bytes: one
decode call builds every array and object of a body while holding the interpreter, so a body of
hundreds of thousands of tiny values would pause every other task (the event loop's included) for
the whole decode, in whatever thread it runs. The bytes are counted a window at a time (other threads
run between windows); brackets inside strings count too (the bound is found without decoding), which
only a body of far more code-like text than any conversation carries reaches.
"""

from __future__ import annotations

from typing import Any

import orjson

from awaken.core.errors import InputRejected

#: the deepest nesting of arrays and objects accepted in a request body, a tool result or the state
MAX_DEPTH = 64
#: the most messages one request may carry (history replay included)
MAX_MESSAGES = 10_000
#: the most ``{`` and ``[`` bytes a body may hold: an upper bound on the arrays and objects its decode
#: builds (``MAX_MESSAGES`` messages need a few each)
MAX_CONTAINERS = 100_000
#: bytes counted per call when bounding a body's containers (a call holds the interpreter throughout)
COUNT_WINDOW = 1 << 20
#: the largest body whose brackets are counted to skip its nesting walk (``load_json_object``)
SHALLOW_BYTES = 16 * 1024


def reject(message: str, code: str = "INVALID_REQUEST") -> InputRejected:
    return InputRejected(message, code=code)


def is_json_media_type(content_type: str | None) -> bool:
    """Whether a ``Content-Type`` value's media type is ``application/json`` itself (parameters such as
    ``; charset=utf-8`` allowed). The media type is what precedes the first ``;``, without surrounding
    whitespace, case-insensitive: the essence a browser's MIME parser finds (WHATWG MIME Sniffing), so
    whatever passes here is never one of the "simple" types a page may send without a preflight
    (``text/plain; x=application/json`` is ``text/plain``)."""
    return (content_type or "").split(";", 1)[0].strip(" \t\r\n").lower() == "application/json"


def check_content_type(content_type: str | None) -> None:
    if not is_json_media_type(content_type):
        raise reject(f"Content-Type must be application/json, not {content_type or 'absent'!r}",
                     "UNSUPPORTED_MEDIA_TYPE")


def count_containers(body: bytes, stop: int = MAX_CONTAINERS) -> int:
    """The ``{`` and ``[`` bytes of ``body``, counted ``COUNT_WINDOW`` bytes at a time; the count
    returned may stop early once it is past ``stop``."""
    count = 0
    for start in range(0, len(body), COUNT_WINDOW):
        end = start + COUNT_WINDOW
        count += body.count(b"{", start, end) + body.count(b"[", start, end)
        if count > stop:
            break
    return count


def load_json_object(body: bytes, *, messages_deep: bool = True) -> dict[str, Any]:
    """The body as a JSON object, its nesting bounded and its message count checked.

    ``messages_deep=False`` leaves the nesting *inside* each element of ``messages`` unchecked (the
    array itself and every other key are checked): a parser that decodes messages on demand checks
    each one it decodes (``message_too_deep``), and never walks the bodies of a replayed history it
    does not read.
    """
    if len(body) > 2 * MAX_CONTAINERS:  # a shorter body cannot hold more (each array or object is 2 bytes or more)
        if count_containers(body) > MAX_CONTAINERS:
            raise _too_many_containers()
    # nesting deeper than MAX_DEPTH takes more than MAX_DEPTH containers: a small body holding fewer
    # brackets (a turn's new message) is not walked (a large one surely holds more: it is not counted)
    shallow = len(body) <= 2 * MAX_DEPTH or (len(body) <= SHALLOW_BYTES
                                             and body.count(b"{") + body.count(b"[") <= MAX_DEPTH)
    try:
        data = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise reject(f"the body is not valid JSON: {exc}", "INVALID_JSON") from None
    if not isinstance(data, dict):
        raise reject("the body must be a JSON object")
    messages = data.get("messages")
    if shallow:
        deep = False
    elif messages_deep or not isinstance(messages, list):
        deep = too_deep(data, MAX_DEPTH)
    else:  # the object is level 1, ``messages`` level 2: its elements are not walked here
        deep = any(too_deep(v, MAX_DEPTH - 1) for k, v in data.items() if k != "messages")
    if deep:
        raise _too_deep()
    if isinstance(messages, list) and len(messages) > MAX_MESSAGES:
        raise _too_many_messages(len(messages))
    return data


def check_split(body: bytes, data: dict[str, Any], messages: int, containers: int) -> None:
    """``load_json_object``'s checks (``messages_deep=False``) for a body parsed around a known prefix of
    its ``messages`` (``replaymemo``): ``data`` holds every key but the prefix, ``messages`` and
    ``containers`` count the whole body's. Refuses what ``load_json_object`` refuses, in its order."""
    if len(body) > 2 * MAX_CONTAINERS and containers > MAX_CONTAINERS:
        raise _too_many_containers()
    if any(too_deep(v, MAX_DEPTH - 1) for k, v in data.items() if k != "messages"):
        raise _too_deep()
    if messages > MAX_MESSAGES:
        raise _too_many_messages(messages)


def _too_many_containers() -> InputRejected:
    return reject(f"the body holds more than {MAX_CONTAINERS:,} arrays and objects ('{{' and '[' "
                  "characters, those in strings included); it is not decoded", "BODY_TOO_LARGE")


def _too_deep() -> InputRejected:
    return reject(f"the body nests arrays and objects deeper than {MAX_DEPTH} levels", "NESTING_TOO_DEEP")


def _too_many_messages(count: int) -> InputRejected:
    return reject(f"the body carries {count} messages; at most {MAX_MESSAGES} are accepted", "TOO_MANY_MESSAGES")


def message_too_deep(message: Any) -> None:
    """Refuse one element of a body's ``messages`` (level 3 of the body) that nests too deep."""
    if too_deep(message, MAX_DEPTH - 2):
        raise _too_deep()


def too_deep(value: Any, limit: int = MAX_DEPTH) -> bool:
    """Whether ``value`` nests arrays/objects more than ``limit`` levels (iterative: no recursion)."""
    stack: list[tuple[Any, int]] = [(value, 1)] if isinstance(value, (dict, list)) else []
    while stack:
        node, depth = stack.pop()
        if depth > limit:
            return True
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, (dict, list)))
    return False


def loads_bounded(text: str | bytes) -> Any:
    """``orjson.loads`` for text the server committed and now sends (tool results and arguments):
    raises ``ValueError`` (orjson's ``JSONDecodeError`` included) for bad JSON or nesting deeper
    than ``MAX_DEPTH``, so the caller falls back to sending the text itself."""
    value = orjson.loads(text)
    if isinstance(value, (dict, list)) and too_deep(value):
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels")
    return value
