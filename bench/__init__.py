"""Awaken's streaming benchmark: latency, throughput, fan-out, memory and ledger commits, each against a
raw-ASGI floor measured in the same run. ``python -m bench --help``; see bench/README.md."""
