"""A third-party-style model provider: ``model = "echo:<name>"`` answers with ``<prefix> <name>: <input>``.

It is what a package would register under the ``awaken.models`` entry-point group; the tests register
it by putting a dist-info directory on ``sys.path`` (``tests.plugins.echo_model:EchoProvider``).
``[providers.echo]`` and an agent's ``provider = {...}`` are structured into ``EchoConfig``.
"""

from __future__ import annotations

from typing import ClassVar

import attrs

from awaken.core.messages import Usage
from awaken.models import ModelOutput, ModelRequest


def _not_blank(instance: object, attribute: attrs.Attribute, value: str) -> None:
    if not value.strip():
        raise ValueError(f"{attribute.name} must not be blank")


@attrs.frozen
class EchoConfig:
    prefix: str = attrs.field(default="echo", validator=_not_blank)
    shout: bool = False


class EchoModel:
    def __init__(self, name: str, config: EchoConfig) -> None:
        self.name = name
        self.config = config

    async def stream(self, request: ModelRequest, out: ModelOutput) -> None:
        said = next((m.text for m in reversed(request.messages) if m.role == "user"), "")
        answer = f"{self.config.prefix} {self.name}: {said}"
        out.text(answer.upper() if self.config.shout else answer)
        out.usage(Usage(len(said.split()), 1))

    async def aclose(self) -> None:
        return None


class EchoProvider:
    config_class: ClassVar[type] = EchoConfig
    takes_model_name: ClassVar[bool] = True

    def model(self, name: str, config: EchoConfig) -> EchoModel:
        return EchoModel(name, config)
