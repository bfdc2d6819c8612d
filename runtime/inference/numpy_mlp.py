"""Pure-numpy MLP backend for tiny feed-forward policies (no onnxruntime).

The ONNX initializers cannot be read without the ``onnx`` package (not part of the
``[runtime]`` install), so the exporter ships the same weights as ``policy_mlp.npz``
(:func:`save_mlp_npz` writes it; :func:`load_mlp_npz` reads it; format in docs/runtime.md).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from edgerl.runtime.inference.base import InferenceError

__all__ = ["MLP_ACTIVATIONS", "MLPWeights", "NumpyMLPBackend", "load_mlp_npz", "save_mlp_npz"]

#: Activations the numpy MLP understands (rsl_rl / torch names).
MLP_ACTIVATIONS = ("elu", "relu", "tanh", "identity")


@dataclass
class MLPWeights:
    """``y = W_n(... act(W_0 ((x - in_mean) / in_std) + b_0) ...) + b_n``.

    ``weights[i]`` has shape ``(out_i, in_i)`` (torch ``nn.Linear`` layout), ``biases[i]``
    ``(out_i,)``; the activation follows every layer except the last.
    """

    weights: list[np.ndarray]
    biases: list[np.ndarray]
    activation: str = "elu"
    in_mean: np.ndarray | None = None
    in_std: np.ndarray | None = None

    def __post_init__(self) -> None:
        if not self.weights or len(self.weights) != len(self.biases):
            raise InferenceError("MLP needs as many biases as weights (and at least one layer)")
        if self.activation not in MLP_ACTIVATIONS:
            raise InferenceError(f"MLP activation {self.activation!r} is not one of "
                                 f"{', '.join(MLP_ACTIVATIONS)}")
        for i, (w, b) in enumerate(zip(self.weights, self.biases)):
            if w.ndim != 2 or b.shape != (w.shape[0],):
                raise InferenceError(f"MLP layer {i}: weight {w.shape} / bias {b.shape} mismatch")
            if i and w.shape[1] != self.weights[i - 1].shape[0]:
                raise InferenceError(f"MLP layer {i}: takes {w.shape[1]} inputs but layer "
                                     f"{i - 1} gives {self.weights[i - 1].shape[0]}")


def save_mlp_npz(path: str | Path, weights: list[np.ndarray], biases: list[np.ndarray],
                 activation: str = "elu", in_mean: np.ndarray | None = None,
                 in_std: np.ndarray | None = None) -> Path:
    """Write the numpy-backend weight file (``policy_mlp.npz``); returns its path."""
    mlp = MLPWeights([np.asarray(w, np.float32) for w in weights],
                     [np.asarray(b, np.float32) for b in biases], activation,
                     None if in_mean is None else np.asarray(in_mean, np.float32),
                     None if in_std is None else np.asarray(in_std, np.float32))
    arrays: dict[str, np.ndarray] = {"n_layers": np.array(len(mlp.weights)),
                                     "activation": np.array(mlp.activation)}
    for i, (w, b) in enumerate(zip(mlp.weights, mlp.biases)):
        arrays[f"weight_{i}"] = w
        arrays[f"bias_{i}"] = b
    if mlp.in_mean is not None:
        arrays["in_mean"] = mlp.in_mean
    if mlp.in_std is not None:
        arrays["in_std"] = mlp.in_std
    path = Path(path)
    with open(path, "wb") as fh:
        np.savez(fh, **arrays)
    return path


def load_mlp_npz(path: str | Path) -> MLPWeights:
    """Read a file written by :func:`save_mlp_npz` (no pickle)."""
    try:
        with np.load(path, allow_pickle=False) as data:
            n = int(data["n_layers"])
            return MLPWeights([data[f"weight_{i}"].astype(np.float32) for i in range(n)],
                              [data[f"bias_{i}"].astype(np.float32) for i in range(n)],
                              str(data["activation"]),
                              data["in_mean"].astype(np.float32) if "in_mean" in data else None,
                              data["in_std"].astype(np.float32) if "in_std" in data else None)
    except KeyError as exc:
        raise InferenceError(f"{path}: not an edgerl MLP weight file (missing {exc})") from exc


class NumpyMLPBackend:
    """A feed-forward MLP evaluated with preallocated numpy buffers (no onnxruntime)."""

    def __init__(self, mlp: MLPWeights) -> None:
        self.name = "numpy-mlp"
        self.mlp = mlp
        self._wt = [np.ascontiguousarray(w.T) for w in mlp.weights]  # (in, out) for x @ W^T
        self.input = np.zeros((1, mlp.weights[0].shape[1]), dtype=np.float32)
        self._hidden = [np.zeros((1, w.shape[0]), dtype=np.float32) for w in mlp.weights]
        self._tmp = [np.zeros_like(h) for h in self._hidden]
        self._x = np.zeros_like(self.input)
        self.output = self._hidden[-1]
        self._mean = mlp.in_mean.reshape(1, -1) if mlp.in_mean is not None else None
        self._std = mlp.in_std.reshape(1, -1) if mlp.in_std is not None else None

    def infer(self) -> np.ndarray:
        """Run on ``self.input``; returns ``self.output`` (filled in place)."""
        x = self.input
        if self._mean is not None or self._std is not None:
            np.copyto(self._x, x)
            if self._mean is not None:
                np.subtract(self._x, self._mean, out=self._x)
            if self._std is not None:
                np.divide(self._x, self._std, out=self._x)
            x = self._x
        last = len(self._wt) - 1
        for i, (wt, b) in enumerate(zip(self._wt, self.mlp.biases)):
            h = self._hidden[i]
            np.matmul(x, wt, out=h)
            np.add(h, b, out=h)
            if i < last:
                self._activate(h, self._tmp[i])
            x = h
        return self.output

    def _activate(self, h: np.ndarray, tmp: np.ndarray) -> None:
        act = self.mlp.activation
        if act == "relu":
            np.maximum(h, 0.0, out=h)
        elif act == "tanh":
            np.tanh(h, out=h)
        elif act == "elu":  # x if x > 0 else exp(x) - 1
            np.minimum(h, 0.0, out=tmp)
            np.expm1(tmp, out=tmp)
            np.maximum(h, 0.0, out=h)
            np.add(h, tmp, out=h)

    def reset_state(self) -> None:
        """Feed-forward: nothing to reset."""
