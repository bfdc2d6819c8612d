"""The planning-budget gate: a tiny PPO policy choosing a budget per decision, and its
comparison with fixed budgets, the chunk-age heuristic and random choices.

The gate is trained with rsl_rl's PPO (:class:`~edgerl.policies.ppo_runner.EdgeRunner`) on a
:class:`~edgerl.sim.gate.env.GatedEnv`. The gate outputs one logit per budget. With
``GateRunCfg.head = "categorical"`` (the default) PPO samples a budget from
``softmax(logits)`` (:class:`~edgerl.policies.categorical.CategoricalDistribution`, one-hot
actions) and the greedy gate runs its mode, ``argmax(logits)``: training and deployment run
the same policy. ``"gaussian"`` is the earlier head (rsl_rl's Gaussian over the scores, argmax
of the *sampled* scores in training, of the mean scores greedily; runs without a ``head`` in
their ``gate.json`` load as it). :class:`ScoreActions` runs the argmax of the action for both.
The critic also reads the full robot observation (the planner-only elements), the actor only
the fast observation + chunk age / rows left.

Run directory (``edgerl gate train --out DIR``)::

    gate.json       {"cfg": GateRunCfg, "history": [metrics rows]}
    model_{it}.pt   rsl_rl checkpoints (``actor_state_dict`` is the gate)
    metrics.jsonl   one line per PPO iteration

The scenario (:func:`driving_gate_cfg`): driving on one of the :data:`ROADS` (sharper than
the task's default) with process noise on both controls (std 0.1, the planner cannot
foresee it). ``fast`` = delay 1 step, 16 rows planned every 4th row, noise 0.2; ``slow`` =
delay 8 steps, 48 exact rows from the committed prefix. Open-loop plans drift as they age.
The ``chicanes`` road has its own scenario (:func:`chicanes_gate_cfg`: a compute price per
planner call, a 0.8 s slow planner, and the current plan's upcoming rows in the gate's
observation); :func:`road_gate_cfg` picks the one of a road.

:func:`compare_gate` tunes the chunk-age heuristic's budget and X on other episodes than the
evaluation ones (:func:`tune_heuristic`).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from edgerl.policies.categorical import CATEGORICAL
from edgerl.policies.gate.baselines import (
    GatePolicy,
    age_heuristic,
    evaluate_gate,
    fixed_policy,
    random_policy,
)
from edgerl.sim.gate.budgets import KEEP, PlanBudget, load_budget_latencies
from edgerl.sim.gate.env import GateCfg, GatedEnv
from edgerl.sim.wrappers.base import VecEnvWrapper

__all__ = ["EVAL_SEED_OFFSET", "GATE_NAME", "HEADS", "HEURISTIC_AGES", "ROADS", "ROAD_GATES",
           "TUNE_SEED_OFFSET", "GateRunCfg", "ScoreActions", "actor_kwargs",
           "calm_kicks_gate_cfg", "chicanes_gate_cfg", "compare_gate", "driving_gate_cfg",
           "gate_with_latencies", "load_gate", "load_gate_actor", "make_gate_env",
           "road_gate_cfg", "train_gate", "tune_heuristic"]

log = logging.getLogger(__name__)

GATE_NAME = "gate.json"
#: Driving roads the gate is compared on (``GateRunCfg.task_kwargs``): ``curves`` a sine road
#: curved almost everywhere; ``straights`` near-straight stretches between sharp crests
#: (curvature 0.071 1/m), where an old plan fails but a fresh one holds the lane;
#: ``chicanes`` a straight road with a one-lane swerve every 75 m (apex curvature 0.074 1/m at
#: 37.5 m and 112.5 m; calm below 0.01 1/m over about half the road), driven with
#: :func:`chicanes_gate_cfg`.
ROADS: dict[str, dict[str, Any]] = {
    "curves": {"road_amp": 6.0, "road_wavelength": 70.0},
    "straights": {"road_amp": 6.0, "road_wavelength": 100.0, "road_shape": "straights"},
    "chicanes": {"road_amp": 3.5, "road_wavelength": 75.0, "road_shape": "chicanes",
                 "road_sharpness": 3.0},
}
#: ``calm_kicks``: the chicanes road with :func:`calm_kicks_gate_cfg` (exact plans, rare kicks).
ROADS["calm_kicks"] = dict(ROADS["chicanes"])
#: Output heads of the gate actor (:attr:`GateRunCfg.head`).
HEADS = ("categorical", "gaussian")
#: Chunk-age thresholds (steps) the heuristic baseline is tuned over.
HEURISTIC_AGES = (2, 4, 8, 12, 16, 24, 32, 48, 64, 80)
#: Seed offsets of the evaluation and of the heuristic's tuning episodes (from the run seed).
EVAL_SEED_OFFSET, TUNE_SEED_OFFSET = 1000, 2000


def driving_gate_cfg(seed: int = 0) -> GateCfg:
    """The gated driving scenario's :class:`GateCfg` (see the module doc)."""
    budgets = (KEEP,
               PlanBudget("fast", delay=1, horizon=16, hold=4, noise_std=0.2, cost=0.02),
               PlanBudget("slow", delay=8, horizon=48, compensate=True, cost=0.02))
    return GateCfg(budgets=budgets, decision_steps=2, action_noise_std=0.1, seed=seed)


def chicanes_gate_cfg(seed: int = 0) -> GateCfg:
    """The ``chicanes`` scenario: every planner call has a compute price (0.4; an episode has
    about 160 decisions), ``fast`` = delay 1, 16 rows every 4th planned, noise
    0.2; ``slow`` = delay 16 steps (0.8 s), 64 exact rows from the committed prefix; process
    noise 0.1; the gate also sees the current plan's rows 8, 16, 24 and 32 steps ahead."""
    budgets = (KEEP,
               PlanBudget("fast", delay=1, horizon=16, hold=4, noise_std=0.2, cost=0.4),
               PlanBudget("slow", delay=16, horizon=64, compensate=True, cost=0.4))
    return GateCfg(budgets=budgets, decision_steps=2, action_noise_std=0.1,
                   preview_steps=(8, 16, 24, 32), seed=seed)


def calm_kicks_gate_cfg(seed: int = 0) -> GateCfg:
    """The ``calm_kicks`` scenario: a plan stays valid for seconds on calm road and
    a rare kick invalidates it. No process noise (an exact plan holds open loop for its whole
    length); kicks on the steering (rate 0.004 per step, +-0.8 for 6 steps: out of the lane
    within about a second unless a fresh plan is asked); a compute price of 1.0 per planner
    call. ``fast`` = delay 1, 16 exact rows with noise 0.05; ``slow`` = delay 8, 96 exact rows
    from the committed prefix. The gate sees the plan's rows 0 (executed now: a yaw rate the
    plan's steering does not explain shows a kick), 8, 16, 24 and 32 steps ahead."""
    budgets = (KEEP,
               PlanBudget("fast", delay=1, horizon=16, noise_std=0.05, cost=1.0),
               PlanBudget("slow", delay=8, horizon=96, compensate=True, cost=1.0))
    return GateCfg(budgets=budgets, decision_steps=2, action_noise_std=0.0, noise_dims=(1,),
                   kick_rate=0.004, kick_size=0.8, kick_steps=6,
                   preview_steps=(0, 8, 16, 24, 32), seed=seed)


#: The :class:`GateCfg` of each road (default :func:`driving_gate_cfg`).
ROAD_GATES: dict[str, Callable[[int], GateCfg]] = {"chicanes": chicanes_gate_cfg,
                                                    "calm_kicks": calm_kicks_gate_cfg}


def road_gate_cfg(road: str, seed: int = 0) -> GateCfg:
    """The :class:`GateCfg` the gate is trained with on ``road`` (one of :data:`ROADS`)."""
    if road not in ROADS:
        raise ValueError(f"unknown road {road!r}; roads: {', '.join(ROADS)}")
    return ROAD_GATES.get(road, driving_gate_cfg)(seed)


def gate_with_latencies(files: dict[str, str | Path], seed: int = 0,
                        road: str = "curves") -> dict[str, Any]:
    """The ``road``'s gate config as a :attr:`GateRunCfg.gate` dict, the named budgets'
    delays read from measured ``LatencyModel`` files (``edgerl bench planner
    --write-latency-model``): ``{"slow": "slow.json"}``."""
    base = road_gate_cfg(road, seed)
    base.budgets = load_budget_latencies(base.budgets, files)
    return asdict(base)


@dataclass
class GateRunCfg:
    """One gate training / comparison run.

    Attributes:
        task / task_kwargs: Registered task and its factory arguments.
        num_envs / iterations / steps_per_env: PPO rollout (decisions per env per iteration).
        hidden: Actor and critic hidden sizes (a tiny MLP).
        seed: Torch / env / wrapper seed (eval and heuristic tuning use ``seed +``
            :data:`EVAL_SEED_OFFSET` / :data:`TUNE_SEED_OFFSET`).
        gate: The :class:`GateCfg` as a dict (budgets as dicts); empty = the driving one.
        head: The actor's output distribution, one of :data:`HEADS` (see the module doc).
    """

    task: str = "driving"
    task_kwargs: dict[str, Any] = field(default_factory=lambda: dict(ROADS["curves"]))
    num_envs: int = 32
    iterations: int = 40
    steps_per_env: int = 32
    hidden: list[int] = field(default_factory=lambda: [32, 32])
    seed: int = 0
    gate: dict[str, Any] = field(default_factory=dict)
    head: str = "categorical"

    def __post_init__(self) -> None:
        if self.head not in HEADS:
            raise ValueError(f"unknown gate head {self.head!r}; heads: {', '.join(HEADS)}")

    def gate_cfg(self, seed: int) -> GateCfg:
        """The :class:`GateCfg` with the wrapper seed ``seed``."""
        if not self.gate:
            return driving_gate_cfg(seed)
        data = dict(self.gate)
        data["budgets"] = tuple(PlanBudget(**b) for b in data.get("budgets", ()))
        for key in ("preview_steps", "noise_dims"):
            if key in data:
                data[key] = tuple(data[key])
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


def actor_kwargs(cfg: GateRunCfg) -> dict[str, Any]:
    """rsl_rl ``MLPModel`` keyword arguments of the gate actor, with the ``cfg.head``
    distribution."""
    kwargs = _train_config(cfg).mlp_kwargs("actor")
    if cfg.head == "categorical":
        kwargs["distribution_cfg"] = {"class_name": CATEGORICAL}
    return kwargs


def _runner_config(cfg: GateRunCfg) -> dict[str, Any]:
    """The rsl_rl runner dict of the gate (its actor built by :func:`actor_kwargs`)."""
    runner_cfg = _train_config(cfg).rsl_rl_cfg(["policy", "critic"])
    runner_cfg["actor"] = {"class_name": "MLPModel", **actor_kwargs(cfg)}
    return runner_cfg


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
    try:
        runner = EdgeRunner(env, _runner_config(cfg), log_dir=out,
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
    cfg = GateRunCfg(**{"head": "gaussian", **doc["cfg"]})  # runs before the head field
    ckpts = sorted(run_dir.glob("model_*.pt"), key=lambda p: int(p.stem.split("_")[1])
                   if p.stem.split("_")[1].isdigit() else -1)
    if not ckpts:
        raise FileNotFoundError(f"{run_dir}: no model_*.pt checkpoint")
    state = torch.load(ckpts[-1], map_location="cpu", weights_only=False)["actor_state_dict"]
    env = make_gate_env(cfg, 1, cfg.seed)
    obs = env.get_observations()
    actor = MLPModel(obs, {"actor": ["policy"]}, "actor", env.num_budgets, **actor_kwargs(cfg))
    env.close()
    actor.load_state_dict(state)
    actor.eval()
    return cfg, actor


def load_gate(run_dir: str | Path) -> tuple[GateRunCfg, GatePolicy]:
    """The run's :class:`GateRunCfg` and its trained gate (the newest checkpoint)."""
    cfg, actor = load_gate_actor(run_dir)
    return cfg, greedy_policy(actor)


def tune_heuristic(cfg: GateRunCfg, episodes: int, num_envs: int, seed: int,
                   ages: Sequence[int] = HEURISTIC_AGES
                   ) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The chunk-age heuristic tuned on the episodes of ``seed``: every plan budget j and
    X in ``ages`` (steps), best return (then success). Returns the best row (``budget``
    = j, ``x``) and every tried row."""
    budgets = cfg.gate_cfg(seed).budgets

    def make() -> GatedEnv:
        return make_gate_env(cfg, num_envs, seed)

    tried = [{"budget": j, "x": x, "policy": f"age>{x}:{b.name}",
              **evaluate_gate(make, age_heuristic(j, x), episodes)}
             for j, b in enumerate(budgets) if not b.keep for x in ages]
    return max(tried, key=lambda r: (r["return_mean"], r["success_rate"])), tried


def compare_gate(cfg: GateRunCfg, gate: GatePolicy | None, episodes: int,
                 num_envs: int = 16, seed: int | None = None, tune_seed: int | None = None,
                 ages: Sequence[int] = HEURISTIC_AGES) -> list[dict[str, Any]]:
    """Rows of the comparison on the same evaluation episodes (seed ``cfg.seed +``
    :data:`EVAL_SEED_OFFSET`): the gate (when given), each fixed budget, the chunk-age
    heuristic and random choices. The heuristic's budget and X are tuned
    (:func:`tune_heuristic`) on other episodes (seed ``cfg.seed +``
    :data:`TUNE_SEED_OFFSET`), then evaluated on the evaluation ones; its row holds
    ``tuned_x``, ``tune_seed`` and ``tune_return``. ``ages``: the X tried (steps)."""
    seed = cfg.seed + EVAL_SEED_OFFSET if seed is None else seed
    tune_seed = cfg.seed + TUNE_SEED_OFFSET if tune_seed is None else tune_seed
    if tune_seed == seed:
        raise ValueError(f"the heuristic must be tuned on other episodes than the evaluation "
                         f"ones (both seed {seed})")

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
    if any(b.keep for b in budgets) and any(not b.keep for b in budgets):
        best, _ = tune_heuristic(cfg, episodes, num_envs, tune_seed, ages)
        rows.append({"policy": f"heuristic({best['policy']})",
                     **evaluate_gate(make, age_heuristic(best["budget"], best["x"]), episodes),
                     "tuned_x": best["x"], "tune_seed": tune_seed,
                     "tune_return": best["return_mean"]})
    rows.append({"policy": "random", **evaluate_gate(make, random_policy(seed), episodes)})
    return rows
