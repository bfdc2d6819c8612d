"""TensorRT engines for a bundle, built on the device that runs it (``edgerl trt-engine``).

A user on a Jetson has only the bundle (``manifest.json`` + ``policy.onnx`` [+
``planner.onnx``]). The runtime's TensorRT path for such a bundle is onnxruntime's TensorRT
execution provider with its engine cache (:class:`edgerl.runtime.inference.TensorRTOptions`;
the nodes' ``trt_cache_dir`` / ``trt_fp16`` / ``trt_workspace_mb`` parameters): the first start
builds the engine (minutes on a Jetson, while the robot waits), later starts load it. A raw
``policy.engine`` is run directly only when the signed manifest lists it (exported with
``edgerl export --trt``), and no file may be added to a bundle afterwards (the gate refuses an
unlisted ``policy.engine``). onnxruntime names its cache entries by a hash of the graph, of the
onnxruntime, TensorRT and CUDA versions, and of the GPU, so only onnxruntime can write an entry
the runtime will find: :func:`build_bundle_engines` pre-builds that cache. Per network the
nodes run through the TensorRT EP (``policy.onnx``: the edit policy; ``planner.onnx``: the
planner node), it

1. builds the whole network with the TensorRT Python API (``Builder`` -> ``OnnxParser`` ->
   ``BuilderConfig`` -> ``build_serialized_network``: :func:`edgerl.export.tensorrt.build_engine`)
   with the same fp16 flag and workspace. The parser's errors name a node TensorRT cannot take
   (onnxruntime would quietly run it on CUDA or the CPU instead); the serialized engine is kept
   beside the cache for ``trtexec --loadEngine`` profiling (edgerl's runtime does not read it);
2. opens the network as the runtime does (the same backend classes, session options and
   TensorRT EP options) on ``device=tensorrt``, so onnxruntime builds and writes its cache
   entry. The session must run on the TensorRT EP; its outputs are compared with a CPU
   session's on random observations (the largest difference is reported, not judged: the
   bundle's parity report holds the judged checks);
3. writes the sidecar ``trt_engine.json`` into ``bundle-<manifest sha256[:12]>-<fp16|fp32>/``
   of the cache directory, never into the bundle: what the cache was built for (bundle,
   manifest hash, precision, versions, files) and the runtime settings that reuse it.

The caller passes the bundle through the one gate
(:func:`edgerl.runtime.bundle_check.verify_bundle`) first; :func:`plan_engines` checks the
arguments and :func:`build_status` what this machine has (``tensorrt`` >= 10, a CUDA device,
onnxruntime's TensorRT EP) before anything is written.
"""

from __future__ import annotations

import hashlib
import importlib.util
import json
import logging
import os
import time
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import numpy as np

from edgerl.contract._version import __version__
from edgerl.contract.errors import UserError
from edgerl.contract.spec import MANIFEST_NAME, PolicySpec
from edgerl.export.tensorrt import TensorRTUnavailable, build_engine, cuda_status, tensorrt_status

__all__ = ["ENGINE_SOURCES", "SIDECAR", "SIDECAR_FORMAT", "TRT_EP", "WORKSPACE_MB_RANGE",
           "EnginePlan", "ModelEngine", "build_bundle_engines", "build_status", "plan_engines",
           "sidecar_document", "write_sidecar"]

log = logging.getLogger(__name__)

#: The networks the nodes run through onnxruntime's TensorRT EP, in build order.
ENGINE_SOURCES = ("policy.onnx", "planner.onnx")
SIDECAR = "trt_engine.json"
SIDECAR_FORMAT = "edgerl-trt-engine/1"
TRT_EP = "TensorrtExecutionProvider"
#: ``--workspace-mb`` bounds: those of the nodes' ``trt_workspace_mb`` parameter.
WORKSPACE_MB_RANGE = (1, 65536)
#: Random observations the TensorRT EP session and the CPU session are compared on.
COMPARE_OBSERVATIONS = 64
_WORK_DIR_PREFIX = "bundle-"


@dataclass(frozen=True)
class EnginePlan:
    """What :func:`build_bundle_engines` builds and where (every path absolute).

    Attributes:
        bundle: The bundle directory (gated by the caller).
        cache_dir: onnxruntime's TensorRT engine cache directory (the runtime's
            ``trt_cache_dir``); the raw engines and the sidecar go in :attr:`work_dir` below it.
        manifest_sha256: sha256 of ``manifest.json``: names the bundle in paths and sidecar.
        task / method: From the manifest (shown in the sidecar).
        fp16 / workspace_mb: TensorRT builder flags, the same for both builds.
        models: ``(file, sha256)`` of each network to build, from the verified manifest.
    """

    bundle: Path
    cache_dir: Path
    manifest_sha256: str
    task: str
    method: str
    fp16: bool
    workspace_mb: int
    models: tuple[tuple[str, str], ...]

    @property
    def precision(self) -> str:
        return "fp16" if self.fp16 else "fp32"

    @property
    def work_dir(self) -> Path:
        """``<cache_dir>/bundle-<sha256[:12]>-<fp16|fp32>``: this bundle's raw engines and
        sidecar (one cache directory serves every bundle, as onnxruntime's entries do)."""
        return self.cache_dir / f"{_WORK_DIR_PREFIX}{self.manifest_sha256[:12]}-{self.precision}"

    @property
    def sidecar_path(self) -> Path:
        return self.work_dir / SIDECAR

    def engine_path(self, model: str) -> Path:
        """The raw TensorRT engine built from ``model`` (``policy.onnx`` -> ``policy.engine``)."""
        return self.work_dir / f"{Path(model).stem}.engine"

    def runtime_settings(self) -> dict[str, Any]:
        """How the runtime reuses the cache: the nodes' parameters (``edit_policy_node`` and
        ``planner_node`` in the parameter file) and the environment variable that
        :func:`~edgerl.runtime.inference.default_trt_cache_dir` reads (``load_bundle``,
        ``edgerl bench loop``)."""
        return {"ros_parameters": {"device": "tensorrt", "trt_cache_dir": str(self.cache_dir),
                                   "trt_fp16": self.fp16,
                                   "trt_workspace_mb": self.workspace_mb},
                "environment": {"EDGERL_TRT_CACHE": str(self.cache_dir)}}


@dataclass(frozen=True)
class ModelEngine:
    """What was built for one network.

    Attributes:
        file / onnx_sha256: The bundle's network and its (verified) hash.
        engine: The raw TensorRT engine, relative to the cache directory.
        engine_bytes / engine_sha256 / build_s: Its size, hash and build time.
        ort_provider: What onnxruntime's session runs on (must be the TensorRT EP).
        ort_load_s: Session creation and warm-up (the cache entry's build when new).
        ort_cache_files: Cache-directory files onnxruntime wrote or rewrote (none: its entry
            was already there and was loaded).
        max_abs_diff_vs_cpu: Largest |TensorRT EP - CPU| output difference over
            :data:`COMPARE_OBSERVATIONS` random observations (reported, not judged).
        note: Why the onnxruntime step was skipped, or what else to know; "" if nothing.
    """

    file: str
    onnx_sha256: str
    engine: str
    engine_bytes: int
    engine_sha256: str
    build_s: float
    ort_provider: str | None = None
    ort_load_s: float | None = None
    ort_cache_files: tuple[str, ...] = field(default_factory=tuple)
    max_abs_diff_vs_cpu: float | None = None
    note: str = ""


def plan_engines(bundle: str | Path, spec: PolicySpec, cache_dir: str | Path | None = None, *,
                 fp16: bool = False, workspace_mb: int = 1024) -> EnginePlan:
    """The :class:`EnginePlan` for a bundle that passed the gate (``spec`` is its manifest).

    ``cache_dir`` ``None`` is the runtime's default
    (:func:`~edgerl.runtime.inference.default_trt_cache_dir`). Reads the manifest's bytes for
    its hash; writes nothing.

    Raises:
        UserError: ``workspace_mb`` out of :data:`WORKSPACE_MB_RANGE`, a cache directory that
            is a file or lies inside the bundle (the bundle stays as signed), or a bundle with
            none of :data:`ENGINE_SOURCES`.
    """
    from edgerl.runtime.inference import default_trt_cache_dir

    lo, hi = WORKSPACE_MB_RANGE
    if not lo <= int(workspace_mb) <= hi:
        raise UserError(f"--workspace-mb must be in {lo}..{hi}, got {workspace_mb}")
    bundle = Path(bundle).expanduser().resolve()
    out = Path(default_trt_cache_dir() if cache_dir is None else cache_dir).expanduser()
    out = out.resolve()
    if out == bundle or out.is_relative_to(bundle):
        raise UserError(f"--out {out} is inside the bundle {bundle}: engines and the sidecar "
                        "go beside it, the bundle stays as it was signed")
    if out.exists() and not out.is_dir():
        raise UserError(f"--out {out} exists and is not a directory")
    models = tuple((name, spec.files[name]) for name in ENGINE_SOURCES if name in spec.files)
    if not models:
        raise UserError(f"{bundle}: the manifest lists none of {', '.join(ENGINE_SOURCES)}; "
                        "nothing runs through TensorRT")
    digest = hashlib.sha256((bundle / MANIFEST_NAME).read_bytes()).hexdigest()
    return EnginePlan(bundle=bundle, cache_dir=out, manifest_sha256=digest, task=spec.task,
                      method=spec.method, fp16=bool(fp16), workspace_mb=int(workspace_mb),
                      models=models)


def _onnxruntime_status() -> tuple[bool, str]:
    """Whether onnxruntime imports and has the TensorRT EP (NVIDIA's GPU build)."""
    try:
        import onnxruntime as ort
    except ImportError as exc:
        return False, f"onnxruntime is not importable ({exc})"
    available = list(ort.get_available_providers())
    if TRT_EP not in available:
        return False, (f"onnxruntime {ort.__version__} has no {TRT_EP} (available: "
                       f"{', '.join(available)}); the runtime's TensorRT path needs the "
                       "onnxruntime-gpu build with TensorRT (docs/jetson.md)")
    return True, f"onnxruntime {ort.__version__} with {TRT_EP}"


def build_status() -> tuple[bool, str]:
    """``(usable, message)`` for building here: ``tensorrt`` >= 10 with a CUDA device (seen
    through the CUDA runtime library: no torch needed) and onnxruntime with the TensorRT EP.
    The message names everything missing (or, when usable, the versions and device)."""
    problems = []
    trt_ok, trt_msg = tensorrt_status(torch_cuda=False)
    if not trt_ok:
        problems.append(trt_msg)
        if importlib.util.find_spec("tensorrt") is None:  # the device check did not run
            cuda_ok, cuda_msg = cuda_status()
            if not cuda_ok:
                problems.append(cuda_msg)
    ort_ok, ort_msg = _onnxruntime_status()
    if not ort_ok:
        problems.append(ort_msg)
    if problems:
        return False, "; ".join(problems)
    return True, f"{trt_msg}; {ort_msg}"


def sidecar_document(plan: EnginePlan, models: Sequence[ModelEngine],
                     environment: Mapping[str, str], built_at: str) -> dict[str, Any]:
    """The sidecar's content (JSON-ready): the bundle and precision the cache was built for,
    this machine's versions (``environment``), the networks, and the runtime settings."""
    return {
        "format": SIDECAR_FORMAT,
        "edgerl_version": __version__,
        "built_at": built_at,
        "bundle": str(plan.bundle),
        "manifest_sha256": plan.manifest_sha256,
        "task": plan.task,
        "method": plan.method,
        "fp16": plan.fp16,
        "workspace_mb": plan.workspace_mb,
        "cache_dir": str(plan.cache_dir),
        "environment": dict(environment),
        "models": [{**asdict(m), "ort_cache_files": list(m.ort_cache_files)} for m in models],
        "runtime": plan.runtime_settings(),
    }


def write_sidecar(path: str | Path, doc: Mapping[str, Any]) -> Path:
    """Write ``doc`` to ``path`` as JSON (through a temporary file: never half written)."""
    path = Path(path)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def _sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _listing(directory: Path) -> dict[str, int]:
    """Files directly in ``directory`` (onnxruntime's cache entries) -> mtime (ns)."""
    return {p.name: p.stat().st_mtime_ns for p in directory.iterdir() if p.is_file()}


def _runtime_backend(plan: EnginePlan, spec: PolicySpec, model: str, device: str) -> Any:
    """``model`` opened as the runtime opens it on ``device``: the edit policy through
    ``make_backend`` (as ``load_bundle``), the planner through ``OnnxChunkPlanner`` (as the
    planner node); both with the plan's TensorRT EP options. Returns the ``OrtBackend``.

    Raises ValueError for a planner the planner node cannot run (e.g. two inputs)."""
    from edgerl.contract.planner import PlannerInfo
    from edgerl.runtime.inference import TensorRTOptions, make_backend
    from edgerl.runtime.planners.local.onnx import OnnxChunkPlanner

    trt = TensorRTOptions(cache_dir=plan.cache_dir, fp16=plan.fp16,
                          workspace_mb=plan.workspace_mb)
    if model == "policy.onnx":
        return make_backend(spec, plan.bundle, backend="onnx", device=device, warmup=1, trt=trt)
    ch = spec.chunk
    info = PlannerInfo(horizon=ch.horizon, action_dim=spec.action.dim, dt_s=ch.dt_s,
                       period_s=ch.period_s, expected_latency_s=ch.expected_latency_s)
    return OnnxChunkPlanner(plan.bundle / model, info, device=device, trt=trt).net


def _max_abs_diff(a: Any, b: Any, n: int, seed: int = 0) -> float:
    """Largest output difference of two backends fed the same ``n`` standard-normal inputs
    (recurrent state advances alike in both; reset before and after)."""
    rng = np.random.default_rng(seed)
    worst = 0.0
    a.reset_state()
    b.reset_state()
    for _ in range(n):
        x = rng.standard_normal(a.input.shape).astype(np.float32)
        np.copyto(a.input, x)
        np.copyto(b.input, x)
        worst = max(worst, float(np.max(np.abs(a.infer() - b.infer()))))
    a.reset_state()
    b.reset_state()
    return worst


def _build_model(plan: EnginePlan, spec: PolicySpec, model: str, onnx_sha256: str
                 ) -> ModelEngine:
    """Steps 1 and 2 of the module docstring for one network."""
    engine = plan.engine_path(model)
    t0 = time.perf_counter()
    build_engine(plan.bundle / model, engine, fp16=plan.fp16,
                 workspace_bytes=plan.workspace_mb << 20, torch_cuda=False)
    built = ModelEngine(file=model, onnx_sha256=onnx_sha256,
                        engine=engine.relative_to(plan.cache_dir).as_posix(),
                        engine_bytes=engine.stat().st_size, engine_sha256=_sha256(engine),
                        build_s=round(time.perf_counter() - t0, 3))
    log.info("%s: TensorRT engine %s (%d bytes, %.1f s)", model, engine, built.engine_bytes,
             built.build_s)
    before = _listing(plan.cache_dir)
    t0 = time.perf_counter()
    try:
        net = _runtime_backend(plan, spec, model, "tensorrt")
    except ValueError as exc:  # a planner the planner node does not run (its own server does)
        note = f"onnxruntime cache not built: the planner node cannot run it ({exc})"
        log.warning("%s: %s", model, note)
        return replace(built, note=note)
    load_s = round(time.perf_counter() - t0, 3)
    if net.provider != TRT_EP:
        raise RuntimeError(f"{model}: onnxruntime runs it on {net.provider}, not {TRT_EP} "
                           "(the provider is listed but could not be used: check the "
                           "TensorRT and CUDA libraries onnxruntime loads); no engine cached")
    after = _listing(plan.cache_dir)
    written = tuple(sorted(n for n, t in after.items() if before.get(n) != t))
    diff = _max_abs_diff(net, _runtime_backend(plan, spec, model, "cpu"), COMPARE_OBSERVATIONS)
    note = ""
    if model == "policy.onnx" and "policy.engine" in spec.files:
        note = ("the bundle lists policy.engine: device tensorrt runs it directly where it "
                "deserializes on this machine; this cache entry is the fallback")
    log.info("%s: onnxruntime %s cache entry in %.1f s (%s), max |TensorRT EP - CPU| %.3g",
             model, TRT_EP, load_s, ", ".join(written) or "already cached", diff)
    return replace(built, ort_provider=net.provider, ort_load_s=load_s, ort_cache_files=written,
                   max_abs_diff_vs_cpu=diff, note=note)


def _environment(status: str) -> dict[str, str]:
    """This machine's versions for the sidecar (the engines are valid only on it)."""
    import onnxruntime as ort
    import tensorrt as trt

    return {"tensorrt": str(trt.__version__), "onnxruntime": str(ort.__version__),
            "numpy": np.__version__, "device": status}


def build_bundle_engines(plan: EnginePlan, spec: PolicySpec) -> dict[str, Any]:
    """Build every network of ``plan`` (module docstring, steps 1-3); returns the sidecar
    document, also written to ``plan.sidecar_path``.

    Raises:
        TensorRTUnavailable: :func:`build_status` fails (checked before anything is written).
        RuntimeError: TensorRT cannot parse or build a network, or onnxruntime's session does
            not run on the TensorRT EP.
    """
    ok, status = build_status()
    if not ok:
        raise TensorRTUnavailable(status)
    plan.work_dir.mkdir(parents=True, exist_ok=True)
    models = [_build_model(plan, spec, name, sha) for name, sha in plan.models]
    built_at = datetime.now(timezone.utc).isoformat(timespec="seconds")
    doc = sidecar_document(plan, models, _environment(status), built_at)
    write_sidecar(plan.sidecar_path, doc)
    log.info("wrote %s", plan.sidecar_path)
    return doc
