"""The vocabulary every layer shares, with no I/O: errors and their HTTP statuses (``errors``), client
ids (``ids``), the history model (``messages``), live AgentEvents (``events``), principals
(``principal``), image bounds (``media``) and the JSON-body checks every parser runs first (``jsonbody``)."""
