"""``edgerl trt-engine BUNDLE``: build a bundle's TensorRT engines on the device that runs it.

For a Jetson (or any robot computer) that has only the bundle: the first start of a node on
``device`` ``tensorrt``/``auto`` would otherwise build onnxruntime's TensorRT engine while the
robot waits. In order, nothing written before the last step:

1. ``--workspace-mb`` in the nodes' ``trt_workspace_mb`` range (argparse, exit 2);
2. the one bundle gate, :func:`edgerl.runtime.bundle_check.verify_bundle` (signature with
   ``--pubkey``/``EDGERL_BUNDLE_PUBKEY``, manifest, hashes, closed file set, parity, ONNX
   shapes): a refused bundle exits 2 naming the check;
3. ``--out`` (not inside the bundle, not a file) and the networks to build
   (:func:`edgerl.export.trt_bundle.plan_engines`): exit 1;
4. what this machine has (:func:`edgerl.export.trt_bundle.build_status`: ``tensorrt`` >= 10,
   a CUDA device, onnxruntime's TensorRT EP): anything missing exits 1 naming all of it;
5. the build (:func:`edgerl.export.trt_bundle.build_bundle_engines`): each network through
   the TensorRT builder, then onnxruntime's TensorRT EP engine cache in ``--out`` (the
   runtime's ``trt_cache_dir``), and the sidecar ``trt_engine.json`` that records it. The
   bundle itself is never written to.

Works on a ``[runtime]``-only install (no torch, no onnx package).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from edgerl.apps.cli import flags

HELP = ("build a bundle's TensorRT engines on this device: onnxruntime's TensorRT engine cache "
        "that device tensorrt reuses (needs tensorrt and a CUDA GPU)")


def _workspace_mb(text: str) -> int:
    """``--workspace-mb``: an int in the nodes' ``trt_workspace_mb`` range."""
    from edgerl.export.trt_bundle import WORKSPACE_MB_RANGE

    lo, hi = WORKSPACE_MB_RANGE
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {text!r}") from None
    if not lo <= value <= hi:
        raise argparse.ArgumentTypeError(f"must be in {lo}..{hi} (MiB), got {value}")
    return value


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="bundle directory (holds manifest.json)")
    p.add_argument("--pubkey", type=Path, default=None,
                   help="ed25519 public key (PEM): require a valid manifest.sig (default: "
                        "$EDGERL_BUNDLE_PUBKEY if set, else no signature check)")
    trt = p.add_argument_group("TensorRT")
    trt.add_argument("--fp16", action="store_true",
                     help="let TensorRT use fp16 kernels (the nodes then need trt_fp16 true to "
                          "find the cached engine)")
    trt.add_argument("--workspace-mb", type=_workspace_mb, default=1024, metavar="N",
                     help="builder workspace limit in MiB (default 1024, as trt_workspace_mb)")
    out = flags.add_output_flags(p, json="the sidecar document as JSON")
    out.add_argument("--out", type=Path, default=None, metavar="DIR",
                     help="engine cache directory (default: $EDGERL_TRT_CACHE, else "
                          "~/.cache/edgerl/tensorrt: where the runtime looks when "
                          "trt_cache_dir is '')")


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.errors import CliError
    from edgerl.apps.cli.output import print_result
    from edgerl.export.tensorrt import TensorRTUnavailable
    from edgerl.export.trt_bundle import build_bundle_engines, build_status, plan_engines
    from edgerl.runtime.bundle_check import verify_bundle

    spec = verify_bundle(args.bundle, pubkey=args.pubkey, check_onnx=True)  # the one gate
    plan = plan_engines(args.bundle, spec, args.out, fp16=args.fp16,
                        workspace_mb=args.workspace_mb)
    ok, status = build_status()
    if not ok:
        raise CliError(f"cannot build TensorRT engines on this machine, nothing was written: "
                       f"{status}")
    try:
        doc = build_bundle_engines(plan, spec)
    except (TensorRTUnavailable, RuntimeError) as exc:
        raise CliError(str(exc)) from exc
    rows = [{"network": m["file"], "engine": m["engine"], "build_s": m["build_s"],
             "MiB": round(m["engine_bytes"] / 2**20, 2), "onnxruntime": m["ort_provider"],
             "cache files written": len(m["ort_cache_files"]),
             "max |TRT-CPU|": m["max_abs_diff_vs_cpu"], "note": m["note"]}
            for m in doc["models"]]
    print_result(doc, as_json=args.json, rows=rows,
                 title=f"edgerl trt-engine {args.bundle} ({plan.precision}, {status})")
    if not args.json:
        params = doc["runtime"]["ros_parameters"]
        print(f"wrote {plan.sidecar_path}")
        print("reused by the nodes with " + ", ".join(f"{k}: {v}" for k, v in params.items())
              + f" (or EDGERL_TRT_CACHE={plan.cache_dir} for load_bundle / edgerl bench loop)")
    return 0
