"""The OpenAI-compatible streaming provider: ``model = "openai:<model name>"`` (CONTRACT §2).

One module per job:

* ``config``: ``OpenAIConfig``, the ``[providers.openai]`` table;
* ``client``: ``OpenAIModel``, the request to ``/chat/completions`` and its retry loop, timeouts and
  failure classification;
* ``mapping``: a ``ModelRequest`` as chat-completions ``messages`` and ``tools``;
* ``sse``: the server-sent-events parser (sans-IO);
* ``chunks``: ``chat.completion.chunk`` objects in, ``ModelOutput`` calls out (sans-IO);
* ``sanitize``: failure text without the API key; the URL as messages show it;
* ``failure``: ``Failed``, how one attempt fails, read by the retry loop.

``OpenAIProvider`` is what the ``awaken.models`` entry point ``openai`` names.
"""

from __future__ import annotations

from typing import ClassVar

from awaken.models.openai.client import OpenAIModel
from awaken.models.openai.config import OpenAIConfig


class OpenAIProvider:
    """``openai:<model name>``: one ``OpenAIModel`` (and one HTTP client) per agent."""

    config_class: ClassVar[type] = OpenAIConfig
    takes_model_name: ClassVar[bool] = True

    def model(self, name: str, config: OpenAIConfig) -> OpenAIModel:
        return OpenAIModel(name, config)


__all__ = ["OpenAIConfig", "OpenAIModel", "OpenAIProvider"]
