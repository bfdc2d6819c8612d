"""The bundle's parity checks: runners, the report, and one check per extra file.

Each check compares a reference (torch, or onnxruntime for TensorRT) with what a bundle file
computes on the same observations, and records a
:class:`~edgerl.export.parity.ParityReport` in :class:`BundleReport` (``parity.json``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edgerl.contract._version import __version__
from edgerl.contract.spec import PolicySpec
from edgerl.export.onnx_export import ActorSignature, ExportError
from edgerl.export.parity import (
    FP16_TOL,
    MIN_PARITY_OBS,
    MIN_ROLLOUT,
    OutputParity,
    ParityReport,
    check_parity,
    max_abs_err,
)
from edgerl.export.trt_compat import TrtCompatReport

__all__ = ["TRT_FP32_TOL", "BundleReport", "check_c_header", "check_inputs", "check_numpy_mlp",
           "check_tensorrt", "onnx_runner", "record_parity", "torch_runner"]

log = logging.getLogger(__name__)

#: TensorRT fp32 kernels (TF32 disabled) differ from onnxruntime's by summation order only.
TRT_FP32_TOL = 1e-4


@dataclass
class BundleReport:
    """What :func:`export_bundle` wrote and proved."""

    out_dir: Path
    spec: PolicySpec
    parity: dict[str, ParityReport] = field(default_factory=dict)
    trt_compat: TrtCompatReport | None = None
    notes: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def ok(self) -> bool:
        return all(p.ok for p in self.parity.values())

    def rows(self) -> list[dict[str, Any]]:
        """One summary row per parity check (for ``print_table``)."""
        return [{"check": name, "reference": p.reference, "candidate": p.candidate,
                 "observations": p.n_observations, "rollouts": p.n_rollouts,
                 "max_abs_err": p.max_abs_err,
                 "tolerance": max((o.tolerance for o in p.outputs), default=0.0),
                 "ok": p.ok} for name, p in self.parity.items()]

    def to_dict(self) -> dict[str, Any]:
        return {"out_dir": str(self.out_dir), "ok": self.ok, "seconds": self.seconds,
                "files": dict(self.spec.files),
                "parity": {k: v.to_dict() for k, v in self.parity.items()},
                "tensorrt_compat": self.trt_compat.to_dict() if self.trt_compat else None,
                "notes": list(self.notes)}


# --- runners -----------------------------------------------------------------------------------
def torch_runner(module: nn.Module):
    """``[obs, *state] (numpy) -> [action, *state_out] (numpy)`` through a PolicyModule."""
    module = module.eval()

    def run(arrays):
        with torch.no_grad():
            outs = module(*(torch.from_numpy(np.asarray(a, np.float32)) for a in arrays))
        return [o.detach().float().numpy() for o in outs]

    return run


def onnx_runner(path: str | Path, input_names: list[str]):
    """The same signature through an onnxruntime CPU session (one thread: deterministic)."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.intra_op_num_threads = 1
    opts.inter_op_num_threads = 1
    sess = ort.InferenceSession(str(path), sess_options=opts,
                                providers=["CPUExecutionProvider"])

    def run(arrays):
        return sess.run(None, {n: np.asarray(a, np.float32) for n, a in zip(input_names, arrays)})

    return run


def check_inputs(parity_inputs: Any, sig_kind: str, rollout_len: int) -> np.ndarray:
    """``parity_inputs`` as ``(N, D)`` float32, refused when too few, non-finite, or (recurrent
    ``sig_kind``) with rollouts too short."""
    obs = np.asarray(parity_inputs, dtype=np.float32)
    if obs.ndim != 2:
        raise ExportError(f"parity_inputs must be (N, D), got shape {obs.shape}")
    if obs.shape[0] < MIN_PARITY_OBS:
        raise ExportError(f"parity needs >= {MIN_PARITY_OBS} observations, got {obs.shape[0]}")
    if not np.all(np.isfinite(obs)):
        raise ExportError("parity_inputs contain NaN or inf")
    if sig_kind != "none" and rollout_len < MIN_ROLLOUT:
        raise ExportError(f"recurrent parity needs rollouts of >= {MIN_ROLLOUT} steps, "
                          f"got {rollout_len}")
    return obs


def record_parity(name: str, report: BundleReport, result: ParityReport) -> None:
    """Add ``result`` to ``report`` as ``name`` (a failure is logged)."""
    report.parity[name] = result
    if not result.ok:
        log.error("parity %s failed: %s", name, "; ".join(result.failures()))


def check_tensorrt(out_dir: Path, sig: ActorSignature, obs: np.ndarray, zero: list[np.ndarray],
         fp16: bool, rollout_len: int, report: BundleReport) -> None:
    """``policy.engine`` (built here) vs onnxruntime on ``policy.onnx``."""
    from edgerl.export.tensorrt import TrtRunner, build_engine

    engine = build_engine(out_dir / "policy.onnx", out_dir / "policy.engine", fp16=fp16)
    record_parity("tensorrt", report, check_parity(
        onnx_runner(out_dir / "policy.onnx", sig.input_names), TrtRunner(engine), obs,
        output_names=sig.output_names, zero_state=zero,
        tolerance=FP16_TOL if fp16 else TRT_FP32_TOL, rollout_len=rollout_len,
        reference_name="onnxruntime", candidate_name="tensorrt" + ("-fp16" if fp16 else "")))


def check_c_header(out_dir: Path, module: nn.Module, obs: np.ndarray, report: BundleReport,
              cc: str, name: str, tolerance: float) -> None:
    """``policy.h`` (written here, compiled with ``cc``) vs torch; noted, not failed, when no
    compiler runs here."""
    from edgerl.export.c_header import run_c_header, write_c_header

    info = write_c_header(out_dir / "policy.onnx", out_dir / "policy.h",
                          provenance=f"edgerl {__version__}")
    try:
        c_out = run_c_header(info.path, obs, cc=cc)
    except FileNotFoundError as exc:
        report.notes.append(f"policy.h written but not checked: {exc}")
        log.warning("policy.h parity skipped: %s", exc)
        return
    with torch.no_grad():
        ref = module(torch.from_numpy(obs))[0].numpy()
    record_parity("c_header", report, ParityReport(
        reference="torch", candidate=f"policy.h ({cc})", n_observations=int(obs.shape[0]),
        n_rollouts=0, rollout_len=0,
        outputs=[OutputParity(name, max_abs_err(ref, c_out), tolerance)]))


def check_numpy_mlp(out_dir: Path, module: nn.Module, obs: np.ndarray, report: BundleReport,
               name: str, tolerance: float) -> None:
    """``policy_mlp.npz`` for the runtime's numpy backend, when the graph is a plain MLP."""
    from edgerl.export.c_header import CHeaderError
    from edgerl.export.numpy_mlp import NPZ_NAME, write_mlp_npz
    from edgerl.runtime.inference import NumpyMLPBackend, load_mlp_npz

    try:
        path = write_mlp_npz(out_dir / "policy.onnx", out_dir / NPZ_NAME)
    except CHeaderError as exc:
        report.notes.append(f"no {NPZ_NAME} (numpy backend): {exc}")
        return
    backend = NumpyMLPBackend(load_mlp_npz(path))

    def run(arrays: list[np.ndarray]) -> list[np.ndarray]:
        backend.input[...] = arrays[0]
        return [backend.infer().copy()]

    record_parity("numpy_mlp", report, check_parity(
        torch_runner(module), run, obs, output_names=[name], tolerance=tolerance,
        candidate_name="numpy backend"))
