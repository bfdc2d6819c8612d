"""edgerl.contract: the bottom layer, shared by training and deployment (numpy only).

:class:`ActionChunk`, :class:`PolicySpec` (``manifest.json``), the edit-observation builder,
the planner interface, clocks, :class:`TimingSpec` (every chunk-timing rule) and the serial
wire format (``edgerl.contract.wire``). Every other layer imports it; it imports none of them.
The layers above, one folder each: ``edgerl.sim`` (tasks, latency wrappers),
``edgerl.runtime`` (the on-device loop; no torch, no simulators), ``edgerl.policies``
(planners, edit policy, PPO training), ``edgerl.export`` (ONNX bundles), ``edgerl.hil``
(firmware in the loop), ``edgerl.bench`` (measurements) and ``edgerl.apps`` (CLI, demo, soak).
"""

from __future__ import annotations

from edgerl.contract._version import __version__
from edgerl.contract.chunk import ActionChunk, ChunkError
from edgerl.contract.edit_obs import (
    EditObsConfig,
    build_edit_obs,
    compose_edit_action,
    select_chunk_rows,
)
from edgerl.contract.planner import Planner, PlannerHealth, PlannerInfo
from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import (
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
from edgerl.contract.timing import TimingSpec

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
