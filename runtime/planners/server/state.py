"""The records :class:`~.server.PlannerServer`'s parts share: a connection's bounded state
(:class:`_Session`, kept by :mod:`.connections`) and an admitted request (:class:`_Job`,
queued and batched by :mod:`.batching`)."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field

from edgerl.runtime.planners.protocol.auth import FrameAuth
from edgerl.runtime.planners.protocol.framing import PRIORITIES
from edgerl.runtime.planners.protocol.messages import PlanRequest

__all__: list[str] = []


@dataclass(eq=False)
class _Session:
    """Bounded state of one connection."""

    cid: int
    peer: str
    writer: asyncio.StreamWriter
    auth: FrameAuth | None
    tokens: float
    refilled: float
    pending_plan: _Job | None = None
    pending_batches: int = 0
    bad_frames: int = 0
    closed: bool = False
    counts: Counter = field(default_factory=Counter)
    #: a frame with a valid tag has arrived (always True without a secret)
    authenticated: bool = False
    host: str = ""  # the peer's address without the port (per-peer caps)
    #: the key id the client named in its hello ("": the shared secret, or no authentication)
    identity: str = ""
    #: the most urgent priority this connection's requests may claim (its key's maximum)
    max_priority: str = PRIORITIES[0]


@dataclass(eq=False)
class _Job:
    """One admitted request waiting for (or in) a batch."""

    session: _Session
    request: PlanRequest
    received: float  # server monotonic seconds
    deadline: float  # absolute server monotonic seconds (inf: none)
    seq: int
    cancelled: bool = False

    @property
    def rank(self) -> tuple[int, float, int]:
        return PRIORITIES.index(self.request.priority), self.deadline, self.seq
