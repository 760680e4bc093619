"""Runs on a new branch: where a regenerate or an edit forks the thread's active path, and the history
its run starts from.

An adapter names the fork by a message id (``wires.protocol.ForkAt``: keep that message, or end just
before it); ``fork_seq`` turns it into the ``after_seq`` of the ledger's ``Fork``, and ``fork_history``
reads the path up to it: the run's model sees that path, never the abandoned one. Both answer from
admission's view when it holds what they need (a regenerate of a recent answer: the view's tail), and
otherwise read the active path (``Ledger.read_messages``), so a turn that does not fork costs nothing
here.
"""

from __future__ import annotations

from awaken.core.errors import InputRejected
from awaken.core.messages import Message
from awaken.ledger.interface import Ledger, ThreadView
from awaken.wires.protocol import ForkAt

#: messages read per ledger call while looking for a fork point outside admission's view
PAGE = 500


def whole_path(view: ThreadView, budget: int) -> bool:
    """Whether ``view.messages`` is the whole active path (a full view, or a tail shorter than asked)."""
    return view.known_ids is None or len(view.messages) < budget


async def fork_seq(ledger: Ledger, view: ThreadView, fork: ForkAt, budget: int) -> int:
    """The ``after_seq`` of ``fork``: the seq of its message (``keep``), or of the message before it on
    the active path (0 when it is the first). ``budget`` is the tail admission asked for. A message not
    on the active path is ``UNKNOWN_MESSAGE`` (the adapter only forks at a committed one)."""
    thread = view.thread
    assert thread is not None
    messages = view.messages
    for i, m in enumerate(messages):
        if m.id == fork.message_id:
            if fork.keep:
                return m.seq
            if i > 0:
                return messages[i - 1].seq
            if whole_path(view, budget):
                return 0
            break
    else:
        if whole_path(view, budget):
            raise _not_on_path(fork)
    # older than the view's tail: look along the active path
    before, after = 0, 0
    while True:
        page = await ledger.read_messages(thread.thread_id, after, PAGE)
        for m in page:
            if m.id == fork.message_id:
                return m.seq if fork.keep else before
            before = m.seq
        if len(page) < PAGE:
            raise _not_on_path(fork)
        after = page[-1].seq


def _not_on_path(fork: ForkAt) -> InputRejected:
    return InputRejected(f"message {fork.message_id!r} is not on the thread's active path; nothing to "
                         f"{fork.reason}", code="UNKNOWN_MESSAGE")


async def fork_history(ledger: Ledger, view: ThreadView, after_seq: int, budget: int) -> tuple[Message, ...]:
    """The latest at most ``budget`` messages of the active path up to and including seq ``after_seq``:
    the committed history a run on the new branch starts from."""
    kept = [m for m in view.messages if m.seq <= after_seq]
    if len(kept) >= budget or whole_path(view, budget):
        return tuple(kept[max(0, len(kept) - budget):])
    thread = view.thread
    assert thread is not None
    width = budget
    while True:  # windows of seqs below the fork point, widening until they hold enough
        low = max(0, after_seq - width)
        window = [m for m in await ledger.read_messages(thread.thread_id, low, after_seq - low) if m.seq <= after_seq]
        if len(window) >= budget or low == 0:
            return tuple(window[max(0, len(window) - budget):])
        width *= 2
