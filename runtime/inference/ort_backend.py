"""onnxruntime backend: a session with inputs/outputs bound once to preallocated buffers.

onnxruntime CPU: one intra-op and one inter-op thread, sequential execution, warm-up at load,
inputs and outputs bound once through an ``IOBinding`` over the preallocated numpy buffers
(``OrtValue.ortvalue_from_numpy`` shares their memory). The public
``InferenceSession.run_with_iobinding`` wrapper adds ~25 us of Python per call on
onnxruntime 1.32 (WebGPU graph-capture bookkeeping), so the C-level binding underneath is
called directly when present (~2 us); both paths give bitwise-identical results (checked
at load). What was asked is kept in ``OrtBackend.requested`` and what the session really
runs on in ``OrtBackend.provider`` (devices: :mod:`edgerl.runtime.inference.providers`).

Recurrent policies (``PolicySpec.recurrent``): state inputs are zeros at start; after each
call every state output is copied into its state input buffer (no allocation). Further named
outputs (a planner's ``intent`` beside its ``chunk``) are bound to their own buffers,
:attr:`OrtBackend.extra`.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np

from edgerl.runtime.inference.base import InferenceError, ModelIOError
from edgerl.runtime.inference.providers import TensorRTOptions, open_session

__all__ = ["OrtBackend"]

log = logging.getLogger(__name__)


def _cpu_session_options(threads: int = 1):  # -> ort.SessionOptions
    import onnxruntime as ort

    so = ort.SessionOptions()
    so.intra_op_num_threads = threads
    so.inter_op_num_threads = threads
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    # Workers would spin between calls and steal the other core from the planner.
    so.add_session_config_entry("session.intra_op.allow_spinning", "0")
    return so


def _static_shape(shape: list, what: str) -> tuple[int, ...]:
    dims = []
    for d in shape:
        if isinstance(d, int) and d > 0:
            dims.append(d)
        elif not dims:
            dims.append(1)  # symbolic batch dimension -> batch 1
        else:
            raise InferenceError(f"{what}: dimension {d!r} is not static (shape {shape})")
    return tuple(dims)


class OrtBackend:
    """An onnxruntime session with inputs/outputs bound once to preallocated buffers.

    Args:
        model: Path to the ``.onnx`` file (or its bytes).
        input_name / output_name: Tensor names (``PolicySpec.tensors``).
        device: One of :data:`DEVICES`.
        recurrent: ``(state_input, state_output, shape)`` triples.
        warmup: Calls run at load so the first real tick is not the slow one.
        threads: intra/inter-op threads (1 on the robot).
        trt: TensorRT EP options (used when the TensorRT EP is chosen).
        extra_outputs: Further output names, each filled into its buffer in :attr:`extra`.

    Attributes:
        requested: The provider list given to onnxruntime (names, or ``(name, options)``).
        provider: The provider the session runs on (the first of ``get_providers()``).
        extra: Output name -> its preallocated buffer, for ``extra_outputs``.
    """

    def __init__(self, model: str | Path | bytes, *, input_name: str = "obs",
                 output_name: str = "action", device: str = "cpu",
                 recurrent: list[tuple[str, str, tuple[int, ...]]] | None = None,
                 warmup: int = 20, threads: int = 1,
                 trt: TensorRTOptions | None = None,
                 extra_outputs: tuple[str, ...] = ()) -> None:
        import onnxruntime as ort

        self.session, self.requested = open_session(model, device,
                                                    _cpu_session_options(threads), trt)
        self.provider = self.session.get_providers()[0]
        self.name = f"onnxruntime:{self.provider}"
        inputs = {i.name: i for i in self.session.get_inputs()}
        outputs = {o.name: o for o in self.session.get_outputs()}
        for name, table, kind in ((input_name, inputs, "input"), (output_name, outputs, "output")):
            if name not in table:
                raise ModelIOError(f"model has no {kind} named {name!r} (has "
                                   f"{', '.join(table)})")
        self.input = np.zeros(_static_shape(inputs[input_name].shape, f"input {input_name}"),
                              dtype=np.float32)
        self.output = np.zeros(_static_shape(outputs[output_name].shape,
                                             f"output {output_name}"), dtype=np.float32)
        self._states: list[tuple[np.ndarray, np.ndarray]] = []
        self.extra: dict[str, np.ndarray] = {}
        for name in extra_outputs:
            if name not in outputs:
                raise ModelIOError(f"model has no output named {name!r} (has "
                                   f"{', '.join(outputs)})")
            self.extra[name] = np.zeros(_static_shape(outputs[name].shape, f"output {name}"),
                                        dtype=np.float32)
        self._binding = self.session.io_binding()
        self._bind(input_name, self.input, output_name, self.output, recurrent or [],
                   inputs, outputs)
        self._run_options = ort.RunOptions()
        # Fast path: the C-level session/binding (see module docstring).
        c_sess = getattr(self.session, "_sess", None)
        c_bind = getattr(self._binding, "_iobinding", None)
        self._fast = None
        if c_sess is not None and c_bind is not None and hasattr(c_sess, "run_with_iobinding"):
            self._fast = (c_sess.run_with_iobinding, c_bind)
        self._check_paths()
        for _ in range(warmup):
            self.infer()
        self.reset_state()

    def _bind(self, input_name, x, output_name, y, recurrent, inputs, outputs) -> None:
        import onnxruntime as ort

        self._values = []  # keep OrtValues alive: they alias the numpy buffers
        pairs = [(input_name, x, True), (output_name, y, False)]
        for s_in, s_out, shape in recurrent:
            for name, table, kind in ((s_in, inputs, "state input"),
                                      (s_out, outputs, "state output")):
                if name not in table:
                    raise InferenceError(f"model has no {kind} named {name!r}")
            buf_in = np.zeros(tuple(shape), dtype=np.float32)
            buf_out = np.zeros(tuple(shape), dtype=np.float32)
            self._states.append((buf_in, buf_out))
            pairs += [(s_in, buf_in, True), (s_out, buf_out, False)]
        pairs += [(name, buf, False) for name, buf in self.extra.items()]
        for name, buf, is_input in pairs:
            value = ort.OrtValue.ortvalue_from_numpy(buf)
            self._values.append(value)
            if is_input:
                self._binding.bind_ortvalue_input(name, value)
            else:
                self._binding.bind_ortvalue_output(name, value)

    def _check_paths(self) -> None:
        """The fast path and the public API must agree bitwise (else use the public one)."""
        if self._fast is None:
            return
        rng = np.random.default_rng(0)
        self.input[...] = rng.standard_normal(self.input.shape).astype(np.float32)
        self.session.run_with_iobinding(self._binding, self._run_options)
        public = self.output.copy()
        self.output[...] = np.nan
        self.reset_state()
        self._fast[0](self._fast[1], self._run_options)
        if not np.array_equal(public, self.output, equal_nan=True):
            log.warning("onnxruntime C-level binding disagrees with the public API; using the "
                        "public run_with_iobinding (slower)")
            self._fast = None
        self.input[...] = 0.0
        self.reset_state()

    def infer(self) -> np.ndarray:
        """Run on ``self.input``; returns ``self.output`` (filled in place)."""
        if self._fast is not None:
            self._fast[0](self._fast[1], self._run_options)
        else:
            self.session.run_with_iobinding(self._binding, self._run_options)
        for buf_in, buf_out in self._states:
            np.copyto(buf_in, buf_out)
        return self.output

    def reset_state(self) -> None:
        """Zero the recurrent state (start of an episode)."""
        for buf_in, _ in self._states:
            buf_in[...] = 0.0
