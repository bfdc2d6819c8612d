"""Sudden disturbances added to executed commands: the "kicks" of a gated scenario.

A kick stands for a gust, a pothole or a push: no plan foresees it, and the fast observation
shows its effect. Each control step an env whose kick is over starts a new one with
probability ``rate``; for ``steps`` control steps ``+-size`` (a random sign per kick, action
units) is added to the command on the masked elements. Kicks draw from their own generator,
so switching them on leaves every other random stream of the env unchanged.
"""

from __future__ import annotations

import torch

__all__ = ["Kicks"]


class Kicks:
    """Kick state of ``n`` envs with ``A`` action elements.

    Args:
        rate: Start probability per control step (0 = no kicks).
        size: Kick magnitude (action units).
        steps: Control steps a kick lasts (>= 1).
        mask: (A,) float, 1 on the elements kicks act on.
        n: Envs. seed: Seed of the kicks' own CPU generator.

    Attributes:
        age: Int64 (N,): control steps since each env's last kick started (2**30 before the
            first); privileged, for oracle baselines only.
        left: Int64 (N,): steps left of the running kick (0 = none).
        offset: (N, A): the running kick's signed offset.
    """

    def __init__(self, rate: float, size: float, steps: int, mask: torch.Tensor, n: int,
                 seed: int) -> None:
        self.rate, self.size, self.steps = float(rate), float(size), int(steps)
        self.mask = mask
        self.n = int(n)
        self.generator = torch.Generator(device="cpu")
        self.restart(seed)

    def restart(self, seed: int) -> None:
        """A fresh kick process seeded ``seed``: no kick running, none started yet (as after
        construction with ``seed``)."""
        dev = self.mask.device
        self.generator.manual_seed(int(seed))
        self.age = torch.full((self.n,), 1 << 30, dtype=torch.int64, device=dev)
        self.left = torch.zeros(self.n, dtype=torch.int64, device=dev)
        self.offset = torch.zeros(self.n, self.mask.numel(), device=dev)

    @property
    def active(self) -> bool:
        """Whether kicks can happen at all."""
        return self.rate > 0 and self.size > 0

    def apply(self, command: torch.Tensor) -> torch.Tensor:
        """``command`` (N, A) plus the running kicks, after starting this step's new ones."""
        if not self.active:
            return command
        n, dev = self.left.numel(), self.left.device
        start = (torch.rand(n, generator=self.generator) < self.rate).to(dev) & (self.left <= 0)
        self.age = torch.where(start, torch.zeros_like(self.age), self.age + 1)
        if bool(start.any()):
            sign = torch.randint(0, 2, (n, 1), generator=self.generator).to(dev) * 2 - 1
            self.offset = torch.where(start[:, None], sign * self.size * self.mask, self.offset)
            self.left = torch.where(start, torch.full_like(self.left, self.steps), self.left)
        on = (self.left > 0)[:, None]
        self.left = (self.left - 1).clamp_min(0)
        return command + torch.where(on, self.offset, torch.zeros_like(self.offset))
