"""``[telemetry]``: where the server's traces go and what they hold (awaken/telemetry/tracing.py).

The standard ``OTEL_*`` environment variables come first (``OTEL_EXPORTER_OTLP_ENDPOINT``,
``OTEL_EXPORTER_OTLP_TRACES_ENDPOINT``, ``OTEL_EXPORTER_OTLP_HEADERS``, ``OTEL_SERVICE_NAME``,
``OTEL_TRACES_EXPORTER``, ``OTEL_SDK_DISABLED``); this table is what they leave unset. With neither,
no span leaves the process (the console's timelines are kept all the same).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from awaken.core.errors import ConfigError
from awaken.telemetry.tracing import TraceSettings, settings_from


@attrs.frozen
class TelemetryConfig:
    #: the OTLP/HTTP collector's base URL (``http://collector:4318``; spans go to ``…/v1/traces``);
    #: empty: no exporter unless the ``OTEL_*`` variables name one
    endpoint: str = ""
    #: headers every export request carries (a collector's API key, for instance)
    headers: dict[str, str] = attrs.field(factory=dict)
    #: the ``service.name`` of the spans
    service_name: str = "awaken"
    #: record message content (prompts, answers, tool arguments and results) on the spans
    capture_content: bool = False


def check(config: TelemetryConfig, source: str) -> None:
    if config.endpoint and not config.endpoint.startswith(("http://", "https://")):
        raise ConfigError(f"{source}: telemetry.endpoint: {config.endpoint!r} is not an http(s) URL")


def trace_settings(config: TelemetryConfig, environ: Mapping[str, str]) -> TraceSettings:
    """The trace settings: the ``OTEL_*`` variables of ``environ`` over ``config``."""
    return settings_from(environ, endpoint=config.endpoint or None, headers=config.headers,
                         service_name=config.service_name, capture_content=config.capture_content)
