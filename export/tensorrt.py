"""Build a TensorRT engine from ``policy.onnx`` and check it against onnxruntime.

Uses the TensorRT (>= 10) Python API directly: ``Builder`` -> ``OnnxParser`` ->
``build_serialized_network`` (fp16 flag optional) -> ``Runtime.deserialize_cuda_engine``;
device buffers are torch CUDA tensors (torch is present wherever ``edgerl export`` runs), so no
pycuda/cuda-python is needed. Where ``import tensorrt`` fails or no CUDA device is visible,
:func:`tensorrt_status` says what is missing and :func:`build_engine` raises
:class:`TensorRTUnavailable` with that message.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

__all__ = ["TensorRTUnavailable", "TrtRunner", "build_engine", "tensorrt_status"]

log = logging.getLogger(__name__)


class TensorRTUnavailable(RuntimeError):
    """TensorRT or a CUDA device is missing on this machine."""


def tensorrt_status() -> tuple[bool, str]:
    """``(usable, message)``: whether ``tensorrt`` imports and CUDA is visible to torch."""
    try:
        import tensorrt as trt
    except ImportError as exc:
        return False, (f"the tensorrt Python package is not importable ({exc}); install "
                       "TensorRT >= 10 (pip install tensorrt, or JetPack on a Jetson)")
    try:
        import torch
    except ImportError:
        return False, "torch is needed for the TensorRT check's CUDA buffers"
    if not torch.cuda.is_available():
        return False, f"tensorrt {trt.__version__} imports but no CUDA device is visible"
    major = int(str(trt.__version__).split(".")[0])
    if major < 10:
        return False, f"tensorrt {trt.__version__} is too old; edgerl needs >= 10"
    return True, f"tensorrt {trt.__version__} on {torch.cuda.get_device_name(0)}"


def _require() -> Any:
    ok, msg = tensorrt_status()
    if not ok:
        raise TensorRTUnavailable(msg)
    import tensorrt as trt

    return trt


def build_engine(onnx_path: str | Path, engine_path: str | Path, *, fp16: bool = False,
                 workspace_bytes: int = 1 << 28) -> Path:
    """Parse ``onnx_path`` and write a serialized engine to ``engine_path``.

    ``fp16`` enables FP16 kernels (``BuilderFlag.FP16``); TensorRT keeps FP32 where faster.
    Raises :class:`TensorRTUnavailable` or ``RuntimeError`` with the parser's errors.
    """
    trt = _require()
    logger = trt.Logger(trt.Logger.WARNING)
    builder = trt.Builder(logger)
    network = builder.create_network(0)  # explicit batch is the only mode in TensorRT 10
    parser = trt.OnnxParser(network, logger)
    if not parser.parse(Path(onnx_path).read_bytes()):
        errors = [str(parser.get_error(i)) for i in range(parser.num_errors)]
        raise RuntimeError(f"TensorRT could not parse {onnx_path}: {'; '.join(errors)}")
    config = builder.create_builder_config()
    config.set_memory_pool_limit(trt.MemoryPoolType.WORKSPACE, workspace_bytes)
    if fp16:
        config.set_flag(trt.BuilderFlag.FP16)
    else:  # TF32 (on by default on Ampere+) would cost ~1e-3 of fp32 accuracy
        config.clear_flag(trt.BuilderFlag.TF32)
    serialized = builder.build_serialized_network(network, config)
    if serialized is None:
        raise RuntimeError(f"TensorRT failed to build an engine from {onnx_path}")
    engine_path = Path(engine_path)
    engine_path.write_bytes(bytes(serialized))
    log.info("built TensorRT engine %s (fp16=%s)", engine_path, fp16)
    return engine_path


class TrtRunner:
    """Run a serialized engine: ``runner([obs, *state]) -> [action, *state_out]`` (numpy).

    Inputs and outputs follow the engine's I/O tensor order; shapes must be static.
    """

    def __init__(self, engine_path: str | Path) -> None:
        trt = _require()
        import torch

        self._torch = torch
        self._logger = trt.Logger(trt.Logger.WARNING)
        self._runtime = trt.Runtime(self._logger)
        self.engine = self._runtime.deserialize_cuda_engine(Path(engine_path).read_bytes())
        if self.engine is None:
            raise RuntimeError(f"{engine_path}: TensorRT could not deserialize the engine")
        self.context = self.engine.create_execution_context()
        self.inputs: list[str] = []
        self.outputs: list[str] = []
        self._buffers: dict[str, Any] = {}
        for i in range(self.engine.num_io_tensors):
            name = self.engine.get_tensor_name(i)
            shape = tuple(self.engine.get_tensor_shape(name))
            if any(d < 0 for d in shape):
                raise RuntimeError(f"engine tensor {name} has a dynamic shape {shape}")
            if self.engine.get_tensor_dtype(name) != trt.DataType.FLOAT:
                raise RuntimeError(f"engine tensor {name} is "
                                   f"{self.engine.get_tensor_dtype(name)}, expected FLOAT")
            buf = torch.zeros(shape, dtype=torch.float32, device="cuda")
            self._buffers[name] = buf
            self.context.set_tensor_address(name, buf.data_ptr())
            is_input = self.engine.get_tensor_mode(name) == trt.TensorIOMode.INPUT
            (self.inputs if is_input else self.outputs).append(name)

    def __call__(self, arrays: Sequence[np.ndarray]) -> list[np.ndarray]:
        torch = self._torch
        for name, arr in zip(self.inputs, arrays):
            self._buffers[name].copy_(torch.from_numpy(np.ascontiguousarray(arr, np.float32)))
        stream = torch.cuda.current_stream()
        if not self.context.execute_async_v3(stream.cuda_stream):
            raise RuntimeError("TensorRT execute_async_v3 failed")
        stream.synchronize()
        return [self._buffers[name].cpu().numpy() for name in self.outputs]
