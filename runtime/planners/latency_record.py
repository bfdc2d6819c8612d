"""Measured planner latency files: what the robot saw, in a form training reads back.

A *latency model file* is JSON::

    {"control_hz": 50.0, "source": "deploy", "samples": 212, "p50_ms": 201.3,
     "p99_ms": 236.0, "latency": {<LatencyModel: delay_distribution over 0, 1, 2... steps>}}

``edgerl bench planner --write-latency-model`` writes the bare ``latency`` object (no
``control_hz``); :func:`load_latency_file` reads both. ``edgerl deploy`` (from the MCAP
recording: each chunk's header stamp, the planner's observation time, to its arrival on the
graph), ``edgerl hil`` (the planner client's request -> chunk latencies) and the bench write
the full form; ``edgerl train --latency-model FILE`` trains on it (see docs/sim.md).
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract.serde import SchemaError, from_dict, to_dict
from edgerl.contract.spec import LatencyModel
from edgerl.runtime.planners.latency_model import latency_model_from_samples

__all__ = ["MeasuredLatency", "chunk_latencies_from_recording", "load_latency_file",
           "measure_latency", "save_latency_file"]


@dataclass
class MeasuredLatency:
    """A measured planner delay model.

    Attributes:
        latency: Delay distribution over whole control steps (``LatencyModel``).
        control_hz: The control rate its steps count (``None``: unknown, a bare model).
        source: Where it was measured (``deploy``, ``hil``, ``bench``, a file name).
        samples: Number of latencies measured.
        p50_ms / p99_ms: Their percentiles (ms).
    """

    latency: LatencyModel
    control_hz: float | None = None
    source: str = ""
    samples: int = 0
    p50_ms: float = float("nan")
    p99_ms: float = float("nan")


def measure_latency(latencies_s: np.ndarray, control_hz: float, period_steps: int,
                    source: str) -> MeasuredLatency:
    """The model of ``latencies_s`` (seconds, ``(n,)``, n >= 1) at ``control_hz``."""
    lat = np.asarray(latencies_s, dtype=np.float64)
    lat = lat[np.isfinite(lat)]
    if lat.size == 0:
        raise ValueError(f"{source}: no planner latency was measured (no chunk arrived)")
    if (lat < 0).any():
        raise ValueError(f"{source}: {int((lat < 0).sum())} negative latencies (clocks out of "
                         "sync?)")
    model = latency_model_from_samples(lat, 1.0 / control_hz, period_steps)
    return MeasuredLatency(latency=model, control_hz=float(control_hz), source=source,
                           samples=int(lat.size), p50_ms=float(np.percentile(lat, 50) * 1e3),
                           p99_ms=float(np.percentile(lat, 99) * 1e3))


def save_latency_file(measured: MeasuredLatency, path: str | Path) -> Path:
    """Write ``measured`` as a latency model file."""
    path = Path(path)
    doc = {k: v for k, v in to_dict(measured).items() if not (isinstance(v, float)
                                                               and not math.isfinite(v))}
    path.write_text(json.dumps(doc, indent=2) + "\n")
    return path


def load_latency_file(path: str | Path) -> MeasuredLatency:
    """Read a latency model file (full form, or a bare ``LatencyModel`` as ``bench planner``
    writes); raises ``SchemaError`` naming the file and the bad field."""
    path = Path(path)
    try:
        doc: Any = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as exc:
        raise SchemaError(f"{path}: not a readable latency model file ({exc})") from exc
    try:
        if isinstance(doc, dict) and "latency" in doc:
            return from_dict(MeasuredLatency, doc, str(path))
        return MeasuredLatency(latency=from_dict(LatencyModel, doc, f"{path}:latency"),
                               source=path.name)
    except SchemaError as exc:
        raise SchemaError(f"{exc}") from exc


def chunk_latencies_from_recording(data: dict[str, list[tuple[int, Any]]],
                                   topic: str = "/planner/chunk") -> np.ndarray:
    """Seconds from each chunk's header stamp (the planner's observation time, wall ns) to
    its arrival on the graph (the recorder's log time, wall ns): ``(n,)`` float64.

    ``data`` is ``edgerl_ros.recording.read_recording``'s ``{topic: [(log_ns, msg)]}``.
    """
    name = topic if topic in data else topic.lstrip("/")
    if name not in data:
        raise ValueError(f"the recording has no {topic} messages (topics: "
                         f"{', '.join(sorted(data)) or 'none'})")
    out = []
    for log_ns, msg in data[name]:
        stamp = msg.header.stamp
        stamp_ns = int(stamp.sec) * 1_000_000_000 + int(stamp.nanosec)
        out.append((int(log_ns) - stamp_ns) * 1e-9)
    return np.asarray(out, dtype=np.float64)
