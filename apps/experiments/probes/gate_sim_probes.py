"""Sim probes behind the HIL reading of the ``calm_kicks`` gate (``gate-hil-calm-kicks``):
the sampled gate and the ``age > 12 -> fast`` heuristic on a run's evaluation episodes
(seed + 1000, 16 envs, 32 episodes) with one change each:

* ``lag``: every plan row executed one step late (a host loop ticking on its own clock just
  before the plant's state arrives);
* ``fast-delay``: the fast budget's delay 2 instead of 1 (a fast plan that misses its tick).

Usage::

    python -m edgerl.apps.experiments.probes.gate_sim_probes runs/gate8_ck0_200 lag
    python -m edgerl.apps.experiments.probes.gate_sim_probes runs/gate8_ck1_200 fast-delay
"""

from __future__ import annotations

import argparse
import dataclasses
import json

import torch

from edgerl.apps.experiments.probes.gate_eval_modes import sampled_policy
from edgerl.contract.edit_obs import select_chunk_rows
from edgerl.policies.gate.baselines import age_heuristic, evaluate_gate
from edgerl.policies.gate.policy import EVAL_SEED_OFFSET, load_gate_actor
from edgerl.sim.gate.env import GatedEnv
from edgerl.sim.registry import make_task


class LaggedRows(GatedEnv):
    """``GatedEnv`` whose executed row is the plan's previous one (row 0 stays row 0)."""

    def _row_now(self) -> torch.Tensor:
        s = self.scheduler
        row = select_chunk_rows(s.cur, (s.row_index() - 1).clamp_min(0), 1)[:, 0]
        return torch.where(self.has_plan()[:, None], row, torch.zeros_like(row))


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("run")
    p.add_argument("probe", choices=("lag", "fast-delay"))
    p.add_argument("--episodes", type=int, default=32)
    a = p.parse_args()
    torch.set_num_threads(1)
    cfg, actor = load_gate_actor(a.run)
    seed = cfg.seed + EVAL_SEED_OFFSET
    for changed in (True, False):
        def make(changed=changed):
            g = cfg.gate_cfg(seed)
            if a.probe == "fast-delay" and changed:
                g.budgets = tuple(dataclasses.replace(b, delay=2) if b.name == "fast" else b
                                  for b in g.budgets)
            env_cls = LaggedRows if a.probe == "lag" and changed else GatedEnv
            return env_cls(make_task(cfg.task, num_envs=16, seed=seed, **cfg.task_kwargs), g)

        for name, policy in (("sampled", sampled_policy(actor, cfg.head, cfg.seed)),
                             ("age>12:fast", age_heuristic(1, 12))):
            row = evaluate_gate(make, policy, a.episodes)
            print(json.dumps({"run": a.run, "probe": a.probe, "changed": changed,
                              "policy": name, "return": round(row["return_mean"], 2),
                              "success": row["success_rate"]}), flush=True)


if __name__ == "__main__":
    main()
