"""The HTTP edge: the ASGI app built from the wire registry (``app``), the Host and cross-site checks
(``hosts``), CORS, authentication (``auth``), the early-answer framing (``early``), the HTML framing
headers (``framing``), the one JSON error writer (``errors``), the threads API, the console and
CopilotKit routes, and ``context``, where the server's parts are built, opened and closed."""
