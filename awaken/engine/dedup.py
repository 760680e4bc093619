"""The dedup of a request against its thread: which of its messages the thread already holds, and
which of its tool calls already have a result.

The ledger answers facts (``Ledger.admission_facts``: the thread, its latest messages, its pending
calls, which of the asked ids are committed; ``Ledger.answered_calls``: which calls have a committed
result anywhere). ``decide`` is the one place those facts become the dedup answer an adapter reads
(``ThreadView.known_ids``, ``ThreadView.known_answered``); ``admission_view`` asks the ledger and
decides. Its cost follows the request, not the thread's length.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence, Set

import attrs

from awaken.core.ids import IdSet
from awaken.core.messages import Message, result_id
from awaken.ledger.interface import NO_IDS, AdmissionFacts, Ledger, ThreadView, answered_in


@attrs.frozen
class Decision:
    """What the facts say of a request: its committed ids, its answered calls, and the calls only a
    read of the history can settle (``Ledger.answered_calls``)."""

    known: Set[str]
    answered: frozenset[str]
    unresolved: frozenset[str]


def looked_up(message_ids: Collection[str], calls: Mapping[str, str | None]) -> Set[str]:
    """The ids admission asks the ledger about: the request's message ids, the ids of the messages
    carrying its tool calls, and the engine's result id of each call (``result_id``)."""
    extra = {m for m in calls.values() if m is not None}
    extra.update(result_id(c) for c in calls)
    if not extra:
        return message_ids if isinstance(message_ids, frozenset | IdSet) else frozenset(message_ids)
    return IdSet.of(message_ids, extra) if type(message_ids) is IdSet else frozenset(message_ids).union(extra)


def resolve_answered(
    candidates: Mapping[str, str], calls: Mapping[str, str | None], committed: Collection[str],
    tail: Sequence[Message],
) -> tuple[frozenset[str], frozenset[str]]:
    """Which candidate call ids (call id -> its engine result id; none of them pending) are answered:
    those whose engine result id is committed or whose result is in ``tail``. Returned unresolved:
    the others, unless the request message carrying them (``calls``) is committed (never asked)."""
    if not candidates:
        return NO_IDS, NO_IDS
    in_tail = answered_in(tail)
    answered = frozenset(c for c, rid in candidates.items() if rid in committed or c in in_tail)
    unresolved = frozenset(c for c in candidates if c not in answered and calls.get(c) not in committed)
    return answered, unresolved


def decide(message_ids: Collection[str], calls: Mapping[str, str | None], facts: AdmissionFacts) -> Decision:
    """The dedup answer of a request (its ``message_ids`` and tool ``calls``: call id -> the id of the
    request message carrying it, or None) from the facts the ledger gave for ``looked_up`` of it.

    A call whose carrying message is committed is not asked about (an adapter drops that message as
    replayed); a pending call is the run's to answer, never answered already."""
    waiting = {p.tool_call_id for p in facts.pending}
    candidates = {c: result_id(c) for c in calls if c not in waiting}
    answered, unresolved = resolve_answered(candidates, calls, facts.committed, facts.tail)
    known = facts.committed
    if calls:  # the facts also name the calls' result ids: only the request's own messages are known
        committed = known
        own = {m for m in calls.values() if m is not None}
        own.update(message_ids)
        known = frozenset(m for m in own if m in committed)
    return Decision(known, answered, unresolved)


async def admission_view(ledger: Ledger, thread_id: str, message_ids: Collection[str],
                         calls: Mapping[str, str | None], tail: int) -> ThreadView:
    """What admission reads: the thread, its latest ``tail`` messages, its pending calls, and the
    dedup answers for the request's own ``message_ids`` (``known_ids``: which are committed) and tool
    ``calls`` (``known_answered``: which have a committed result).

    Its cost does not grow with the thread's length, except for a call that is neither pending nor
    answered under the engine's result id nor in the tail (``Ledger.answered_calls`` reads the
    history for it)."""
    facts = await ledger.admission_facts(thread_id, looked_up(message_ids, calls), tail)
    if facts.thread is None:
        return ThreadView(None, (), (), NO_IDS, NO_IDS)
    decision = decide(message_ids, calls, facts)
    answered = decision.answered
    if decision.unresolved:
        answered |= await ledger.answered_calls(thread_id, decision.unresolved)
    return ThreadView(facts.thread, facts.tail, facts.pending, decision.known, answered)
