"""Model providers as plugins: the ``awaken.models`` entry-point group and what a provider is.

An agent's ``model = "<provider>:<model>"`` picks a provider registered under the group by name;
``scripted`` alone names the scripted provider, which takes no model name. The built-in providers
(``scripted``, ``openai``) are registered by this package's own entry points in pyproject.toml, a
third party's the same way:

.. code-block:: toml

    [project.entry-points."awaken.models"]
    echo = "my_package.echo:EchoProvider"

A provider is a class with

* ``config_class``: the attrs class its ``[providers.<name>]`` table, merged with an agent's
  ``provider = {...}`` overrides, is structured into (by config.py, strictly: an unknown key or a
  wrong type stops start-up with one line naming it). Validators on its fields are the provider's own
  checks; a field without a default makes the key required.
* ``takes_model_name``: whether config names a model after the colon (``openai:gpt-4o``) or the
  provider stands alone (``scripted``).
* ``model(name, config) -> Model``: the model of one agent. The class is instantiated once per server
  with no arguments, so it decides what its agents share (one scripted model serves them all; each
  OpenAI agent has its own HTTP client).
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import Any, ClassVar, Protocol

from awaken.core.errors import ConfigError
from awaken.models import Model

PROVIDER_GROUP = "awaken.models"
#: the provider of the default model, named first when config names none that exists
DEFAULT_PROVIDER = "scripted"


class Provider(Protocol):
    config_class: ClassVar[type]
    takes_model_name: ClassVar[bool]

    def model(self, name: str, config: Any) -> Model: ...


def known_providers() -> dict[str, EntryPoint]:
    """Provider name -> where its class lives, for every entry point under ``awaken.models``."""
    return {ep.name: ep for ep in entry_points(group=PROVIDER_GROUP)}


def provider_class(name: str, providers: dict[str, EntryPoint] | None = None) -> type[Provider]:
    """The class registered as ``name`` (among ``providers``, by default every registered one); an
    unknown name raises ``ConfigError`` listing the known ones, a plugin that fails to import one naming it."""
    providers = known_providers() if providers is None else providers
    if name not in providers:
        known = ", ".join(sorted(providers)) or "(none: is the awaken package installed?)"
        raise ConfigError(f"unknown provider {name!r}; known providers: {known}")
    try:
        return providers[name].load()
    except Exception as exc:  # a broken plugin is a start-up error, named
        raise ConfigError(f"the model provider {name!r} ({providers[name].value}) could not be loaded: "
                          f"{type(exc).__name__}: {exc}") from None


def resolve_model(model: str) -> tuple[str, type[Provider], str]:
    """``model`` as (provider name, provider class, model name). A model that names no provider in a
    form it takes raises ``ConfigError`` naming every known form (``'scripted'``, ``'openai:<model>'``),
    the default provider first."""
    providers = known_providers()
    name, colon, model_name = model.partition(":")
    if name in providers:
        cls = provider_class(name, providers)
        if model_name if cls.takes_model_name else not colon:
            return name, cls, model_name
    forms = [
        repr(f"{n}:<model>" if provider_class(n, providers).takes_model_name else n)
        for n in sorted(providers, key=lambda n: (n != DEFAULT_PROVIDER, n))
    ]
    if len(forms) == 2:
        said = f"neither {forms[0]} nor {forms[1]}"
    elif len(forms) == 1:
        said = f"not {forms[0]}"
    else:
        said = f"none of {', '.join(forms)}" if forms else "not a model (no provider is installed)"
    raise ConfigError(f"{model!r} is {said}")
