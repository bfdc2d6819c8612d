"""A categorical output distribution for rsl_rl's ``MLPModel``: discrete choices with PPO.

rsl_rl 5.5 ships Gaussian and Beta heads only. A gate choosing one of B budgets trained
through a Gaussian head explores with the argmax of *sampled* scores but is evaluated (and
deployed) on the argmax of the *mean* scores: two different policies (measured: the
sampled one 38 return points above the greedy one on the chicanes road). With this head PPO
optimises the categorical policy ``softmax(logits)`` itself and its mode, ``argmax(logits)``,
is what evaluation and the runtime run.

Shapes: the MLP outputs logits (N, B); :meth:`CategoricalDistribution.sample` returns a
one-hot float (N, B) so rsl_rl's rollout storage keeps its (N, A) action layout, and an env
adapter takes ``argmax`` of it (:class:`edgerl.policies.gate.policy.ScoreActions` does, so the same
adapter serves both heads). The deterministic output is the logits themselves: the exported
ONNX gate outputs logits and its argmax is the mode.

Selected with ``distribution_cfg={"class_name": CATEGORICAL}`` (a ``module:Class`` string
rsl_rl's ``resolve_callable`` imports).
"""

from __future__ import annotations

import torch
from rsl_rl.modules.distribution import Distribution
from torch import nn

__all__ = ["CATEGORICAL", "CategoricalDistribution"]

#: The ``class_name`` rsl_rl resolves to :class:`CategoricalDistribution`.
CATEGORICAL = "edgerl.policies.categorical:CategoricalDistribution"


class _Logits(nn.Module):
    """Export module: the deterministic output is the logits (argmax = the mode)."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


class CategoricalDistribution(Distribution):
    """Categorical over ``output_dim`` choices, parameterised by logits (N, B).

    Args:
        output_dim: B, the number of choices.
        init_scale: The MLP's last layer weights are multiplied by this and its bias zeroed
            at construction, so the first policy is close to uniform (0.01 by default).
    """

    def __init__(self, output_dim: int, init_scale: float = 0.01) -> None:
        super().__init__(output_dim)
        if output_dim < 2:
            raise ValueError(f"a categorical head needs >= 2 choices, got {output_dim}")
        self.init_scale = float(init_scale)
        self._logp: torch.Tensor | None = None

    def update(self, mlp_output: torch.Tensor) -> None:
        """Store the log-probabilities of the logits (N, B)."""
        self._logp = torch.log_softmax(mlp_output, dim=-1)

    def _require(self) -> torch.Tensor:
        if self._logp is None:
            raise RuntimeError("CategoricalDistribution used before update()")
        return self._logp

    def sample(self) -> torch.Tensor:
        """One-hot samples (N, B), float."""
        logp = self._require()
        idx = torch.multinomial(logp.exp().reshape(-1, logp.shape[-1]), 1).reshape(
            logp.shape[:-1])
        return nn.functional.one_hot(idx, logp.shape[-1]).to(logp.dtype)

    def deterministic_output(self, mlp_output: torch.Tensor) -> torch.Tensor:
        """The logits (N, B); their argmax is the mode."""
        return mlp_output

    def as_deterministic_output_module(self) -> nn.Module:
        return _Logits()

    @property
    def input_dim(self) -> int:
        return self.output_dim

    @property
    def mean(self) -> torch.Tensor:
        """The choice probabilities (N, B)."""
        return self._require().exp()

    @property
    def std(self) -> torch.Tensor:
        """Per-choice Bernoulli std sqrt(p (1 - p)) (N, B): the spread rsl_rl logs."""
        p = self.mean
        return (p * (1.0 - p)).sqrt()

    @property
    def entropy(self) -> torch.Tensor:
        """Entropy (N,) in nats."""
        logp = self._require()
        return -(logp.exp() * logp).sum(dim=-1)

    @property
    def params(self) -> tuple[torch.Tensor, ...]:
        """(log-probabilities (N, B),): what the KL of the adaptive learning rate needs."""
        return (self._require(),)

    def log_prob(self, outputs: torch.Tensor) -> torch.Tensor:
        """Log-probability (N,) of one-hot ``outputs`` (N, B)."""
        return (outputs * self._require()).sum(dim=-1)

    def kl_divergence(self, old_params: tuple[torch.Tensor, ...],
                      new_params: tuple[torch.Tensor, ...]) -> torch.Tensor:
        """KL(old || new) (N,) from stored log-probabilities."""
        (old,), (new,) = old_params, new_params
        return (old.exp() * (old - new)).sum(dim=-1)

    def init_mlp_weights(self, mlp: nn.Module) -> None:
        """Scale the last linear layer so the initial policy is near uniform."""
        last = [m for m in mlp.modules() if isinstance(m, nn.Linear)][-1]
        with torch.no_grad():
            last.weight.mul_(self.init_scale)
            last.bias.zero_()
