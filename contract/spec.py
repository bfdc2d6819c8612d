"""``PolicySpec``: everything the runtime must know about an exported policy.

Serialised as ``manifest.json`` in a bundle directory next to ``policy.onnx`` (and
``planner.onnx``, ``policy.h``...). The schema is versioned: a manifest from a newer schema, a
missing field, an unknown field or a wrong type is refused with a message naming the field.
File hashes (sha256) are checked by :func:`load_bundle_manifest` so a retrained ONNX dropped
into an old bundle is caught before it drives a robot.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.contract._version import __version__
from edgerl.contract.bundle_errors import (
    BundleError,
    BundleFileError,
    ManifestSchemaError,
    ManifestSizeError,
)
from edgerl.contract.bundle_files import manifest_path, read_capped, sha256_file, verify_files
from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.gate_obs import GateSpec
from edgerl.contract.manifest_json import MAX_MANIFEST_BYTES, parse_json_document
from edgerl.contract.serde import SchemaError, from_dict, to_dict
from edgerl.contract.timing import LatencyModel, TimingSpec

__all__ = [
    "MANIFEST_NAME",
    "SCHEMA_VERSION",
    "ActionSpec",
    "BundleError",
    "ChunkSpec",
    "LatencyModel",
    "ObservationSpec",
    "PolicySpec",
    "RecurrentSpec",
    "TensorSpec",
    "TimingSpec",
    "load_bundle_manifest",
    "read_manifest_bytes",
    "sha256_file",
]

#: Version of the manifest schema this edgerl writes and the newest it reads. Version 2 adds
#: ``timing`` (the whole :class:`~edgerl.contract.timing.TimingSpec`); a version-1 manifest gets the
#: timing its training used, derived from ``chunk``, ``latency`` and ``method``.
SCHEMA_VERSION = 2
MANIFEST_NAME = "manifest.json"


def _check_len(name: str, values: list, n: int) -> None:
    if len(values) != n:
        raise SchemaError(f"{name}: expected {n} entries (one per element), got {len(values)}")


@dataclass
class ObservationSpec:
    """Layout of the robot observation (before the edit-policy augmentation).

    ``names[i]``/``units[i]`` describe element ``i``; the network sees ``(x - mean) / std``
    (normalisation baked into the ONNX graph when ``normalized_in_graph``).
    """

    names: list[str]
    units: list[str]
    mean: list[float]
    std: list[float]
    normalized_in_graph: bool = True

    def __post_init__(self) -> None:
        n = len(self.names)
        if n == 0:
            raise SchemaError("observation.names: must not be empty")
        if len(set(self.names)) != n:
            raise SchemaError("observation.names: names must be unique")
        for key in ("units", "mean", "std"):
            _check_len(f"observation.{key}", getattr(self, key), n)
        for i, s in enumerate(self.std):
            if not s > 0:
                raise SchemaError(f"observation.std[{i}]: must be > 0, got {s}")

    @property
    def dim(self) -> int:
        """Observation size O."""
        return len(self.names)


@dataclass
class ActionSpec:
    """Layout and limits of the command: ``command = clip(action, low, high)`` per element.

    ``max_rate`` (units per second, 0 = unlimited) bounds how fast each element may change.
    """

    names: list[str]
    units: list[str]
    low: list[float]
    high: list[float]
    max_rate: list[float] = field(default_factory=list)

    def __post_init__(self) -> None:
        n = len(self.names)
        if n == 0:
            raise SchemaError("action.names: must not be empty")
        if len(set(self.names)) != n:
            raise SchemaError("action.names: names must be unique")
        for key in ("units", "low", "high"):
            _check_len(f"action.{key}", getattr(self, key), n)
        if not self.max_rate:
            self.max_rate = [0.0] * n
        _check_len("action.max_rate", self.max_rate, n)
        for i, (lo, hi) in enumerate(zip(self.low, self.high)):
            if not lo < hi:
                raise SchemaError(f"action.low[{i}]: must be below action.high[{i}] ({lo} >= {hi})")

    @property
    def dim(self) -> int:
        """Action size A."""
        return len(self.names)


@dataclass
class ChunkSpec:
    """The planner's chunks: ``horizon`` rows spaced ``dt_s`` apart, one every ``period_s``."""

    horizon: int
    dt_s: float
    period_s: float
    expected_latency_s: float = 0.0

    def __post_init__(self) -> None:
        if self.horizon < 1:
            raise SchemaError(f"chunk.horizon: must be >= 1, got {self.horizon}")
        for key in ("dt_s", "period_s"):
            if not getattr(self, key) > 0:
                raise SchemaError(f"chunk.{key}: must be > 0, got {getattr(self, key)}")
        if self.expected_latency_s < 0:
            raise SchemaError("chunk.expected_latency_s: must be >= 0")


@dataclass
class TensorSpec:
    """ONNX input/output tensor names, in order."""

    inputs: list[str] = field(default_factory=lambda: ["obs"])
    outputs: list[str] = field(default_factory=lambda: ["action"])


@dataclass
class RecurrentSpec:
    """Recurrent state carried between ticks: ``kind`` is ``none``, ``gru`` or ``lstm``.

    ``state_shapes`` lists the per-state tensor shapes (batch 1); state ``i`` is input
    ``state_inputs[i]`` and comes back as output ``state_outputs[i]``; reset to zeros at start.
    """

    kind: str = "none"
    state_inputs: list[str] = field(default_factory=list)
    state_outputs: list[str] = field(default_factory=list)
    state_shapes: list[list[int]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.kind not in ("none", "gru", "lstm"):
            raise SchemaError(f"recurrent.kind: must be none, gru or lstm, got {self.kind!r}")
        n = len(self.state_inputs)
        if len(self.state_outputs) != n or len(self.state_shapes) != n:
            raise SchemaError("recurrent: state_inputs, state_outputs and state_shapes must "
                              "have the same length")
        if self.kind != "none" and n == 0:
            raise SchemaError(f"recurrent.state_inputs: a {self.kind} policy needs state tensors")


@dataclass
class PolicySpec:
    """The manifest of a bundle: the one description shared by training and deployment."""

    task: str
    method: str
    control_hz: float
    observation: ObservationSpec
    action: ActionSpec
    chunk: ChunkSpec
    edit_obs: EditObsConfig
    latency: LatencyModel = field(default_factory=LatencyModel)
    tensors: TensorSpec = field(default_factory=TensorSpec)
    recurrent: RecurrentSpec = field(default_factory=RecurrentSpec)
    #: Edit methods: the residual added to the chunk row is bounded to +-residual_bound.
    residual_bound: float = 0.0
    #: Bundle files (relative name -> sha256 hex); checked on load.
    files: dict[str, str] = field(default_factory=dict)
    schema_version: int = SCHEMA_VERSION
    edgerl_version: str = __version__
    #: Free-form provenance (training run, seed, metrics); never interpreted by the runtime.
    extra: dict[str, Any] = field(default_factory=dict)
    #: All chunk timing (horizon, delays, stale, merge, trigger); ``None`` = derived from
    #: ``chunk``/``latency``/``method`` by the rules of :mod:`edgerl.contract.timing`.
    timing: TimingSpec | None = None
    #: The planning-budget gate (``gate.onnx``; :mod:`edgerl.contract.gate_obs`), ``None`` = no gate
    #: (the key is then left out of the JSON, so gate-less manifests are unchanged).
    gate: GateSpec | None = None

    def __post_init__(self) -> None:
        if not self.control_hz > 0:
            raise SchemaError(f"control_hz: must be > 0, got {self.control_hz}")
        if self.edit_obs.obs_dim != self.observation.dim:
            raise SchemaError(f"edit_obs.obs_dim: {self.edit_obs.obs_dim} does not match "
                              f"observation.names ({self.observation.dim})")
        if self.edit_obs.action_dim != self.action.dim:
            raise SchemaError(f"edit_obs.action_dim: {self.edit_obs.action_dim} does not match "
                              f"action.names ({self.action.dim})")
        if self.timing is None:
            self.timing = self.derived_timing()
            self.latency = self.timing.latency
        self._check_timing(self.timing)
        self._check_gate(self.gate)

    def _check_gate(self, gate: GateSpec | None) -> None:
        if gate is None:
            return
        if gate.fast_indices and gate.fast_indices[-1] >= self.observation.dim:
            raise SchemaError(f"gate.fast_indices: {gate.fast_indices[-1]} is outside the "
                              f"observation ({self.observation.dim} elements)")
        longest = max((b.horizon for b in gate.budgets if not b.keep), default=0)
        if longest > self.chunk.horizon:
            raise SchemaError(f"gate.budgets: a plan of {longest} rows exceeds chunk.horizon "
                              f"({self.chunk.horizon})")

    def derived_timing(self) -> TimingSpec:
        """The timing a manifest without ``timing`` (schema 1) was trained with: P from
        ``chunk.period_s``, stale after ``H + P``, ``rtc`` blends over P, clock trigger."""
        period = max(1, round(self.chunk.period_s / self.chunk.dt_s))
        lat = LatencyModel(**{**to_dict(self.latency), "planner_period_steps": period})
        return TimingSpec.build(self.control_hz, lat, self.method, horizon=self.chunk.horizon,
                                lookahead=self.edit_obs.lookahead)

    def _check_timing(self, timing: TimingSpec) -> None:
        if timing.horizon != self.chunk.horizon:
            raise SchemaError(f"timing.horizon: {timing.horizon} does not match chunk.horizon "
                              f"({self.chunk.horizon})")
        if not math.isclose(timing.control_hz, self.control_hz, rel_tol=1e-9):
            raise SchemaError(f"timing.control_hz: {timing.control_hz} does not match "
                              f"control_hz ({self.control_hz})")
        if timing.latency != self.latency:
            raise SchemaError("latency: does not match timing.latency (the manifest's timing "
                              "is authoritative; write the same model in both)")

    @property
    def control_dt(self) -> float:
        """Control period in seconds."""
        return 1.0 / self.control_hz

    # --- (de)serialisation ---------------------------------------------------------------
    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-compatible dict (without ``gate`` when there is none)."""
        out = to_dict(self)
        if out.get("gate") is None:
            out.pop("gate", None)
        return out

    def to_json(self) -> str:
        """Strict JSON (no NaN/Infinity), stable key order, 2-space indent."""
        return json.dumps(self.to_dict(), indent=2, sort_keys=False, allow_nan=False) + "\n"

    @classmethod
    def from_dict(cls, data: Any) -> PolicySpec:
        """Validate and build; raises :class:`SchemaError` naming the offending field."""
        if not isinstance(data, dict):
            raise SchemaError(f"manifest: expected an object, got {type(data).__name__}")
        version = data.get("schema_version")
        if version is None:
            raise SchemaError("manifest.schema_version: missing required field")
        if isinstance(version, bool) or not isinstance(version, int):
            raise SchemaError(f"manifest.schema_version: expected an integer, got {version!r}")
        if version > SCHEMA_VERSION:
            raise SchemaError(f"manifest.schema_version: {version} is newer than this edgerl "
                              f"({__version__}) reads (<= {SCHEMA_VERSION}); upgrade edgerl")
        if version < 1:
            raise SchemaError(f"manifest.schema_version: unknown version {version}")
        return from_dict(cls, data, "manifest")

    @classmethod
    def from_json(cls, text: str | bytes) -> PolicySpec:
        """Parse JSON text or UTF-8 bytes with
        :func:`~edgerl.contract.manifest_json.parse_json_document`
        (size, encoding, syntax, nesting: each a named error); a field error is a
        :class:`~edgerl.contract.bundle_errors.ManifestSchemaError` (also a
        :class:`SchemaError`)."""
        data = parse_json_document(text.encode("utf-8", "surrogatepass")
                                   if isinstance(text, str) else text)
        try:
            return cls.from_dict(data)
        except ManifestSchemaError:
            raise
        except SchemaError as exc:
            raise ManifestSchemaError(str(exc)) from None

    def save(self, path: str | Path) -> Path:
        """Write the manifest to ``path`` (a file, or a bundle directory)."""
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        path.write_text(self.to_json())
        return path

    @classmethod
    def load(cls, path: str | Path) -> PolicySpec:
        """Read a manifest file (or ``DIR/manifest.json``) without checking file hashes."""
        path = Path(path)
        if path.is_dir():
            path = path / MANIFEST_NAME
        return cls.from_json(read_manifest_bytes(path))


def read_manifest_bytes(path: str | Path) -> bytes:
    """The bytes of a manifest file, refusing a missing, unreadable or oversized one."""
    path = Path(path)
    if not path.is_file():
        raise BundleFileError(f"{path}: no manifest found")
    return read_capped(path, MAX_MANIFEST_BYTES, size_error=ManifestSizeError)


def load_bundle_manifest(bundle_dir: str | Path, *, verify: bool = True) -> PolicySpec:
    """Load ``bundle_dir/manifest.json`` and (by default) verify every listed file's sha256.

    Raises a :class:`BundleError` subclass (:mod:`edgerl.contract.bundle_errors`) naming the
    missing,
    modified or out-of-bundle file (:mod:`edgerl.contract.bundle_files`), or the bad manifest field.
    The full load-time check (semantic bounds, parity, unlisted files, signature) is
    :func:`edgerl.runtime.bundle_check.verify_bundle`.
    """
    bundle_dir = Path(bundle_dir)
    if not bundle_dir.is_dir():
        raise BundleFileError(f"{bundle_dir}: bundle directory not found")
    spec = PolicySpec.load(manifest_path(bundle_dir, MANIFEST_NAME))
    if verify:
        verify_files(bundle_dir, spec.files)
    return spec
