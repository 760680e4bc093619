"""The OpenAI-compatible provider's settings: the ``[providers.openai]`` table, merged with an agent's
``provider = {...}`` overrides (config.py structures both into ``OpenAIConfig``; an unknown key or a
wrong type stops start-up with one line naming it)."""

from __future__ import annotations

import attrs


@attrs.frozen
class OpenAIConfig:
    base_url: str = "https://api.openai.com/v1"
    #: the name of the environment variable holding the API key (the key itself never goes in config)
    api_key_env: str = "OPENAI_API_KEY"
    connect_timeout: float = 10.0
    first_byte_timeout: float = 60.0
    idle_timeout: float = 60.0
    #: seconds one model call may take in all, retries included (zero or less: no limit)
    total_timeout: float = 600.0
    max_retries: int = 2
    temperature: float | None = None
    max_tokens: int | None = None
