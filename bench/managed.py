"""The Managed Agents wire against the AG-UI wire, on one server in one run: how soon a turn shows.

AG-UI: one ``POST /v1/ag-ui`` per turn (a new thread each time), timed from the send to its first
``TEXT_MESSAGE_CONTENT`` and to ``RUN_FINISHED``. Managed Agents: one session whose stream is open with
``event_deltas=agent.message`` (what a chat client keeps), one ``POST /v1/sessions/{id}/events`` per turn,
timed from the send to the first ``event_delta`` and to the ``agent.message`` on the stream (and to the
send's answer, which comes once the input is committed). The runs alternate, AG-UI first then the other
way round, so both see the same machine. Both through httpx, so the client's cost is the same on each side.

``python -m bench`` runs it for every Awaken subject (``cli``); alone: ``python -m bench.managed URL [RUNS]``.
"""

from __future__ import annotations

import math
import sys
import time
import uuid
from typing import Any

import httpx
import orjson
import trio

from .stats import summary

WORDS = 3


def _text(words: int) -> str:
    return f"/words {words}"


async def _agui_turn(client: httpx.AsyncClient, words: int) -> tuple[float, float]:
    body = {"threadId": f"bench-m-{uuid.uuid4().hex}", "runId": f"bench-r-{uuid.uuid4().hex}",
            "messages": [{"id": f"bench-u-{uuid.uuid4().hex}", "role": "user", "content": _text(words)}],
            "tools": [], "context": [], "forwardedProps": {}, "state": {}}
    first = math.nan
    t0 = time.perf_counter()
    async with client.stream("POST", "/v1/ag-ui", content=orjson.dumps(body),
                             headers={"content-type": "application/json", "accept": "text/event-stream"}) as response:
        async for line in response.aiter_lines():
            if not line.startswith("data: "):
                continue
            kind = orjson.loads(line[6:]).get("type")
            if kind == "TEXT_MESSAGE_CONTENT" and math.isnan(first):
                first = time.perf_counter()
            if kind in ("RUN_FINISHED", "RUN_ERROR"):
                return (first - t0) * 1000, (time.perf_counter() - t0) * 1000
    raise RuntimeError("the AG-UI stream ended before RUN_FINISHED")


class Session:
    """One session with its stream open; ``turn`` sends and reads that turn's events off the stream."""

    def __init__(self, client: httpx.AsyncClient) -> None:
        self.client = client
        self.id = ""
        self._lines: Any = None
        self._stream: Any = None

    async def open(self) -> None:
        created = await self.client.post("/v1/sessions", json={"agent": "assistant", "environment_id": "bench"})
        created.raise_for_status()
        self.id = created.json()["id"]
        self._stream = self.client.stream("GET", f"/v1/sessions/{self.id}/events/stream",
                                          params={"event_deltas": "agent.message"})
        response = await self._stream.__aenter__()
        self._lines = response.aiter_lines()

    async def close(self) -> None:
        if self._stream is not None:
            await self._stream.__aexit__(None, None, None)

    async def _next_event(self) -> dict[str, Any]:
        async for line in self._lines:
            if line.startswith("data: "):
                return orjson.loads(line[6:])
        raise RuntimeError("the session stream ended")

    async def turn(self, words: int) -> tuple[float, float, float]:
        """(ms to the first ``event_delta``, to the ``agent.message``, to the send's answer)."""
        answered = math.nan
        t0 = time.perf_counter()

        async def send() -> None:
            nonlocal answered
            sent = await self.client.post(f"/v1/sessions/{self.id}/events", json={"events": [
                {"type": "user.message", "content": [{"type": "text", "text": _text(words)}]}]})
            sent.raise_for_status()
            answered = time.perf_counter()

        first = message = math.nan
        async with trio.open_nursery() as nursery:
            nursery.start_soon(send)
            while True:
                event = await self._next_event()
                kind = event.get("type")
                if kind == "event_delta" and math.isnan(first):
                    first = time.perf_counter()
                elif kind == "agent.message" and math.isnan(message):
                    message = time.perf_counter()
                elif kind == "session.status_idle" and event["stop_reason"]["type"] != "requires_action":
                    break
        return (first - t0) * 1000, (message - t0) * 1000, (answered - t0) * 1000


async def first_events(base_url: str, runs: int, *, words: int = WORDS, warmup: int = 2) -> dict[str, Any]:
    """Both wires, ``runs`` turns each (after ``warmup`` each), alternating; medians and tails in ms."""
    series: dict[str, list[float]] = {"agui_first_delta": [], "agui_finished": [], "managed_first_delta": [],
                                      "managed_agent_message": [], "managed_send_answered": []}
    async with httpx.AsyncClient(base_url=base_url, timeout=60) as agui, \
            httpx.AsyncClient(base_url=base_url, timeout=None) as managed:
        session = Session(managed)
        await session.open()
        try:
            for i in range(warmup + runs):
                order = ("agui", "managed") if i % 2 == 0 else ("managed", "agui")
                for wire in order:
                    if wire == "agui":
                        delta, finished = await _agui_turn(agui, words)
                        got = {"agui_first_delta": delta, "agui_finished": finished}
                    else:
                        delta, message, answered = await session.turn(words)
                        got = {"managed_first_delta": delta, "managed_agent_message": message,
                               "managed_send_answered": answered}
                    if i >= warmup:
                        for key, value in got.items():
                            series[key].append(value)
        finally:
            with trio.CancelScope(shield=True):
                await session.close()
    return {key: summary(values) for key, values in series.items()} | {"runs": runs, "words": words}


def describe(result: dict[str, Any]) -> str:
    """One line for the report's notes."""
    def p50(key: str) -> str:
        return f"{result[key]['p50']:.1f}"

    return (f"Managed Agents vs AG-UI ({result['runs']} turns each, /words {result['words']}): first delta "
            f"{p50('managed_first_delta')} ms (event_deltas) vs {p50('agui_first_delta')} ms, agent.message "
            f"{p50('managed_agent_message')} ms vs RUN_FINISHED {p50('agui_finished')} ms; a send answered in "
            f"{p50('managed_send_answered')} ms (p50)")


if __name__ == "__main__":
    url = sys.argv[1]
    count = int(sys.argv[2]) if len(sys.argv) > 2 else 50
    out = trio.run(first_events, url, count)
    print(orjson.dumps(out, option=orjson.OPT_INDENT_2).decode())
    print(describe(out))
