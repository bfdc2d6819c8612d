"""Builders for the export tests: a tiny 3-obs 2-action spec and actors (MLP, GRU, LSTM)."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from edgerl.contract import PolicySpec
from tests.helpers import specs

OBS_DIM, ACT_DIM = 3, 2


def make_spec(**overrides) -> PolicySpec:
    """A valid PolicySpec for a 3-obs 2-action task; the actor input is edit_obs.dim (15)."""
    kwargs = dict(control_hz=50.0, horizon=8, chunk_dt=0.02, period_s=0.06, residual_bound=0.0,
                  lookahead=1, n_committed=1, expected_latency_s=0.0, task="toy",
                  observation=dict(names=["x", "v", "th"], units=["m", "m/s", "rad"]),
                  action=dict(names=["f0", "f1"], units=["N", "N"]))
    return specs.make_spec(OBS_DIM, ACT_DIM, **{**kwargs, **overrides})


IN_DIM = make_spec().edit_obs.dim


class NormMLP(nn.Module):
    """rsl_rl-like actor: ``(x - mean) / std`` baked in, then an MLP."""

    def __init__(self, in_dim: int = IN_DIM, out_dim: int = ACT_DIM, hidden: int = 32,
                 act: type[nn.Module] = nn.ELU, seed: int = 0) -> None:
        super().__init__()
        g = torch.Generator().manual_seed(seed)
        self.register_buffer("mean", torch.randn(in_dim, generator=g))
        self.register_buffer("std", torch.rand(in_dim, generator=g) + 0.5)
        torch.manual_seed(seed)
        self.net = nn.Sequential(nn.Linear(in_dim, hidden), act(), nn.Linear(hidden, hidden),
                                 act(), nn.Linear(hidden, out_dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)


class RecurrentActor(nn.Module):
    """rsl_rl ``_OnnxRNNModel``-like: ``(obs, h[, c]) -> (action, h_out, c_out or None)``."""

    def __init__(self, kind: str, in_dim: int = IN_DIM, out_dim: int = ACT_DIM,
                 hidden: int = 16, layers: int = 1, seed: int = 0) -> None:
        super().__init__()
        torch.manual_seed(seed)
        self.kind = kind
        self.rnn = (nn.GRU if kind == "gru" else nn.LSTM)(in_dim, hidden, num_layers=layers)
        self.head = nn.Sequential(nn.Linear(hidden, 16), nn.ELU(), nn.Linear(16, out_dim))

    def forward(self, obs, h, c=None):
        if self.kind == "gru":
            y, h2 = self.rnn(obs.unsqueeze(0), h)
            return self.head(y.squeeze(0)), h2, None
        y, (h2, c2) = self.rnn(obs.unsqueeze(0), (h, c))
        return self.head(y.squeeze(0)), h2, c2


def make_actor(kind: str) -> nn.Module:
    return (NormMLP() if kind == "mlp" else RecurrentActor(kind)).eval()


def parity_observations() -> np.ndarray:
    """1000 (N, D) observations: half a smooth 'trajectory', half wide random."""
    rng = np.random.default_rng(0)
    t = np.linspace(0, 20, 500)[:, None]
    traj = np.sin(t * (1 + np.arange(IN_DIM)) / 3.0) * 2.0
    rand = rng.standard_normal((500, IN_DIM)) * 3.0
    return np.concatenate([traj, rand]).astype(np.float32)
