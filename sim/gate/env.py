"""``GatedEnv``: a VecEnv whose action is a planning budget, chosen every k control steps.

The inner task is driven by chunk rows executed open loop (as the ``planner`` method does).
At a decision point (every ``GateCfg.decision_steps`` control steps) the action picks a
:class:`~edgerl.sim.gate.budgets.PlanBudget` per env: ``keep`` asks for nothing, any
other budget queries its plan, which arrives after the budget's delay through the shared
:class:`~edgerl.sim.wrappers.chunk.ChunkScheduler` (timing rules of :mod:`edgerl.contract.timing`: a
plan queried at step t with delay D is adopted at t + D and runs from its row D, rows are
time-aligned; a newer plan replaces an older one). The env steps on meanwhile.

One ``step`` = ``decision_steps`` control steps of the inner env:

* action: the budget index, (N,) or (N, 1), integer-valued in ``[0, B)``;
* reward: the task's reward summed over the steps of the env's current episode, minus the
  chosen budget's ``cost``;
* done: the episode ended during these steps (with ``decision_steps > 1`` the env's
  remaining steps already run its new episode, without a plan);
* ``"policy"`` observation (N, F + 4 + P*A), built by
:func:`edgerl.contract.gate_obs.build_gate_obs`
  (the runtime gate builds it with the same function): the task's fast observation
  (``TaskSpec``'s non-planner-only elements), then chunk age (steps since the plan's
  observation) and rows left in the current plan (both divided by ``GateCfg.age_scale``),
  has-chunk and plan-in-flight flags, and the current plan's rows ``GateCfg.preview_steps``
  steps ahead (``plan_preview``); ``"critic"``: the policy group plus the full robot
  observation.

``GateCfg.action_noise_std`` adds Gaussian process noise to the executed row (what the
planner cannot foresee), so an open-loop plan drifts from the world as it ages.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import torch
from tensordict import TensorDict

from edgerl.contract.edit_obs import select_chunk_rows
from edgerl.contract.gate_obs import GATE_EXTRA_OBS, GateBudgetSpec, GateSpec, build_gate_obs
from edgerl.contract.spec import LatencyModel
from edgerl.contract.timing import chunk_usable, max_planner_delay
from edgerl.sim.gate.budgets import BudgetPlanner, PlanBudget, default_budgets
from edgerl.sim.vec_env import ActionError
from edgerl.sim.wrappers.base import VecEnvWrapper, done_ids
from edgerl.sim.wrappers.chunk import ChunkScheduler, sample_delays
from edgerl.sim.wrappers.disturbance import Kicks

__all__ = ["BUDGET_FIELDS", "GATE_EXTRA_OBS", "GateCfg", "GatedEnv", "gate_spec", "plan_budgets"]


@dataclass
class GateCfg:
    """The gated environment.

    Attributes:
        budgets: The choices, index = action (:func:`default_budgets`).
        decision_steps: Control steps per decision (k >= 1).
        action_noise_std: Std of Gaussian noise on the executed row (action units): one
            for every element, or one per action element.
        noise_dims: Action elements the noise applies to (empty = all).
        action_noise_gain: Signal-dependent part of that noise (1): the std on an element is
            ``action_noise_std + action_noise_gain * |row|`` (a large command, such as hard
            steering near the tyres' limit, is executed less faithfully than a small one).
        kick_rate / kick_size / kick_steps: Sudden disturbances (a gust, a pothole, a push):
            each control step an env starts one with probability ``kick_rate``; for
            ``kick_steps`` steps ``+-kick_size`` (random sign, action units) is added to the
            executed row on the noise elements. No plan foresees one, and the fast
            observation shows its effect; 0 = none (their own generator, so the other random
            streams do not change).
        use_cost: Subtract each chosen budget's ``cost`` from the reward.
        stale_steps: Steps past a plan's last row (its budget's horizon) before it is
            dropped (command zeros).
        age_scale: Chunk age and rows left are divided by this (steps).
        preview_steps: Offsets (steps from now) of the current plan's rows in the
            observation (``plan_preview``; empty = none).
        seed: Seed of the wrapper's generator (delays, plan noise, process noise).
    """

    budgets: tuple[PlanBudget, ...] = field(default_factory=default_budgets)
    decision_steps: int = 1
    action_noise_std: float | tuple[float, ...] = 0.0
    noise_dims: tuple[int, ...] = ()
    action_noise_gain: float = 0.0
    kick_rate: float = 0.0
    kick_size: float = 0.0
    kick_steps: int = 3
    use_cost: bool = True
    stale_steps: int = 0
    age_scale: float = 20.0
    preview_steps: tuple[int, ...] = ()
    seed: int = 0

    def __post_init__(self) -> None:
        self.budgets = tuple(self.budgets)
        self.preview_steps = tuple(int(o) for o in self.preview_steps)
        if any(o < 0 for o in self.preview_steps):
            raise ValueError(f"GateCfg.preview_steps must be >= 0, got {self.preview_steps}")
        if not self.budgets:
            raise ValueError("GateCfg.budgets: give at least one budget")
        names = [b.name for b in self.budgets]
        if len(set(names)) != len(names):
            raise ValueError(f"GateCfg.budgets: names must be unique, got {names}")
        if self.decision_steps < 1 or self.stale_steps < 0 or self.age_scale <= 0:
            raise ValueError("decision_steps must be >= 1, stale_steps >= 0, age_scale > 0")
        if isinstance(self.action_noise_std, (list, tuple)):
            self.action_noise_std = tuple(float(v) for v in self.action_noise_std)
        if min(self._noise_stds(), default=0.0) < 0:
            raise ValueError(f"action_noise_std must be >= 0, got {self.action_noise_std}")
        if not 0.0 <= self.kick_rate <= 1.0 or not math.isfinite(self.kick_size) \
                or self.kick_size < 0 or self.kick_steps < 1:
            raise ValueError(f"kicks need 0 <= kick_rate <= 1, kick_size >= 0, kick_steps >= 1; "
                             f"got {self.kick_rate}, {self.kick_size}, {self.kick_steps}")
        if not math.isfinite(self.action_noise_gain) or self.action_noise_gain < 0:
            raise ValueError(f"action_noise_gain must be finite and >= 0, "
                             f"got {self.action_noise_gain}")

    def _noise_stds(self) -> tuple[float, ...]:
        std = self.action_noise_std
        return std if isinstance(std, tuple) else (float(std),)


#: The :class:`PlanBudget` fields the manifest's ``GateBudgetSpec`` carries under the same name
#: (``delay`` is its ``latency``): every one, so a host planner degrades plans as training did.
BUDGET_FIELDS = ("name", "keep", "horizon", "hold", "noise_std", "gain", "cost", "compensate")


def gate_spec(cfg: GateCfg, fast_indices: list[int], action_dim: int = 0) -> GateSpec:
    """The manifest's ``gate`` section (:class:`edgerl.contract.gate_obs.GateSpec`) of ``cfg`` for
    a task
    whose fast observation is ``fast_indices``: what the runtime's gate needs to build the
    same observation and run the same budgets."""
    budgets = [GateBudgetSpec(latency=b.latency, **{f: getattr(b, f) for f in BUDGET_FIELDS})
               for b in cfg.budgets]
    return GateSpec(budgets=budgets, decision_steps=cfg.decision_steps,
                    fast_indices=list(fast_indices), age_scale=float(cfg.age_scale),
                    stale_steps=cfg.stale_steps, preview_steps=list(cfg.preview_steps),
                    action_dim=int(action_dim))


def plan_budgets(gate: GateSpec) -> tuple[PlanBudget, ...]:
    """The sim budgets of a manifest's ``gate`` (the inverse of :func:`gate_spec`): what a
    host-side :class:`BudgetPlanner` needs to degrade plans as training did."""
    return tuple(PlanBudget(delay=b.latency, **{f: getattr(b, f) for f in BUDGET_FIELDS})
                 for b in gate.budgets)


class GatedEnv(VecEnvWrapper):
    """Wrap ``env`` (a task with ``expert_chunk``) so the action is a budget index.

    Args:
        env: The task (auto-resetting rsl_rl VecEnv, ``"policy"`` = robot obs (N, O)).
        cfg: :class:`GateCfg`.
        planner: The plans per budget (default: :class:`BudgetPlanner` on ``env``).

    Attributes:
        scheduler: The :class:`ChunkScheduler` (period 1: queries only where requested).
        cur_rows: Int64 (N,): the current plan's budget horizon (0 without a plan).
        last_choice: Int64 (N,): the budget index of the last decision.
        num_budgets: B. inner_actions: A of the inner task.
    """

    def __init__(self, env: Any, cfg: GateCfg | None = None,
                 planner: BudgetPlanner | None = None) -> None:
        super().__init__(env)
        self.gate_cfg = cfg = cfg or GateCfg()
        self.budgets = cfg.budgets
        self.num_budgets = len(self.budgets)
        self.inner_actions = self.num_actions
        self.num_actions = 1
        n, a, dev = self.num_envs, self.inner_actions, self.device
        self.generator = torch.Generator(device="cpu").manual_seed(int(cfg.seed))
        self.planner = planner or BudgetPlanner(env, self.budgets, self.generator)
        self.horizon = int(self.planner.horizon)
        plans = [b for b in self.budgets if not b.keep]
        d_max = max((max_planner_delay(b.latency) for b in plans), default=0)
        self.scheduler = ChunkScheduler(n, self.horizon, a, LatencyModel(d_max), dev,
                                        self.generator)
        self.scheduler.delay_fn = self._delays
        self._keep = torch.tensor([b.keep for b in self.budgets], device=dev)
        self._cost = torch.tensor([b.cost if cfg.use_cost else 0.0 for b in self.budgets],
                                  device=dev)
        self._rows = torch.tensor([b.horizon for b in self.budgets], device=dev)
        self._fly_rows = torch.zeros(n, self.scheduler.slots, dtype=torch.int64, device=dev)
        self._next_delay = torch.zeros(n, dtype=torch.int64, device=dev)
        self.cur_rows = torch.zeros(n, dtype=torch.int64, device=dev)
        self.last_choice = torch.zeros(n, dtype=torch.int64, device=dev)
        spec = getattr(self.unwrapped, "spec", None)
        obs0 = self.env.get_observations()
        self.obs_dim = int(obs0["policy"].shape[-1])
        self._fast = (list(spec.fast_obs_indices) if spec is not None
                      else list(range(self.obs_dim)))
        dims = list(cfg.noise_dims) or list(range(a))
        std = cfg.action_noise_std
        if isinstance(std, tuple) and len(std) != a:
            raise ValueError(f"GateCfg.action_noise_std: {len(std)} stds for {a} action "
                             f"elements")
        self._noise_std = torch.zeros(a, device=dev)
        self._noise_std[dims] = torch.as_tensor(std, dtype=torch.float32, device=dev)[dims] \
            if isinstance(std, tuple) else float(std)
        self._noise_gain = torch.zeros(a, device=dev)
        self._noise_gain[dims] = float(cfg.action_noise_gain)
        kick_mask = torch.zeros(a, device=dev)
        kick_mask[dims] = 1.0
        self.kicks = Kicks(cfg.kick_rate, cfg.kick_size, cfg.kick_steps, kick_mask, n,
                           int(cfg.seed) + 7919)
        self.spec_gate = gate_spec(cfg, self._fast, a)
        self.policy_obs_dim = self.spec_gate.dim
        self.scheduler.reset(torch.arange(n, device=dev))
        self._obs = self._observe(obs0)

    @property
    def max_episode_length(self) -> int:
        """The inner episode length in decisions."""
        return int(math.ceil(int(self.env.max_episode_length) / self.gate_cfg.decision_steps))

    # --- plans and delays ------------------------------------------------------------------
    def _plan(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        """Scheduler ``PlanFn``: each queried env's chunk for its chosen budget."""
        choice = self.last_choice[env_ids]
        out = torch.zeros(int(env_ids.numel()), self.horizon, self.inner_actions,
                          device=self.device)
        for j, budget in enumerate(self.budgets):
            m = choice == j
            if not budget.keep and bool(m.any()):
                ids = env_ids[m]
                prefix = self.committed_rows(ids) if budget.compensate else None
                out[m] = self.planner.plan(budget, ids, prefix).to(out.dtype)
        return out

    def _draw_delays(self, request: torch.Tensor) -> None:
        """Draw each requesting env's delay from its chosen budget's latency (before the
        query, so a delay-aware plan knows its committed prefix)."""
        for j, budget in enumerate(self.budgets):
            m = request & (self.last_choice == j)
            if not budget.keep and bool(m.any()):
                d = sample_delays(budget.latency, int(m.sum()), self.generator)
                self._next_delay[m] = d.to(self.device)

    def _delays(self, env_ids: torch.Tensor, t: torch.Tensor) -> torch.Tensor:
        """Scheduler ``DelayFn``: the delays drawn for this decision."""
        return self._next_delay[env_ids]

    def committed_rows(self, env_ids: torch.Tensor) -> torch.Tensor:
        """(n, D_max, A): the rows ``env_ids`` will execute over their drawn delay, NaN past
        each env's delay: at each step the newest plan (largest step0) among the current one
        and those in flight that have arrived by then (the scheduler's adoption rule), zeros
        where that plan is past its budget's horizon + stale steps or there is none."""
        s, d_max = self.scheduler, max(int(self.scheduler.max_delay), 1)
        dev = self.device
        t = s.t[env_ids]
        plans = torch.cat((s.cur[env_ids, None], s.fly[env_ids]), dim=1)  # (n, 1+M, H, A)
        step0 = torch.cat((s.cur_step0[env_ids, None], s.fly_step0[env_ids]), dim=1)
        arrive = torch.cat((t[:, None], s.fly_arrive[env_ids]), dim=1)
        valid = torch.cat((s.cur_valid[env_ids, None], s.fly_valid[env_ids]), dim=1)
        rows_of = torch.cat((self.cur_rows[env_ids, None], self._fly_rows[env_ids]), dim=1)
        n = int(env_ids.numel())
        out = torch.zeros(n, d_max, self.inner_actions, device=dev)
        ar = torch.arange(n, device=dev)
        for j in range(d_max):
            key = torch.where(valid & (arrive <= (t + j)[:, None]), step0,
                              torch.full_like(step0, -1))
            best = key.argmax(dim=1)
            offset = t + j - step0[ar, best]
            row = select_chunk_rows(plans[ar, best], offset, 1)[:, 0]
            usable = (key[ar, best] >= 0) & chunk_usable(offset, rows_of[ar, best],
                                                           self.gate_cfg.stale_steps)
            out[:, j] = torch.where(usable[:, None], row, torch.zeros_like(row))
        later = torch.arange(d_max, device=dev)[None, :] >= self._next_delay[env_ids, None]
        return out.masked_fill(later[..., None], float("nan"))

    def _track_rows(self, queried: torch.Tensor, adopted: torch.Tensor) -> None:
        """Remember the budget horizon of each new query's slot and of adopted plans."""
        s = self.scheduler
        ids = queried.nonzero().squeeze(-1)
        if ids.numel():
            slot = torch.remainder(s.n_queries[ids] - 1, s.slots)
            self._fly_rows[ids, slot] = self._rows[self.last_choice[ids]]
        ids = adopted.nonzero().squeeze(-1)
        if ids.numel():
            # the adopted plan's slot: the one queried at its step0 in this episode
            match = (s.fly_step0[ids] == s.cur_step0[ids, None]) & (s.fly_serial[ids] > 0)
            self.cur_rows[ids] = (self._fly_rows[ids] * match).amax(dim=1)

    def has_plan(self) -> torch.Tensor:
        """Bool (N,): a plan is running and not past its budget's horizon + stale steps."""
        s = self.scheduler
        return s.cur_valid & chunk_usable(s.t - s.cur_step0, self.cur_rows,
                                          self.gate_cfg.stale_steps)

    def _row_now(self) -> torch.Tensor:
        """The command (N, A): the current plan's row for now, zeros without a plan."""
        s = self.scheduler
        row = select_chunk_rows(s.cur, s.row_index(), 1)[:, 0]
        return torch.where(self.has_plan()[:, None], row, torch.zeros_like(row))

    # --- VecEnv ----------------------------------------------------------------------------
    def budget_index(self, actions: torch.Tensor) -> torch.Tensor:
        """Int64 (N,) budget indices from an action batch; ``ActionError`` when invalid."""
        if not isinstance(actions, torch.Tensor):
            raise ActionError(f"gate actions must be a torch.Tensor, got {type(actions).__name__}")
        a = actions.reshape(-1) if actions.dim() == 2 and actions.shape[-1] == 1 else actions
        if tuple(a.shape) != (self.num_envs,):
            raise ActionError(f"gate actions must have shape ({self.num_envs},) or "
                              f"({self.num_envs}, 1) budget indices, got {tuple(actions.shape)}")
        if not torch.isfinite(a.float()).all() or bool((a != torch.round(a.float())).any()):
            raise ActionError("gate actions must be whole budget indices")
        idx = a.to(torch.int64)
        bad = (idx < 0) | (idx >= self.num_budgets)
        if bool(bad.any()):
            names = ", ".join(f"{j}={b.name}" for j, b in enumerate(self.budgets))
            raise ActionError(f"budget index {int(idx[bad][0])} out of range; budgets: {names}")
        return idx.to(self.device)

    def get_observations(self) -> TensorDict:
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        choice = self.budget_index(actions)
        self.last_choice = choice
        request = ~self._keep[choice]
        n, dev, s = self.num_envs, self.device, self.scheduler
        reward = -self._cost[choice]
        ended = torch.zeros(n, dtype=torch.bool, device=dev)
        flags = {k: torch.zeros(n, dtype=torch.bool, device=dev) for k in ("time_outs",
                                                                            "success")}
        logs: dict[str, Any] = {}
        seen = self._obs["robot"]
        for j in range(self.gate_cfg.decision_steps):
            if j == 0:
                self._draw_delays(request)
                adopted = s.tick(seen, self._plan, only=request)
                self._track_rows(request, adopted)
            obs, rew, dones, extras = self.env.step(self.kicks.apply(self._noisy(self._row_now())))
            dones = dones.to(torch.bool)
            live = ~ended
            reward = reward + torch.where(live, rew, torch.zeros_like(rew))
            for key, acc in flags.items():
                if key in extras:
                    acc |= extras[key].to(torch.bool) & dones & live
            logs.update(extras.get("log", {}))
            ended |= dones
            s.advance(~dones)
            ids = done_ids(dones)
            s.reset(ids)
            self.cur_rows[ids] = 0
            seen = obs["policy"]
            none = torch.zeros(n, dtype=torch.bool, device=dev)
            self._track_rows(none, s.tick(seen, self._plan, only=none))
        self._obs = self._observe(obs)
        logs["/gate/replan_rate"] = request.float().mean()
        logs["/gate/has_plan"] = self.has_plan().float().mean()
        return self._obs, reward, ended, {**flags, "log": logs}

    def _noisy(self, command: torch.Tensor) -> torch.Tensor:
        """The executed row (N, A) plus process noise of std ``std + gain * |row|``."""
        if not bool((self._noise_std > 0).any() or (self._noise_gain > 0).any()):
            return command
        noise = torch.randn(command.shape, generator=self.generator, dtype=command.dtype)
        std = self._noise_std + self._noise_gain * command.abs()
        return command + noise.to(command.device) * std

    @property
    def kick_age(self) -> torch.Tensor:
        """Int64 (N,): control steps since each env's last kick started (privileged;
        oracle baselines only; :class:`~edgerl.sim.wrappers.disturbance.Kicks`)."""
        return self.kicks.age

    def _observe(self, inner: TensorDict) -> TensorDict:
        """The gate's observation groups from the inner observation."""
        s = self.scheduler
        robot = inner["policy"]
        rows = torch.where(s.cur_valid, self.cur_rows, torch.zeros_like(self.cur_rows))
        policy = build_gate_obs(robot, s.age_steps(), s.t - s.cur_step0, rows,
                                s.fly_valid.any(dim=1), self.spec_gate, chunk=s.cur)
        groups = {k: v for k, v in inner.items() if k != "policy"}
        groups.update(policy=policy, robot=robot, critic=torch.cat((policy, robot), dim=-1))
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset envs (all by default): new episodes, no plan, nothing in flight."""
        if env_ids is None:
            env_ids = torch.arange(self.num_envs, device=self.device)
        obs = self.env.reset(env_ids)
        if not isinstance(obs, TensorDict):
            obs = self.env.get_observations()
        self.scheduler.reset(env_ids)
        self.cur_rows[env_ids] = 0
        self._obs = self._observe(obs)
        return self._obs

    def close(self) -> None:
        """Collect plans still in flight, then close the wrapped env."""
        try:
            self.scheduler.drain()
        finally:
            super().close()
