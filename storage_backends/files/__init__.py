"""The append-only file ledger (``[ledger] backend = "files"``): one checksummed log per thread, an in-memory index rebuilt at open.

Layout of the ledger directory (``[ledger] backend = "files"``, option ``path``)::

    LOCK                    an exclusive ``flock`` held while a process has the ledger open
    threads/<sha256>.log    one append-only log per thread; the name is the SHA-256 hex digest of
                            the thread id's UTF-8 bytes, so no id can name a path outside the
                            directory (the raw id is stored inside every record)
    torn/                   bytes cut off a log at open (a torn or corrupt tail), kept for forensics

A log is a sequence of frames ``>I length, >I crc32(payload), payload``; the payload is one JSON
object. Every ``start_run``, ``commit``, ``import_thread`` call (and every crash recovery at open)
writes exactly one frame to one file and fsyncs it before returning, so a step is atomic: after a
crash a frame is either whole (and applied on replay) or torn (and cut off at open).

Opening replays every log into a compact index: per thread what a listing shows (created_at, owner,
title, agent, times, message count, last run, waiting), its last seq and the applied length of its
log, and per run which thread holds it (by the run id's hash: ``runs``). The rest of a thread's index, its detail, is kept only while
the thread is hot (an LRU bounded in bytes, ``index_cache_bytes``, default 8 MiB) and rebuilt from its
log on access (one read of the log, no message parsed): the set of its message ids (for dedup and
duplicate checks), where each message lives (runs of consecutive seqs and the offset of the frame that
holds them), its runs, its pending calls and its agent state. Message bodies are not kept: a read locates the frames that
hold the wanted seqs, reads that one byte range of the log, checks and parses it (one worker-thread
round trip per call). Recently used threads are in the hot-thread cache every single-writer ledger
shares (``awaken.ledger.hotcache``, capped by ``cache_bytes``, default 8 MiB): their record, latest
messages, pending calls and committed ids, applied by every write right after it is applied to the
index, so a run's admission and the history reads of a short thread stay off the disk while memory
stays flat as history grows.

Branches (``awaken.ledger.interface.Branch``): a message record's messages are on its run's branch
(a message's JSON carries ``branch`` only when it is not 0, a run's likewise); a fork is the
``start_run`` record's ``fork`` key (the new branch), so the branch, its run and its inputs are one
frame; an import carries ``branches`` and the thread's ``active_branch``. A thread that never branched
writes exactly what it did before branches existed, and its index keeps no ``BranchTree``; a thread
that branched keeps one in its detail (every message's seq, branch and id in seq order: any branch's
path is computed from it, its active path's ids are the detail's ids). A path read locates the byte
range from its first message to its last and skips other branches' messages in it.

Replay stops at the first frame that is short, fails its checksum or is not a JSON object; the file
is truncated there. Runs left ``running`` are then marked ``interrupted`` by a ``recover`` record.
All blocking file I/O (and the JSON work of reads and writes) goes through
``trio.to_thread.run_sync`` with a capacity limiter of one (one I/O thread; calls queued meanwhile
share the next hop: ``awaken.ledger.serial``), and writers are
serialized by a ``trio.Lock`` held from validation until the index is updated. Logs only grow under
an open ledger (a failed write is cut back to the applied length), so the applied prefix a read
locates stays valid while the read is in flight.

Any ``OSError`` becomes ``StoreUnavailable``; a write that fails halfway is truncated back to the
file's previous length, so nothing partial is ever visible (in memory or after reopen).

The ledger never acknowledges a commit it would lose at the next open. Before a write and again after
its fsync (in the same I/O-thread call) it checks that ``threads/`` is still the directory it opened
(``stat``, same device and inode) and that the thread's open log is still linked there and not shorter
than the index says (``fstat``): a directory deleted, moved away or replaced under the server, or a
log deleted or replaced, is ``StoreUnavailable`` (the run ends ``STORE_UNAVAILABLE``), never a write
into an unlinked file. A lost log also refuses its thread's history reads until the ledger is reopened.
What the checks cost per commit: ``python -m bench.durability``. ``probe_write`` (``/readyz``)
checks the directory and creates, writes, fsyncs and removes ``threads/.write-probe``.

Modules: ``frames`` (the frame codec and positional I/O), ``records`` (JSON forms of runs and pending
calls), ``index`` (the in-memory index, how each record applies to it, and which details stay held),
``runs`` (which thread holds each run: a table of the run ids' hashes), ``ledger`` (``FileLedger``:
locking, replay, recovery, writes and reads).
"""

from .frames import decode_frames, encode_frame, thread_file_name
from .ledger import FileLedger

__all__ = ["FileLedger", "decode_frames", "encode_frame", "thread_file_name"]
