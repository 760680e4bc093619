"""The ledger registry: the ``awaken.ledgers`` entry-point group, and the configured ledger built from it.

A backend registers its class under the group (the shipped ``sqlite``, ``files`` and ``postgres`` come
from Awaken's own package metadata; a plugin package adds its own); ``[ledger] backend`` names one.
"""

from __future__ import annotations

from awaken.config import AppConfig
from awaken.core.errors import ConfigError
from awaken.ledger.interface import Ledger, ledger_class


def check_workers(config: AppConfig) -> None:
    """``[server] workers > 1`` needs a ledger that several processes may share (one line if not)."""
    workers = config.server.workers
    if workers > 1 and not ledger_class(config.ledger.backend).shared_by_processes:
        raise ConfigError(
            f"server.workers: {workers} server processes need a ledger they can share (backend = \"postgres\"); "
            f"the {config.ledger.backend} ledger is owned by one process, so workers must be 1"
        )


def build_ledger(config: AppConfig) -> Ledger:
    """The configured backend, constructed (not opened); bad options are a ``ConfigError``."""
    backend = ledger_class(config.ledger.backend)
    try:
        return backend(path=config.ledger.path, **config.ledger.options)
    except (TypeError, ValueError) as exc:
        raise ConfigError(f"ledger.options: the {config.ledger.backend} backend refused its options: {exc}") from None
