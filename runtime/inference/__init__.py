"""Inference backends behind one interface, one backend a module, and :func:`make_backend`.

- :mod:`~edgerl.runtime.inference.base`: the :class:`InferenceBackend` protocol and errors;
- :mod:`~edgerl.runtime.inference.providers`: devices, onnxruntime execution providers and
  :class:`TensorRTOptions`;
- :mod:`~edgerl.runtime.inference.ort_backend`: :class:`OrtBackend` (onnxruntime, CPU / CUDA /
  TensorRT EPs);
- :mod:`~edgerl.runtime.inference.numpy_mlp`: :class:`NumpyMLPBackend` (pure numpy, tiny MLPs).

Every backend owns preallocated buffers: the caller writes the network input into
``backend.input`` (shape ``(1, D)`` float32) and calls :meth:`InferenceBackend.infer`, which
returns ``backend.output`` (shape ``(1, A)`` float32) filled in place. Nothing is allocated per
call in the steady state.
"""

from __future__ import annotations

from pathlib import Path

from edgerl.contract.spec import PolicySpec
from edgerl.runtime.inference.base import (
    InferenceBackend,
    InferenceError,
    ModelIOError,
    ModelLoadError,
)
from edgerl.runtime.inference.numpy_mlp import (
    MLP_ACTIVATIONS,
    MLPWeights,
    NumpyMLPBackend,
    load_mlp_npz,
    save_mlp_npz,
)
from edgerl.runtime.inference.ort_backend import OrtBackend
from edgerl.runtime.inference.providers import (
    DEVICES,
    TensorRTOptions,
    choose_providers,
    default_trt_cache_dir,
    open_session,
)

__all__ = [
    "DEVICES",
    "MLP_ACTIVATIONS",
    "InferenceBackend",
    "InferenceError",
    "ModelIOError",
    "ModelLoadError",
    "MLPWeights",
    "NumpyMLPBackend",
    "OrtBackend",
    "TensorRTOptions",
    "choose_providers",
    "default_trt_cache_dir",
    "load_mlp_npz",
    "make_backend",
    "open_session",
    "save_mlp_npz",
]


def make_backend(spec: PolicySpec, bundle_dir: str | Path, *, backend: str = "onnx",
                 device: str = "cpu", model_file: str = "policy.onnx",
                 warmup: int = 20, trt: TensorRTOptions | None = None) -> InferenceBackend:
    """Build the backend for a bundle: ``backend`` is ``onnx`` (onnxruntime on ``device``,
    TensorRT EP options ``trt``) or ``numpy``."""
    bundle_dir = Path(bundle_dir)
    if backend == "numpy":
        if spec.recurrent.kind != "none":
            raise InferenceError(f"the numpy backend runs feed-forward MLPs only; this policy "
                                 f"is {spec.recurrent.kind}")
        path = bundle_dir / "policy_mlp.npz"
        if not path.is_file():
            raise InferenceError(f"{path}: missing; the numpy backend needs the exporter's "
                                 "MLP weight file (use --backend onnx)")
        return NumpyMLPBackend(load_mlp_npz(path))
    if backend != "onnx":
        raise InferenceError(f"unknown backend {backend!r}; choose onnx or numpy")
    path = bundle_dir / model_file
    if not path.is_file():
        raise InferenceError(f"{path}: missing")
    rec = spec.recurrent
    triples = [(i, o, tuple(s)) for i, o, s in zip(rec.state_inputs, rec.state_outputs,
                                                   rec.state_shapes)]
    return OrtBackend(path, input_name=spec.tensors.inputs[0],
                      output_name=spec.tensors.outputs[0], device=device, recurrent=triples,
                      warmup=warmup, trt=trt)
