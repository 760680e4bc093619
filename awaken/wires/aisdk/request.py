"""Parse an AI SDK chat POST body (sans-IO): bytes in, ``AiSdkInput`` or ``InputRejected``.

The body is what ``DefaultChatTransport`` sends (``reference/aisdk.md`` §3.1)::

    {messages: UIMessage[], id?, trigger?, messageId?, threadId?, agentId?, ...extra keys ignored}

Validation is lenient where the AI SDK is (unknown part types — ``step-start``, ``data-*``,
``source-*``, future ones — and unknown keys are ignored) and strict where a wrong type would be
misread (ids, roles, text, tool part states, approvals): those are ``INVALID_REQUEST``.

What becomes input (CONTRACT §4): ``text`` parts of user/system messages, and ``file`` parts with an
``image/*`` media type, checked as AG-UI's images are (``media.check_image``: an ``http(s)`` or
``data:image/*`` URL, else refused). Files of other media types, reasoning and UI-only parts never reach
the model and are not errors; a ``mediaType`` that is no media type at all is ``INVALID_REQUEST``. Assistant messages are the client's copy of history;
only the tool parts of the request's **last** message, when it is an assistant message (the
continuation ``useChat`` posts after ``addToolOutput``/``addToolApprovalResponse``), are decision
candidates. Which candidates are real decisions (not replayed history) is the adapter's call: it
needs the ledger.

``scan_chat_request`` (what the server uses) reads a message the thread already holds for its id,
role and ``parts`` array only: its parts are the client's copy of history, neither decoded nor
refused. Every other message is validated as ``parse_chat_request`` validates it (``AiSdkInput.
fresh_inputs`` at admission), and so is the last message when it is an assistant message (its tool
parts are the decision candidates).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from typing import Any, Literal

import attrs

from awaken.core.errors import InputRejected
from awaken.core.ids import IdSet, interned, uncommitted
from awaken.core.jsonbody import check_content_type, check_split, load_json_object, message_too_deep, reject
from awaken.core.media import check_count, check_image, is_image_type
from awaken.core.messages import ImagePart, Part, TextPart
from awaken.wires.memo import Joined, PrefixedList, ReplayMemo

#: tool part states that carry the client's answer to a waiting call
DECISION_STATES = frozenset({"output-available", "output-error", "approval-responded"})


@attrs.frozen
class InputUIMessage:
    """A user/system message, already reduced to the parts the model may see."""

    id: str
    role: Literal["user", "system"]
    parts: tuple[Part, ...]


@attrs.frozen
class ToolPartAnswer:
    """A tool part of the continued assistant message in a decision state."""

    tool_call_id: str
    tool_name: str
    state: Literal["output-available", "output-error", "approval-responded"]
    #: ``output-available``: the output (``None`` when absent); ``output-error``: unused
    output: Any = None
    error_text: str = ""
    #: ``approval-responded`` (and any approval the part carries)
    approval_id: str | None = None
    approved: bool | None = None
    reason: str | None = None


@attrs.frozen(eq=False)
class UiScan:
    """The messages of a scanned body whose parts are not read yet: ``raw`` is the ``messages`` array,
    ``positions``/``ids`` the index and id of each message but a last assistant one (decoded at once)."""

    raw: Sequence[Any]
    positions: tuple[int, ...]
    ids: tuple[str, ...]
    roles: tuple[str, ...]
    #: ``ids`` as a set (what dedup asks about), given when known (a split parse builds it on its
    #: prefix's)
    id_set: frozenset[str] = attrs.field(default=None, kw_only=True)

    def __attrs_post_init__(self) -> None:
        if self.id_set is None:
            object.__setattr__(self, "id_set", frozenset(self.ids))


@attrs.frozen(eq=False)
class KnownUiScan:
    """What the replay memo keeps of a scanned ``messages`` array (``ReplayMemo[KnownUiScan]``): every
    message's id and role, in request order, and the ids as a set."""

    ids: tuple[str, ...]
    roles: tuple[str, ...]
    id_set: frozenset[str]


@attrs.frozen
class AiSdkInput:
    """One parsed chat request."""

    #: ``threadId``, else the chat ``id``; None when the client sent neither
    thread_id: str | None
    agent_id: str | None
    trigger: str | None
    #: the input messages, decoded (empty when ``scan`` holds them undecoded)
    inputs: tuple[InputUIMessage, ...]
    #: decision candidates from the last message when it is an assistant message
    answers: tuple[ToolPartAnswer, ...]
    #: the last message's id when it is an assistant message (the stream continues it)
    continued_id: str | None
    #: the messages scanned but not decoded (``scan_chat_request``), else None
    scan: UiScan | None = None
    #: the body's ``messageId``: with ``regenerate-message`` the assistant message to make again, with
    #: ``submit-message`` the user message ``sendMessage({text, messageId})`` replaced (or the assistant
    #: message a tool continuation continues)
    message_id: str | None = attrs.field(default=None, kw_only=True)

    def roles(self) -> list[tuple[str, str]]:
        """``(id, role)`` of the messages in request order: every message's when scanned (a continued
        last assistant one included), else the input messages' (a full parse keeps no assistant one)."""
        if self.scan is not None:
            pairs = list(zip(self.scan.ids, self.scan.roles, strict=True))
        else:
            pairs = [(m.id, m.role) for m in self.inputs]
        if self.continued_id is not None:
            pairs.append((self.continued_id, "assistant"))
        return pairs

    def message_ids(self) -> frozenset[str]:
        """The ids dedup asks about: every message's but a continued last assistant one's."""
        if self.scan is None:
            return frozenset(m.id for m in self.inputs)
        return self.scan.id_set

    def fresh_inputs(self, committed: Collection[str]) -> list[InputUIMessage]:
        """The input messages not in ``committed``, decoded; any other message not committed is
        validated too (the first refusal in request order is raised)."""
        if self.scan is None:
            return [m for m in self.inputs if m.id not in committed]
        scan = self.scan
        out: list[InputUIMessage] = []
        positions = scan.positions
        for k in uncommitted(scan.ids, scan.id_set, committed):
            i = positions[k]
            decoded = _decode(scan.raw[i], i, last=False)
            if isinstance(decoded, InputUIMessage):
                out.append(decoded)
        return out


def _optional_id(data: dict[str, Any], key: str) -> str | None:
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise reject(f"{key} must be a non-empty string")
    return value


def _string(part: dict[str, Any], key: str, where: str) -> str:
    value = part.get(key)
    if not isinstance(value, str):
        raise reject(f"{where}.{key} must be a string")
    return value


def _optional_string(part: dict[str, Any], key: str, where: str) -> str | None:
    value = part.get(key)
    if value is not None and not isinstance(value, str):
        raise reject(f"{where}.{key} must be a string")
    return value


def _image(part: dict[str, Any], where: str) -> ImagePart | None:
    """An image ``file`` part the model may see, or None for other media (never input, not an error).
    A part that says it is an image gets the one image check (``media.check_image``) AG-UI's get."""
    media = _string(part, "mediaType", where)
    url = _string(part, "url", where)
    _optional_string(part, "filename", where)
    if not is_image_type(media, where):
        return None
    return check_image(ImagePart(url, media), where)


def _input_parts(parts: list[Any], where: str) -> tuple[Part, ...]:
    out: list[Part] = []
    for i, part in enumerate(parts):
        pw = f"{where}.parts[{i}]"
        kind = part["type"]
        if kind == "text":
            text = _string(part, "text", pw)
            if text:
                out.append(TextPart(text))
        elif kind == "file":
            image = _image(part, pw)
            if image is not None:
                out.append(image)
        elif kind == "reasoning":
            _string(part, "text", pw)
    check_count(out, f"{where}.parts")
    return tuple(out)


def _tool_answer(part: dict[str, Any], where: str) -> ToolPartAnswer | None:
    kind = part["type"]
    call_id = part.get("toolCallId")
    if not isinstance(call_id, str) or not call_id:
        raise reject(f"{where}.toolCallId must be a non-empty string")
    state = _string(part, "state", where)
    name = _string(part, "toolName", where) if kind == "dynamic-tool" else kind.removeprefix("tool-")
    approval = part.get("approval")
    approval_id = approved = reason = None
    if approval is not None:
        if not isinstance(approval, dict):
            raise reject(f"{where}.approval must be an object")
        approval_id = _string(approval, "id", f"{where}.approval")
        approved = approval.get("approved")
        if approved is not None and not isinstance(approved, bool):
            raise reject(f"{where}.approval.approved must be a boolean")
        reason = _optional_string(approval, "reason", f"{where}.approval")
    if state not in DECISION_STATES:
        return None
    if state == "output-error":
        return ToolPartAnswer(call_id, name, state, error_text=_optional_string(part, "errorText", where) or "",
                              approval_id=approval_id, approved=approved, reason=reason)
    if state == "approval-responded" and (approval_id is None or approved is None):
        raise reject(f"{where}: an approval-responded part needs approval.id and approval.approved")
    return ToolPartAnswer(call_id, name, state, output=part.get("output"), approval_id=approval_id,
                          approved=approved, reason=reason)


def _is_tool_part(kind: str) -> bool:
    return kind == "dynamic-tool" or kind.startswith("tool-")


def _decode(raw: Any, i: int, *, last: bool) -> InputUIMessage | tuple[ToolPartAnswer, ...] | None:
    """Validate ``messages[i]`` in full: an input message, the answers of an assistant message (when it is
    the ``last`` one, else None)."""
    where = f"messages[{i}]"
    if not isinstance(raw, dict):
        raise reject(f"{where} must be an object")
    message_id = raw.get("id")
    if not isinstance(message_id, str) or not message_id:
        raise reject(f"{where}.id must be a non-empty string")
    role = raw.get("role")
    parts = raw.get("parts")
    if not isinstance(parts, list):
        raise reject(f"{where}.parts must be an array")
    for j, part in enumerate(parts):
        if not isinstance(part, dict) or not isinstance(part.get("type"), str):
            raise reject(f"{where}.parts[{j}] must be an object with a string type")
    if role in ("user", "system"):
        message_too_deep(raw)
        return InputUIMessage(message_id, role, _input_parts(parts, where))
    if role == "assistant":
        message_too_deep(raw)
        found = []
        for j, part in enumerate(parts):
            pw = f"{where}.parts[{j}]"
            if _is_tool_part(part["type"]):
                answer = _tool_answer(part, pw)
                if answer is not None:
                    found.append(answer)
            elif part["type"] in ("text", "reasoning"):
                _string(part, "text", pw)
        return tuple(found) if last else None
    raise reject(f"{where}.role must be 'user', 'system' or 'assistant', not {role!r}")


def parse_chat_request(body: bytes, content_type: str | None) -> AiSdkInput:
    """Parse and validate one chat request, every message decoded. Raises ``InputRejected`` with its
    catalogue code (the first refusal in request order, then repeated ids)."""
    parsed = _scan(body, content_type, eager=True)
    scan = parsed.scan
    assert scan is not None
    inputs = [m for i in scan.positions if isinstance(m := _decode(scan.raw[i], i, last=False), InputUIMessage)]
    return attrs.evolve(parsed, inputs=tuple(inputs), scan=None)


def scan_chat_request(body: bytes, content_type: str | None,
                      memo: ReplayMemo[KnownUiScan] | None = None) -> AiSdkInput:
    """Parse one chat request without decoding the parts of its messages but a last assistant one (see
    the module docstring): ``AiSdkInput.fresh_inputs`` decodes those the thread does not hold.

    With a ``memo``, the body's ``messages`` array is kept there for the thread's next request
    (``scan_known_chat_request``)."""
    parsed = _scan(body, content_type, eager=False)
    scan = parsed.scan
    if memo is not None and scan is not None and parsed.thread_id is not None and memo.keeps(body):
        ids, roles = scan.ids, scan.roles
        if parsed.continued_id is not None:  # the last message, an assistant one, is not in the scan
            ids, roles = ids + (parsed.continued_id,), roles + ("assistant",)
        ids = tuple(interned(ids))  # as the hot-thread cache keeps them: the dedup compares pointers
        memo.record(body, parsed.thread_id, scan.raw, KnownUiScan(ids, roles, frozenset(ids)))
    return parsed


def scan_known_chat_request(body: bytes, content_type: str | None, memo: ReplayMemo[KnownUiScan], *,
                            most: int | None = None) -> AiSdkInput | None:
    """``scan_chat_request`` of a body whose ``messages`` array begins with a prefix ``memo`` holds for
    its thread (a replayed history): only the envelope and the messages after the prefix are decoded.
    None when the memo does not know the body or when anything after the prefix would be refused (the
    plain scan then words the refusal)."""
    check_content_type(content_type)
    split = memo.split(body, _thread_of, most=most)
    if split is None or not split.tail:
        return None
    data, prefix, tail = split.data, split.prefix, split.tail
    shift = prefix.count
    try:
        check_split(body, data, shift + len(tail), split.containers)
        thread_id, agent_id, trigger, message_id = _envelope(data)
        every, positions, ids, roles, answers, continued_id = _message_shapes(tail, eager=False, offset=shift)
    except InputRejected:
        return None
    known = prefix.scan
    if len(set(every)) != len(every) or not known.id_set.isdisjoint(every):
        return None
    # every message of the prefix is a position: none of them is the body's last
    # the prefix's sequences and id set joined to the tail's, not copied (``Joined``, ``IdSet``: no element
    # of the thousands touched)
    scan = UiScan(PrefixedList(prefix, tail), Joined.of(range(shift), positions), Joined.of(known.ids, ids),
                  Joined.of(known.roles, roles), id_set=IdSet.of(known.id_set, ids))
    parsed = AiSdkInput(thread_id, agent_id, trigger, (), answers, continued_id, scan, message_id=message_id)
    all_ids, all_roles = scan.ids, scan.roles
    if continued_id is not None:
        all_ids, all_roles = Joined.of(all_ids, (continued_id,)), Joined.of(all_roles, ("assistant",))
    kept_set = scan.id_set if continued_id is None else IdSet.of(scan.id_set, (continued_id,))
    memo.record_split(body, split, KnownUiScan(all_ids, all_roles, kept_set))
    return parsed


def served_ui_scan(items: list[Any]) -> KnownUiScan | None:
    """The memo's scan of ``UIMessage`` history items as the history route serves them
    (``ReplayMemo.served``): what ``scan_chat_request`` keeps of those bytes. None when they would be
    refused (the plain parse then words it)."""
    try:
        every, _positions, ids, roles, _answers, continued_id = _message_shapes(items, eager=False)
    except InputRejected:
        return None
    if len(set(every)) != len(every):
        return None
    if continued_id is not None:  # the last message, an assistant one, is not in the scan
        ids, roles = ids + (continued_id,), roles + ("assistant",)
    kept = tuple(interned(ids))
    return KnownUiScan(kept, roles, frozenset(kept))


def join_ui_scans(first: KnownUiScan, then: KnownUiScan, count: int) -> KnownUiScan | None:
    """The scan of two history pages in a row; None when they repeat an id."""
    if not first.id_set.isdisjoint(then.id_set):
        return None
    return KnownUiScan(Joined.of(first.ids, then.ids), Joined.of(first.roles, then.roles), first.id_set | then.id_set)


def _thread_of(data: dict[str, Any]) -> str | None:
    for key in ("threadId", "id"):
        value = data.get(key)
        if value is not None:
            return value if type(value) is str and value else None
    return None


def _envelope(data: dict[str, Any]) -> tuple[str | None, str | None, str | None, str | None]:
    """``(thread, agentId, trigger, messageId)`` of a request."""
    thread_id = _optional_id(data, "threadId") or _optional_id(data, "id")
    agent_id = _optional_id(data, "agentId")
    trigger = _optional_string(data, "trigger", "body")
    message_id = _optional_string(data, "messageId", "body")
    return thread_id, agent_id, trigger, message_id or None


def _scan(body: bytes, content_type: str | None, *, eager: bool) -> AiSdkInput:
    check_content_type(content_type)
    data = load_json_object(body, messages_deep=eager)
    thread_id, agent_id, trigger, message_id = _envelope(data)
    raw_messages = data.get("messages")
    if not isinstance(raw_messages, list):
        raise reject("messages must be an array of UIMessages")

    ids, positions, kept_ids, roles, answers, continued_id = _message_shapes(raw_messages, eager=eager)
    scan = UiScan(raw_messages, positions, kept_ids, roles)
    if len(set(ids)) != len(ids):
        if eager:
            for i in scan.positions:
                _decode(raw_messages[i], i, last=False)
        raise reject("message ids must be unique within a request")
    return AiSdkInput(thread_id, agent_id, trigger, (), answers, continued_id, scan, message_id=message_id)


def _message_shapes(raw_messages: list[Any], *, eager: bool, offset: int = 0) -> tuple[
        list[str], tuple[int, ...], tuple[str, ...], tuple[str, ...], tuple[ToolPartAnswer, ...], str | None]:
    """Each message's shape, in request order: (every id, the positions, ids and roles of the messages
    but a last assistant one, that one's decision candidates and id). ``raw_messages`` are the body's
    messages from index ``offset`` on (a split body's new ones). Raises the first refusal; ``eager``:
    as the plain parser words it, every earlier message's content first."""

    def refuse(k: int, exc: InputRejected) -> InputRejected:
        # the plain parser refuses the first bad message in request order, field by field
        if eager:
            for j in range(k + 1):
                _decode(raw_messages[j], j, last=j == len(raw_messages) - 1)
        return exc

    ids: list[str] = []
    positions: list[int] = []
    kept_ids: list[str] = []
    roles: list[str] = []
    answers: tuple[ToolPartAnswer, ...] = ()
    continued_id: str | None = None
    last = len(raw_messages) - 1
    for k, raw in enumerate(raw_messages):
        i = offset + k
        where = f"messages[{i}]"
        if type(raw) is not dict:
            raise refuse(k, reject(f"{where} must be an object"))
        message_id = raw.get("id")
        if type(message_id) is not str or not message_id:
            raise refuse(k, reject(f"{where}.id must be a non-empty string"))
        ids.append(message_id)
        if type(raw.get("parts")) is not list:
            raise refuse(k, reject(f"{where}.parts must be an array"))
        role = raw.get("role")
        if role == "assistant" and k == last:
            if eager:  # the plain order: every earlier message first
                for j in range(k):
                    _decode(raw_messages[j], j, last=False)
            found = _decode(raw, i, last=True)
            assert isinstance(found, tuple)
            answers, continued_id = found, message_id
        elif role == "user" or role == "system" or role == "assistant":
            positions.append(i)
            kept_ids.append(message_id)
            roles.append(role)
        else:
            raise refuse(k, reject(f"{where}.role must be 'user', 'system' or 'assistant', not {role!r}"))
    return ids, tuple(positions), tuple(kept_ids), tuple(roles), answers, continued_id
