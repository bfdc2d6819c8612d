"""Load an exported bundle (``manifest.json`` + ``policy.onnx`` ...) for the runtime.

:func:`load_bundle` runs every check of :func:`edgerl.runtime.bundle_check.verify_bundle`
(signature when a public key is configured, strict manifest parse and schema, semantic bounds,
paths inside the bundle, every file's sha256, no unlisted loader file, a passed parity
report, each ONNX file's inputs/outputs against the manifest), then builds the inference
backend. A tampered, truncated, newer or nonsensical bundle fails here with one named
:class:`~edgerl.contract.bundle_errors.BundleError` subclass, never later on the robot.
"""

from __future__ import annotations

import logging
from pathlib import Path

from edgerl.contract.bundle_errors import OnnxModelError, OnnxShapeError
from edgerl.contract.spec import BundleError, PolicySpec
from edgerl.runtime.bundle_check import verify_bundle
from edgerl.runtime.inference import (
    InferenceBackend,
    InferenceError,
    ModelIOError,
    ModelLoadError,
    TensorRTOptions,
    make_backend,
)
from edgerl.runtime.manifest_rules import ManifestLimits
from edgerl.runtime.onnx_check import check_bundle_onnx, check_policy_io

__all__ = ["POLICY_FILE", "PLANNER_FILE", "load_bundle"]

log = logging.getLogger(__name__)

POLICY_FILE = "policy.onnx"
PLANNER_FILE = "planner.onnx"


def load_bundle(bundle_dir: str | Path, *, backend: str = "onnx", device: str = "cpu",
                warmup: int = 20, trt: TensorRTOptions | None = None,
                pubkey: str | Path | None = None, limits: ManifestLimits | None = None
                ) -> tuple[PolicySpec, InferenceBackend | None]:
    """``(spec, backend)`` for a bundle directory.

    ``backend`` is ``onnx`` (onnxruntime on ``device``: ``auto``/``cpu``/``cuda``/``tensorrt``,
    TensorRT EP options ``trt``) or ``numpy`` (``policy_mlp.npz``). With ``device`` ``auto`` or
    ``tensorrt`` the exported ``policy.engine`` runs through TensorRT directly when it matches
    this machine (:mod:`edgerl.runtime.trt_engine`); otherwise the reason is logged and
    onnxruntime runs ``policy.onnx``.
    A ``planner``, ``blend`` or ``rtc`` bundle without a policy network returns ``backend=None``:
    the command is the planner's chunk row. ``pubkey`` (else ``$EDGERL_BUNDLE_PUBKEY``)
    requires a valid ``manifest.sig``; ``limits`` overrides the semantic bounds.

    Raises:
        BundleError: a subclass from :mod:`edgerl.contract.bundle_errors` naming the file or field
            (see :func:`~edgerl.runtime.bundle_check.verify_bundle`).
        InferenceError: the backend cannot run here (device, provider, numpy weights).
    """
    bundle_dir = Path(bundle_dir)
    spec = verify_bundle(bundle_dir, pubkey=pubkey, limits=limits)
    model = bundle_dir / POLICY_FILE
    wanted = POLICY_FILE if backend == "onnx" else "policy_mlp.npz"
    if not (bundle_dir / wanted).is_file() and spec.method in ("planner", "blend", "rtc"):
        log.info("bundle %s (%s) has no %s: commands are the planner's chunk rows",
                 bundle_dir, spec.method, wanted)
        check_bundle_onnx(bundle_dir, spec)
        return spec, None
    if (bundle_dir / wanted).is_file() and wanted not in spec.files:
        raise BundleError(f"{bundle_dir / wanted}: not listed in manifest.files, so its hash "
                          "cannot be checked; re-export the bundle")
    if backend == "onnx" and not model.is_file():
        raise BundleError(f"{model}: missing (method {spec.method!r} needs a policy network)")
    net = _prebuilt_engine(spec, bundle_dir, warmup) \
        if backend == "onnx" and device in ("auto", "tensorrt") else None
    if net is None:
        try:
            net = make_backend(spec, bundle_dir, backend=backend, device=device,
                               warmup=warmup, trt=trt)
        except ModelLoadError as exc:
            raise OnnxModelError(f"{model}: not a model onnxruntime can load ({exc})") \
                from None
        except ModelIOError as exc:
            raise OnnxShapeError(f"{model}: {exc}; the manifest's tensors are "
                                 f"{spec.tensors.inputs} -> {spec.tensors.outputs}") from None
    # ONNX I/O against the manifest: the policy through the backend's own session (no
    # second session on the device), every other listed .onnx through a CPU metadata one
    session = getattr(net, "session", None)
    if session is not None and backend == "onnx":
        check_policy_io(model, session, spec)
    check_bundle_onnx(bundle_dir, spec, skip=(POLICY_FILE,) if session is not None and
                      backend == "onnx" else ())
    check_shapes(spec, net)
    log.info("loaded bundle %s: task=%s method=%s %.0f Hz backend=%s", bundle_dir, spec.task,
             spec.method, spec.control_hz, net.name)
    return spec, net


def _prebuilt_engine(spec: PolicySpec, bundle_dir: Path, warmup: int
                     ) -> InferenceBackend | None:
    """The bundle's ``policy.engine`` as a backend when it matches this machine, else None
    (with the reason logged)."""
    from edgerl.runtime.trt_engine import ENGINE_FILE, TensorRTEngineBackend, engine_status

    if not (bundle_dir / ENGINE_FILE).is_file():
        return None
    usable, reason = engine_status(spec, bundle_dir)
    if usable:
        try:
            net = TensorRTEngineBackend(spec, bundle_dir, warmup=warmup)
        except (RuntimeError, OSError) as exc:
            usable, reason = False, str(exc)
        else:
            log.info("%s: running %s with %s", bundle_dir, ENGINE_FILE, reason)
            return net
    log.info("%s not used (%s); running policy.onnx through onnxruntime", ENGINE_FILE,
             reason)
    return None


def check_shapes(spec: PolicySpec, net: InferenceBackend) -> None:
    """The network must take the edit observation (or the raw observation) and give A."""
    d_in, d_out = net.input.shape[-1], net.output.shape[-1]
    if d_in not in (spec.edit_obs.dim, spec.observation.dim):
        raise InferenceError(f"network input has {d_in} elements; the manifest implies "
                             f"{spec.edit_obs.dim} (edit observation) or "
                             f"{spec.observation.dim} (observation)")
    if d_out != spec.action.dim:
        raise InferenceError(f"network output has {d_out} elements; manifest action has "
                             f"{spec.action.dim}")
