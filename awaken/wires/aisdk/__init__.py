"""AI SDK v6 UI Message Stream (seed 003): request parsing, the chunk encoder, history projection.

Layout: ``request.py`` turns a chat POST body into an ``AiSdkInput`` or an ``InputRejected``;
``encoder.py`` turns AgentEvents into UI Message Stream chunks; ``wire.py`` pins the ai@6.0.0 chunk
field set (and the ids the server mints for the wire); ``history.py`` projects committed messages as
``UIMessage``s; ``adapter.py`` ties them to the run engine and serves the routes. Only
``adapter.py`` awaits anything. Decisions that outlive a commit message are in ``NOTES.md``.
"""
