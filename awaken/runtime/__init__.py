"""The process: glibc's allocator and trims (``memory``), hypercorn's seams (``tcp``: write deadlines,
reads; ``accept``: batched accepts), the performance layer's constants (``tuning``) and ``workers``."""
