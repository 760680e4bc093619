"""Plugin tools used by the tests (loaded by dotted path from config, like a user's package)."""
