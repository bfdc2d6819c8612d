"""A start policy that is good in most states and bad in some (the RLIF experiment's
partially weakened start): the bundle's edit network, re-fitted (distilled) so that its
output is the original one outside a region of the state space and a corrupted one inside.

The result is an ordinary feed-forward network of the bundle's own architecture (so
``edgerl finetune`` and the runtime load it like any edit bundle) exported through the
normal exporter (:func:`edgerl.export.bundle_mlp.export_like`).

Region (:class:`RegionSpec`, on the edit observation's cart-pole state ``[x, x_dot, theta,
theta_dot]`` at the indices the manifest names ``pole_angle`` / ``pole_vel``): ``falling``
= the pole moves away from upright (``theta * theta_dot > 0``) and ``|theta| >= min_angle``
(rad). Corruption ``mode``: ``flip`` (``-out``: the edit pushes the wrong way), ``zero``
(no edit: the bare chunk) or ``scale`` (``out * scale``).
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from edgerl.contract.key_values import parse_key_values
from edgerl.contract.spec import PolicySpec

__all__ = ["RegionSpec", "region_mask", "corrupted_targets", "weaken_region"]

log = logging.getLogger(__name__)

MODES = ("flip", "zero", "scale")


@dataclass
class RegionSpec:
    """Where and how the start policy is corrupted.

    Attributes:
        min_angle: ``|theta|`` (rad) from which a falling state is in the region.
        mode: ``flip``, ``zero`` or ``scale``.
        scale: Output factor for ``mode="scale"``.
        steps: Distillation gradient steps.
        lr: Distillation Adam learning rate.
        jitter: Std of the Gaussian added to the sample observations, in units of each
            dimension's std over the samples (widens the fitted neighbourhood).
    """

    min_angle: float = 0.0
    mode: str = "flip"
    scale: float = 0.0
    steps: int = 3000
    lr: float = 1e-3
    jitter: float = 0.3

    def __post_init__(self) -> None:
        if self.mode not in MODES:
            raise ValueError(f"region weakening: mode {self.mode!r} is not one of "
                             f"{', '.join(MODES)}")
        if self.min_angle < 0 or self.steps < 1 or self.jitter < 0:
            raise ValueError("region weakening: min_angle and jitter must be >= 0, steps >= 1")

    @classmethod
    def parse(cls, text: str) -> RegionSpec:
        """``"mode=flip,min_angle=0.05,scale=0,steps=3000"`` (any subset)."""
        convert = {"mode": str, "steps": int}
        fields = {name: (name, convert.get(name, float)) for name in cls.__dataclass_fields__}
        kw = parse_key_values(text, "region weakening", fields)
        return cls(**kw)  # type: ignore[arg-type]


def _angle_indices(spec: PolicySpec) -> tuple[int, int]:
    names = list(spec.observation.names)
    if spec.edit_obs.obs_indices:
        names = [names[i] for i in spec.edit_obs.obs_indices]
    try:
        return names.index("pole_angle"), names.index("pole_vel")
    except ValueError:
        raise ValueError(f"region weakening needs pole_angle and pole_vel in the edit "
                         f"observation; it has {names}") from None


def region_mask(obs: np.ndarray, spec: PolicySpec, region: RegionSpec) -> np.ndarray:
    """``(N,)`` bool: which edit observations ``(N, D)`` lie in the corrupted region."""
    ia, iv = _angle_indices(spec)
    th, thd = obs[:, ia], obs[:, iv]
    return (th * thd > 0) & (np.abs(th) >= region.min_angle)


def corrupted_targets(out: np.ndarray, mask: np.ndarray, region: RegionSpec) -> np.ndarray:
    """The weakened policy's intended output ``(N, A)``: ``out`` outside ``mask``, the
    corruption inside."""
    bad = {"flip": -out, "zero": np.zeros_like(out), "scale": region.scale * out}[region.mode]
    return np.where(mask[:, None], bad, out).astype(np.float32)


def weaken_region(actor: nn.Module, spec: PolicySpec, obs: np.ndarray, region: RegionSpec,
                  seed: int = 0) -> tuple[nn.Module, dict[str, float]]:
    """A copy of ``actor`` (``(N, D) -> (N, A)``) re-fitted to :func:`corrupted_targets` on
    ``obs`` ``(N, D)`` (recorded edit observations) plus jittered copies. Returns it and
    fit statistics (region fraction, mean abs error inside / outside the region on ``obs``)."""
    obs = np.asarray(obs, np.float32)
    if obs.ndim != 2 or len(obs) < 10:
        raise ValueError(f"region weakening needs (N >= 10, D) observations, got {obs.shape}")
    rng = np.random.default_rng(seed)
    sd = obs.std(0) + 1e-6
    x = np.concatenate([obs, obs + region.jitter * sd * rng.standard_normal(obs.shape),
                        obs + region.jitter * sd * rng.standard_normal(obs.shape)])
    x = x.astype(np.float32)
    with torch.no_grad():
        base_out = actor(torch.as_tensor(x)).numpy()
    mask = region_mask(x, spec, region)
    y = torch.as_tensor(corrupted_targets(base_out, mask, region))
    xt = torch.as_tensor(x)
    out = copy.deepcopy(actor).train()
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(out.parameters(), lr=region.lr)
    for _ in range(region.steps):
        i = torch.randint(len(xt), (512,), generator=gen)
        loss = ((out(xt[i]) - y[i]) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    out.eval()
    n = len(obs)
    with torch.no_grad():
        err = (out(xt[:n]) - y[:n]).abs().sum(-1).numpy()
    m = mask[:n]
    stats = {"region_fraction": float(m.mean()),
             "fit_err_region": float(err[m].mean()) if m.any() else float("nan"),
             "fit_err_outside": float(err[~m].mean()) if (~m).any() else float("nan"),
             "base_abs_out": float(np.abs(base_out[:n]).mean())}
    log.info("region weakening %s: %s", region, stats)
    return out, stats
