"""Offline probes of an RLIF run (the ``rlif-region-flip`` experiments): on every recorded state of
the run's
RLIF chain, (1) the sign agreement of each bundle's output with the unweakened base's, in the
flipped region (falling, ``|theta| >= min_angle``) and outside it, plus the squared distance to
the base outside; (2) with ``--critic``, how often an IQL critic trained on the same recordings
ranks a full push in the base's direction above the opposite push, on the region's own and
operator-covered states and on own states outside.

Usage (repo root)::

    python -m edgerl.apps.experiments.probes.rlif_region_probe --run runs/rlif14c --min-angle 0.1 \
        --bundles weak rlif/round2/bundle bc [--critic]

Bundle paths are relative to each seed's folder (``RUN/seedS``) unless absolute; ``{S}`` in a
path is the seed.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np
import torch

from edgerl.contract.intervention_log import load_transitions
from edgerl.export.bundle_mlp import load_bundle_mlp
from edgerl.export.weaken_region import RegionSpec, region_mask
from edgerl.policies.rlif import FinetuneConfig, _train_critic, intervention_dataset


def sign_agreement(bundle: Path, s: torch.Tensor, base_out: np.ndarray,
                   region: np.ndarray) -> dict[str, float]:
    """Agreement of ``sign(out)`` with ``sign(base_out)`` in / outside ``region`` and the mean
    squared distance to the base outside (outputs clipped to the bound, action units)."""
    actor, _ = load_bundle_mlp(bundle)
    with torch.no_grad():
        y = actor(s)[:, 0].clamp(-1, 1).numpy()
    agree = np.sign(y) == np.sign(base_out)
    return {"agree_region": round(float(agree[region].mean()), 3),
            "agree_outside": round(float(agree[~region].mean()), 3),
            "sq_dist_outside": round(float(((y - base_out)[~region] ** 2).mean()), 3)}


def critic_ranking(data: dict[str, torch.Tensor], base_sign: torch.Tensor, region: torch.Tensor,
                   seed: int) -> dict[str, dict[str, float]]:
    """P(Q(s, +a*) > Q(s, -a*)), a* = the base's sign, per group of states."""
    q, _, _ = _train_critic(data, FinetuneConfig(seed=seed), torch.Generator().manual_seed(seed),
                            init_seed=seed)
    s = data["s"]
    own = data["intervened"] == 0
    with torch.no_grad():
        gap = q(s, base_sign) - q(s, -base_sign)
    groups = {"region_own": region & own, "region_operator": region & ~own,
              "outside_own": ~region & own}
    return {k: {"n": int(m.sum()), "p_right_push_higher": round(float((gap[m] > 0).float()
                                                                       .mean()), 3),
                "mean_gap": round(float(gap[m].mean()), 4)} for k, m in groups.items()}


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", type=Path, required=True, help="rlif_experiment.py --out folder")
    p.add_argument("--base", type=Path, default=Path("runs/rlif_base_bundle"))
    p.add_argument("--min-angle", type=float, required=True, help="the run's region (rad)")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--bundles", nargs="+", default=["weak", "rlif/round2/bundle", "bc"])
    p.add_argument("--critic", action="store_true", help="also the critic's ranking")
    a = p.parse_args()
    torch.set_num_threads(1)
    base, spec = load_bundle_mlp(a.base)
    region_spec = RegionSpec(min_angle=a.min_angle)
    for seed in a.seeds:
        d = a.run / f"seed{seed}"
        steps = load_transitions(sorted(d.glob("rlif/round*/interventions.mcap")),
                                 spec.edit_obs.fast_dim)
        data = intervention_dataset(steps, spec.residual_bound)
        s = data["s"]
        region = region_mask(s.numpy(), spec, region_spec)
        with torch.no_grad():
            base_out = base(s)[:, :1].clamp(-1, 1)
        row: dict = {"seed": seed, "states": len(s), "region_states": int(region.sum()),
                     "region_own_states": int((region & (data["intervened"] == 0).numpy())
                                              .sum())}
        for name in a.bundles:
            path = Path(name.replace("{S}", str(seed)))
            row[name] = sign_agreement(path if path.is_absolute() or name.startswith("runs/")
                                       else d / path, s, base_out[:, 0].numpy(), region)
        if a.critic:
            row["critic"] = critic_ranking(data, torch.sign(base_out),
                                           torch.as_tensor(region), seed)
        print(json.dumps(row), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
