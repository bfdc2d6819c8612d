"""Domain randomization: per-env physical scales sampled at reset, for any task.

A task owns one :class:`DomainRandomizer` (attribute ``randomizer``), calls
:meth:`DomainRandomizer.resample` for the envs it resets, and multiplies its nominal physical
parameters by the per-env scales (``randomizer.mass_scale[env_ids]`` ...). MuJoCo tasks apply
the same scales to their model copies. ``latency_steps`` is an extra planner delay (control
steps) per env and episode; the latency wrappers add it to the delay they sample when the
wrapped env has a ``randomizer`` (see ``edgerl.sim.wrappers.latency``).

Sampling uses the task's CPU ``torch.Generator``, so the same seed gives the same draws on any
device.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

import torch

__all__ = ["DomainRandConfig", "DomainRandomizer"]


def _check_range(name: str, value: tuple[float, float], minimum: float) -> None:
    low, high = value
    if not (minimum <= low <= high):
        raise ValueError(f"randomization.{name}: need {minimum} <= low <= high, got {value}")


@dataclass
class DomainRandConfig:
    """Uniform ranges ``(low, high)`` sampled per env at every reset; ``(1, 1)`` = off.

    Attributes:
        mass_scale: Multiplier on the task's moving masses (dimensionless).
        friction_scale: Multiplier on friction coefficients (dimensionless).
        damping_scale: Multiplier on joint / viscous damping (dimensionless).
        actuator_gain: Multiplier on the commanded force / torque (dimensionless).
        latency_steps: Extra planner delay in control steps, integers ``low..high`` inclusive.
    """

    mass_scale: tuple[float, float] = (1.0, 1.0)
    friction_scale: tuple[float, float] = (1.0, 1.0)
    damping_scale: tuple[float, float] = (1.0, 1.0)
    actuator_gain: tuple[float, float] = (1.0, 1.0)
    latency_steps: tuple[int, int] = (0, 0)

    def __post_init__(self) -> None:
        for f in fields(self):
            value = tuple(getattr(self, f.name))
            if len(value) != 2:
                raise ValueError(f"randomization.{f.name}: need (low, high), got {value}")
            setattr(self, f.name, value)
            _check_range(f.name, value, 0.0)
        if any(int(v) != v for v in self.latency_steps):
            raise ValueError(f"randomization.latency_steps: need integers, got "
                             f"{self.latency_steps}")

    @classmethod
    def coerce(cls, value: DomainRandConfig | dict[str, Any]) -> DomainRandConfig:
        """``value`` as a config: a dict (e.g. from YAML or CLI kwargs) becomes
        ``DomainRandConfig(**value)``; anything else is returned unchanged."""
        if isinstance(value, dict):
            return cls(**value)
        return value

    @property
    def enabled(self) -> bool:
        """Whether any range is non-degenerate (or latency is non-zero)."""
        return any(getattr(self, f.name)[0] != getattr(self, f.name)[1]
                   or (f.name != "latency_steps" and getattr(self, f.name)[0] != 1.0)
                   or (f.name == "latency_steps" and getattr(self, f.name)[0] != 0)
                   for f in fields(self))


_SCALES = ("mass_scale", "friction_scale", "damping_scale", "actuator_gain")


class DomainRandomizer:
    """Per-env randomized scales: tensors of shape (num_envs,) on ``device``.

    Attributes:
        mass_scale / friction_scale / damping_scale / actuator_gain: float32 (num_envs,).
        latency_steps: int64 (num_envs,), extra planner delay in control steps.
    """

    def __init__(self, cfg: DomainRandConfig, num_envs: int, device: torch.device | str) -> None:
        self.cfg = cfg
        self.num_envs = int(num_envs)
        self.device = torch.device(device)
        for name in _SCALES:
            setattr(self, name, torch.ones(num_envs, dtype=torch.float32, device=self.device))
        self.latency_steps = torch.zeros(num_envs, dtype=torch.int64, device=self.device)

    def resample(self, env_ids: torch.Tensor, generator: torch.Generator) -> None:
        """Draw new values for ``env_ids`` (int64 (n,)) from ``generator`` (CPU).

        Nothing is drawn when randomization is off, so an un-randomized task's random stream
        is the same as without a randomizer.
        """
        if not self.cfg.enabled:
            return
        n = int(env_ids.numel())
        ids = env_ids.to(self.device)
        for name in _SCALES:
            low, high = getattr(self.cfg, name)
            u = torch.rand(n, generator=generator, dtype=torch.float32)
            getattr(self, name)[ids] = (low + (high - low) * u).to(self.device)
        lo, hi = (int(v) for v in self.cfg.latency_steps)
        lat = torch.randint(lo, hi + 1, (n,), generator=generator)
        self.latency_steps[ids] = lat.to(self.device)

    def as_dict(self) -> dict[str, torch.Tensor]:
        """The current per-env values by name."""
        out = {name: getattr(self, name) for name in _SCALES}
        out["latency_steps"] = self.latency_steps
        return out
