"""Never worse than its planner: the deployed edit policy is chosen on validation episodes.

After training, the candidates are evaluated on episodes of seeds that neither training nor
the final evaluation uses, in the run's own (latency-wrapped) env:

* ``final``: the actor after the last PPO iteration;
* ``best``: the actor of the best training iteration (``model_best.pt``);
* ``warm``: the actor after the warm start, before PPO (when there was one);
* ``planner``: the same network with its output layer zeroed, so the residual is 0 and the
  command is the planner's chunk row: the planner alone, at the same delay.

Smooth enough first: when a rate reference is given (the privileged no-delay expert the
planner learned from, the upper bound of the result tables; the planner without delay for a
task without one), its own command's mean |du| per tick is measured in the same episodes, and
only the candidates within ``max_rate_ratio`` of it compete (all of them if none is). The
best of those by the task's score (success rate, then return) is written as
``model_deploy.pt``, which :func:`edgerl.policies.runs.default_checkpoint` loads first. Since
the planner alone is a candidate, the deployed edit policy scores at least the planner's
validation score: a policy-level guarantee, up to the validation's sampling error (report
the validation margin beside it). It costs a few hundred validation episodes per run and no
change on the robot: the deployed network is an ordinary edit network.
"""

from __future__ import annotations

import copy
import logging
from pathlib import Path
from typing import Any

import torch

from edgerl.policies.config import GuardConfig

__all__ = ["DEPLOY_NAME", "GuardConfig", "select_deployed", "zero_residual"]

log = logging.getLogger(__name__)

#: The chosen actor, in rsl_rl's checkpoint format.
DEPLOY_NAME = "model_deploy.pt"


def zero_residual(actor_state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """A copy of an rsl_rl ``MLPModel`` actor state whose last linear layer outputs 0 (the
    residual 0: the edit commands the chunk row)."""
    state = copy.deepcopy(actor_state)
    weights = [k for k in state if k.startswith("mlp.") and k.endswith(".weight")]
    last = max(weights, key=lambda k: int(k.split(".")[1]))
    state[last].zero_()
    state[last.replace(".weight", ".bias")].zero_()
    return state


def _score(summary: dict[str, Any]) -> tuple[float, float]:
    success = summary["success_rate"]
    return (success if success == success else 0.0, summary["return_mean"])


def _evaluate(env: Any, act: Any, episodes: int) -> dict[str, Any]:
    from edgerl.policies.evaluate import evaluate

    return evaluate(env, act, episodes, show_progress=False).summary()


def select_deployed(env: Any, actor: Any, candidates: dict[str, dict[str, torch.Tensor]],
                    cfg: GuardConfig, run_dir: Path | None,
                    reference: Any = None, reference_name: str = "") -> dict[str, Any]:
    """Evaluate each candidate actor state on ``env`` (deterministic means), load the chosen
    one into ``actor`` and save it as ``run_dir / model_deploy.pt``; the per-candidate scores.
    ``reference(env) -> (N, A)`` (optional, named ``reference_name``): the command whose
    rate bounds the candidates' (``cfg.max_rate_ratio``)."""
    from tensordict import TensorDict

    scores: dict[str, Any] = {}
    for name, state in candidates.items():
        actor.load_state_dict(state)
        actor.eval()

        def act(obs: torch.Tensor) -> torch.Tensor:
            return actor(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))

        scores[name] = _evaluate(env, act, cfg.episodes)
    measured = None
    if reference is not None:
        bound = float(env.latency_cfg.edit_bound)

        def follow(obs: torch.Tensor) -> torch.Tensor:  # the residual commanding the reference
            return torch.clamp((reference(env) - env.current_row()) / max(bound, 1e-6), -1, 1)

        measured = _evaluate(env, follow, cfg.episodes)
    smooth = [k for k in scores if measured is None
              or scores[k]["action_rate"] <= cfg.max_rate_ratio * measured["action_rate"]]
    chosen = max(smooth or scores, key=lambda k: _score(scores[k]))
    actor.load_state_dict(candidates[chosen])
    if run_dir is not None:
        torch.save({"actor_state_dict": candidates[chosen], "infos": {"deployed": chosen}},
                   run_dir / DEPLOY_NAME)
    log.info("guard: deployed %s (%s)", chosen,
             {k: round(v["return_mean"], 3) for k, v in scores.items()})
    out = {"deployed": chosen, "episodes": cfg.episodes, "seed_offset": cfg.seed_offset,
           "smooth_enough": smooth,
           "scores": {k: {"success_rate": v["success_rate"], "return_mean": v["return_mean"],
                          "action_rate": v["action_rate"]} for k, v in scores.items()}}
    if measured is not None:
        out["reference"] = {"name": reference_name, "success_rate": measured["success_rate"],
                            "return_mean": measured["return_mean"],
                            "action_rate": measured["action_rate"],
                            "max_rate_ratio": cfg.max_rate_ratio}
    return out
