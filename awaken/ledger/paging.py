"""Paging through a thread's committed history, protocol-neutral.

A cursor is an opaque token naming a position in one thread's committed sequence: the ``seq`` after
which the next page starts, bound to the thread by a keyed digest. ``read_page`` answers a page and
the cursor after its last item (the same cursor again when nothing newer is committed yet). A
cursor that is malformed, belongs to another thread, or points past the committed sequence raises
``BadCursor`` (400); an unknown thread raises ``UnknownThread`` (404); a store failure propagates as
``StoreUnavailable`` (503), never as an empty page; a bad ``limit`` is ``INVALID_LIMIT`` (400). A page
reads one path of the thread's branches (the active one by default, ``?branch=N`` another: an unknown
branch is ``UNKNOWN_BRANCH``, 400).
"""

from __future__ import annotations

import base64
import binascii
import hashlib

from awaken.core.errors import BadCursor, BadLimit, UnknownBranch, UnknownThread
from awaken.core.messages import Message
from awaken.ledger.interface import Ledger

DEFAULT_LIMIT = 50
MAX_LIMIT = 500
_KEY = b"awaken-history-cursor-v1"


def _tag(thread_id: str, seq: int) -> str:
    return hashlib.blake2b(f"{thread_id}\x00{seq}".encode(), key=_KEY, digest_size=6).hexdigest()


def encode_cursor(thread_id: str, seq: int) -> str:
    raw = f"{seq}.{_tag(thread_id, seq)}".encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode_cursor(thread_id: str, cursor: str) -> int:
    try:
        raw = base64.urlsafe_b64decode(cursor + "=" * (-len(cursor) % 4)).decode()
        seq_text, tag = raw.split(".", 1)
        seq = int(seq_text)
    except (binascii.Error, UnicodeDecodeError, ValueError):
        raise BadCursor("the cursor is malformed; start again without a cursor") from None
    if seq < 0 or tag != _tag(thread_id, seq):
        raise BadCursor("the cursor does not belong to this thread; start again without a cursor")
    return seq


def parse_limit(value: str | None) -> int:
    if value is None or value == "":
        return DEFAULT_LIMIT
    # isdigit() alone accepts "²" and "①", which int() refuses: ASCII digits only
    if not (value.isascii() and value.isdigit()) or not 1 <= int(value) <= MAX_LIMIT:
        raise BadLimit(f"limit must be an integer from 1 to {MAX_LIMIT}")
    return int(value)


def parse_branch(value: str | None) -> int | None:
    """A history route's ``?branch=``: None (absent or empty: the active path) or a branch number;
    anything else is ``UNKNOWN_BRANCH`` (400)."""
    if value is None or value == "":
        return None
    if not (value.isascii() and value.isdigit()) or len(value) > 18:
        raise UnknownBranch(f"branch must be a branch number of the thread, not {value[:32]!r}")
    return int(value)


async def read_path(ledger: Ledger, thread_id: str, after: int, limit: int, branch: int | None) -> list[Message]:
    """``Ledger.read_messages`` of the path of ``branch`` (None: the active one); a branch the thread does
    not have is ``UNKNOWN_BRANCH``."""
    if branch is None:
        return await ledger.read_messages(thread_id, after, limit)
    try:
        return await ledger.read_messages(thread_id, after, limit, branch=branch)
    except ValueError:
        raise UnknownBranch(f"thread {thread_id!r} has no branch {branch}") from None


async def read_page(ledger: Ledger, thread_id: str, cursor: str | None, limit: int,
                    branch: int | None = None) -> tuple[list[Message], str]:
    """One page of committed messages of the path of ``branch`` (None: the thread's active branch), oldest
    first, and the cursor after it. A cursor names a seq, which every path orders the same way."""
    thread = await ledger.get_thread(thread_id)
    if thread is None:
        raise UnknownThread(f"no thread {thread_id!r}")
    after = decode_cursor(thread_id, cursor) if cursor else 0
    if after > thread.last_seq:
        raise BadCursor("the cursor is past the committed history; start again without a cursor")
    messages = await read_path(ledger, thread_id, after, limit, branch)
    last = messages[-1].seq if messages else after
    return messages, encode_cursor(thread_id, last)
