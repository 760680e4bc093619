"""What a stream needs from the server that hosts it: the engine, the ledger, the settings, the
large-body slots and the SSE keep-alive heartbeat. The HTTP edge's ``ServerContext`` is one; the
streams never import it."""

from __future__ import annotations

from typing import Protocol

from awaken.config import AppConfig
from awaken.engine.admission import RunApplication
from awaken.engine.agents import AgentRegistry
from awaken.ledger.interface import Ledger
from awaken.transports.body import LargeBodies
from awaken.transports.sse import Heartbeat


class StreamHost(Protocol):
    """The handles a run, rejoin or history stream uses (structural: ``ServerContext`` has them)."""

    config: AppConfig
    ledger: Ledger
    agents: AgentRegistry
    app: RunApplication
    large_bodies: LargeBodies
    heartbeat: Heartbeat
