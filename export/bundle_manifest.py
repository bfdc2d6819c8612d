"""The bundle's manifest pieces: graph signature from the spec, file hashes, the final
manifest (checked against the runtime's bounds before it is written, last)."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

from torch import nn

from edgerl.contract._version import __version__
from edgerl.contract.report import finite
from edgerl.contract.spec import MANIFEST_NAME, PolicySpec, RecurrentSpec, TensorSpec, sha256_file
from edgerl.export.bundle_parity import BundleReport
from edgerl.export.onnx_export import ActorSignature, ExportError, infer_signature

__all__ = ["BUNDLE_FILES", "PARITY_NAME", "signature_for", "write_manifest", "write_parity"]

PARITY_NAME = "parity.json"
#: Files an export may write besides the manifest (hashed into it when present).
BUNDLE_FILES = ("policy.onnx", "policy_mlp.npz", "policy_fp16.onnx", "planner.onnx",
                "gate.onnx", "policy.engine", "policy.h", PARITY_NAME)


def signature_for(actor: nn.Module, spec: PolicySpec, input_dim: int) -> ActorSignature:
    """The actor's graph signature, with the tensor names of ``spec``."""
    rec = spec.recurrent
    sig = infer_signature(actor, input_dim, rec.state_shapes or None, expected_kind=rec.kind)
    if sig.action_dim != spec.action.dim:
        raise ExportError(f"the actor outputs {sig.action_dim} actions but the manifest's "
                          f"action.names has {spec.action.dim}")
    sig.obs_name = spec.tensors.inputs[0] if spec.tensors.inputs else "obs"
    sig.action_name = spec.tensors.outputs[0] if spec.tensors.outputs else "action"
    if rec.kind != "none":
        sig.state_inputs, sig.state_outputs = list(rec.state_inputs), list(rec.state_outputs)
    names = sig.input_names + sig.output_names
    if len(set(names)) != len(names):
        raise ExportError(f"graph tensor names must be unique, got {names}")
    return sig



def _file_hashes(out_dir: Path, names: list[str]) -> dict[str, str]:
    return {n: sha256_file(out_dir / n) for n in names if (out_dir / n).is_file()}



def write_parity(out_dir: Path, report: BundleReport) -> None:
    """``parity.json``: the report without the file list."""
    parity_doc = {k: v for k, v in report.to_dict().items() if k != "files"}
    (out_dir / PARITY_NAME).write_text(json.dumps(finite(parity_doc), indent=2) + "\n")


def write_manifest(out_dir: Path, spec: PolicySpec, sig: ActorSignature, report: BundleReport,
                   extra_export: dict[str, Any]) -> PolicySpec:
    """Write ``manifest.json`` (last): ``spec`` with the graph's tensors and recurrent state,
    the sha256 of every file written, the export settings and parity errors. Raises
    :class:`edgerl.contract.bundle_errors.ManifestValueError` when the runtime would refuse it."""
    final = dataclasses.replace(
        spec,
        tensors=TensorSpec(inputs=sig.input_names, outputs=sig.output_names),
        recurrent=RecurrentSpec(kind=sig.kind, state_inputs=list(sig.state_inputs),
                                state_outputs=list(sig.state_outputs),
                                state_shapes=[list(s) for s in sig.state_shapes]),
        files=_file_hashes(out_dir, list(BUNDLE_FILES)),
        edgerl_version=__version__,
        extra={**spec.extra, "export": extra_export,
               "parity_max_abs_err": {k: float(v.max_abs_err) for k, v in report.parity.items()},
               "tensorrt_compatible": report.trt_compat.ok},
    )
    from edgerl.runtime.manifest_rules import check_manifest_values

    check_manifest_values(final)  # refuse to write what the runtime would refuse
    final.save(out_dir / MANIFEST_NAME)
    return final
