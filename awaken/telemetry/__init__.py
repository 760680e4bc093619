"""Telemetry: what the server tells operators about itself, behind one package.

Traces (OpenTelemetry, the GenAI semantic conventions), Prometheus metrics and structured logs. Every
span, attribute and metric name lives in this package, so a rename of a convention is one edit. The
engine, the ledger and the HTTP edge call in; this package imports nothing above ``awaken.core``.
"""
