"""The planner interface shared by training stand-ins, local models and remote VLAs.

A planner is slow: it takes the newest observation (and an instruction) and returns an
:class:`~edgerl.contract.chunk.ActionChunk` some tens to hundreds of milliseconds later. The runtime
never waits for it; it only reads the latest chunk.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

import numpy as np

from edgerl.contract.chunk import ActionChunk

__all__ = ["Planner", "PlannerHealth", "PlannerInfo"]


class PlannerHealth(str, enum.Enum):
    """Planner state as seen by its caller."""

    STARTING = "starting"
    OK = "ok"
    SLOW = "slow"  # answering, but later than expected_latency_s
    DEAD = "dead"  # crashed / unreachable; a supervisor may restart it


@dataclass(frozen=True)
class PlannerInfo:
    """What a planner declares about itself.

    Attributes:
        horizon: Rows per chunk H.
        action_dim: Action size A.
        dt_s: Row spacing (s).
        period_s: How often a new chunk is requested (s).
        expected_latency_s: Typical inference latency (s), e.g. its measured p50.
        intent_dim: Size I of the intent vector its chunks carry (0: none).
    """

    horizon: int
    action_dim: int
    dt_s: float
    period_s: float
    expected_latency_s: float
    intent_dim: int = 0


@runtime_checkable
class Planner(Protocol):
    """``plan(observation, instruction, now) -> ActionChunk``.

    ``observation``: ``(O,)`` float32; ``instruction``: free text ("" if none); ``now``:
    monotonic time (s) when the observation was taken; the returned chunk's ``obs_time`` is
    ``now`` and its ``t0`` the time its row 0 is meant for.
    """

    info: PlannerInfo

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk: ...

    def health(self) -> PlannerHealth: ...
