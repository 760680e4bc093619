"""The wires, sans-IO: each protocol's request parser, encoder, history projection and adapter (``agui``,
``aisdk``, the ``copilotkit`` runtime, the ``managed`` sessions-and-events API), the ``Protocol`` interface and encoder base (``protocol``,
``encoding``), the replay memo that wraps a protocol's parse (``memo``), and the ``awaken.wires``
entry-point ``registry`` whose ``Wire`` entries declare their routes."""
