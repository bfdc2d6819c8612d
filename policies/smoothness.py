"""Commands a motor can follow: during PPO, the edit pays for being jerkier than its teacher.

A late chunk's rows jump when the next chunk arrives, and PPO's residual learns no reason to
smooth them: on a task whose good policy moves smoothly the edit's command then changes more
per tick than the privileged policy's does. :class:`RatePenalty` wraps the training env and
subtracts, every step, a penalty for the part of the command's change that exceeds the
teacher's (the planner without delay, :mod:`edgerl.policies.distill`) at the same step::

    excess_t  = mean_i max(0, |u_t - u_{t-1}|_i - |v_t - v_{t-1}|_i) / range_i
    penalty_t = weight * R * excess_t / (rate + eps)

where ``v`` is the teacher's action, ``R`` a running mean of the task's |reward| per step and
``rate`` a running mean of the teacher's own ``|v_t - v_{t-1}| / range``: an excess as large as
the teacher's typical change costs ``weight`` times the typical reward. Both scales are the
task's own, so the one default weight transfers: a bang-bang teacher leaves nothing to pay
for, a smooth one (a task with a control cost) makes the edit smooth. The reward the policy is
evaluated and deployed on (:mod:`edgerl.policies.guard`) is the task's, unchanged.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

__all__ = ["RatePenalty"]

#: EMA factor of the running reward and teacher-rate scales (per step).
_EMA = 0.01


class RatePenalty:
    """``env`` (a latency-wrapped edit env) with the rate penalty in its reward.

    Args:
        env: The env PPO steps; its ``last_command`` is the command of the last step.
        teacher: ``teacher(env) -> (N, A)``, the teacher's action at the env's current step.
        weight: Cost of an excess as large as the teacher's typical change, in units of the
            typical |reward| per step (0 = off).
    """

    def __init__(self, env: Any, teacher: Callable[[Any], torch.Tensor],
                 weight: float) -> None:
        self.env, self.teacher, self.weight = env, teacher, float(weight)
        spec = env.unwrapped.spec
        low = torch.as_tensor(spec.action_low, dtype=torch.float32)
        high = torch.as_tensor(spec.action_high, dtype=torch.float32)
        self._range = (high - low).clamp_min(1e-6).to(env.device)
        self._prev_cmd: torch.Tensor | None = None
        self._prev_teacher: torch.Tensor | None = None
        self._fresh = torch.ones(env.num_envs, dtype=torch.bool, device=env.device)
        self.reward_scale: float | None = None
        self.teacher_rate: float | None = None
        #: The last step's mean penalty and mean excess (for the logs).
        self.last_penalty = 0.0
        self.last_excess = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self.env, name)

    def step(self, actions: torch.Tensor) -> tuple[Any, torch.Tensor, torch.Tensor, dict]:
        teach = self.teacher(self.env).detach()
        obs, rew, dones, extras = self.env.step(actions)
        cmd = self.env.last_command.detach()
        if self._prev_cmd is not None:
            valid = ~self._fresh
            du = (cmd - self._prev_cmd).abs() / self._range
            dv = (teach - self._prev_teacher).abs() / self._range
            excess = torch.clamp(du - dv, min=0.0).mean(dim=-1) * valid
            self._update_scales(rew, dv.mean(dim=-1), valid)
            penalty = (self.weight * self.reward_scale * excess
                       / (self.teacher_rate + 1e-6))
            rew = rew - penalty
            self.last_penalty = float(penalty.mean())
            self.last_excess = float(excess.mean())
            extras = dict(extras)
            log = dict(extras.get("log", {}))
            log["/smoothness/excess_rate"] = excess.mean()
            log["/smoothness/penalty"] = penalty.mean()
            extras["log"] = log
        self._prev_cmd, self._prev_teacher = cmd, teach
        self._fresh = dones.to(torch.bool)
        return obs, rew, dones, extras

    def _update_scales(self, rew: torch.Tensor, teacher_rate: torch.Tensor,
                       valid: torch.Tensor) -> None:
        r = float(rew.detach().abs().mean())
        v = float(teacher_rate[valid].mean()) if bool(valid.any()) else None
        self.reward_scale = r if self.reward_scale is None else (
            (1 - _EMA) * self.reward_scale + _EMA * r)
        if v is not None:
            self.teacher_rate = v if self.teacher_rate is None else (
                (1 - _EMA) * self.teacher_rate + _EMA * v)
        elif self.teacher_rate is None:
            self.teacher_rate = 0.0
