"""``gate.onnx``: a trained planning-budget gate (``edgerl gate train``) into a bundle.

The gate actor (rsl_rl ``MLPModel``, normaliser baked in by ``as_onnx()``) becomes
``gate.onnx``: ``obs (1, F + 4) -> scores (1, B)``. The manifest gets a ``gate`` section
(:class:`~edgerl.contract.gate_obs.GateSpec`: budgets with their latency models, decision steps,
observation layout), ``parity.json`` two more checks:

* ``gate_onnx``: torch vs onnxruntime scores, max abs error <= 1e-5;
* ``gate_argmax``: the fraction of observations where the chosen budget differs (must be 0).

Parity observations are recorded from the gated env under random budgets (so they hold
plans of every age, no plan and plans in flight) plus the same number of random ones.

Two ways in: ``--bundle DIR`` adds the gate to an existing bundle of the same task (its
observation layout must match; a stale ``manifest.sig`` is removed: sign again), ``--out
DIR`` writes a planner-method bundle holding only the gate (commands are the planner's chunk
rows, as in the gated env).
"""

from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch

from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.gate_obs import GATE_FILE, GateSpec
from edgerl.contract.spec import (
    MANIFEST_NAME,
    ActionSpec,
    ChunkSpec,
    ObservationSpec,
    PolicySpec,
    TimingSpec,
    sha256_file,
)
from edgerl.contract.timing_rules import LatencyModel, max_planner_delay
from edgerl.export.bundle_manifest import BUNDLE_FILES, PARITY_NAME
from edgerl.export.bundle_parity import onnx_runner, torch_runner
from edgerl.export.onnx_export import (
    ExportError,
    OnnxExportConfig,
    PolicyModule,
    export_onnx,
    infer_signature,
)
from edgerl.export.parity import (
    OutputParity,
    ParityReport,
    check_parity,
    fp32_tolerance_for,
)

__all__ = ["GateExport", "export_gate", "gate_only_spec", "gate_parity_observations"]

log = logging.getLogger(__name__)


@dataclass
class GateExport:
    """What :func:`export_gate` wrote: the bundle, its manifest and the two parity checks."""

    bundle: Path
    spec: PolicySpec
    scores: ParityReport
    argmax: ParityReport

    @property
    def ok(self) -> bool:
        return self.scores.ok and self.argmax.ok


def gate_parity_observations(cfg: Any, n: int, seed: int = 0) -> np.ndarray:
    """(2n, F + 4) float32: ``n`` gate observations recorded under random budgets from the
    run's gated env, then ``n`` random normal ones."""
    from edgerl.policies.gate.policy import make_gate_env

    env = make_gate_env(cfg, 8, seed)
    gen = torch.Generator().manual_seed(seed)
    rows = []
    try:
        obs = env.get_observations()
        while sum(r.shape[0] for r in rows) < n:
            rows.append(obs["policy"].cpu().numpy())
            pick = torch.randint(0, env.num_budgets, (env.num_envs,), generator=gen)
            obs, *_ = env.step(pick)
        dim = env.policy_obs_dim
    finally:
        env.close()
    recorded = np.concatenate(rows)[:n]
    noise = np.random.default_rng(seed).standard_normal((n, dim))
    return np.concatenate((recorded, noise)).astype(np.float32)


def gate_only_spec(cfg: Any, gate: GateSpec) -> PolicySpec:
    """A ``planner``-method manifest for the gate run's task holding only the gate: chunk
    horizon = the longest budget's, period = the decision interval, stale after
    ``gate.stale_steps``; the command is the chunk row."""
    from edgerl.sim.registry import make_task

    task = make_task(cfg.task, num_envs=1, seed=cfg.seed, **cfg.task_kwargs)
    ts = task.spec
    task.close()
    plans = [b for b in gate.budgets if not b.keep]
    horizon = max((b.horizon for b in plans), default=1)
    delay = max((max_planner_delay(b.latency) for b in plans), default=0)
    lat = LatencyModel(planner_delay_steps=delay, planner_period_steps=gate.decision_steps)
    dt = 1.0 / float(ts.control_hz)
    obs_dim, act_dim = len(ts.obs_names), len(ts.action_names)
    return PolicySpec(
        task=ts.name, method="planner", control_hz=float(ts.control_hz),
        observation=ObservationSpec(names=list(ts.obs_names), units=list(ts.obs_units),
                                    mean=[0.0] * obs_dim, std=[1.0] * obs_dim),
        action=ActionSpec(names=list(ts.action_names), units=list(ts.action_units),
                          low=[float(x) for x in ts.action_low],
                          high=[float(x) for x in ts.action_high]),
        chunk=ChunkSpec(horizon=horizon, dt_s=dt, period_s=gate.decision_steps * dt),
        edit_obs=EditObsConfig(obs_dim=obs_dim, action_dim=act_dim,
                               obs_indices=list(gate.fast_indices)),
        latency=lat,
        timing=TimingSpec.build(float(ts.control_hz), lat, "planner", horizon=horizon,
                                stale_steps=gate.stale_steps, merge="replace"),
        extra={"task_kwargs": dict(cfg.task_kwargs)})


def _check_fits(spec: PolicySpec, gate: GateSpec, cfg: Any, bundle: Path) -> None:
    if spec.task != cfg.task:
        raise ExportError(f"{bundle}: bundle task {spec.task!r}, gate task {cfg.task!r}")
    plans = [b.horizon for b in gate.budgets if not b.keep]
    if plans and max(plans) > spec.chunk.horizon:
        raise ExportError(f"{bundle}: chunk.horizon {spec.chunk.horizon} is shorter than the "
                          f"gate's longest plan ({max(plans)} rows)")


def export_gate(run_dir: str | Path, bundle: str | Path, *, create: bool = False,
                n_parity: int = 256, seed: int = 0, opset: int = 17) -> GateExport:
    """Write ``gate.onnx`` and the manifest's ``gate`` into ``bundle`` (``create``: a new
    gate-only bundle there). Raises :class:`ExportError` on a failed parity check (nothing
    is listed in the manifest then)."""
    from edgerl.policies.gate.policy import load_gate_actor
    from edgerl.runtime.bundle_check import verify_bundle
    from edgerl.sim.gate.env import gate_spec

    bundle = Path(bundle)
    cfg, actor = load_gate_actor(run_dir)
    env_spec, action_dim = _task_fast_indices(cfg)
    gate = gate_spec(cfg.gate_cfg(cfg.seed), env_spec, action_dim)
    # a categorical head exports its logits: the runtime may sample the policy PPO trained
    gate = dataclasses.replace(gate, outputs="logits" if cfg.head == "categorical" else "scores")
    if create:
        bundle.mkdir(parents=True, exist_ok=True)
        for stale in (*BUNDLE_FILES, MANIFEST_NAME, "manifest.sig"):
            (bundle / stale).unlink(missing_ok=True)
        spec = gate_only_spec(cfg, gate)
    else:
        spec = verify_bundle(bundle)
        _check_fits(spec, gate, cfg, bundle)
    module = actor.as_onnx(verbose=False).eval()
    sig = infer_signature(module, gate.dim)
    if sig.action_dim != len(gate.budgets):
        raise ExportError(f"the gate outputs {sig.action_dim} scores for {len(gate.budgets)} "
                          "budgets")
    sig.obs_name, sig.action_name = gate.input, gate.output
    path = export_onnx(module, bundle / GATE_FILE, sig, OnnxExportConfig(opset=opset))
    obs = gate_parity_observations(cfg, n_parity, seed)
    ref, cand = torch_runner(PolicyModule(module, 0)), onnx_runner(path, sig.input_names)
    with torch.no_grad():
        tol = fp32_tolerance_for(module(torch.as_tensor(obs)).numpy())
    scores = check_parity(ref, cand, obs, output_names=[gate.output], tolerance=tol)
    argmax = _argmax_parity(ref, cand, obs)
    if not (scores.ok and argmax.ok):
        path.unlink(missing_ok=True)
        raise ExportError(f"gate parity failed: {'; '.join(scores.failures() + argmax.failures())}")
    spec = dataclasses.replace(spec, gate=gate)
    _write_parity(bundle, {"gate_onnx": scores, "gate_argmax": argmax})
    spec.extra = {**spec.extra, "gate": {"run_dir": str(run_dir), "seed": cfg.seed,
                                         "task_kwargs": dict(cfg.task_kwargs)}}
    spec.files = {**{n: sha256_file(bundle / n) for n in spec.files if (bundle / n).is_file()},
                  GATE_FILE: sha256_file(path), PARITY_NAME: sha256_file(bundle / PARITY_NAME)}
    from edgerl.runtime.manifest_rules import check_manifest_values

    check_manifest_values(spec)
    if (bundle / "manifest.sig").exists():
        log.warning("%s: removing manifest.sig (the manifest changed); sign it again",
                    bundle)
        (bundle / "manifest.sig").unlink()
    spec.save(bundle / MANIFEST_NAME)
    log.info("gate written to %s: scores max abs err %.3g, argmax disagreements %g", bundle,
             scores.max_abs_err, argmax.max_abs_err)
    return GateExport(bundle=bundle, spec=spec, scores=scores, argmax=argmax)


def _task_fast_indices(cfg: Any) -> tuple[list[int], int]:
    """The task's fast observation indices and its action size."""
    from edgerl.sim.registry import make_task

    task = make_task(cfg.task, num_envs=1, seed=cfg.seed, **cfg.task_kwargs)
    idx, action_dim = list(task.spec.fast_obs_indices), int(task.num_actions)
    task.close()
    return idx, action_dim


def _argmax_parity(ref: Any, cand: Any, obs: np.ndarray) -> ParityReport:
    """Fraction of observations where torch and onnxruntime choose different budgets."""
    differ = sum(int(np.argmax(ref([x[None]])[0]) != np.argmax(cand([x[None]])[0]))
                 for x in obs)
    return ParityReport(reference="torch", candidate="onnxruntime",
                        n_observations=int(obs.shape[0]), n_rollouts=0, rollout_len=0,
                        outputs=[OutputParity("argmax_disagree", differ / obs.shape[0], 0.0)])


def _write_parity(bundle: Path, checks: dict[str, ParityReport]) -> None:
    """Add ``checks`` to ``parity.json`` (created when absent); ``ok`` over every check."""
    path = bundle / PARITY_NAME
    doc: dict[str, Any] = json.loads(path.read_text()) if path.is_file() else {}
    parity = dict(doc.get("parity") or {})
    parity.update({k: v.to_dict() for k, v in checks.items()})
    doc["parity"] = parity
    doc["ok"] = all(isinstance(c, dict) and c.get("ok") is True for c in parity.values())
    path.write_text(json.dumps(doc, indent=2) + "\n")
