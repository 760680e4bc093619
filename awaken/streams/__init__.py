"""One request, one run, one stream: ``exchange`` joins a wire, a transport and the engine; a run's
output fans out through ``broadcast`` and is kept for late watchers in ``replay``; ``rejoin`` serves them;
``host`` is what a stream needs from the server that hosts it."""
