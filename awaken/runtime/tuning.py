"""Every tuning constant of the performance layer, in one place.

A constant here changes how fast or how lean the server is, never what it answers: setting any of
them to its neutral value (0, 1, or a bound nothing reaches) switches its mechanism off and every
test of behaviour still passes. Each one names the bench figure that chose it; how each was measured,
and the history of those figures, is in ``bench/README.md`` and ``bench/REPORT.md``.

Limits that are part of the contract (body and message caps, the nesting depth, rate limits) are
not tuning: they stay with the code that refuses (``awaken.core.jsonbody``, ``awaken.engine.limits``).
"""

from __future__ import annotations

# -- the event loop: what runs on it and what goes to a worker thread ----------------------------------
# One policy: a request is parsed and turned into its run on the loop unless it is large; then the
# work goes to a worker thread (``trio.to_thread``), where it cannot delay other streams' deltas.

#: a body at least this large is parsed in a worker thread, and takes one of ``[server]
#: max_large_bodies``' slots (``python -m bench.stall``: decoding a replayed history of hundreds of KB
#: held the loop for milliseconds; below this size a parse is well under one)
OFF_LOOP_BODY = 256 * 1024
#: a body up to this size is first offered to the replay memo's split parse on the loop: finding a
#: known prefix is a byte search and a compare, a millisecond at most at 4 MiB (``python -m bench.threads``)
KNOWN_ON_LOOP = 4 * 1024 * 1024
#: the most bytes a split parse on the loop leaves to decode: what the loop parses anyway
#: (``OFF_LOOP_BODY``); a longer rest is split in a worker thread
ON_LOOP_REST = OFF_LOOP_BODY
#: a request carrying at least this many new messages is turned into its run in a worker thread: at
#: the message cap the dedup, the id checks and the stamping held the loop for tens of ms
#: (``python -m bench.stall``, the largest AG-UI body row)
OFF_LOOP_MESSAGES = 1000

# -- the replay memo (``awaken.wires.memo``) ------------------------------------------------------------

#: the default ``[server] replay_memo_bytes`` (``python -m bench.threads``: a few hundred threads of
#: 5,000 messages; 0 turns the memo off)
MEMO_BUDGET = 16 * 1024 * 1024
#: bodies shorter than this are parsed plainly: they parse in well under a millisecond
#: (``python -m bench.threads``, the 10- and 100-message rows: the split saves nothing there)
MEMO_MIN_BODY = 32 * 1024
#: bytes of a kept prefix (from its ``[``) that index it
MEMO_KEY_BYTES = 96
#: prefixes kept per key (threads whose histories begin with the same bytes)
MEMO_PER_KEY = 4
#: top-level ``"messages":[`` candidates tried per body (the key may also sit in nested values)
MEMO_MAX_CANDIDATES = 4
#: estimated bytes per scanned message beyond the prefix's bytes (its id string and scan slots:
#: ``python -m bench.memtrace`` of a 5,000-message memo entry)
MEMO_PER_MESSAGE = 160
#: threads whose history pages, read from the start, the memo follows (``ReplayMemo.served``)
MEMO_SERVED_THREADS = 64

# -- the hot-thread cache (``awaken.ledger.hotcache``) ---------------------------------------------------

#: the default ``cache_bytes`` of the ledgers that keep hot threads (``python -m bench.threads``: a
#: 5,000-message thread's entry is ~1 MB; ``python -m bench`` memory per waiting run: about 3,300
#: short threads fill it, then the oldest goes)
HOT_BUDGET = 8 * 1024 * 1024
#: the fewest latest messages an entry keeps: admission's tail is the agent's history budget (200)
HOT_MIN_KEEP = 200
#: estimated bytes per committed id beyond the string itself (its set slot, amortised; tracemalloc)
HOT_ID_OVERHEAD = 40

# -- the HTTP edge (``awaken.http.hosts``) ----------------------------------------------------------------

#: how many ``Host`` header values' answers (this server's name or not) the Host check keeps, so a
#: keep-alive client's every request is one dict lookup (the A/B in ``bench/REPORT.md``, 2026-12-03
#: later); 0: every request is checked afresh
HOST_ANSWERS = 64

# -- the ledgers' worker thread (``awaken.ledger.serial``) -----------------------------------------------

#: the most calls of the SQLite or file ledger that one worker-thread hop carries: the calls queued
#: while a hop runs go together in the next (``python -m bench.memtrace`` and an in-process burst of
#: 200 first writes: ``bench/REPORT.md``); 1: a hop per call
LEDGER_CALLS_PER_HOP = 64

# -- memory: glibc and the cycle collector (``awaken.runtime.memory``, ``awaken.cli``) ------------------

#: blocks at least this large are mapped on their own and unmapped when freed
#: (``python -m bench.slowclients``: freed large bodies otherwise stayed in the heap)
MMAP_THRESHOLD = 1024 * 1024
#: free memory at the top of the heap kept between trims
TRIM_THRESHOLD = 4 * 1024 * 1024
#: seconds a trim waits after it was asked for
TRIM_DELAY = 0.2
#: freed bytes that make a trim worth its page faults (``python -m bench.threads``: a trim after each
#: replay had the next one fault its pages back in; joining a 684 KB body took 0.29 ms instead of 0.01)
TRIM_WORTH = 8 * 1024 * 1024
#: the cycle collector's thresholds while serving (Python's default: 700, 10, 10): with the defaults a
#: request at the message cap caused full collections of 20-45 ms CPU two or three times; these keep
#: every pause under ~16 ms CPU (``python -m bench.stall``) for a few MB of garbage held a little longer
GC_THRESHOLDS = (50_000, 20, 100)
#: seconds a worker thread running Python may keep the interpreter while the loop waits (CPython's
#: default 5 ms: the loop's wake-up waited that long behind a thread walking a large decoded body;
#: ``python -m bench.stall``)
SWITCH_INTERVAL = 0.001

# -- I/O sizes -------------------------------------------------------------------------------------------

#: the most bytes one read of a connection takes (hypercorn's own loop reads 64 KiB): a 684 KB body
#: cost 1.68-1.74 ms more than a 1-byte one with 64 KiB reads, 1.08-1.16 ms with 256 KiB; 512 KiB and
#: 1 MiB measured the same as 256 KiB (a raw ASGI app under hypercorn, ``bench/README.md``)
READ_SIZE = 256 * 1024
#: a connection's read of at least this many bytes that arrives while h11 holds nothing is kept as it came,
#: and a read that is wholly body goes to the app as that very object (``awaken.runtime.heldchunks``:
#: h11 and hypercorn otherwise copied each body byte four times; ``bench/REPORT.md``); 0: h11's own buffer
HELD_CHUNK_BYTES = 16 * 1024
#: a connection on a plain socket reads and writes it itself (``awaken.runtime.tcp``: ``_receive``,
#: ``_write_at_once``), with trio's results and errors: no error-translation context manager, wrapper
#: coroutines or no-deadline ``fail_after`` alive with every waiting connection, and no cancel scope in
#: trio's deadline heap per write (``bench/REPORT.md``, 2026-12-03 evening); False: trio's stream
OWN_SOCKET_IO = True
#: queued SSE frames are joined into one block once this many of their bytes wait behind the socket
#: (large enough to be mapped on its own: ``MMAP_THRESHOLD``; ``python -m bench.slowclients``)
COALESCE_BYTES = 256 * 1024
#: and every this many single frames queued behind the socket are joined first
#: (``python -m bench.slowclients``: a stopped reader held thousands of small objects)
COALESCE_FRAMES = 64
#: a WebSocket text message goes out framed by ``awaken.transports.ws.text_frames`` when the connection
#: negotiated no extension, rather than through wsproto's event, frame and copy per message (the A/B in
#: ``bench/REPORT.md``, 2026-12-03 (after the close): the first delta over WebSocket keep-alive); False: wsproto frames all
WS_OWN_FRAMING = True
#: a WebSocket request's frames written at once, as the run makes them, while nothing waits for the
#: socket (``awaken.transports.ws``: ``WsConnection.send``), before the writer takes the next ones in
#: batches; four is a run's opening on both wires (the run's start, its step's, its text's and the
#: first delta), each in the client's hands while the run makes the next (the A/B in
#: ``bench/REPORT.md``, 2026-12-03 (after the close)); 0: every frame waits for the writer's next pass
WS_AT_ONCE_FRAMES = 4
#: a WebSocket read that is one whole text frame, on a connection with no extension, is read by
#: ``awaken.runtime.wsread`` rather than by hypercorn's protocol layers and wsproto; False: hypercorn reads all
WS_OWN_READING = True
#: a WebSocket text message is handed to the connection's reader in hypercorn's read, synchronously, while
#: the reader waits with nothing queued, rather than through the request's app queue and a scheduling pass
#: (``awaken.runtime.tcp.AppQueue.receive_directly``); False: every message through the queue
WS_DIRECT_RECEIVE = True
#: bytes of text framed per WebSocket write (framing is ~7-13 us a message: a 4 MB backlog is
#: written in slices that each leave the loop quickly; ``python -m bench.stall``, the 5 MiB delta row)
WS_WRITE_CHUNK = 64 * 1024
#: a step's text (and reasoning, and each call's arguments) is kept as blocks of this many deltas
#: (``python -m bench`` one-stream events/s)
JOIN_EVERY = 128
#: frames appended to a run's replay are packed into one block every this many
#: (``python -m bench.memtrace``, memory per active stream)
REPLAY_BATCH = 64
#: a frame at least this large is packed at once, with those before it (the 5 MiB delta row of
#: ``python -m bench.stall``)
REPLAY_LARGE = 4096

# ---- accepting connections (awaken/runtime/accept.py) ----

#: the most connections taken from the listen queue in one pass of the event loop; then the loop runs
#: what is due before taking more (``python -m bench.bursts``: 2,000 clients at once)
ACCEPT_BATCH = 256
