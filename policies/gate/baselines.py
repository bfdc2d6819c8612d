"""Gate policies that do not learn, and the evaluation every gate policy is compared with.

A gate policy maps the :class:`~edgerl.sim.gate.env.GatedEnv` to budget indices, int64
(N,), at each decision: ``policy(env, obs) -> indices``. Baselines:

* :func:`fixed_policy`: always the same budget (``keep`` only once a plan runs);
* :func:`age_heuristic`: ask budget ``j`` when the running plan is older than ``X`` steps (or
  there is none) and nothing is in flight, else keep;
* :func:`random_policy`: a uniformly random budget.

:func:`evaluate_gate` runs a policy for a number of finished episodes on a fresh env (the same
seed gives every policy the same episodes) and reports success rate, return and replans.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from edgerl.sim.gate.env import GatedEnv

__all__ = ["GatePolicy", "age_heuristic", "ask_or_keep", "evaluate_gate", "fixed_policy",
           "keep_index", "random_policy"]

#: ``policy(env, obs) -> int64 (N,)`` budget indices.
GatePolicy = Callable[[GatedEnv, Any], torch.Tensor]


def keep_index(env: GatedEnv) -> int:
    """Index of the ``keep`` budget; ``ValueError`` when the budget set has none."""
    for j, b in enumerate(env.budgets):
        if b.keep:
            return j
    raise ValueError("the budget set has no 'keep' budget")


def fixed_policy(index: int) -> GatePolicy:
    """Always budget ``index``."""

    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        return torch.full((env.num_envs,), int(index), dtype=torch.int64, device=env.device)

    return policy


def ask_or_keep(env: GatedEnv, ask: torch.Tensor, budget: int | torch.Tensor) -> torch.Tensor:
    """Int64 (N,): ``budget`` (an index, or (N,) indices) where ``ask`` (bool (N,)) and no plan
    is in flight, ``keep`` elsewhere: the request rule every rule-based gate shares."""
    s = env.scheduler
    ask = ask & ~s.fly_valid.any(dim=1)
    budget = torch.as_tensor(budget, dtype=s.t.dtype, device=s.t.device).expand_as(s.t)
    return torch.where(ask, budget, torch.full_like(s.t, keep_index(env)))


def age_heuristic(index: int, max_age: int) -> GatePolicy:
    """Budget ``index`` when the running plan is older than ``max_age`` steps (or there is
    none) and no plan is in flight; ``keep`` otherwise."""

    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        return ask_or_keep(env, ~env.has_plan() | (env.scheduler.age_steps() > max_age),
                           int(index))

    return policy


def random_policy(seed: int = 0) -> GatePolicy:
    """A uniformly random budget each decision."""
    gen = torch.Generator(device="cpu").manual_seed(int(seed))

    def policy(env: GatedEnv, obs: Any) -> torch.Tensor:
        return torch.randint(0, env.num_budgets, (env.num_envs,), generator=gen).to(env.device)

    return policy


@torch.no_grad()
def evaluate_gate(make_env: Callable[[], GatedEnv], policy: GatePolicy, episodes: int,
                  max_decisions: int = 100_000) -> dict[str, float]:
    """Success rate, mean return (task reward minus budget costs), mean episode length
    (decisions) and the fraction of decisions per budget over the first ``episodes``
    finished episodes of a fresh env from ``make_env()``.

    Every env counts only its first episodes so that each policy sees the same episode
    starts (envs draw their episodes from their own seed sequence)."""
    env = make_env()
    n = env.num_envs
    per_env = -(-int(episodes) // n)
    ret = torch.zeros(n)
    length = torch.zeros(n)
    done_count = torch.zeros(n, dtype=torch.int64)
    returns: list[float] = []
    lengths: list[float] = []
    successes: list[float] = []
    choices = torch.zeros(env.num_budgets)
    obs = env.get_observations()
    try:
        for _ in range(int(max_decisions)):
            if int(done_count.clamp(max=per_env).sum()) >= per_env * n:
                break
            idx = policy(env, obs)
            counting = (done_count < per_env).to(env.device)
            choices += torch.bincount(idx[counting].cpu(), minlength=env.num_budgets).float()
            obs, rew, dones, extras = env.step(idx)
            ret += rew.cpu()
            length += 1
            for i in dones.nonzero().squeeze(-1).cpu().tolist():
                if done_count[i] < per_env:
                    returns.append(float(ret[i]))
                    lengths.append(float(length[i]))
                    successes.append(float(bool(extras["success"][i])))
                done_count[i] += 1
                ret[i] = 0.0
                length[i] = 0.0
    finally:
        env.close()
    k = max(len(returns), 1)
    share = (choices / choices.sum().clamp_min(1.0)).tolist()
    return {"episodes": len(returns), "success_rate": sum(successes) / k,
            "return_mean": sum(returns) / k, "length_mean": sum(lengths) / k,
            **{f"share_{b.name}": round(p, 4) for b, p in zip(env.budgets, share, strict=True)}}
