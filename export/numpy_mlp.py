"""``policy_mlp.npz``: the weights of a plain MLP for the runtime's numpy backend.

The runtime's :class:`edgerl.runtime.inference.NumpyMLPBackend` evaluates
``W_n(... act(W_0 ((x - in_mean) / in_std) + b_0) ...) + b_n`` with one activation
(``elu``/``relu``/``tanh``/``identity``) after every layer but the last. This module reads the
exported ``policy.onnx`` chain (via :func:`edgerl.export.c_header.parse_mlp_chain`) and writes
the file when the graph has exactly that form; otherwise it says why not.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from edgerl.export.c_header import CHeaderError, Layer, parse_mlp_chain

__all__ = ["NPZ_NAME", "mlp_from_chain", "write_mlp_npz"]

NPZ_NAME = "policy_mlp.npz"


def mlp_from_chain(layers: list[Layer]) -> dict:
    """Keyword arguments for ``save_mlp_npz``; raises :class:`CHeaderError` if not a plain MLP.

    Accepted: optional leading ``sub`` (mean) and ``div``/``mul`` (std) by constants, then
    ``dense`` layers separated by one shared activation (ELU only with alpha 1).
    """
    i = 0
    in_mean = in_std = None
    if i < len(layers) and layers[i].kind == "sub":
        in_mean = layers[i].c
        i += 1
    if i < len(layers) and layers[i].kind in ("div", "mul"):
        c = np.asarray(layers[i].c, dtype=np.float64)
        in_std = c if layers[i].kind == "div" else 1.0 / c
        i += 1
    weights, biases, acts = [], [], []
    expect_dense = True
    for layer in layers[i:]:
        if expect_dense:
            if layer.kind != "dense":
                raise CHeaderError(f"expected a dense layer, got {layer.kind}")
            weights.append(layer.w)
            biases.append(layer.b)
        else:
            if layer.kind not in ("elu", "relu", "tanh"):
                raise CHeaderError(f"activation {layer.kind} is not one the numpy backend runs")
            if layer.kind == "elu" and layer.params.get("alpha", 1.0) != 1.0:
                raise CHeaderError("ELU with alpha != 1 is not supported by the numpy backend")
            acts.append(layer.kind)
        expect_dense = not expect_dense
    if not weights or expect_dense:
        raise CHeaderError("the chain must end with a dense layer")
    if len(set(acts)) > 1:
        raise CHeaderError(f"mixed activations {sorted(set(acts))}; the numpy backend uses one")
    return {"weights": weights, "biases": biases,
            "activation": acts[0] if acts else "identity", "in_mean": in_mean, "in_std": in_std}


def write_mlp_npz(onnx_path: str | Path, out_path: str | Path) -> Path:
    """Write ``policy_mlp.npz`` from a chain MLP ``policy.onnx``; raises :class:`CHeaderError`."""
    from edgerl.runtime.inference import save_mlp_npz

    _, layers = parse_mlp_chain(onnx_path)
    kwargs = mlp_from_chain(layers)
    return save_mlp_npz(out_path, **kwargs)
