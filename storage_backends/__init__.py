"""Ledger backends shipped with Awaken: ``sqlite`` (the default) and ``files``.

Each is a ``awaken.ledger.interface.Ledger`` subclass registered under the ``awaken.ledgers`` entry-point
group; third-party packages add theirs the same way.
"""
