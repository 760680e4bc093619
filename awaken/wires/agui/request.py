"""Parse an AG-UI ``RunAgentInput`` POST body (sans-IO): bytes in, ``AguiInput`` or ``InputRejected``.

What is accepted follows CONTRACT §3 and ``reference/agui.md`` §3/§9: ``forwardedProps`` may be
absent, null or empty (what ``HttpAgent`` sends by default) or carry only the documented branching flags
(``{"awaken": {"regenerate": true}}``, ``{"awaken": {"edit": true}}``: ``Branching``, CONTRACT §10); any
other key of it, or any ``parentRunId``, is ``UNSUPPORTED_FIELD``. ``tools``, ``context`` and ``state`` are the page's per-run declarations,
parsed by ``frontend.py``. ``resume`` is a list of ``{interruptId, status: "resolved"|"cancelled",
payload?, metadata?}`` entries (``interrupts.py`` maps them to decisions). Unknown keys are ignored.
User content may be a string or parts: ``text`` and ``image`` (URL or inline base64) are input;
``audio``, ``video``, ``document`` and legacy ``binary`` parts are ``UNSUPPORTED_CONTENT``.
Assistant, reasoning and activity messages are never input: they are the client's copy of history.

Two entry points. ``scan_run_input`` (what the server uses) validates the envelope and each
message's shape (an object, a non-empty string ``id``, a known ``role``, a tool message's
``toolCallId``; ids unique) and decodes no content: ``AguiInput.fresh`` decodes, at admission, only
the messages the thread does not hold, so a replayed history costs its JSON parse and one pass over
ids and roles, and a replayed message's content (the client's copy, not the server's truth) is never
refused. ``parse_run_input`` decodes every message, with the refusals the per-message parser always
gave (the first bad message in request order).
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Sequence
from itertools import compress
from operator import itemgetter, not_
from typing import Any, Literal

import attrs

from awaken.core.errors import InputRejected
from awaken.core.ids import IdSet, interned, uncommitted
from awaken.core.jsonbody import check_content_type, check_split, load_json_object, message_too_deep, reject
from awaken.core.media import check_count, check_image
from awaken.core.messages import ImagePart, Part, TextPart
from awaken.models import ContextEntry, ToolSpec
from awaken.wires.agui.frontend import parse_context, parse_state, parse_tools
from awaken.wires.agui.interrupts import ResumeEntry
from awaken.wires.memo import Joined, PrefixedList, ReplayMemo

_MEDIA_PARTS = frozenset({"audio", "video", "document", "binary"})
_HISTORY_ROLES = ("assistant", "reasoning", "activity")  # a tuple: a role of any JSON type is compared, never hashed


@attrs.frozen
class InputMessage:
    """A user/system/developer message carrying input parts."""

    id: str
    role: Literal["user", "system", "developer"]
    parts: tuple[Part, ...]


@attrs.frozen
class ToolMessage:
    """A ``role: "tool"`` message: a client tool's result, or a decision at a permission gate."""

    id: str
    tool_call_id: str
    content: str
    error: str | None = None


def version_at_least(version: str | None, floor: tuple[int, int]) -> bool:
    if not version:
        return False
    try:
        major, minor, *_ = (int(x) for x in version.split("."))
    except ValueError:
        return False
    return (major, minor) >= floor


def _string(data: dict[str, Any], key: str, where: str, *, required: bool = True) -> str | None:
    value = data.get(key)
    if value is None and not required:
        return None
    if not isinstance(value, str) or (required and not value):
        raise reject(f"{where}{key} must be a non-empty string")
    return value


def parse_image(part: dict[str, Any], where: str) -> ImagePart:
    source = part.get("source")
    if isinstance(source, dict):
        kind, value, mime = source.get("type"), source.get("value"), source.get("mimeType")
        if not isinstance(value, str) or not value:
            raise reject(f"{where}.source.value must be a non-empty string")
        if mime is not None and not isinstance(mime, str):
            raise reject(f"{where}.source.mimeType must be a string")
        if kind == "url":
            return ImagePart(value, mime)
        if kind == "data":
            if not mime:
                raise reject(f"{where}.source.mimeType is required for inline data")
            return ImagePart(f"data:{mime};base64,{value}", mime)
        raise reject(f"{where}.source.type must be 'url' or 'data'", "UNSUPPORTED_CONTENT")
    url = part.get("url")
    if isinstance(url, str) and url:
        return ImagePart(url, part.get("mimeType") if isinstance(part.get("mimeType"), str) else None)
    raise reject(f"{where}.source must be an object")


def _parts(content: Any, where: str) -> tuple[Part, ...]:
    if isinstance(content, str):
        return (TextPart(content),) if content else ()
    if not isinstance(content, list):
        raise reject(f"{where}.content must be a string or an array of parts")
    parts: list[Part] = []
    for i, part in enumerate(content):
        pw = f"{where}.content[{i}]"
        if not isinstance(part, dict):
            raise reject(f"{pw} must be an object")
        kind = part.get("type")
        if kind == "text":
            text = part.get("text")
            if not isinstance(text, str):
                raise reject(f"{pw}.text must be a string")
            if text:
                parts.append(TextPart(text))
        elif kind == "image":
            parts.append(check_image(parse_image(part, pw), pw))
        elif kind in _MEDIA_PARTS:
            raise reject(f"{pw}: {kind} content is not supported; send text or images", "UNSUPPORTED_CONTENT")
        else:
            raise reject(f"{pw}.type {kind!r} is not a known content part")
    check_count(parts, f"{where}.content")
    return tuple(parts)


def _tool_content(content: Any, where: str) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for i, part in enumerate(content):
            if not isinstance(part, dict) or part.get("type") != "text" or not isinstance(part.get("text"), str):
                raise reject(f"{where}.content[{i}] must be a text part", "UNSUPPORTED_CONTENT")
            texts.append(part["text"])
        return "".join(texts)
    raise reject(f"{where}.content must be a string")


@attrs.frozen
class Branching:
    """The documented ``forwardedProps`` keys: ``{"awaken": {"regenerate": true}}`` (the messages end with
    the history up to a committed user message: its answer is made again, on a new branch) and
    ``{"awaken": {"edit": true}}`` (opt-in: an earlier user message the thread holds with other content
    is an edit, continued from on a new branch; without it the committed message wins, as always)."""

    regenerate: bool = False
    edit: bool = False


NO_BRANCHING = Branching()
#: the keys of ``forwardedProps.awaken`` this server reads
BRANCHING_KEYS = ("regenerate", "edit")


def parse_forwarded(value: Any) -> Branching:
    """``forwardedProps``: absent, null or ``{}`` (what ``HttpAgent`` sends), or only the documented
    ``awaken`` key (``Branching``). Any other key is ``UNSUPPORTED_FIELD``; a documented one of the wrong
    type ``INVALID_REQUEST``."""
    if value is None:
        return NO_BRANCHING
    if not isinstance(value, dict):
        raise reject("forwardedProps must be an object")
    if not value:
        return NO_BRANCHING
    if set(value) != {"awaken"}:
        raise reject("forwardedProps: only the documented key awaken ({\"regenerate\": true} or {\"edit\": "
                     "true}) is supported by this server", "UNSUPPORTED_FIELD")
    flags = value["awaken"]
    if not isinstance(flags, dict):
        raise reject("forwardedProps.awaken must be an object")
    if unknown := sorted(set(flags) - set(BRANCHING_KEYS)):
        raise reject(f"forwardedProps.awaken.{unknown[0]} is not supported by this server (documented: "
                     "regenerate, edit)", "UNSUPPORTED_FIELD")
    for key in BRANCHING_KEYS:
        if key in flags and type(flags[key]) is not bool:
            raise reject(f"forwardedProps.awaken.{key} must be a boolean")
    return Branching(flags.get("regenerate", False), flags.get("edit", False))


@attrs.frozen(eq=False)
class Scan:
    """The messages of a scanned body (``scan_run_input``): every message's shape is checked, the
    content of none is read yet. ``raw`` is the body's ``messages`` array; ``positions`` are the
    indexes of its input and tool messages (history roles are only ids), ``ids`` their ids and
    ``calls`` their ``toolCallId`` (None for input messages)."""

    raw: Sequence[Any]
    positions: tuple[int, ...]
    ids: tuple[str, ...]
    calls: tuple[str | None, ...]
    #: ``ids`` as a set (given when known: a split parse builds it on its prefix's), and the ids of the
    #: tool messages (built with the scan, off the event loop; a split parse joins its prefix's)
    id_set: frozenset[str] = attrs.field(default=None, kw_only=True)
    tool_ids: frozenset[str] = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.id_set is None:
            object.__setattr__(self, "id_set", frozenset(self.ids))
        if self.tool_ids is None:
            object.__setattr__(self, "tool_ids", frozenset(
                [mid for mid, call in zip(self.ids, self.calls, strict=True) if call is not None]
                if any(self.calls) else ()))

    def decode(self, k: int) -> InputMessage | ToolMessage:
        """The ``k``-th input/tool message, validated in full (``InputRejected`` as the plain parser)."""
        i = self.positions[k]
        raw = self.raw[i]
        message_too_deep(raw)
        return decode_message(raw, i, self.ids[k], raw["role"], self.calls[k])


@attrs.frozen
class AguiInput:
    thread_id: str
    run_id: str
    protocol_version: str | None
    #: input and tool messages in request order, decoded; history-only roles are dropped here.
    #: Empty when ``scan`` holds them undecoded (``scan_run_input``)
    messages: tuple[InputMessage | ToolMessage, ...]
    #: every message id in the request (history included), for dedup against the ledger
    message_ids: tuple[str, ...]
    #: a non-empty ``state`` the client sent: the thread's state from the start of this run
    state: dict[str, Any] | None = None
    #: tools the client executes, declared for this run
    tools: tuple[ToolSpec, ...] = ()
    #: context entries for the model, for this run
    context: tuple[ContextEntry, ...] = ()
    #: ``resume[]`` entries answering interrupts, in request order
    resume: tuple[ResumeEntry, ...] = ()
    #: the input and tool messages scanned but not decoded (``scan_run_input``), else None
    scan: Scan | None = None
    #: the documented ``forwardedProps`` flags (regenerate, edit)
    branching: Branching = attrs.field(default=NO_BRANCHING, kw_only=True)

    def inputs_in_order(self) -> list[tuple[str, str, Callable[[], InputMessage | ToolMessage]]]:
        """``(id, role, decode)`` of each input and tool message, in request order; ``decode`` validates and
        decodes its content (``InputRejected`` as ``fresh`` would)."""
        if self.scan is None:
            return [(m.id, m.role if isinstance(m, InputMessage) else "tool", lambda m=m: m) for m in self.messages]
        scan = self.scan
        return [(mid, scan.raw[i]["role"], lambda k=k: scan.decode(k))
                for k, (i, mid) in enumerate(zip(scan.positions, scan.ids, strict=True))]

    @property
    def modern(self) -> bool:
        """Whether the client declared protocolVersion >= 1.0 (gates 1.0-only wire features)."""
        return version_at_least(self.protocol_version, (1, 0))

    def entries(self) -> list[tuple[str, str]]:
        """``(id, toolCallId)`` of each tool message, in request order."""
        if self.scan is not None:
            scan = self.scan
            return [(mid, call) for mid, call in zip(scan.ids, scan.calls, strict=True) if call is not None] \
                if scan.tool_ids else []
        return [(m.id, m.tool_call_id) for m in self.messages if isinstance(m, ToolMessage)]

    def input_ids(self) -> frozenset[str]:
        """The ids of the input and tool messages."""
        return self.scan.id_set if self.scan is not None else frozenset(m.id for m in self.messages)

    def tool_message_ids(self) -> frozenset[str]:
        return self.scan.tool_ids if self.scan is not None else frozenset(
            m.id for m in self.messages if isinstance(m, ToolMessage))

    def fresh(self, committed: Collection[str]) -> list[InputMessage | ToolMessage]:
        """The input and tool messages whose id is not in ``committed``, decoded, in request order.

        A committed message is the client's copy of history: its content is not read, so it is
        neither decoded nor refused; the first refusal of an uncommitted one is raised."""
        if self.scan is None:
            return [m for m in self.messages if m.id not in committed]
        scan = self.scan
        return [scan.decode(k) for k in uncommitted(scan.ids, scan.id_set, committed)]


def decode_message(raw: dict[str, Any], i: int, message_id: str, role: str,
                   tool_call_id: str | None) -> InputMessage | ToolMessage:
    """Validate and decode the content of ``messages[i]``, whose id, role and toolCallId are checked."""
    content = raw.get("content")
    if role == "user" and type(content) is str:
        return InputMessage(message_id, "user", (TextPart(content),) if content else ())
    where = f"messages[{i}]"
    if role == "tool":
        assert tool_call_id is not None
        error = raw.get("error")
        if error is not None and not isinstance(error, str):
            raise reject(f"{where}.error must be a string")
        return ToolMessage(message_id, tool_call_id, _tool_content(raw.get("content", ""), where), error)
    if role != "user" and not isinstance(content, str):
        raise reject(f"{where}.content must be a string")
    return InputMessage(message_id, role, _parts(content, where))  # type: ignore[arg-type]


def parse_run_input(body: bytes, content_type: str | None) -> AguiInput:
    """Parse and validate one request in full, every message decoded. Raises ``InputRejected`` with
    its catalogue code: the first refusal in request order (a message's shape or its content), then
    repeated ids."""
    parsed = _scan(body, content_type, eager=True)
    scan = parsed.scan
    assert scan is not None
    messages = tuple(scan.decode(k) for k in range(len(scan.positions)))
    return attrs.evolve(parsed, messages=messages, scan=None)


def scan_run_input(body: bytes, content_type: str | None, memo: ReplayMemo[KnownScan] | None = None) -> AguiInput:
    """Parse one request without decoding its messages' content (what a server holding the thread
    needs for dedup): the envelope and every message's shape (object, non-empty string ``id``, a
    known ``role``, a tool message's ``toolCallId``) are validated, unique ids too; the content of
    input and tool messages is validated by ``AguiInput.fresh`` only for the messages not committed.

    So a replayed message the thread holds is not refused for its content (the server's copy is the
    truth); any other body gets the refusal ``parse_run_input`` gives, except that a refusal of an
    uncommitted message's content comes after the envelope's and the shape's (at admission).

    With a ``memo``, the body's ``messages`` array is kept there for the thread's next request
    (``scan_known_run_input``)."""
    parsed = _scan(body, content_type, eager=False)
    if memo is not None and parsed.scan is not None and memo.keeps(body):
        memo.record(body, parsed.thread_id, parsed.scan.raw, _memo_scan(parsed))
    return parsed


def _envelope(data: dict[str, Any]) -> tuple[str, str, str | None, tuple[ResumeEntry, ...], tuple[ToolSpec, ...],
                                           tuple[ContextEntry, ...], dict[str, Any] | None, Branching]:
    """The request's fields but ``messages``, validated: (threadId, runId, protocolVersion, resume,
    tools, context, state, the documented forwardedProps)."""
    thread_id = _string(data, "threadId", "")
    run_id = _string(data, "runId", "")
    version = data.get("protocolVersion")
    if version is not None and not isinstance(version, str):
        raise reject("protocolVersion must be a string")
    if data.get("parentRunId") is not None:
        raise reject("parentRunId is not supported by this server", "UNSUPPORTED_FIELD")
    branching = parse_forwarded(data.get("forwardedProps"))
    resume = parse_resume(data.get("resume"))
    tools, context, state = parse_tools(data.get("tools")), parse_context(data.get("context")), \
        parse_state(data.get("state"))
    assert thread_id is not None and run_id is not None
    return thread_id, run_id, version, resume, tools, context, state, branching


def scan_known_run_input(body: bytes, content_type: str | None, memo: ReplayMemo[KnownScan], *,
                         most: int | None = None) -> AguiInput | None:
    """``scan_run_input`` of a body whose ``messages`` array begins with a prefix ``memo`` holds for its
    thread (a replayed history): only the envelope and the messages after the prefix are decoded. None
    when the memo does not know the body, or when its new messages are not all well formed (the plain
    scan then words the refusal). The parse is the plain scan's, refusals included."""
    check_content_type(content_type)
    split = memo.split(body, _thread_of, most=most)
    if split is None:
        return None
    data, prefix, tail = split.data, split.prefix, split.tail
    check_split(body, data, prefix.count + len(tail), split.containers)
    thread_id, run_id, version, resume, tools, context, state, branching = _envelope(data)
    fast = _shapes(tail) if tail else ((), (), (), ())
    if fast is None:
        return None
    known = prefix.scan
    if not known.all_ids.isdisjoint(fast[0]):
        return None
    shift = prefix.count
    added_tools = [mid for mid, call in zip(fast[2], fast[3], strict=True) if call is not None]
    # the prefix's sequences and id set joined to the tail's, not copied (``Joined``, ``IdSet``: no element
    # of the thousands touched)
    scan = Scan(PrefixedList(prefix, tail), Joined.of(known.positions, [shift + p for p in fast[1]]),
                Joined.of(known.input_ids, fast[2]), Joined.of(known.calls, fast[3]),
                id_set=IdSet.of(known.input_set, fast[2]),
                tool_ids=known.tool_ids.union(added_tools) if added_tools else known.tool_ids)
    parsed = AguiInput(thread_id, run_id, version, (), Joined.of(known.ids, fast[0]), state, tools, context, resume,
                       scan, branching=branching)
    # the thread's set of every id is grown in place, not copied: a parse still holding the previous
    # prefix then sees a superset of its ids, which can only make it fall back to the plain parse
    known.all_ids.update(fast[0])
    memo.record_split(body, split, _memo_scan(parsed, known.all_ids))
    return parsed


def _thread_of(data: dict[str, Any]) -> str | None:
    thread = data.get("threadId")
    return thread if type(thread) is str else None


@attrs.frozen(eq=False)
class KnownScan:
    """What the replay memo keeps of a scanned ``messages`` array (``ReplayMemo[KnownScan]``): what
    ``_scan`` reads of a message it does not decode."""

    #: every message's id, in request order
    ids: tuple[str, ...]
    #: the indexes of the input and tool messages (history roles are only ids), their ids and their
    #: ``toolCallId`` (None for input messages)
    positions: tuple[int, ...]
    input_ids: tuple[str, ...]
    calls: tuple[str | None, ...]
    #: ``input_ids`` as a set
    input_set: frozenset[str]
    #: every id as a set: grown in place by the thread's next split (a parse still holding this prefix
    #: then sees a superset of its ids, which only sends it to the plain parse)
    all_ids: set[str]
    #: the ids of the tool messages
    tool_ids: frozenset[str]


def _memo_scan(parsed: AguiInput, all_ids: set[str] | None = None) -> KnownScan:
    """What the memo keeps of ``parsed``; a history the memo keeps for the first time (``all_ids`` None) with
    its input and tool ids (those the dedup looks up) ``interned``, as the hot-thread cache keeps them (a
    split adds its few new ids as they are)."""
    scan = parsed.scan
    assert scan is not None
    if all_ids is not None:
        return KnownScan(parsed.message_ids, scan.positions, scan.ids, scan.calls, scan.id_set, all_ids,
                         scan.tool_ids)
    inputs = tuple(interned(scan.ids))  # only input and tool ids are looked up (the others are only ids)
    return KnownScan(parsed.message_ids, scan.positions, inputs, scan.calls, frozenset(inputs),
                     set(parsed.message_ids), frozenset(interned(scan.tool_ids)))


def served_scan(items: list[Any]) -> KnownScan | None:
    """The memo's scan of history items as the history route serves them (``ReplayMemo.served``): what
    the plain scan of those bytes keeps, its input and tool ids interned as a history kept for the first
    time. None when the fast scan does not take them (the plain parse then decides)."""
    fast = _shapes(items)
    if fast is None:
        return None
    ids, positions, inputs, calls = fast
    kept = tuple(interned(inputs))
    tools = frozenset(interned(mid for mid, call in zip(inputs, calls, strict=True) if call is not None))
    return KnownScan(ids, positions, kept, calls, frozenset(kept), set(ids), tools)


def join_scans(first: KnownScan, then: KnownScan, count: int) -> KnownScan | None:
    """The scan of two history pages in a row (``then``'s positions follow ``first``'s ``count``
    messages); None when they repeat an id (a plain parse words the refusal)."""
    if not first.all_ids.isdisjoint(then.all_ids):
        return None
    return KnownScan(Joined.of(first.ids, then.ids), Joined.of(first.positions, [count + p for p in then.positions]),
                     Joined.of(first.input_ids, then.input_ids), Joined.of(first.calls, then.calls),
                     first.input_set | then.input_set, first.all_ids | then.all_ids, first.tool_ids | then.tool_ids)


def _scan(body: bytes, content_type: str | None, *, eager: bool) -> AguiInput:
    check_content_type(content_type)
    data = load_json_object(body, messages_deep=eager)
    thread_id, run_id, version, resume, tools, context, state, branching = _envelope(data)
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise reject("messages must be an array")
    ids: list[str] = []
    positions: list[int] = []
    input_ids: list[str] = []
    calls: list[str | None] = []

    def refuse(exc: InputRejected) -> InputRejected:
        # the plain parser refuses the first bad message in request order: an earlier message's
        # content (which this scan did not read) is refused before a later message's shape
        if eager:
            scan = Scan(raw_messages, tuple(positions), tuple(input_ids), tuple(calls))
            for k in range(len(positions)):
                scan.decode(k)
        return exc

    fast = _shapes(raw_messages)
    if fast is not None:
        return AguiInput(thread_id, run_id, version, (), fast[0], state, tools, context, resume,
                         Scan(raw_messages, *fast[1:]), branching=branching)
    # One pass, no per-message allocation beyond what is kept: only ids, roles and tool call ids are
    # read; the field path for an error message is built only when a message is refused.
    append_id, append_position, append_input, append_call = ids.append, positions.append, input_ids.append, \
        calls.append
    for i, raw in enumerate(raw_messages):
        if type(raw) is not dict:
            raise refuse(reject(f"messages[{i}] must be an object"))
        message_id = raw.get("id")
        if type(message_id) is not str or not message_id:
            try:
                _string(raw, "id", f"messages[{i}].")  # raises with the plain path's message
            except InputRejected as exc:
                raise refuse(exc) from None
        append_id(message_id)
        role = raw.get("role")
        if role in _HISTORY_ROLES:
            continue
        if role == "user" or role == "system" or role == "developer":
            call = None
        elif role == "tool":
            call = raw.get("toolCallId")
            if type(call) is not str or not call:
                try:
                    _string(raw, "toolCallId", f"messages[{i}].")
                except InputRejected as exc:
                    raise refuse(exc) from None
        else:
            raise refuse(reject(f"messages[{i}].role {role!r} is not a known role"))
        append_position(i)
        append_input(message_id)
        append_call(call)
    if len(set(ids)) != len(ids):
        raise refuse(reject("message ids must be unique within a request"))
    scan = Scan(raw_messages, tuple(positions), tuple(input_ids), tuple(calls))
    return AguiInput(thread_id, run_id, version, (), tuple(ids), state, tools, context, resume, scan,
                     branching=branching)


_INPUT_ROLES = frozenset({"user", "system", "developer", "tool"})
_ID, _ROLE = itemgetter("id"), itemgetter("role")
_HISTORY_ROLE_SET = frozenset(_HISTORY_ROLES)


def _shapes(raw_messages: list[Any]) -> tuple[tuple[str, ...], tuple[int, ...], tuple[str, ...],
                                              tuple[str | None, ...]] | None:
    """The scan of a well-formed ``messages`` array in a few C-level passes: (every id, the positions,
    ids and tool call ids of the input and tool messages). None when anything is off (a message not an
    object, an id or role missing or ill-typed, a repeated id...): the per-message loop then finds
    the first refusal and words it."""
    try:
        ids = list(map(_ID, raw_messages))
        roles = list(map(_ROLE, raw_messages))
        if set(map(type, ids)) != {str} or "" in ids or len(set(ids)) != len(ids):
            return None
        # an unhashable role raises TypeError; any other non-string one is not an input role
        positions = list(compress(range(len(roles)), map(not_, map(_HISTORY_ROLE_SET.__contains__, roles))))
        input_roles = set(map(roles.__getitem__, positions))
    except (TypeError, KeyError):
        return None
    if not input_roles <= _INPUT_ROLES:
        return None
    kept = tuple(map(ids.__getitem__, positions))
    if "tool" in input_roles:
        calls: list[str | None] = [raw_messages[i].get("toolCallId") if roles[i] == "tool" else None
                                   for i in positions]
        if any((type(c) is not str or not c) for c, i in zip(calls, positions, strict=True) if roles[i] == "tool"):
            return None
    else:
        calls = [None] * len(positions)
    return tuple(ids), tuple(positions), kept, tuple(calls)


def parse_resume(raw: Any) -> tuple[ResumeEntry, ...]:
    """``resume``: absent, null or a list of entries with unique ``interruptId``s."""
    if raw is None:
        return ()
    if not isinstance(raw, list):
        raise reject("resume must be an array")
    entries: list[ResumeEntry] = []
    for i, item in enumerate(raw):
        where = f"resume[{i}]"
        if not isinstance(item, dict):
            raise reject(f"{where} must be an object")
        interrupt = _string(item, "interruptId", f"{where}.")
        status = item.get("status")
        if status not in ("resolved", "cancelled"):
            raise reject(f"{where}.status must be 'resolved' or 'cancelled'")
        metadata = item.get("metadata")
        if metadata is not None and not isinstance(metadata, dict):
            raise reject(f"{where}.metadata must be an object")
        payload = item["payload"] if item.get("payload") is not None else ResumeEntry.payload_absent()
        entries.append(ResumeEntry(interrupt, status, payload))
    if len({e.interrupt_id for e in entries}) != len(entries):
        raise reject("resume answers an interrupt twice")
    return tuple(entries)
