"""The in-process steps of the RLIF drivers: weakening the start, counting BC's targets.

Each has a one-line form (what ``--dry-run`` lists, e.g. ``weaken-region --base B --out O
--region R --recording REC --seed S``) and runs through :meth:`Executor.action`, so a dry run
lists it without loading torch.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from edgerl.apps.experiments.execute import Executor

__all__ = ["bc_targets", "weaken", "weaken_region"]

#: what a dry run answers for :func:`weaken_region` and :func:`bc_targets`
DRY_REGION = {"region_fraction": 0.0}
DRY_TARGETS = {"override_steps": 0, "mean_u": 0.0, "mean_abs_u": 0.0, "at_bound": 0.0,
               "base_mean_u": 0.0, "sign_agrees_with_base": 0.0, "mse_to_base": 0.0}


def weaken(ex: Executor, base: str, out: str, shrink: float, noise: float, seed: int) -> None:
    """The uniformly weakened start: the base's output layer scaled by ``shrink`` plus weight
    noise ``noise`` x std (seed ``seed``), exported like the base."""

    def go() -> None:
        import torch

        from edgerl.export.bundle_mlp import export_like, load_bundle_mlp
        from edgerl.export.bundle_mlp import weaken as weaken_mlp

        torch.set_num_threads(1)
        actor, spec = load_bundle_mlp(ex.path(base))
        export_like(weaken_mlp(actor, noise, seed, shrink), spec, ex.path(out), seed=seed)

    ex.action(["weaken", "--base", base, "--out", out, "--shrink", str(shrink), "--noise",
               str(noise), "--seed", str(seed)], go, None)


def weaken_region(ex: Executor, base: str, out: str, region: str, recording: str,
                  seed: int) -> dict[str, Any]:
    """The start that is bad only in a region (``edgerl.export.weaken_region``), distilled on
    the edit observations of ``recording`` (a recording of the base); returns the fit's
    statistics (region fraction, fit errors)."""

    def go() -> dict[str, Any]:
        import torch

        from edgerl.contract.intervention_log import load_transitions
        from edgerl.export.bundle_mlp import export_like, load_bundle_mlp
        from edgerl.export.weaken_region import RegionSpec
        from edgerl.export.weaken_region import weaken_region as distil

        torch.set_num_threads(1)
        actor, spec = load_bundle_mlp(ex.path(base))
        obs = load_transitions([ex.path(recording)], spec.edit_obs.fast_dim)["edit_obs"]
        weak, stats = distil(actor, spec, obs, RegionSpec.parse(region), seed=seed)
        export_like(weak, spec, ex.path(out), inputs=obs, seed=seed)
        return stats

    return ex.action(["weaken-region", "--base", base, "--out", out, "--region", region,
                      "--recording", recording, "--seed", str(seed)], go, dict(DRY_REGION))


def bc_targets(ex: Executor, recordings: list[str], base: str) -> dict[str, Any]:
    """What BC regresses on (the override steps' residuals ``u``) against the base
    (unweakened) policy's own residual in the same states: counts, means, sign agreement and
    mean squared difference."""

    def go() -> dict[str, Any]:
        import numpy as np
        import torch

        from edgerl.contract.intervention_log import load_transitions
        from edgerl.export.bundle_mlp import load_bundle_mlp
        from edgerl.policies.rlif import intervention_dataset

        actor, spec = load_bundle_mlp(ex.path(base))
        data = intervention_dataset(load_transitions([ex.path(r) for r in recordings],
                                                     spec.edit_obs.fast_dim),
                                    spec.residual_bound)
        m = data["intervened"] > 0
        u = data["u"][m][:, 0].numpy()
        with torch.no_grad():
            ref = actor(data["s"][m])[:, 0].clamp(-1, 1).numpy()
        return {"override_steps": int(m.sum()), "mean_u": float(u.mean()),
                "mean_abs_u": float(np.abs(u).mean()),
                "at_bound": float((np.abs(u) >= 0.999).mean()),
                "base_mean_u": float(ref.mean()),
                "sign_agrees_with_base": float((np.sign(u) == np.sign(ref)).mean()),
                "mse_to_base": float(((u - ref) ** 2).mean())}

    return ex.action(["bc-targets", "--base", base, "--recordings", *recordings], go,
                     dict(DRY_TARGETS))


def hil_args(bundle: str | Path, episodes: int, seed: int, latency_ms: float,
             *extra: str) -> list[str]:
    """``edgerl hil`` as the RLIF drivers run it (no e-stop self-test, no link probe)."""
    return ["edgerl", "hil", "--bundle", str(bundle), "--episodes", str(episodes), "--seed",
            str(seed), "--planner-latency-ms", str(float(latency_ms)), "--no-estop-check",
            "--link-probe", "0", *extra]
