"""Trace the sampled gate through ``edgerl hil`` (a diagnostic): every decision's gate
observation, probabilities and choice, and every kick's start, with ``perf_counter`` times,
into ``OUT/hil_trace_S.npy`` / ``OUT/hil_kicks_S.npy`` (the kick-response reading of the
``gate-hil-calm-kicks`` experiment).

Usage::

    python -m edgerl.apps.experiments.probes.gate_hil_trace runs/gate9_ck2_bundle 2 8 \
        --out runs/trace [--no-kicks]
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np

import edgerl.hil.kicks as kicks_mod
import edgerl.runtime.gate.budget_gate as gate_mod
from edgerl.hil.harness import HilConfig, run_hil
from edgerl.hil.kicks import KickConfig

DECISIONS: list[np.ndarray] = []
KICKS: list[tuple[float, int, float]] = []


def _traced_choose(orig):
    def choose(self, robot, plan, in_flight):
        j = orig(self, robot, plan, in_flight)
        DECISIONS.append(np.r_[self.last_obs, self.last_probabilities, j, time.perf_counter()])
        return j
    return choose


def _traced_apply(orig):
    def apply(self, cmd):
        out = orig(self, cmd)
        KICKS.append((time.perf_counter(), int(self.kicks.age[0]), float(out[1] - cmd[1])))
        return out
    return apply


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("bundle", type=Path)
    p.add_argument("seed", type=int)
    p.add_argument("episodes", type=int)
    p.add_argument("--out", type=Path, default=Path("runs"))
    p.add_argument("--no-kicks", action="store_true")
    a = p.parse_args()
    gate_mod.BudgetGate.choose = _traced_choose(gate_mod.BudgetGate.choose)
    kicks_mod.PlantKicks.apply = _traced_apply(kicks_mod.PlantKicks.apply)
    res = run_hil(HilConfig(bundle=a.bundle, episodes=a.episodes, link_probe=0,
                            check_estop=False, seed=1000 + a.seed, gate_policy="gate:sample",
                            kicks=None if a.no_kicks else KickConfig())).as_dict()
    a.out.mkdir(parents=True, exist_ok=True)
    np.save(a.out / f"hil_trace_{a.seed}.npy", np.array(DECISIONS))
    np.save(a.out / f"hil_kicks_{a.seed}.npy", np.array(KICKS))
    print(json.dumps({k: res.get(k) for k in ("success", "return_minus_cost_mean",
                                              "gate_decided", "kicks_started")}))


if __name__ == "__main__":
    main()
