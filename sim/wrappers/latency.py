"""``LatencyWrapper``: the timing the runtime will have, around any rsl_rl VecEnv.

One wrapper models every delay so the order of events is defined in one place (the
step-by-step diagram is in docs/sim.md):

* **sensor**: the robot observation is seen ``obs_delay_steps`` late, plus Gaussian noise;
* **planner**: queried every P steps on the seen observation, its chunk arrives D steps
  later (:class:`~edgerl.sim.wrappers.chunk.ChunkScheduler`);
* **fast policy**: its command is applied ``edit_delay_steps`` late (edit method);
* **actuator**: every command is applied ``action_delay_steps`` late.

Methods (``LatencyCfg.method``) are described in :mod:`edgerl.sim.wrappers.latency_config`.
Without a (non-stale) chunk, ``planner``/``blend``/``rtc`` command zeros and ``edit`` composes
on a zero row. Observation groups returned: ``"policy"`` (method-specific), ``"robot"`` (the
seen robot observation), and the inner env's other groups (e.g. ``"critic"``) unchanged. With
``LatencyCfg.privileged`` (``nodelay`` only: the upper bound of the result tables) the policy
reads the task's ``"critic"`` group, which holds what only the planner knows, when the task has
one, else the whole robot observation.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from tensordict import TensorDict

from edgerl.contract.edit_obs import (
    EditObsConfig,
    build_edit_obs,
    compose_edit_action,
    select_chunk_rows,
)
from edgerl.contract.timing import (
    TimingSpec,
    blend_active,
    blend_weight,
    default_horizon,
    max_planner_delay,
    resolve_blend_steps,
    resolve_stale_steps,
)
from edgerl.sim.wrappers.base import DelayLine, VecEnvWrapper, check_action_batch, done_ids
from edgerl.sim.wrappers.chunk import ChunkScheduler, DelayFn, PlanFn, sample_delays
from edgerl.sim.wrappers.latency_config import CHUNK_METHODS, SCHEDULED_METHODS, LatencyCfg

__all__ = ["LatencyWrapper"]


class LatencyWrapper(VecEnvWrapper):
    """Wrap ``env`` (any rsl_rl VecEnv) with the timing of ``cfg.method``.

    Args:
        env: The task (auto-resetting, ``get_observations()["policy"]`` = robot obs (N, O)).
        cfg: :class:`LatencyCfg`.
        planner: Batched ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``; required by
            :data:`CHUNK_METHODS`.
        delays: Optional ``delays(env_ids, t) -> int64 (n,)`` planner delays used instead of
            sampling them (a recorded arrival trace; ``ChunkScheduler.delay_fn``).

    Attributes:
        horizon: H. edit_obs_cfg: the ``EditObsConfig`` (edit method).
        policy_obs_dim: Size of the ``"policy"`` group.
        scheduler: The :class:`ChunkScheduler` (chunk methods), for inspection.
        last_command (N, A): command the fast loop sent at the last step (before delays).
        last_applied (N, A): action the env received at the last step.
    """

    def __init__(self, env: Any, cfg: LatencyCfg | None = None,
                 planner: PlanFn | None = None, delays: DelayFn | None = None) -> None:
        super().__init__(env)
        self.latency_cfg = cfg = cfg or LatencyCfg()
        #: ``edit_zero_chunks`` runs exactly as ``edit`` with an all-zero planner.
        self.zero_chunks = cfg.method == "edit_zero_chunks"
        self.method = "edit" if self.zero_chunks else cfg.method
        lat = cfg.latency
        if cfg.method in CHUNK_METHODS and planner is None:
            raise ValueError(f"method {cfg.method!r} needs a planner (plan(obs, env_ids))")
        # a planner that exports an intent says so (``intent_dim``) and returns (chunks, intent)
        planner_intent = int(getattr(planner, "intent_dim", 0) or 0) if planner else 0
        if planner is not None and not self.zero_chunks and planner_intent != cfg.intent_dim:
            raise ValueError(f"the planner exports an intent of {planner_intent} elements, the "
                             f"latency config expects {cfg.intent_dim} (LatencyCfg.intent_dim)")
        self.planner = self._zero_plan if self.zero_chunks else planner
        #: The planner reads the committed prefix (``rtc``; an edit with ``prefix_planner``).
        self.prefixed = cfg.method == "rtc" or (cfg.prefix_planner and not self.zero_chunks)
        if self.prefixed:
            self._rtc_planner, self.planner = planner, self._prefixed_plan
        self.generator = torch.Generator(device="cpu").manual_seed(int(cfg.seed))
        n, a, dev = self.num_envs, self.num_actions, self.device
        spec = getattr(self.unwrapped, "spec", None)
        self.dt = float(cfg.control_dt or (spec.control_dt if spec is not None else 0.0))
        if not self.dt > 0:
            raise ValueError("control_dt unknown: set LatencyCfg.control_dt or give the env a spec")
        self._low, self._high = self._limits(cfg, spec, a)

        rand = getattr(self.unwrapped, "randomizer", None)
        self._extra_delay = getattr(rand, "latency_steps", None)
        extra_max = int(rand.cfg.latency_steps[1]) if self._extra_delay is not None else 0
        self.max_delay = max_planner_delay(lat, extra_max)

        obs0 = self.env.get_observations()
        robot0 = obs0["policy"]
        self.obs_dim = int(robot0.shape[-1])
        fast = (list(spec.fast_obs_indices) if spec is not None and cfg.edit_inputs == "fast"
                else [])
        self.edit_obs_cfg = EditObsConfig(self.obs_dim, a, cfg.lookahead, cfg.n_committed,
                                          cfg.age_scale_s, cfg.age_clip,
                                          fast if len(fast) < self.obs_dim else [],
                                          intent_dim=cfg.intent_dim)
        self._privileged_group = ("critic" if cfg.privileged and "critic" in obs0
                                  else None)
        self.blend_steps = resolve_blend_steps(cfg.rtc_blend_steps, lat.planner_period_steps)
        self.horizon = (cfg.horizon or int(getattr(planner, "horizon", 0) or 0)
                        or default_horizon(lat, cfg.lookahead, extra_max, cfg.method,
                                           self.blend_steps))
        stale = resolve_stale_steps(cfg.stale_steps, lat.planner_period_steps)
        extra_lo = int(rand.cfg.latency_steps[0]) if self._extra_delay is not None else 0
        #: The whole timing this wrapper trains with (what the manifest records).
        self.timing = TimingSpec.build(1.0 / self.dt, lat, cfg.method, horizon=self.horizon,
                                       lookahead=cfg.lookahead,
                                       extra_delay_steps=[extra_lo, extra_max],
                                       stale_steps=stale, blend_steps=self.blend_steps)

        # Per-env method delay (policy -> command queue), resampled at episode start.
        self._delay = torch.zeros(n, dtype=torch.int64, device=dev)
        self._mid = torch.zeros(n, dtype=torch.int64, device=dev)
        # ARLI's queue delay D - floor(D * f) never decreases with D, so D_max bounds it.
        self._mid_max = (int(math.floor(self.max_delay * cfg.arli_mid_fraction))
                         if cfg.method == "arli" else 0)
        method_max = {"naive": self.max_delay, "arli": self.max_delay - self._mid_max,
                      "edit": lat.edit_delay_steps}.get(cfg.method, 0)
        self._queue_max = method_max + lat.action_delay_steps

        self._raw = DelayLine(n, self.obs_dim, lat.obs_delay_steps, dev)
        self._seen = DelayLine(n, self.obs_dim, self._mid_max, dev)
        self._queue = DelayLine(n, a, self._queue_max, dev)
        self._sent = DelayLine(n, a, max(cfg.n_committed - 1, 0), dev)
        self.scheduler = (ChunkScheduler(n, self.horizon, a, lat, dev, self.generator, stale,
                                         cfg.random_phase, self._extra_delay, extra_max,
                                         intent_dim=cfg.intent_dim)
                          if cfg.method in SCHEDULED_METHODS else None)
        if self.scheduler is not None:
            self.scheduler.delay_fn = delays
        self.last_command = torch.zeros(n, a, device=dev)
        self.last_applied = torch.zeros(n, a, device=dev)
        self.policy_obs_dim = self._policy_dim()
        self._start(torch.arange(n, device=dev), robot0)
        self._obs = self._observe(obs0)

    # --- setup ----------------------------------------------------------------------------
    def _limits(self, cfg: LatencyCfg, spec: Any, a: int) -> tuple[torch.Tensor, torch.Tensor]:
        low = cfg.action_low or (list(spec.action_low) if spec is not None else [-math.inf] * a)
        high = cfg.action_high or (list(spec.action_high) if spec is not None else [math.inf] * a)
        if len(low) != a or len(high) != a:
            raise ValueError(f"action limits need {a} elements, got {len(low)} and {len(high)}")
        return (torch.tensor(low, dtype=torch.float32, device=self.device),
                torch.tensor(high, dtype=torch.float32, device=self.device))

    def _policy_dim(self) -> int:
        if self.method == "edit":
            return self.edit_obs_cfg.dim
        if self.method == "arli":
            return 2 * self.obs_dim + self._queue_max * self.num_actions
        if self._privileged_group is not None:
            return int(self.env.get_observations()[self._privileged_group].shape[-1])
        return self.obs_dim

    def _prefixed_plan(self, obs: torch.Tensor, env_ids: torch.Tensor) -> Any:
        """``rtc`` (and an edit with ``prefix_planner``): the planner asked with the committed
        prefix."""
        return self.plan_with_prefix(self._rtc_planner, obs, env_ids)

    def committed_prefix(self, env_ids: torch.Tensor) -> torch.Tensor:
        """(n, D, A): the rows the current chunk gives the next D steps of ``env_ids`` (zeros
        where there is none), which the robot executes while the planner thinks."""
        s = self.scheduler
        d = self.latency_cfg.latency.planner_delay_steps
        # the chunk the robot runs from now on: the current one, or one arriving this very step
        # (queries come before this step's arrivals are adopted)
        chunk, step0, valid = s.cur[env_ids], s.cur_step0[env_ids], s.cur_valid[env_ids]
        t = s.t[env_ids]
        for j in range(s.slots):
            newer = (s.fly_valid[env_ids, j] & (s.fly_arrive[env_ids, j] <= t)
                     & (~valid | (s.fly_step0[env_ids, j] > step0)))
            chunk = torch.where(newer[:, None, None], s.fly[env_ids, j], chunk)
            step0 = torch.where(newer, s.fly_step0[env_ids, j], step0)
            valid = valid | newer
        index = torch.where(valid, t - step0, torch.zeros_like(t))
        prefix = select_chunk_rows(chunk, index, max(d, 1))[:, :d]
        return prefix * valid[:, None, None].to(prefix.dtype)

    def plan_with_prefix(self, planner: Any, obs: torch.Tensor, env_ids: torch.Tensor) -> Any:
        """``planner(obs, env_ids, committed prefix)``: a prefix-conditioned planner's chunks
        for ``env_ids`` (real-time chunking, trained with the prefix as input)."""
        return planner(obs, env_ids, self.committed_prefix(env_ids))

    def _zero_plan(self, obs: torch.Tensor, env_ids: torch.Tensor) -> Any:
        """``edit_zero_chunks``' planner: an all-zero (n, H, A) chunk (and an all-zero intent
        of the configured size), on the same schedule."""
        n = int(obs.shape[0])
        chunks = torch.zeros(n, self.horizon, self.num_actions, device=obs.device)
        if self.latency_cfg.intent_dim:
            return chunks, torch.zeros(n, self.latency_cfg.intent_dim, device=obs.device)
        return chunks

    def _start(self, ids: torch.Tensor, robot: torch.Tensor) -> None:
        """Episode start for ``ids``: fill histories, clear queues, draw delays."""
        if ids.numel() == 0:
            return
        lat, n = self.latency_cfg.latency, int(ids.numel())
        first = robot[ids]
        self._raw.fill(ids, first)
        self._seen.fill(ids, self._noisy(first))
        zeros = torch.zeros(n, self.num_actions, device=self.device)
        self._queue.fill(ids, zeros)
        self._sent.fill(ids, zeros)
        if self.method in ("naive", "arli"):
            d = sample_delays(lat, n, self.generator).to(self.device)
            if self._extra_delay is not None:
                d = d + self._extra_delay[ids]
            mid = torch.floor(d.double() * self.latency_cfg.arli_mid_fraction).long()
            self._mid[ids] = mid if self.method == "arli" else 0
            self._delay[ids] = d - self._mid[ids] + lat.action_delay_steps
        elif self.method == "edit":
            self._delay[ids] = lat.edit_delay_steps + lat.action_delay_steps
        else:
            self._delay[ids] = lat.action_delay_steps
        if self.scheduler is not None:
            self.scheduler.reset(ids)

    def _noisy(self, x: torch.Tensor) -> torch.Tensor:
        std = self.latency_cfg.obs_noise_std
        if std == 0:
            return x.clone()
        noise = torch.randn(x.shape, generator=self.generator, dtype=x.dtype)
        return x + std * noise.to(x.device)

    # --- per step --------------------------------------------------------------------------
    def get_observations(self) -> TensorDict:
        return self._obs

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        check_action_batch(actions, self.num_envs, self.num_actions)
        command = self._command(actions.to(self.device))
        self.last_command = command
        self._sent.push(command)
        self._queue.push(command)
        applied = self._queue.read(self._delay)
        self.last_applied = applied
        obs, rew, dones, extras = self.env.step(applied)
        ids = done_ids(dones)
        robot = obs["policy"]
        self._raw.push(robot)
        self._seen.push(self._noisy(self._raw.read(self.latency_cfg.latency.obs_delay_steps)))
        if self.scheduler is not None:
            self.scheduler.advance(~dones.to(torch.bool))
        self._start(ids, robot)
        self._obs = self._observe(obs)
        extras = dict(extras)
        if self.scheduler is not None:
            log = dict(extras.get("log", {}))
            log["/latency/has_chunk"] = self.scheduler.has_chunk().float().mean()
            extras["log"] = log
        return self._obs, rew, dones, extras

    def _command(self, actions: torch.Tensor) -> torch.Tensor:
        """The command the fast loop sends at this step, (N, A), within the limits."""
        if self.method in ("nodelay", "naive", "arli"):
            cmd = actions
        else:
            row = self._row_now()
            if self.method == "edit":
                cmd = compose_edit_action(row, actions, self.latency_cfg.edit_bound)
            else:
                cmd = row
        return torch.maximum(torch.minimum(cmd, self._high), self._low)

    def current_row(self) -> torch.Tensor:
        """(N, A): the chunk row the command is composed on at the current step (blend:
        blended; zeros without a chunk). Chunk methods only."""
        return self._row_now()

    def _row_now(self) -> torch.Tensor:
        """The chunk action for the current step (blend: blended), zeros without a chunk."""
        s = self.scheduler
        row = select_chunk_rows(s.cur, s.row_index(), 1)[:, 0]
        if self.method == "blend":
            since = s.t - s.arrived_at
            blend = s.prev_valid & blend_active(since, self.blend_steps, s.prev_row_index(),
                                                s.prev.shape[1])
            w = blend_weight(since.float(), self.blend_steps)[:, None]
            old = select_chunk_rows(s.prev, s.prev_row_index(), 1)[:, 0]
            row = torch.where(blend[:, None], (1.0 - w) * old + w * row, row)
        return torch.where(s.has_chunk()[:, None], row, torch.zeros_like(row))

    def _observe(self, inner: TensorDict, only: torch.Tensor | None = None) -> TensorDict:
        """Query/adopt chunks for the new step and build every observation group.

        ``only`` (bool (N,)) limits planner queries to those envs (a partial ``reset``).
        """
        seen = self._seen.read(0)
        if self.scheduler is not None:
            self.scheduler.tick(seen, self.planner, self.latency_cfg.latency.obs_delay_steps,
                                only)
        if self.method == "edit":
            policy = self.edit_observation(seen)
        elif self.method == "arli":
            policy = self._arli_observation(seen)
        elif self._privileged_group is not None:
            policy = inner[self._privileged_group]
        else:
            policy = seen
        groups = {k: v for k, v in inner.items() if k != "policy"}
        groups.update(policy=policy, robot=seen)
        return TensorDict(groups, batch_size=[self.num_envs], device=self.device)

    def edit_observation(self, seen: torch.Tensor) -> torch.Tensor:
        """The edit policy's input (N, D) from the contract builder."""
        s, cfg = self.scheduler, self.edit_obs_cfg
        rows = select_chunk_rows(s.cur, s.row_index(), cfg.n_rows)
        age_s = (s.age_steps().double() * self.dt).float()
        committed = self._sent.newest(cfg.n_committed)
        return build_edit_obs(seen, rows, age_s, committed, s.has_chunk(), cfg,
                              intent=s.cur_intent if cfg.intent_dim else None)

    def _arli_observation(self, seen: torch.Tensor) -> torch.Tensor:
        start_obs = self._seen.read(self._mid)
        k = self._queue_max
        parts = [start_obs, seen]
        if k:
            pending = self._queue.newest(k)
            mask = torch.arange(k, device=self.device)[None, :] < self._delay[:, None]
            parts.append((pending * mask[..., None]).reshape(self.num_envs, k * self.num_actions))
        return torch.cat(parts, dim=-1)

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        """Reset envs (all by default) if the wrapped env can, and restart their timing."""
        if env_ids is None:
            env_ids = torch.arange(self.num_envs, device=self.device)
        reset = getattr(self.env, "reset", None)
        if reset is None:
            raise AttributeError(f"{type(self.env).__name__} has no reset()")
        obs = reset(env_ids)
        if not isinstance(obs, TensorDict):
            obs = self.env.get_observations()
        self._start(env_ids, obs["policy"])
        only = torch.zeros(self.num_envs, dtype=torch.bool, device=self.device)
        only[env_ids] = True
        self._obs = self._observe(obs, only)
        return self._obs

    def close(self) -> None:
        """Collect the planner queries still in flight, close the planner (a service
        connection) if it can be closed, then the wrapped env."""
        try:
            if self.scheduler is not None:
                self.scheduler.drain()
        finally:
            close = getattr(self._planner_to_close(), "close", None)
            if close is not None:
                close()
            super().close()

    def _planner_to_close(self) -> Any:
        return self._rtc_planner if self.prefixed else self.planner
