"""Where onnxruntime runs: devices, execution providers and the TensorRT EP options.

Devices (``device``): ``auto`` takes the first of TensorRT EP -> CUDA EP -> CPU that this
onnxruntime build has (``onnxruntime-gpu`` on x86_64, NVIDIA's JetPack build on a Jetson);
``cpu`` / ``cuda`` / ``tensorrt`` ask for one (an explicit GPU device this build lacks is an
error). The TensorRT EP gets :class:`TensorRTOptions`: an engine cache directory (the engine
is built once, later starts load it), fp16 and the builder workspace. A fallback (a GPU
provider listed but not usable) is logged as a warning by :func:`open_session`.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from edgerl.runtime.inference.base import InferenceError, ModelLoadError

__all__ = ["DEVICES", "TensorRTOptions", "choose_providers", "default_trt_cache_dir",
           "open_session"]

log = logging.getLogger(__name__)

#: Values of ``--device``.
DEVICES = ("auto", "cpu", "cuda", "tensorrt")
_PROVIDER = {"cpu": "CPUExecutionProvider", "cuda": "CUDAExecutionProvider",
             "tensorrt": "TensorrtExecutionProvider"}


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
