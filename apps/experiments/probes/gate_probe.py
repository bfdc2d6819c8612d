"""Quick probe of a calm-road kick scenario: a few untuned rules on one set of episodes.

Before the tuned comparison (``edgerl.apps.experiments.probes.gate_oracle``), this evaluates a
handful of age heuristics and kick oracles on 16 evaluation episodes (seed 1000) of the
``chicanes`` road with the budgets and kicks given as JSON (process noise on steering,
``noise``, default 0; the gate's preview rows 0, 8, 16, 24, 32), to find settings worth tuning:

    python -m edgerl.apps.experiments.probes.gate_probe \
        '{"fast": {"horizon": 16, "noise_std": 0.05, "cost": 1.0},
        "slow": {"delay": 8, "horizon": 96, "cost": 1.0}, "kick": [0.004, 0.8, 6],
        "fx": [4, 8, 12], "sx": [8, 24, 48, 80], "kx": [48, 80], "kx0": [80]}'

``fast`` / ``slow``: fields replacing those of ``chicanes_gate_cfg``'s budgets (``fast`` is
also made exact: hold 1); ``kick``: rate, size, steps; ``fx`` / ``sx``: X of the age
heuristic with fast / slow; ``kx`` / ``kx0``: X of the kick oracle asking slow by age and fast
after a kick's end / start; ``react``: steps after that the oracle still reacts (default
kick steps + 4).
"""

from __future__ import annotations

import json
import sys
import time
from dataclasses import asdict, replace

import torch

from edgerl.policies.gate.baselines import age_heuristic, evaluate_gate
from edgerl.policies.gate.oracles import kick_rule
from edgerl.policies.gate.policy import ROADS, GateRunCfg, chicanes_gate_cfg, make_gate_env


def main() -> None:
    torch.set_num_threads(1)
    o = json.loads(sys.argv[1])
    g = chicanes_gate_cfg(0)
    keep, fast, slow = g.budgets
    g.budgets = (keep, replace(fast, hold=1, **o.get("fast", {})),
                 replace(slow, **o.get("slow", {})))
    g.action_noise_std, g.noise_dims = o.get("noise", 0.0), (1,)
    g.kick_rate, g.kick_size, g.kick_steps = o["kick"]
    g.preview_steps = (0, 8, 16, 24, 32)
    cfg = GateRunCfg(task_kwargs=dict(ROADS["chicanes"]), gate=asdict(g), seed=0)
    k, react = g.kick_steps, int(o.get("react", g.kick_steps + 4))
    rules = {}
    for x in o.get("fx", []):
        rules[f"age>{x}:fast"] = age_heuristic(1, x)
    for x in o.get("sx", []):
        rules[f"age>{x}:slow"] = age_heuristic(2, x)
    for x in o.get("kx", []):
        rules[f"kick slow>{x}/fast w{k}"] = kick_rule(2, x, react, 1, k)
    for x in o.get("kx0", []):
        rules[f"kick slow>{x}/fast w0"] = kick_rule(2, x, react, 1, 0)
    for label, rule in rules.items():
        t = time.time()
        e = evaluate_gate(lambda: make_gate_env(cfg, 16, 1000), rule, 16)
        print(f"{label:26s} ret {e['return_mean']:7.2f} succ {e['success_rate']:.2f} "
              f"len {e['length_mean']:.0f} share {e['share_keep']:.2f}/{e['share_fast']:.2f}/"
              f"{e['share_slow']:.2f} {time.time() - t:.1f}s", flush=True)


if __name__ == "__main__":
    main()
