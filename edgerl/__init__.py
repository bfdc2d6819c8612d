"""edgerl: latency-aware asynchronous RL from vectorized simulation to the edge.

The import root holds the contract shared by training and deployment (pure numpy):
:class:`ActionChunk`, :class:`PolicySpec` (``manifest.json``), the edit-observation builder,
the planner interface, clocks and :class:`TimingSpec` (every chunk-timing rule).
Sub-packages: ``edgerl.sim`` (tasks, latency wrappers), ``edgerl.policies`` (planners, edit
policy, PPO training), ``edgerl.export`` (ONNX bundles), ``edgerl.runtime`` (the on-device
loop; no torch, no simulators).
"""

from __future__ import annotations

from edgerl._version import __version__
from edgerl.chunk import ActionChunk, ChunkError
from edgerl.edit_obs import EditObsConfig, build_edit_obs, compose_edit_action, select_chunk_rows
from edgerl.planner import Planner, PlannerHealth, PlannerInfo
from edgerl.serde import SchemaError
from edgerl.spec import (
    ActionSpec,
    BundleError,
    ChunkSpec,
    LatencyModel,
    ObservationSpec,
    PolicySpec,
    RecurrentSpec,
    TensorSpec,
    load_bundle_manifest,
)
from edgerl.timing import TimingSpec

__all__ = [
    "ActionChunk",
    "ActionSpec",
    "BundleError",
    "ChunkError",
    "ChunkSpec",
    "EditObsConfig",
    "LatencyModel",
    "ObservationSpec",
    "Planner",
    "PlannerHealth",
    "PlannerInfo",
    "PolicySpec",
    "RecurrentSpec",
    "SchemaError",
    "TensorSpec",
    "TimingSpec",
    "__version__",
    "build_edit_obs",
    "compose_edit_action",
    "load_bundle_manifest",
    "select_chunk_rows",
]
