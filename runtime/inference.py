"""Inference backends behind one interface: onnxruntime (CPU / CUDA / TensorRT EPs) and a
pure-numpy MLP for tiny policies.

Every backend owns preallocated buffers: the caller writes the network input into
``backend.input`` (shape ``(1, D)`` float32) and calls :meth:`InferenceBackend.infer`, which
returns ``backend.output`` (shape ``(1, A)`` float32) filled in place. Nothing is allocated per
call in the steady state.

onnxruntime CPU: one intra-op and one inter-op thread, sequential execution, warm-up at load,
inputs and outputs bound once through an ``IOBinding`` over the preallocated numpy buffers
(``OrtValue.ortvalue_from_numpy`` shares their memory). The public
``InferenceSession.run_with_iobinding`` wrapper adds ~25 us of Python per call on
onnxruntime 1.32 (WebGPU graph-capture bookkeeping), so the C-level binding underneath is
called directly when present (~2 us); both paths give bitwise-identical results (checked
at load).

Numpy MLP: the ONNX initializers cannot be read without the ``onnx`` package (not part of the
``[runtime]`` install), so the exporter ships the same weights as ``policy_mlp.npz``
(:func:`save_mlp_npz` writes it; :func:`load_mlp_npz` reads it; format in docs/runtime.md).

Devices (``device``): ``auto`` takes the first of TensorRT EP -> CUDA EP -> CPU that this
onnxruntime build has (``onnxruntime-gpu`` on x86_64, NVIDIA's JetPack build on a Jetson);
``cpu`` / ``cuda`` / ``tensorrt`` ask for one (an explicit GPU device this build lacks is an
error). The TensorRT EP gets :class:`TensorRTOptions`: an engine cache directory (the engine
is built once, later starts load it), fp16 and the builder workspace. What was asked is kept
in ``OrtBackend.requested`` and what the session really runs on in ``OrtBackend.provider``;
a fallback (a GPU provider listed but not usable) is logged as a warning.

Recurrent policies (``PolicySpec.recurrent``): state inputs are zeros at start; after each
call every state output is copied into its state input buffer (no allocation).
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import numpy as np

from edgerl.spec import PolicySpec

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

log = logging.getLogger(__name__)

#: Values of ``--device``.
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
_PROVIDER = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
             "tensorrt": "TensorrtExecutionProvider"}
#: Activations the numpy MLP understands (rsl_rl / torch names).
MLP_ACTIVATIONS = ("elu", "relu", "tanh", "identity")


class InferenceError(RuntimeError):
    """A backend cannot be built (unknown device, missing provider, bad model shapes)."""


class ModelLoadError(InferenceError):
    """onnxruntime refuses the model file itself (garbage, truncated, invalid graph)."""


class ModelIOError(InferenceError):
    """The model lacks an input/output the manifest names."""


class InferenceBackend(Protocol):
    """``infer()`` runs the network on ``input`` and returns ``output`` (both preallocated).

    Attributes:
        name: Backend and device, e.g. ``"onnxruntime:CPUExecutionProvider"``.
        input: ``(1, D)`` float32 buffer the caller fills before :meth:`infer`.
        output: ``(1, A)`` float32 buffer :meth:`infer` fills.
    """

    name: str
    input: np.ndarray
    output: np.ndarray

    def infer(self) -> np.ndarray: ...

    def reset_state(self) -> None: ...


def default_trt_cache_dir() -> Path:
    """``$EDGERL_TRT_CACHE``, else ``$XDG_CACHE_HOME/edgerl/tensorrt`` (``~/.cache/...``)."""
    env = os.environ.get("EDGERL_TRT_CACHE")
    if env:
        return Path(env)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "edgerl" / "tensorrt"


@dataclass
class TensorRTOptions:
    """onnxruntime TensorRT execution-provider options.

    Attributes:
        cache_dir: Engine (and timing) cache directory; ``None`` = :func:`default_trt_cache_dir`,
            ``""`` = no cache (the engine is rebuilt at every start: minutes on a Jetson).
            onnxruntime keys cached engines by model hash, GPU and TensorRT version, so one
            directory serves every bundle.
        fp16: Let TensorRT pick fp16 kernels (check the bundle's fp16 parity first).
        workspace_mb: Builder workspace limit in MiB.
    """

    cache_dir: str | Path | None = None
    fp16: bool = False
    workspace_mb: int = 1024

    def __post_init__(self) -> None:
        if not 1 <= int(self.workspace_mb) <= 1 << 20:
            raise InferenceError(f"TensorRT workspace_mb must be in 1..{1 << 20}, got "
                                 f"{self.workspace_mb}")

    def provider_options(self) -> dict[str, str]:
        """The EP's option strings (onnxruntime ``trt_*`` names)."""
        opts = {"trt_fp16_enable": str(bool(self.fp16)),
                "trt_max_workspace_size": str(int(self.workspace_mb) << 20)}
        cache = default_trt_cache_dir() if self.cache_dir is None else self.cache_dir
        if str(cache):
            opts.update({"trt_engine_cache_enable": "True",
                         "trt_engine_cache_path": str(cache),
                         "trt_timing_cache_enable": "True",
                         "trt_timing_cache_path": str(cache)})
        return opts


def choose_providers(device: str, available: list[str] | None = None,
                     trt: TensorRTOptions | None = None) -> list[str | tuple[str, dict]]:
    """onnxruntime execution providers for ``device`` (one of :data:`DEVICES`), in order.

    ``auto`` prefers TensorRT, then CUDA, then CPU, logging which one it picked; an explicit
    ``cuda`` / ``tensorrt`` that this onnxruntime build lacks raises :class:`InferenceError`.
    TensorRT comes as ``("TensorrtExecutionProvider", trt.provider_options())`` followed by
    CUDA (for nodes TensorRT does not take) and CPU. ``available`` defaults to
    ``onnxruntime.get_available_providers()``.
    """
    if device not in DEVICES:
        raise InferenceError(f"unknown device {device!r}; choose one of {', '.join(DEVICES)}")
    if available is None:
        import onnxruntime as ort

        available = list(ort.get_available_providers())
    cpu = _PROVIDER["cpu"]
    if device == "cpu":
        return [cpu]
    if device == "auto":
        pick = next((n for n in ("tensorrt", "cuda") if _PROVIDER[n] in available), "cpu")
        if pick == "cpu":
            log.info("device auto: no CUDA/TensorRT execution provider in this onnxruntime "
                     "(available: %s); using CPU", ", ".join(available))
            return [cpu]
        log.info("device auto: using %s", _PROVIDER[pick])
        device = pick
    provider = _PROVIDER[device]
    if provider not in available:
        raise InferenceError(f"device {device!r} needs {provider}, which this onnxruntime "
                             f"build lacks (available: {', '.join(available)}); install "
                             "onnxruntime-gpu (docs/jetson.md)")
    if device == "cuda":
        return [provider, cpu]
    trt_entry = (provider, (trt or TensorRTOptions()).provider_options())
    cuda = [_PROVIDER["cuda"]] if _PROVIDER["cuda"] in available else []
    return [trt_entry, *cuda, cpu]


def _provider_name(p: str | tuple[str, dict]) -> str:
    return p if isinstance(p, str) else p[0]


def _split_providers(providers: list) -> tuple[list[str], list[dict]]:
    """``InferenceSession(providers=..., provider_options=...)`` form of a provider list."""
    return [_provider_name(p) for p in providers], \
        [dict(p[1]) if not isinstance(p, str) else {} for p in providers]


def open_session(model: str | Path | bytes, device: str, sess_options: object = None,
                 trt: TensorRTOptions | None = None) -> tuple[object, list]:
    """``(onnxruntime.InferenceSession, providers asked for)`` on ``device``.

    Creates the TensorRT engine cache directory when the TensorRT EP is chosen and warns when
    the session does not run on the first provider asked for.

    Raises:
        InferenceError: unknown device, missing provider, or a model onnxruntime refuses.
    """
    import onnxruntime as ort

    requested = choose_providers(device, trt=trt)
    names, options = _split_providers(requested)
    for opts in options:
        if opts.get("trt_engine_cache_enable") == "True":
            Path(opts["trt_engine_cache_path"]).mkdir(parents=True, exist_ok=True)
    src = model if isinstance(model, bytes) else str(model)
    try:
        session = ort.InferenceSession(src, sess_options, providers=names,
                                       provider_options=options)
    except Exception as exc:  # onnxruntime raises its own Fail/InvalidGraph types
        raise ModelLoadError(f"onnxruntime could not load the model on {names[0]}: "
                             f"{exc}") from exc
    running = session.get_providers()[0]
    if running != names[0]:
        log.warning("asked onnxruntime for %s but the session runs on %s (the provider is "
                    "listed but could not be used: check the CUDA/TensorRT libraries)",
                    names[0], running)
    else:
        log.info("onnxruntime session on %s", running)
    return session, requested


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

    Attributes:
        requested: The provider list given to onnxruntime (names, or ``(name, options)``).
        provider: The provider the session runs on (the first of ``get_providers()``).
    """

    def __init__(self, model: str | Path | bytes, *, input_name: str = "obs",
                 output_name: str = "action", device: str = "cpu",
                 recurrent: list[tuple[str, str, tuple[int, ...]]] | None = None,
                 warmup: int = 20, threads: int = 1,
                 trt: TensorRTOptions | None = None) -> None:
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


# --- numpy MLP ---------------------------------------------------------------------------

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
