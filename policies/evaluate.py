"""Evaluate any method on its (wrapped) env: success rate and return over N episodes.

The same code evaluates PPO policies (``nodelay``/``naive``/``arli``/``edit``) and the
non-learning baselines (``planner``/``blend``/``rtc``, whose wrappers ignore the action they get).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass, field

import torch

from edgerl.contract.logs import progress

__all__ = ["EvalResult", "evaluate", "evaluate_run"]


@dataclass
class EvalResult:
    """Per-episode outcomes of an evaluation (the first ``episodes`` finished, env-major)."""

    returns: list[float]
    successes: list[float]
    lengths: list[int]
    #: Per episode: mean over its ticks of ``mean_i |u_t[i] - u_{t-1}[i]|`` (action units),
    #: the command's change per control tick (the first tick of an episode not counted).
    action_rates: list[float] = field(default_factory=list)

    @property
    def episodes(self) -> int:
        return len(self.returns)

    @property
    def success_rate(self) -> float:
        return sum(self.successes) / max(len(self.successes), 1)

    @property
    def return_mean(self) -> float:
        return sum(self.returns) / max(len(self.returns), 1)

    @property
    def return_std(self) -> float:
        n = len(self.returns)
        if n < 2:
            return 0.0
        mean = self.return_mean
        return math.sqrt(sum((r - mean) ** 2 for r in self.returns) / n)

    @property
    def length_mean(self) -> float:
        return sum(self.lengths) / max(len(self.lengths), 1)

    @property
    def action_rate(self) -> float:
        """Mean |du| per tick over the episodes (action units); NaN when not measured."""
        if not self.action_rates:
            return float("nan")
        return sum(self.action_rates) / len(self.action_rates)

    def summary(self) -> dict[str, float | int]:
        """``success_rate``, ``return_mean``, ``return_std``, ``episodes``, ``episode_length``,
        ``action_rate`` (mean |du| per tick)."""
        return {"success_rate": self.success_rate, "return_mean": self.return_mean,
                "return_std": self.return_std, "episodes": self.episodes,
                "episode_length": self.length_mean, "action_rate": self.action_rate}


def evaluate(env, act: Callable[[torch.Tensor], torch.Tensor], episodes: int, *,
             max_steps: int | None = None, show_progress: bool = True) -> EvalResult:
    """Run ``act`` on ``env`` until each env has finished ``ceil(episodes / num_envs)`` episodes.

    Args:
        env: rsl_rl-style VecEnv (``policy`` obs group; ``extras["success"]`` optional).
        act: ``(num_envs, D) policy obs -> (num_envs, A) action``, deterministic.
        episodes: Episodes to report (taken env by env, so short episodes are not favoured).
        max_steps: Safety limit on env steps (default: 20 x the episode limit x quota).
        show_progress: tqdm bar over finished episodes.

    Raises:
        RuntimeError: the episodes did not finish within ``max_steps``.
    """
    if episodes < 1:
        raise ValueError(f"episodes must be >= 1, got {episodes}")
    n = env.num_envs
    quota = math.ceil(episodes / n)
    limit = max_steps or 20 * int(env.max_episode_length) * quota + 100
    per_env: list[list[tuple[float, float, int, float]]] = [[] for _ in range(n)]
    ret = torch.zeros(n, dtype=torch.float64)
    length = torch.zeros(n, dtype=torch.int64)
    rate = torch.zeros(n, dtype=torch.float64)  # summed |du| per tick over the episode
    prev: torch.Tensor | None = None
    bar = progress(range(episodes), total=episodes, desc="eval",
                   disable=not show_progress or None)
    bar_iter = iter(bar)
    done_count = 0
    # the reset too: an env evaluated before holds inference tensors, updated in place here
    with torch.inference_mode():
        obs = env.reset()
        if obs is None:
            obs = env.get_observations()
        for _ in range(limit):
            actions = act(obs["policy"])
            obs, rew, dones, extras = env.step(actions.to(env.device))
            # the command the robot got this tick (the latency wrapper's composed command)
            cmd = getattr(env, "last_command", actions).detach().cpu().double()
            if prev is not None:
                rate += (cmd - prev).abs().mean(dim=-1) * (length > 0)
            prev = cmd
            ret += rew.detach().cpu().double().flatten()
            length += 1
            ended = (dones.detach().cpu().flatten() > 0).nonzero().flatten().tolist()
            if ended:
                success = extras.get("success")
                succ = (success.detach().cpu().flatten().float() if success is not None
                        else torch.full((n,), float("nan")))
                for i in ended:
                    if len(per_env[i]) < quota:
                        ticks = max(int(length[i]) - 1, 1)
                        per_env[i].append((float(ret[i]), float(succ[i]), int(length[i]),
                                           float(rate[i]) / ticks))
                        if done_count < episodes:
                            next(bar_iter, None)
                            done_count += 1
                    ret[i] = 0.0
                    rate[i] = 0.0
                    length[i] = 0
            if all(len(p) >= quota for p in per_env):
                break
        else:
            finished = sum(len(p) for p in per_env)
            raise RuntimeError(f"evaluation finished only {finished} of {n * quota} episodes in "
                               f"{limit} steps")
    for _ in bar_iter:  # drain (closes the bar)
        pass
    ordered = [ep for k in range(quota) for p in per_env for ep in p[k:k + 1]][:episodes]
    return EvalResult(returns=[e[0] for e in ordered], successes=[e[1] for e in ordered],
                      lengths=[e[2] for e in ordered], action_rates=[e[3] for e in ordered])


def evaluate_run(run_dir: str, episodes: int, num_envs: int = 0, seed: int | None = None,
                 checkpoint: str | None = None, device: str = "cpu",
                 show_progress: bool = True) -> dict:
    """Load ``run_dir`` and evaluate it; the dict ``edgerl eval --json`` prints."""
    from edgerl.policies.runs import load_policy

    pol = load_policy(run_dir, device=device, checkpoint=checkpoint)
    cfg = pol.config
    n = num_envs or min(episodes, 256)
    seed = cfg.seed + 1000 if seed is None else seed
    env = pol.make_env(n, seed=seed)
    try:
        result = evaluate(env, pol.act, episodes, show_progress=show_progress)
    finally:
        env.close()
    return {**result.summary(), "method": cfg.method, "task": cfg.task,
            "delay_steps": cfg.delay_steps, "delay_ms": pol.document["resolved"]["delay_ms"],
            "seed": cfg.seed, "eval_seed": seed, "planner": cfg.planner,
            "checkpoint": None if pol.checkpoint is None else pol.checkpoint.name,
            "run": str(pol.run_dir)}
