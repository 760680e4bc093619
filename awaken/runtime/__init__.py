"""The process: glibc's allocator and trims (``memory``), hypercorn's seams (``tcp``: write deadlines,
reads; ``accept``: batched accepts), the performance layer's constants (``tuning``), ``workers``, and ``flag`` (an event made only for a waiter)."""
