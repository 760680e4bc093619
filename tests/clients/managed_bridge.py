"""One AG-UI conversation through the ``ag-ui-claude-managed-agents`` bridge, pointed at an Awaken server's
Managed Agents wire (run by tests/clients/test_managed_sdk.py in a process of its own: the bridge runs on
asyncio). ``python managed_bridge.py BASE_URL AGENT TEXT...``: one AG-UI run per TEXT on one thread; prints
every AG-UI event as JSON."""

from __future__ import annotations

import asyncio
import json
import sys

from ag_ui.core import RunAgentInput, UserMessage
from ag_ui_claude_managed_agents import ManagedAgentsAgent
from anthropic import AsyncAnthropic


async def main(base_url: str, agent_id: str, texts: list[str]) -> None:
    client = AsyncAnthropic(base_url=base_url, api_key="unused", max_retries=0)
    agent = ManagedAgentsAgent(managed_agent_id=agent_id, environment_id="env_local", client=client)
    out = []
    for i, text in enumerate(texts):
        run = RunAgentInput(thread_id="bridge-thread", run_id=f"bridge-run-{i}", state={}, tools=[], context=[],
                            forwarded_props={}, messages=[UserMessage(id=f"bridge-u{i}", role="user", content=text)])
        async for event in agent.run(run):
            out.append(event.model_dump(mode="json", by_alias=True, exclude_none=True))
    print(json.dumps(out))


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
