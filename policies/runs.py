"""Reload a training run: the stable API the exporter and ``edgerl eval`` use.

>>> pol = load_policy("runs/cartpole__edit__d5__s0__20261130-013000")
>>> action = pol.actor(obs)            # (B, D) float32 policy obs -> (B, A), normalisation baked in
>>> pol.spec.to_json()                  # PolicySpec for manifest.json (files={} to fill)
>>> env = pol.make_env(4)               # the training wrappers, for parity recordings

``actor`` is a plain, stateless ``nn.Module`` (all methods here are feed-forward MLPs; the
``recurrent`` field of the spec is ``none``). For ``edit`` it outputs the raw residual; the
applied action is ``edgerl.compose_edit_action(chunk_row, residual, spec.residual_bound)``
clipped to the action limits. For ``planner``/``blend``/``rtc`` (no learning) ``actor`` is ``None``.
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import torch
from torch import nn

from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.spec import (
    ActionSpec,
    ChunkSpec,
    LatencyModel,
    ObservationSpec,
    PolicySpec,
    TensorSpec,
)
from edgerl.contract.timing import TimingSpec
from edgerl.policies.config import CONFIG_NAME, PLANNER_NAME, TrainConfig

__all__ = ["LoadedPolicy", "PolicyActor", "RunError", "default_checkpoint", "find_latest_run",
           "latest_checkpoint", "load_policy"]

log = logging.getLogger(__name__)


class RunError(FileNotFoundError):
    """A run directory is missing, incomplete or has no checkpoint."""


class PolicyActor(nn.Module):
    """Deterministic PPO actor: ``(B, D) -> (B, A)``, ``(x - mean) / (std + eps)`` inside.

    Built from rsl_rl's ``MLPModel.as_onnx`` export module (normaliser + MLP + the Gaussian's
    deterministic output = the mean). Attributes ``input_dim`` (D) and ``output_dim`` (A).
    """

    def __init__(self, onnx_module: nn.Module, input_dim: int, output_dim: int) -> None:
        super().__init__()
        self.net = onnx_module
        self.input_dim = int(input_dim)
        self.output_dim = int(output_dim)

    def forward(self, obs: torch.Tensor) -> torch.Tensor:
        return self.net(obs)

    def normalizer_stats(self) -> tuple[torch.Tensor, torch.Tensor]:
        """``(mean (D,), std (D,))`` such that the network sees ``(x - mean) / std``."""
        norm = self.net.obs_normalizer
        if hasattr(norm, "_mean"):
            return norm._mean.reshape(-1).clone(), (norm._std + norm.eps).reshape(-1).clone()
        return torch.zeros(self.input_dim), torch.ones(self.input_dim)


@dataclass
class LoadedPolicy:
    """A run reloaded for evaluation or export.

    Attributes:
        run_dir: The run directory.
        config: Its :class:`TrainConfig`.
        actor: :class:`PolicyActor` in eval mode on ``device`` (``None`` for planner/blend/rtc).
        spec: :class:`edgerl.PolicySpec` (``files`` empty: the exporter fills the hashes).
        planner: The BC planner network (``--planner bc``) in eval mode, else ``None``.
        checkpoint: The rsl_rl checkpoint loaded (``None`` for planner/blend/rtc).
        document: The whole ``config.json``.
    """

    run_dir: Path
    config: TrainConfig
    actor: PolicyActor | None
    spec: PolicySpec
    planner: nn.Module | None
    checkpoint: Path | None
    document: dict[str, Any] = field(default_factory=dict)

    def make_env(self, num_envs: int, seed: int | None = None, device: str | None = None) -> Any:
        """The task wrapped exactly as in training (same method wrappers and planner).

        ``seed`` (default: the run's) seeds both the task and the wrapper's delay draws.
        """
        from edgerl.policies.methods import make_base_env, make_method_env

        cfg = self.config
        if device is not None and device != cfg.device:
            cfg = replace(cfg, device=device)
        base = make_base_env(cfg, num_envs, seed=seed)
        return make_method_env(base, cfg, self.planner, seed=seed)

    def act(self, obs: torch.Tensor) -> torch.Tensor:
        """Deterministic action for a batch of policy observations (zeros for planner/blend/rtc)."""
        if self.actor is None:
            return torch.zeros(obs.shape[0], self.spec.action.dim, device=obs.device)
        return self.actor(obs)


def latest_checkpoint(run_dir: str | Path) -> Path:
    """The ``model_{it}.pt`` with the largest iteration in ``run_dir``."""
    run_dir = Path(run_dir)
    ckpts = [p for p in run_dir.glob("model_*.pt") if p.stem.split("_")[-1].isdigit()]
    ckpts = sorted(ckpts, key=lambda p: int(p.stem.split("_")[-1]))
    if not ckpts:
        raise RunError(f"{run_dir}: no model_*.pt checkpoint")
    return ckpts[-1]


def find_latest_run(task: str, method: str, root: str | Path = "runs", *,
                    delay_steps: int | None = None, seed: int | None = None) -> Path:
    """Newest run directory ``root/{task}__{method}__d{D}__s{S}__{stamp}`` with a config.json.

    ``delay_steps`` / ``seed`` narrow the search. Raises :class:`RunError` when none exists.
    """
    d = "*" if delay_steps is None else str(int(delay_steps))
    s = "*" if seed is None else str(int(seed))
    candidates = [p for p in Path(root).glob(f"{task}__{method}__d{d}__s{s}__*")
                  if (p / CONFIG_NAME).is_file()]
    if not candidates:
        raise RunError(f"no run of task {task!r} method {method!r} under {root}")
    return max(candidates, key=lambda p: (p.name.split("__")[-1], p.stat().st_mtime))


def read_run_document(run_dir: str | Path) -> dict[str, Any]:
    """``config.json`` of a run, with a clear error when it is missing or broken."""
    path = Path(run_dir) / CONFIG_NAME
    if not path.is_file():
        raise RunError(f"{run_dir}: not a run directory (no {CONFIG_NAME})")
    try:
        return json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise RunError(f"{path}: not valid JSON ({exc})") from exc


def _load_actor(cfg: TrainConfig, ckpt: Path, action_dim: int, device: str) -> PolicyActor:
    from rsl_rl.models import MLPModel
    from tensordict import TensorDict

    state = torch.load(ckpt, map_location=device, weights_only=False)["actor_state_dict"]
    obs_dim = int(state["mlp.0.weight"].shape[1])
    dummy = TensorDict({"policy": torch.zeros(1, obs_dim)}, batch_size=[1])
    model = MLPModel(dummy, {"actor": ["policy"]}, "actor", action_dim,
                     **cfg.mlp_kwargs("actor"))
    model.load_state_dict(state)
    model.eval()
    actor = PolicyActor(model.as_onnx(verbose=False), obs_dim, action_dim).to(device)
    actor.eval()
    for p in actor.parameters():
        p.requires_grad_(False)
    return actor


def _load_planner(document: dict[str, Any], run_dir: Path, device: str) -> nn.Module | None:
    info = document.get("planner") or {}
    if info.get("kind") != "bc":
        return None
    from edgerl.policies.bc_planner import BCChunkPlanner

    net = BCChunkPlanner(**info["net"])
    net.load_state_dict(torch.load(run_dir / PLANNER_NAME, map_location="cpu"))
    net.to(device).eval()
    for p in net.parameters():
        p.requires_grad_(False)
    return net


def _edit_obs_config(cfg: TrainConfig, task_spec: dict[str, Any]) -> EditObsConfig:
    from edgerl.policies.methods import edit_obs_config
    from edgerl.sim.vec_env import TaskSpec

    # the layout needs the names, sizes and split; older runs have no planner_only (no split)
    layout = {"name": cfg.task, "max_episode_steps": 1, **task_spec}
    return edit_obs_config(cfg, TaskSpec(**layout))


def build_spec(cfg: TrainConfig, document: dict[str, Any], actor: PolicyActor | None,
               checkpoint: Path | None, run_dir: str | Path = "") -> PolicySpec:
    """The :class:`PolicySpec` of a run (``files`` left empty for the exporter); ``document``
    is its ``config.json`` (read, never changed)."""
    ts = document["task_spec"]
    res = document["resolved"]
    obs_dim = len(ts["obs_names"])
    edit_obs = _edit_obs_config(cfg, ts)
    mean_l, std_l = [0.0] * obs_dim, [1.0] * obs_dim
    if actor is not None:  # the normaliser's leading entries belong to the observation read
        mean, std = actor.normalizer_stats()
        read = (edit_obs.obs_indices or list(range(obs_dim))) if cfg.is_edit else \
            list(range(min(obs_dim, actor.input_dim)))
        for k, i in enumerate(read):
            mean_l[i], std_l[i] = float(mean[k]), float(std[k])
    dt = 1.0 / float(ts["control_hz"])
    from edgerl.policies.methods import latency_model

    latency: LatencyModel = latency_model(cfg)
    return PolicySpec(
        task=cfg.task, method=cfg.method, control_hz=float(ts["control_hz"]),
        observation=ObservationSpec(names=list(ts["obs_names"]), units=list(ts["obs_units"]),
                                    mean=mean_l, std=std_l, normalized_in_graph=True),
        action=ActionSpec(names=list(ts["action_names"]), units=list(ts["action_units"]),
                          low=[float(x) for x in ts["action_low"]],
                          high=[float(x) for x in ts["action_high"]]),
        chunk=ChunkSpec(horizon=int(res["horizon"]), dt_s=dt,
                        period_s=int(res["period_steps"]) * dt,
                        expected_latency_s=cfg.delay_steps * dt if cfg.uses_planner else 0.0),
        edit_obs=edit_obs,
        latency=latency,
        timing=TimingSpec.build(float(ts["control_hz"]), latency, cfg.method,
                                horizon=int(res["horizon"]), lookahead=cfg.lookahead,
                                extra_delay_steps=cfg.extra_delay_steps,
                                trigger=cfg.trigger),
        tensors=TensorSpec(inputs=["obs"], outputs=["action"]),
        residual_bound=float(res["residual_bound"]) if cfg.is_edit else 0.0,
        files={},
        extra={"run_dir": str(run_dir), "seed": cfg.seed,
               "delay_steps": cfg.delay_steps, "delay_ms": res.get("delay_ms"),
               "planner": cfg.planner,
               "policy_obs_dim": None if actor is None else actor.input_dim,
               "checkpoint": None if checkpoint is None else checkpoint.name},
    )


def default_checkpoint(run_dir: str | Path) -> Path:
    """``model_deploy.pt`` when the edit's validation chose one (:mod:`edgerl.policies.guard`),
    else ``model_best.pt`` when training wrote one, else the newest ``model_{it}.pt``."""
    for name in ("model_deploy.pt", "model_best.pt"):
        path = Path(run_dir) / name
        if path.is_file():
            return path
    return latest_checkpoint(run_dir)


def load_policy(run_dir: str | Path, device: str = "cpu",
                checkpoint: str | Path | None = None) -> LoadedPolicy:
    """Reload a run: ``checkpoint`` (a path, or a file name inside the run), by default
    ``model_best.pt`` (best training success rate) or, without one, the newest checkpoint.

    Raises :class:`RunError` for a missing/incomplete run directory.
    """
    run_dir = Path(run_dir)
    document = read_run_document(run_dir)
    cfg = TrainConfig.from_dict({**document["train"], "device": device})
    action_dim = len(document["task_spec"]["action_names"])
    actor, ckpt = None, None
    if cfg.learned:
        ckpt = Path(checkpoint) if checkpoint is not None else default_checkpoint(run_dir)
        if not ckpt.is_absolute() and not ckpt.exists():
            ckpt = run_dir / ckpt
        if not ckpt.is_file():
            raise RunError(f"{ckpt}: checkpoint not found")
        actor = _load_actor(cfg, ckpt, action_dim, device)
    planner = _load_planner(document, run_dir, device)
    spec = build_spec(cfg, document, actor, ckpt, run_dir)
    return LoadedPolicy(run_dir=run_dir, config=cfg, actor=actor, spec=spec, planner=planner,
                        checkpoint=ckpt, document=document)
