"""An agent's AG-UI ``AgentCapabilities`` (``@ag-ui/core`` 1.0.0): what it declares to a client (pure).

Served at ``GET /v1/ag-ui/agents/{agentId}/capabilities``; any other discovery route (CopilotKit's)
should return this same document. Only what the server really does is declared ``true``; what it
does not do is declared ``false`` where a client would otherwise offer it (audio, video, PDF input,
binary transport). Stream resumption (``transport.resumable``) is declared
only once the server can rejoin a stream.
"""

from __future__ import annotations

from typing import Any

from awaken.engine.agents import Agent


def capabilities(agent: Agent) -> dict[str, Any]:
    identity: dict[str, Any] = {"name": agent.id, "type": "awaken"}
    if agent.config.description:
        identity["description"] = agent.config.description
    return {
        "identity": identity,
        "transport": {"streaming": True, "websocket": True, "httpBinary": False, "pushNotifications": False,
                      "resumable": False},
        "tools": {
            "supported": True,
            "items": [{"name": t.name, "description": t.description, "parameters": t.parameters}
                      for t in agent.tools],
            "parallelCalls": True,
            "clientProvided": True,
        },
        "state": {"snapshots": True, "deltas": True, "memory": False, "persistentState": True},
        "reasoning": {"supported": True, "streaming": True, "encrypted": False},
        "multimodal": {
            "input": {"image": True, "audio": False, "video": False, "pdf": False, "file": False},
            "output": {"image": False, "audio": False},
        },
        "execution": {"maxIterations": agent.config.max_steps},
        "humanInTheLoop": {"supported": True, "approvals": True, "interrupts": True, "approveWithEdits": True},
    }
