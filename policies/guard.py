"""Never worse than its planner: the deployed edit policy is chosen on validation episodes.

After training, the candidates are evaluated on episodes of seeds that neither training nor
the final evaluation uses, in the run's own (latency-wrapped) env:

* ``final``: the actor after the last PPO iteration;
* ``best``: the actor of the best training iteration (``model_best.pt``);
* ``warm``: the actor after the warm start, before PPO (when there was one);
* ``planner``: the same network with its output layer zeroed, so the residual is 0 and the
  command is the planner's chunk row: the planner alone, at the same delay.

The best candidate by the task's score (success rate, then return) is written as
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


def select_deployed(env: Any, actor: Any, candidates: dict[str, dict[str, torch.Tensor]],
                    cfg: GuardConfig, run_dir: Path | None) -> dict[str, Any]:
    """Evaluate each candidate actor state on ``env`` (deterministic means), load the best
    into ``actor`` and save it as ``run_dir / model_deploy.pt``; the per-candidate scores."""
    from edgerl.policies.evaluate import evaluate

    scores: dict[str, Any] = {}
    for name, state in candidates.items():
        actor.load_state_dict(state)
        actor.eval()

        def act(obs: torch.Tensor) -> torch.Tensor:
            from tensordict import TensorDict

            return actor(TensorDict({"policy": obs}, batch_size=[obs.shape[0]]))

        result = evaluate(env, act, cfg.episodes, show_progress=False)
        scores[name] = result.summary()
    chosen = max(scores, key=lambda k: _score(scores[k]))
    actor.load_state_dict(candidates[chosen])
    if run_dir is not None:
        torch.save({"actor_state_dict": candidates[chosen], "infos": {"deployed": chosen}},
                   run_dir / DEPLOY_NAME)
    log.info("guard: deployed %s (%s)", chosen,
             {k: round(v["return_mean"], 3) for k, v in scores.items()})
    return {"deployed": chosen, "episodes": cfg.episodes, "seed_offset": cfg.seed_offset,
            "scores": {k: {"success_rate": v["success_rate"], "return_mean": v["return_mean"],
                           "action_rate": v["action_rate"]} for k, v in scores.items()}}
