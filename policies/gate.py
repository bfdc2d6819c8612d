"""The planning-budget gate: a tiny PPO policy choosing a budget per decision, and its
comparison with fixed budgets, the chunk-age heuristic and random choices.

The gate is trained with rsl_rl's PPO (:class:`~edgerl.policies.ppo_runner.EdgeRunner`) on a
:class:`~edgerl.sim.wrappers.gate.GatedEnv`. rsl_rl's actor is Gaussian, so the gate outputs
one score per budget and the env runs the best-scored one (:class:`ScoreActions`; the sampled
scores are what PPO explores with). The critic also reads the full robot observation (the
planner-only elements), the actor only the fast observation + chunk age / rows left.

Run directory (``edgerl gate train --out DIR``)::

    gate.json       {"cfg": GateRunCfg, "history": [metrics rows]}
    model_{it}.pt   rsl_rl checkpoints (``actor_state_dict`` is the gate)
    metrics.jsonl   one line per PPO iteration

The scenario (:func:`driving_gate_cfg`): driving on one of the :data:`ROADS` (sharper than
the task's default) with process noise on both controls (std 0.1, the planner cannot
foresee it). ``fast`` = delay 1 step, 16 rows planned every 4th row, noise 0.2; ``slow`` =
delay 8 steps, 48 exact rows from the committed prefix. Open-loop plans drift as they age.
"""

from __future__ import annotations

import json
import logging
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from edgerl.policies.gate_baselines import (
    GatePolicy,
    age_heuristic,
    evaluate_gate,
    fixed_policy,
    random_policy,
)
from edgerl.sim.wrappers.base import VecEnvWrapper
from edgerl.sim.wrappers.budgets import KEEP, PlanBudget, load_budget_latencies
from edgerl.sim.wrappers.gate import GateCfg, GatedEnv

__all__ = ["GATE_NAME", "ROADS", "GateRunCfg", "ScoreActions", "compare_gate", "driving_gate_cfg",
           "gate_with_latencies", "load_gate", "load_gate_actor", "make_gate_env", "train_gate"]

log = logging.getLogger(__name__)

GATE_NAME = "gate.json"
#: Driving roads the gate is compared on (``GateRunCfg.task_kwargs``): ``curves`` a sine road
#: curved almost everywhere; ``straights`` near-straight stretches between sharp crests
#: (curvature 0.071 1/m), where an old plan fails but a fresh one holds the lane.
ROADS: dict[str, dict[str, Any]] = {
    "curves": {"road_amp": 6.0, "road_wavelength": 70.0},
    "straights": {"road_amp": 6.0, "road_wavelength": 100.0, "road_shape": "straights"},
}
#: Chunk-age thresholds (steps) the heuristic baseline is tuned over.
HEURISTIC_AGES = (2, 4, 8, 12, 16, 24)


def driving_gate_cfg(seed: int = 0) -> GateCfg:
    """The gated driving scenario's :class:`GateCfg` (see the module doc)."""
    budgets = (KEEP,
               PlanBudget("fast", delay=1, horizon=16, hold=4, noise_std=0.2, cost=0.02),
               PlanBudget("slow", delay=8, horizon=48, compensate=True, cost=0.02))
    return GateCfg(budgets=budgets, decision_steps=2, action_noise_std=0.1, seed=seed)


def gate_with_latencies(files: dict[str, str | Path], seed: int = 0) -> dict[str, Any]:
    """:func:`driving_gate_cfg` as a :attr:`GateRunCfg.gate` dict, the named budgets' delays
    read from measured ``LatencyModel`` files (``edgerl bench planner
    --write-latency-model``): ``{"slow": "slow.json"}``."""
    base = driving_gate_cfg(seed)
    base.budgets = load_budget_latencies(base.budgets, files)
    return asdict(base)


@dataclass
class GateRunCfg:
    """One gate training / comparison run.

    Attributes:
        task / task_kwargs: Registered task and its factory arguments.
        num_envs / iterations / steps_per_env: PPO rollout (decisions per env per iteration).
        hidden: Actor and critic hidden sizes (a tiny MLP).
        seed: Torch / env / wrapper seed (eval uses ``seed + 1000``).
        gate: The :class:`GateCfg` as a dict (budgets as dicts); empty = the driving one.
    """

    task: str = "driving"
    task_kwargs: dict[str, Any] = field(default_factory=lambda: dict(ROADS["curves"]))
    num_envs: int = 32
    iterations: int = 40
    steps_per_env: int = 32
    hidden: list[int] = field(default_factory=lambda: [32, 32])
    seed: int = 0
    gate: dict[str, Any] = field(default_factory=dict)

    def gate_cfg(self, seed: int) -> GateCfg:
        """The :class:`GateCfg` with the wrapper seed ``seed``."""
        if not self.gate:
            return driving_gate_cfg(seed)
        data = dict(self.gate)
        data["budgets"] = tuple(PlanBudget(**b) for b in data.get("budgets", ()))
        data["seed"] = seed
        return GateCfg(**data)


def make_gate_env(cfg: GateRunCfg, num_envs: int, seed: int) -> GatedEnv:
    """The gated env of ``cfg`` with ``num_envs`` envs, task and wrapper seeded ``seed``."""
    from edgerl.sim.registry import make_task

    task = make_task(cfg.task, num_envs=num_envs, seed=seed, **cfg.task_kwargs)
    return GatedEnv(task, cfg.gate_cfg(seed))


class ScoreActions(VecEnvWrapper):
    """PPO adapter: the action is one score per budget (N, B); the best one is run."""

    def __init__(self, env: GatedEnv) -> None:
        super().__init__(env)
        self.num_actions = env.num_budgets

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        return self.env.step(actions.argmax(dim=-1))


def _train_config(cfg: GateRunCfg) -> Any:
    from edgerl.policies.config import ModelConfig, TrainConfig

    net = ModelConfig(hidden_dims=list(cfg.hidden), init_std=1.0, output_scale=1.0)
    return TrainConfig(task=cfg.task, method="nodelay", seed=cfg.seed, num_envs=cfg.num_envs,
                       iterations=cfg.iterations, num_steps_per_env=cfg.steps_per_env,
                       save_interval=max(cfg.iterations, 1), actor=net, critic=net)


def train_gate(cfg: GateRunCfg, out: str | Path, show_progress: bool = False
               ) -> tuple[GatePolicy, list[dict[str, Any]]]:
    """Train the gate with PPO; writes ``out`` (see the module doc). Returns the greedy gate
    policy and the metrics rows."""
    from edgerl.policies.ppo_runner import EdgeRunner
    from edgerl.policies.train import seed_everything

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    seed_everything(cfg.seed)
    env = ScoreActions(make_gate_env(cfg, cfg.num_envs, cfg.seed))
    tcfg = _train_config(cfg)
    try:
        runner = EdgeRunner(env, tcfg.rsl_rl_cfg(["policy", "critic"]), log_dir=out,
                            total_iterations=cfg.iterations, show_progress=show_progress)
        runner.learn(cfg.iterations)
        history = runner.history
        actor = runner.alg.get_policy()
    finally:
        env.close()
    (out / GATE_NAME).write_text(json.dumps({"cfg": asdict(cfg), "history": history},
                                            indent=2) + "\n")
    return greedy_policy(actor), history


def greedy_policy(actor: Any) -> GatePolicy:
    """The gate policy of an rsl_rl actor: the budget with the highest mean score."""
    actor.eval()

    @torch.no_grad()
    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        return actor(obs).argmax(dim=-1).to(env.device)

    return policy


def load_gate_actor(run_dir: str | Path) -> tuple[GateRunCfg, Any]:
    """The run's :class:`GateRunCfg` and its trained actor (rsl_rl ``MLPModel`` on the newest
    checkpoint, eval mode): ``actor(TensorDict{"policy": (N, F + 4)}) -> scores (N, B)``."""
    from rsl_rl.models import MLPModel

    run_dir = Path(run_dir)
    doc = json.loads((run_dir / GATE_NAME).read_text())
    cfg = GateRunCfg(**doc["cfg"])
    ckpts = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1])
                   if p.stem.split("_")[1].isdigit() else -1)
    if not ckpts:
        raise FileNotFoundError(f"{run_dir}: no model_*.pt checkpoint")
    state = torch.load(ckpts[-1], map_location="cpu", weights_only=False)["actor_state_dict"]
    env = make_gate_env(cfg, 1, cfg.seed)
    obs = env.get_observations()
    actor = MLPModel(obs, {"actor": ["policy"]}, "actor", env.num_budgets,
                     **_train_config(cfg).mlp_kwargs("actor"))
    env.close()
    actor.load_state_dict(state)
    actor.eval()
    return cfg, actor


def load_gate(run_dir: str | Path) -> tuple[GateRunCfg, GatePolicy]:
    """The run's :class:`GateRunCfg` and its trained gate (the newest checkpoint)."""
    cfg, actor = load_gate_actor(run_dir)
    return cfg, greedy_policy(actor)


def compare_gate(cfg: GateRunCfg, gate: GatePolicy | None, episodes: int,
                 num_envs: int = 16, seed: int | None = None) -> list[dict[str, Any]]:
    """Rows of the comparison on the same episodes (eval seed ``cfg.seed + 1000``): the gate
    (when given), each fixed budget, the chunk-age heuristic for the slowest budget tuned
    over :data:`HEURISTIC_AGES` (best return; its X reported) and random choices."""
    seed = cfg.seed + 1000 if seed is None else seed

    def make() -> GatedEnv:
        return make_gate_env(cfg, num_envs, seed)

    budgets = cfg.gate_cfg(seed).budgets
    rows: list[dict[str, Any]] = []
    if gate is not None:
        rows.append({"policy": "gate", **evaluate_gate(make, gate, episodes)})
    for j, b in enumerate(budgets):
        if not b.keep:
            rows.append({"policy": f"fixed:{b.name}", **evaluate_gate(make, fixed_policy(j),
                                                                      episodes)})
    plans = [(j, b) for j, b in enumerate(budgets) if not b.keep]
    if any(b.keep for b in budgets) and plans:
        j = max(plans, key=lambda jb: jb[1].latency.planner_delay_steps)[0]
        tuned = [{"policy": f"age>{x}:{budgets[j].name}",
                  **evaluate_gate(make, age_heuristic(j, x), episodes)} for x in HEURISTIC_AGES]
        best = max(tuned, key=lambda r: (r["return_mean"], r["success_rate"]))
        rows.append({**best, "policy": f"heuristic({best['policy']})"})
    rows.append({"policy": "random", **evaluate_gate(make, random_policy(seed), episodes)})
    return rows
