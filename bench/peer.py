"""The peer: pydantic-ai's AG-UI app on uvicorn, streaming what the scripted model streams.

A pydantic-ai ``Agent`` whose model is a ``FunctionModel`` with a streaming function that reads the same
scripted directives (``/words N``, ``/delay MS``) from the last user message and yields the same text deltas
(the scripted model's word cycle, a space after every word but the last), sleeping before each one as the
scripted model and the floor do. The AG-UI route is pydantic-ai's own ``AGUIAdapter.dispatch_request``; the
AI SDK route is its ``VercelAIAdapter`` (UI message stream, SDK version 6). There is no WebSocket: the peer
has none, and the bench lists those channels as skipped for it.

Run it as ``python -m bench.peer --bind 127.0.0.1:PORT`` (needs the ``bench`` extra:
``pip install -e '.[bench]'``).
"""

from __future__ import annotations

import argparse
from collections.abc import AsyncIterator
from typing import Any

#: why the peer's WebSocket channels are skipped
NO_WEBSOCKET = "the peer has no WebSocket: pydantic-ai's AG-UI and AI SDK adapters answer HTTP requests only"
#: what the peer needs; ``available()`` says whether they import
REQUIRES = "pydantic-ai-slim[ag-ui] and uvicorn (pip install -e '.[bench]')"


def available() -> tuple[bool, str]:
    try:
        import uvicorn  # noqa: F401
        from pydantic_ai.ui.ag_ui import AGUIAdapter  # noqa: F401
        from pydantic_ai.ui.vercel_ai import VercelAIAdapter  # noqa: F401
    except Exception as exc:  # noqa: BLE001 - any import failure means "no peer in this run"
        return False, f"the peer's packages do not import ({type(exc).__name__}: {exc}); needs {REQUIRES}"
    return True, "ok"


def _last_user_text(messages: list[Any]) -> str:
    from pydantic_ai.messages import ModelRequest, UserPromptPart

    for message in reversed(messages):
        if not isinstance(message, ModelRequest):
            continue
        for part in reversed(message.parts):
            if isinstance(part, UserPromptPart):
                content = part.content
                if isinstance(content, str):
                    return content
                return "".join(c for c in content if isinstance(c, str))
    return ""


def build_app() -> Any:
    import anyio
    from pydantic_ai import Agent
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.ui.ag_ui import AGUIAdapter
    from pydantic_ai.ui.vercel_ai import VercelAIAdapter
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    from .floor import WORDS, parse_script

    async def scripted(messages: list[Any], info: AgentInfo) -> AsyncIterator[str]:
        words, delay = parse_script(_last_user_text(messages))
        for i in range(words):
            if delay:
                await anyio.sleep(delay)
            word = WORDS[i % len(WORDS)]
            yield word + " " if i < words - 1 else word

    agent = Agent(FunctionModel(stream_function=scripted, model_name="scripted"))

    async def agui(request: Request) -> Response:
        return await AGUIAdapter.dispatch_request(request, agent=agent)

    async def aisdk(request: Request) -> Response:
        return await VercelAIAdapter.dispatch_request(request, agent=agent, sdk_version=6)

    async def healthz(request: Request) -> Response:
        return JSONResponse({"status": "ok"})

    return Starlette(routes=[Route("/v1/ag-ui", agui, methods=["POST"]),
                             Route("/v1/ai-sdk/chat", aisdk, methods=["POST"]),
                             Route("/healthz", healthz, methods=["GET"])])


def main() -> None:
    import uvicorn

    parser = argparse.ArgumentParser(prog="python -m bench.peer", description=__doc__.splitlines()[0])
    parser.add_argument("--bind", default="127.0.0.1:8901")
    host, _, port = parser.parse_args().bind.rpartition(":")
    # uvicorn's defaults (backlog 2048, h11 or httptools as installed), access log off like the other servers
    uvicorn.run(build_app(), host=host, port=int(port), log_level="warning", access_log=False)


if __name__ == "__main__":
    main()
