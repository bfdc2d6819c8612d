"""Write a deployable bundle: ``policy.onnx`` + ``manifest.json`` + ``parity.json`` (+ extras).

``export_bundle`` exports the actor, proves parity (torch vs onnxruntime, and vs TensorRT and
the C header when asked), checks TensorRT compatibility of the graph, and writes the manifest
last, with the sha256 of every file. A failed export leaves no ``manifest.json``, so a
half-written bundle can never be loaded.

Bundle layout::

    policy.onnx        edit policy, static batch 1, fp32, normalisation baked in
    policy_mlp.npz     the same MLP's weights for the runtime's numpy backend (plain MLPs)
    policy_fp16.onnx   (--fp16) same graph with fp16 weights/compute, fp32 inputs/outputs
    planner.onnx       when the planner is a learned torch network (chunk, and its intent
                       when it has an intent head)
    policy.engine      (--trt) TensorRT engine for this machine's GPU
    policy.h           (--c-header) plain C99 forward pass (MLP only)
    parity.json        every parity check and the TensorRT compatibility report
    manifest.json      PolicySpec: tensors, recurrent state, latency model, files' sha256
    manifest.sig       (sign_key) ed25519 signature of manifest.json

Every file written is listed with its sha256 (the runtime reads no unlisted file), and the
manifest must pass the runtime's semantic bounds (:mod:`edgerl.runtime.manifest_rules`)
before it is written, so an export never produces a bundle the robot would refuse.

This module writes the files in order; the checks are :mod:`edgerl.export.bundle_parity`, the
manifest :mod:`edgerl.export.bundle_manifest`.
"""


from __future__ import annotations

import contextlib
import copy
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from edgerl.contract.spec import MANIFEST_NAME, PolicySpec
from edgerl.export.bundle_manifest import (
    PARITY_NAME,
    signature_for,
    write_manifest,
    write_parity,
)
from edgerl.export.bundle_parity import (
    BundleReport,
    check_c_header,
    check_inputs,
    check_numpy_mlp,
    check_tensorrt,
    onnx_runner,
    record_parity,
    torch_runner,
)
from edgerl.export.onnx_export import (
    DEFAULT_OPSET,
    ExportError,
    OnnxExportConfig,
    PolicyModule,
    export_onnx,
    infer_signature,
)
from edgerl.export.parity import (
    FP16_TOL,
    FP32_TOL,
    check_parity,
    random_observations,
    record_observations,
)
from edgerl.export.trt_compat import check_tensorrt_compat

__all__ = ["collect_parity_inputs", "export_bundle"]

log = logging.getLogger(__name__)


class _HalfModule(nn.Module):
    """fp16 weights and compute with fp32 inputs/outputs (for ``policy_fp16.onnx``)."""

    def __init__(self, actor: nn.Module, n_states: int) -> None:
        super().__init__()
        self.inner = PolicyModule(copy.deepcopy(actor).half(), n_states)

    def forward(self, obs: torch.Tensor, *state: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = self.inner(obs.half(), *(s.half() for s in state))
        return tuple(o.float() for o in outs)


# --- helpers -----------------------------------------------------------------------------------

@contextlib.contextmanager
def _torch_threads(n: int) -> Iterator[None]:
    """Batch-1 torch calls are ~100x slower with contended intra-op threads (measured: LSTM
    14 ms vs 0.16 ms per step on a loaded 2-core machine); parity runs single-threaded."""
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)



class _PlannerWithIntent(nn.Module):
    """``x -> (chunk, intent)`` of a planner with an intent head (its ``forward_intent``)."""

    def __init__(self, planner: nn.Module) -> None:
        super().__init__()
        self.planner = planner

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.planner.forward_intent(x)


def _planner_intent_dim(planner: nn.Module, spec: PolicySpec) -> int:
    """The planner's intent size I, which must be the manifest's ``edit_obs.intent_dim``."""
    intent_dim = int(getattr(planner, "intent_dim", 0) or 0)
    if intent_dim and not callable(getattr(planner, "forward_intent", None)):
        raise ExportError(f"the planner has intent_dim {intent_dim} but no forward_intent(x) "
                          "-> (chunk, intent) to export it with")
    if intent_dim != spec.edit_obs.intent_dim:
        raise ExportError(f"the planner exports an intent of {intent_dim} values; the "
                          f"manifest's edit_obs.intent_dim is {spec.edit_obs.intent_dim} (the "
                          "edit policy must read what the planner sends)")
    return intent_dim


def _export_planner(planner: nn.Module, spec: PolicySpec, out_dir: Path, obs: np.ndarray,
                    config: OnnxExportConfig, report: BundleReport) -> dict[str, Any]:
    """``planner.onnx``: ``obs (1, P) -> chunk (1, ...)`` and, for a planner with an intent
    head, a second output ``intent (1, I)``; P from ``planner.input_dim`` (else the
    observation size). Parity (every output) on the first columns of the policy's parity
    observations (the raw observation comes first in the edit observation), then random."""
    from edgerl.runtime.planners.local.onnx import INTENT_OUTPUT

    p_dim = int(getattr(planner, "input_dim", spec.observation.dim))
    n_copy = min(p_dim, spec.observation.dim, obs.shape[1])
    planner_obs = random_observations(obs.shape[0], p_dim, seed=1)
    planner_obs[:, :n_copy] = obs[:, :n_copy]
    sig = infer_signature(planner, p_dim, [], any_output_rank=True)
    if sig.kind != "none":
        raise ExportError("recurrent planners are not supported by the bundle")
    sig.action_name = "chunk"
    n_out = int(np.prod(sig.output_shape))
    if n_out != spec.chunk.horizon * spec.action.dim:
        raise ExportError(f"the planner outputs {sig.output_shape} ({n_out} elements); the "
                          f"manifest's chunk needs horizon*action = "
                          f"{spec.chunk.horizon}*{spec.action.dim}")
    intent_dim = _planner_intent_dim(planner, spec)
    module = _PlannerWithIntent(planner) if intent_dim else planner
    if intent_dim:
        sig.extra_outputs = [INTENT_OUTPUT]
    path = export_onnx(module, out_dir / "planner.onnx", sig, config)
    record_parity("planner_onnx", report, check_parity(
        torch_runner(PolicyModule(module, 0, len(sig.extra_outputs))),
        onnx_runner(path, sig.input_names), planner_obs, output_names=sig.output_names,
        tolerance=FP32_TOL))
    info = {"file": "planner.onnx", "inputs": sig.input_names, "outputs": sig.output_names,
            "input_dim": p_dim, "output_shape": sig.output_shape}
    if intent_dim:
        info["intent_dim"] = intent_dim
    return info


# --- the entry point ---------------------------------------------------------------------------
def export_bundle(actor: nn.Module, spec: PolicySpec, out_dir: str | Path,
                  parity_inputs: Any, *, planner: nn.Module | None = None,
                  opset: int = DEFAULT_OPSET, fp16: bool = False, c_header: bool = False,
                  trt: bool = False, exporter: str = "torchscript", rollout_len: int = 100,
                  tolerance: float = FP32_TOL, cc: str = "gcc",
                  sign_key: str | Path | None = None) -> BundleReport:
    """Export ``actor`` with ``spec`` into ``out_dir`` and prove parity.

    ``parity_inputs``: (N, D) float32 observations as the runtime feeds them (N >=
    1000; recorded from the task plus random ones, see :func:`collect_parity_inputs`);
    D is the actor's input size. Recurrent actors are checked over rollouts of
    ``rollout_len`` (>= 50) steps with state fed back. Raises :class:`ExportError` when any
    parity check exceeds its tolerance (``tolerance`` for fp32 ONNX and the C header),
    :class:`edgerl.export.tensorrt.TensorRTUnavailable` when ``trt`` cannot run here, and
    :class:`edgerl.export.c_header.CHeaderError` when ``c_header`` is asked of a non-MLP,
    and :class:`edgerl.contract.bundle_errors.ManifestValueError` when ``spec`` is outside the
    runtime's bounds. ``sign_key`` (an ed25519 PEM private key from ``edgerl keygen``)
    writes ``manifest.sig``.
    """
    with _torch_threads(1):
        report = _export_bundle(actor, spec, out_dir, parity_inputs, planner=planner,
                                opset=opset, fp16=fp16, c_header=c_header, trt=trt,
                                exporter=exporter, rollout_len=rollout_len,
                                tolerance=tolerance, cc=cc)
    if sign_key is not None:
        from edgerl.runtime.bundle_sign import sign_manifest

        sign_manifest(report.out_dir, sign_key)
        report.notes.append(f"manifest signed with {sign_key}")
    return report


def _export_bundle(actor: nn.Module, spec: PolicySpec, out_dir: str | Path, parity_inputs: Any,
                   *, planner: nn.Module | None, opset: int, fp16: bool, c_header: bool,
                   trt: bool, exporter: str, rollout_len: int, tolerance: float,
                   cc: str) -> BundleReport:
    t_start = time.perf_counter()
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for stale in (MANIFEST_NAME, "manifest.sig", "policy_mlp.npz", "policy_fp16.onnx",
                  "planner.onnx", "policy.engine", "policy.h"):
        (out_dir / stale).unlink(missing_ok=True)  # a re-export never mixes in old files
    actor = copy.deepcopy(actor).eval().cpu().float()  # never move the caller's model
    obs_probe = np.asarray(parity_inputs)
    if obs_probe.ndim != 2:
        raise ExportError(f"parity_inputs must be (N, D), got shape {obs_probe.shape}")
    sig = signature_for(actor, spec, int(obs_probe.shape[1]))
    obs = check_inputs(parity_inputs, sig.kind, rollout_len)
    config = OnnxExportConfig(opset=opset, exporter=exporter)
    report = BundleReport(out_dir=out_dir, spec=spec)
    module = PolicyModule(actor, len(sig.state_inputs)).eval()
    zero = [s.numpy() for s in sig.zero_state()]

    export_onnx(actor, out_dir / "policy.onnx", sig, config)
    record_parity("policy_onnx", report, check_parity(
        torch_runner(module), onnx_runner(out_dir / "policy.onnx", sig.input_names), obs,
        output_names=sig.output_names, zero_state=zero, tolerance=tolerance,
        rollout_len=rollout_len))
    report.trt_compat = check_tensorrt_compat(out_dir / "policy.onnx", require_static=True)
    if not report.trt_compat.ok:
        report.notes.append("TensorRT compatibility: " + "; ".join(report.trt_compat.errors))
    if sig.kind == "none":
        check_numpy_mlp(out_dir, module, obs, report, sig.action_name, tolerance)
    if fp16:
        half = _HalfModule(actor, len(sig.state_inputs))
        export_onnx(half, out_dir / "policy_fp16.onnx", sig, config)
        record_parity("policy_fp16_onnx", report, check_parity(
            torch_runner(module), onnx_runner(out_dir / "policy_fp16.onnx", sig.input_names),
            obs, output_names=sig.output_names, zero_state=zero, tolerance=FP16_TOL,
            rollout_len=rollout_len, candidate_name="onnxruntime-fp16"))
    extra_export: dict[str, Any] = {
        "opset": opset, "exporter": exporter, "input_dim": sig.input_dim, "batch": 1,
        "fp16_file": "policy_fp16.onnx" if fp16 else None}
    if planner is not None:
        if isinstance(planner, nn.Module):
            extra_export["planner"] = _export_planner(copy.deepcopy(planner).eval().cpu().float(),
                                                      spec,
                                                      out_dir, obs, config, report)
        else:
            report.notes.append(f"planner {type(planner).__name__} is not a torch network; "
                                "no planner.onnx written")
    if c_header:
        check_c_header(out_dir, module, obs, report, cc, sig.action_name, tolerance)
    if trt:
        check_tensorrt(out_dir, sig, obs, zero, fp16, rollout_len, report)

    report.seconds = time.perf_counter() - t_start
    write_parity(out_dir, report)
    if not report.ok:
        failures = [f"{name}: {'; '.join(p.failures())}" for name, p in report.parity.items()
                    if not p.ok]
        raise ExportError("parity over tolerance, bundle not written (see "
                          f"{out_dir / PARITY_NAME}): " + " | ".join(failures))
    final = write_manifest(out_dir, spec, sig, report, extra_export)
    report.spec = final
    log.info("bundle %s written in %.1f s: %s", out_dir, report.seconds, ", ".join(final.files))
    return report


def collect_parity_inputs(input_dim: int, *, env: Any = None, n_recorded: int = 1000,
                          n_random: int = 1000, seed: int = 0,
                          action_low: Any = None, action_high: Any = None) -> np.ndarray:
    """(n_recorded + n_random, D) observations: recorded from ``env`` (if given) then random.

    Random rows are ``N(mean, (2 * std)^2)`` of the recorded rows (standard normal without an
    env), i.e. deliberately wider than what training saw.
    """
    parts = []
    center: Any = 0.0
    scale: Any = 1.0
    if env is not None and n_recorded > 0:
        rec = record_observations(env, n_recorded, seed=seed, action_low=action_low,
                                  action_high=action_high)
        if rec.shape[1] != input_dim:
            raise ExportError(f"the env's policy observation has {rec.shape[1]} elements but "
                              f"the actor takes {input_dim}")
        parts.append(rec)
        center, scale = rec.mean(axis=0), 2.0 * rec.std(axis=0) + 1e-3
    parts.append(random_observations(n_random, input_dim, scale=scale, center=center,
                                     seed=seed + 1))
    return np.concatenate(parts).astype(np.float32)
