"""How one attempt at the endpoint fails: a classified ``Failed`` the retry loop reads.

Every part of the provider (request, SSE parser, chunk reader) raises ``Failed`` with a
``ModelFailure`` code; ``OpenAIModel.stream`` alone decides whether to retry and turns the last one
into the run's ``ModelFailure``.
"""

from __future__ import annotations

import attrs


@attrs.define
class Failed(Exception):
    """One attempt failed; ``stream`` decides whether to retry and raises the ``ModelFailure``."""

    code: str
    message: str
    retryable: bool = False
    retry_after: float | None = None
