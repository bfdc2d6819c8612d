"""Builders for gated planner client tests: a budgeted stand-in planner and a client over
a gate bundle (see :mod:`tests.helpers.gate_bundles`)."""

from __future__ import annotations

import numpy as np

from edgerl.contract.chunk import ActionChunk
from edgerl.contract.clock import VirtualClock
from edgerl.contract.spec import load_bundle_manifest
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.gate.budget_gate import BudgetGate
from edgerl.runtime.gate.client import GatedPlannerClient
from edgerl.runtime.loop_io import ObservationSlot

__all__ = ["ZeroRows", "gated_client"]


class ZeroRows:
    """A budgeted planner returning ``budget.horizon`` rows of ``value``; records its calls."""

    def __init__(self, value: float = 0.0) -> None:
        self.value = value
        self.calls: list[tuple[str, float, np.ndarray | None]] = []

    def plan(self, budget, observation, now, prefix):
        self.calls.append((budget.name, now, None if prefix is None else prefix.copy()))
        return ActionChunk(actions=np.full((budget.horizon, 2), self.value, np.float32),
                           t0=now, dt=0.05, obs_time=now, source=budget.name)


def gated_client(bundle, planner, clock=None
                 ) -> tuple[GatedPlannerClient, ChunkBuffer, ObservationSlot]:
    """A :class:`GatedPlannerClient` with the bundle's gate over ``planner``, its chunk buffer
    and its observation slot (``clock``: a fresh :class:`VirtualClock` by default)."""
    spec = load_bundle_manifest(bundle)
    buffer = ChunkBuffer("replace", spec.action.dim)
    slot = ObservationSlot(spec.observation.dim)
    client = GatedPlannerClient(BudgetGate(bundle, spec), planner, buffer, slot,
                                clock=clock or VirtualClock())
    return client, buffer, slot
