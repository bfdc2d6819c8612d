"""Kicks on the command the HIL plant applies: the gated scenarios' rare large disturbances
(``GateCfg.kick_rate`` / ``kick_size`` / ``kick_steps`` on ``noise_dims``, e.g. the
``calm_kicks`` road's steering kicks), so a gate trained against them meets them in
``edgerl hil`` too.

The kicks are the sim's own :class:`edgerl.sim.wrappers.disturbance.Kicks` (one env, its own
seeded generator): the same start rule, sign draw and duration as in training. They act on
the command after it leaves the firmware, where the plant applies it: the host loop and the
gate see their effect only through the plant's state, as the training gate did.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from edgerl.contract.key_values import SpecValueError, parse_key_values

__all__ = ["KickConfig", "PlantKicks"]


@dataclass(frozen=True)
class KickConfig:
    """Kick settings (``edgerl hil --kicks 'rate=0.004,size=0.8,steps=6,dims=1'``).

    Attributes:
        rate: Start probability per control step (0 < rate <= 1).
        size: Magnitude (action units, > 0); the sign is drawn per kick.
        steps: Control steps a kick lasts (>= 1).
        dims: Command elements kicked (``calm_kicks``: 1, the steering).
        seed: Seed of the kicks' generator (None: the run's plant seed + 2).
    """

    rate: float = 0.004
    size: float = 0.8
    steps: int = 6
    dims: tuple[int, ...] = (1,)
    seed: int | None = None

    def __post_init__(self) -> None:
        if not (0.0 < self.rate <= 1.0) or not (math.isfinite(self.size) and self.size > 0) \
                or self.steps < 1:
            raise ValueError(f"kicks: need 0 < rate <= 1, size > 0, steps >= 1; got rate="
                             f"{self.rate}, size={self.size}, steps={self.steps}")
        if not self.dims or any(d < 0 for d in self.dims):
            raise ValueError(f"kicks: dims must name command elements >= 0; got {self.dims}")

    @classmethod
    def parse(cls, text: str) -> KickConfig:
        """From ``"rate=R,size=S,steps=N,dims=I+J,seed=K"`` (any subset; the rest default)."""
        fields = {"rate": ("rate", float), "size": ("size", float), "steps": ("steps", int),
                  "dims": ("dims", _dims), "seed": ("seed", int)}
        return cls(**parse_key_values(text, "kicks", fields))  # type: ignore[arg-type]


def _dims(value: str) -> tuple[int, ...]:
    """``dims``' value: element indices joined by ``+`` (``1`` or ``0+1``)."""
    try:
        return tuple(int(v) for v in value.split("+"))
    except ValueError:
        raise SpecValueError(f"dims={value!r} is not element indices joined by '+'") from None


class PlantKicks:
    """The running kick process on one plant's ``n_cmd`` command elements.

    Args:
        cfg: :class:`KickConfig`. n_cmd: Command size (every ``dims`` entry must be below it).
        run_seed: The run's plant seed (the kicks' seed when ``cfg.seed`` is None).

    Attributes:
        started: Kicks started so far.
    """

    def __init__(self, cfg: KickConfig, n_cmd: int, run_seed: int = 0) -> None:
        import torch

        from edgerl.sim.wrappers.disturbance import Kicks

        if max(cfg.dims) >= n_cmd:
            raise ValueError(f"kicks: dims {list(cfg.dims)} out of range for a command of "
                             f"{n_cmd} elements")
        mask = torch.zeros(n_cmd)
        mask[list(cfg.dims)] = 1.0
        self._torch = torch
        self.seed = run_seed + 2 if cfg.seed is None else cfg.seed
        self.kicks = Kicks(cfg.rate, cfg.size, cfg.steps, mask, 1, self.seed)
        self.started = 0

    def start_episode(self, episode: int) -> None:
        """Reseed the kicks for episode ``episode`` (no kick running): episode ``i`` gets the
        same kick times, in steps from its start, whatever ran before it, so policies compared
        on the same plant seed meet the same kicks (common random numbers)."""
        self.kicks.restart(self.seed * 1_000_003 + int(episode))

    def apply(self, cmd: np.ndarray) -> np.ndarray:
        """``cmd`` (n_cmd,) plus the running kick (after starting this step's new one)."""
        out = self.kicks.apply(self._torch.as_tensor(cmd, dtype=self._torch.float32)[None])
        self.started += int(self.kicks.age[0] == 0)
        return out[0].numpy()
