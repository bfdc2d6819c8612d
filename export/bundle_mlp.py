"""A bundle's feed-forward policy back in torch: load ``policy_mlp.npz`` as an ``nn.Module``,
perturb it (the deliberately weakened start of the RLIF experiment), and export a changed
copy as a new bundle through the normal exporter (ONNX + parity + manifest).
"""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import torch
from torch import nn

from edgerl.contract.spec import PolicySpec, load_bundle_manifest
from edgerl.export.numpy_mlp import NPZ_NAME
from edgerl.runtime.inference.numpy_mlp import MLPWeights, load_mlp_npz

__all__ = ["BundleMLP", "export_like", "load_bundle_mlp", "weaken"]

_ACT = {"elu": nn.ELU, "relu": nn.ReLU, "tanh": nn.Tanh, "identity": nn.Identity}


class BundleMLP(nn.Module):
    """``y = MLP((x - mean) / std)``: the bundle's network, ``(N, D) -> (N, A)``."""

    def __init__(self, mlp: MLPWeights) -> None:
        super().__init__()
        d = mlp.weights[0].shape[1]
        mean = np.zeros(d, np.float32) if mlp.in_mean is None else mlp.in_mean
        std = np.ones(d, np.float32) if mlp.in_std is None else mlp.in_std
        self.register_buffer("mean", torch.as_tensor(mean, dtype=torch.float32))
        self.register_buffer("std", torch.as_tensor(std, dtype=torch.float32))
        layers: list[nn.Module] = []
        for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases)):
            lin = nn.Linear(w.shape[1], w.shape[0])
            with torch.no_grad():
                lin.weight.copy_(torch.as_tensor(w))
                lin.bias.copy_(torch.as_tensor(b))
            layers.append(lin)
            if i < len(mlp.weights) - 1:
                layers.append(_ACT[mlp.activation]())
        self.net = nn.Sequential(*layers)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.std)


def load_bundle_mlp(bundle: str | Path) -> tuple[BundleMLP, PolicySpec]:
    """The bundle's edit policy as a torch module, and its manifest. Raises ``ValueError``
    for a bundle that is not a feed-forward edit policy with ``policy_mlp.npz``."""
    bundle = Path(bundle)
    spec = load_bundle_manifest(bundle)
    if spec.method != "edit":
        raise ValueError(f"{bundle}: method {spec.method!r}; fine-tuning needs an edit policy")
    path = bundle / NPZ_NAME
    if not path.exists():
        raise ValueError(f"{bundle}: no policy_mlp.npz (a recurrent or non-MLP policy?)")
    return BundleMLP(load_mlp_npz(path)), spec


def weaken(actor: BundleMLP, noise: float, seed: int, shrink: float = 1.0) -> BundleMLP:
    """The deliberately weakened starting policy: a copy whose output layer is scaled by
    ``shrink`` (the edit's authority cut: ``shrink`` = 0 leaves the bare chunk) and whose every
    weight and bias then moves by ``noise`` times its tensor's std times standard normal
    noise (seeded)."""
    out = copy.deepcopy(actor)
    gen = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        last = out.net[-1]
        last.weight.mul_(shrink)
        last.bias.mul_(shrink)
        for p in out.net.parameters():
            scale = float(p.std()) if p.numel() > 1 else float(p.abs().mean())
            p.add_(noise * scale * torch.randn(p.shape, generator=gen))
    return out


def export_like(actor: nn.Module, spec: PolicySpec, out_dir: str | Path,
                inputs: np.ndarray | None = None, seed: int = 0) -> PolicySpec:
    """Export ``actor`` as a bundle with ``spec``'s manifest fields (the normal exporter:
    ONNX, numpy weights, parity checked to ``FP32_TOL`` times the largest output magnitude,
    at least 1). ``inputs`` ``(N, D)``: recorded edit observations
    for the parity check (wider random ones are added); returns the written manifest."""
    from edgerl.export.bundle import export_bundle
    from edgerl.export.parity import fp32_tolerance_for, random_observations

    d = spec.edit_obs.dim
    parts = [] if inputs is None else [np.asarray(inputs, np.float32)[:1000]]
    center = parts[0].mean(0) if parts else 0.0
    scale = 2.0 * parts[0].std(0) + 1e-3 if parts else 1.0
    parts.append(random_observations(1000, d, scale=scale, center=center, seed=seed + 1))
    fresh = PolicySpec.from_dict({k: v for k, v in spec.to_dict().items()
                                  if k not in ("files", "tensors", "parity")})
    obs = np.concatenate(parts).astype(np.float32)
    with torch.no_grad():
        tol = fp32_tolerance_for(actor(torch.as_tensor(obs)).numpy())
    return export_bundle(actor, fresh, out_dir, obs, tolerance=tol).spec
