"""Held-out evaluation of the language planner alone, timed by the sim latency wrapper.

The planner runs with no delay: every ``period`` steps (and at each episode start) it plans
from the current observation and the env's instruction, phrased with a paraphrase held out
from training; the env executes the chunk's rows open loop until the next plan. The timing is
:class:`~edgerl.sim.wrappers.latency.LatencyWrapper`'s ``planner`` method (zero delays, period
P, horizon H), the clock every other chunk method is trained and evaluated with.
"""

from __future__ import annotations

from typing import Any

import torch

from edgerl.contract.spec import LatencyModel
from edgerl.policies.evaluate import EvalResult, evaluate
from edgerl.policies.language.config import LanguagePlannerConfig
from edgerl.policies.language.head import GroundedChunkHead
from edgerl.policies.language.instructions import InstructionSet, instruction_ids, make_task_env
from edgerl.sim.wrappers.latency import LatencyWrapper
from edgerl.sim.wrappers.latency_config import LatencyCfg

__all__ = ["evaluate_language_planner"]


class _RotatingPhrasingPlanFn:
    """The wrappers' batched planner callable, phrasing env ``e``'s instruction with paraphrase
    ``k = (e + episode) % K`` (``episode`` counts the env's episode starts), so every phrasing
    is exercised: ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``."""

    def __init__(self, head: GroundedChunkHead, phrasings: InstructionSet, env: Any) -> None:
        self.head = head.eval()
        self.phrasings = phrasings
        self.env = env
        self.horizon = head.horizon
        self.episode = torch.zeros(env.num_envs, dtype=torch.int64)

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(env_ids).reshape(-1).cpu().long()
        fresh = torch.as_tensor(self.env.episode_length_buf).reshape(-1).cpu()[ids] == 0
        self.episode[ids] += fresh.long()
        k = (ids + self.episode[ids]) % self.phrasings.embeddings.shape[1]
        emb = self.phrasings.embeddings[instruction_ids(self.env)[ids], k]
        with torch.no_grad():
            return self.head(obs.detach().float().cpu(), emb).to(obs.device)


def evaluate_language_planner(head: GroundedChunkHead, phrasings: InstructionSet,
                              cfg: LanguagePlannerConfig, *, episodes: int | None = None,
                              seed: int | None = None,
                              show_progress: bool = True) -> EvalResult:
    """Success of the planner alone (no delay) with the given phrasings of each instruction.

    Env ``e`` uses phrasing ``k = (e + episode) % K`` of its instruction, so every phrasing is
    exercised; the chunk is recomputed every ``cfg.period`` steps and at episode starts.
    """
    episodes = episodes or cfg.eval_episodes
    seed = cfg.seed + 20_000 if seed is None else seed
    env = make_task_env(cfg.task, min(cfg.eval_envs, episodes), seed)
    plan = _RotatingPhrasingPlanFn(head, phrasings, env)
    timing = LatencyCfg(method="planner", horizon=cfg.horizon,
                        latency=LatencyModel(planner_period_steps=cfg.period))
    wrapped = LatencyWrapper(env, timing, planner=plan)
    plan.episode.zero_()  # the wrapper planned once on construction; evaluate() resets
    zeros = torch.zeros(env.num_envs, env.num_actions)  # the planner method ignores actions
    try:
        return evaluate(wrapped, lambda obs: zeros, episodes, show_progress=show_progress)
    finally:
        wrapped.close()
