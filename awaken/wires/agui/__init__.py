"""AG-UI (seed 004): request parsing, the event encoder, and history projection.

Layout: ``request.py`` turns a POST body into an ``AguiInput`` or an ``InputRejected``;
``encoder.py`` turns AgentEvents into AG-UI wire events and SSE bytes; ``history.py`` projects
committed messages as AG-UI messages; ``adapter.py`` ties them to the run engine. Only
``adapter.py`` awaits anything.
"""
