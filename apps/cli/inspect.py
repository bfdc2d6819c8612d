"""``edgerl inspect BUNDLE``: print a bundle's manifest after every load-time check.

The checks are the runtime loader's (:func:`edgerl.runtime.bundle_check.verify_bundle`:
signature when ``--pubkey``/``EDGERL_BUNDLE_PUBKEY`` is set, strict manifest, semantic
bounds, paths, sha256 of every file, no unlisted loader file, passed parity, ONNX shapes).
A bundle failing one prints ``edgerl inspect: bundle refused (<ErrorName>): ...`` and exits 2.

Works on a ``[runtime]``-only install (no torch, no onnx): the TensorRT compatibility shown
is re-checked from ``policy.onnx`` when the ``onnx`` package is present, else read from
``parity.json``.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from edgerl.apps.cli import flags

HELP = "show a bundle's manifest, verify file hashes, parity and TensorRT compatibility"


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("bundle", type=Path, help="bundle directory (holds manifest.json)")
    p.add_argument("--pubkey", type=Path, default=None,
                   help="ed25519 public key (PEM): require a valid manifest.sig (default: "
                        "$EDGERL_BUNDLE_PUBKEY if set, else no signature check)")
    flags.add_output_flags(p, json="one JSON document")


def _summary(spec: Any) -> list[dict[str, Any]]:
    """(field, value) rows for the table."""
    lat = spec.latency
    rec = spec.recurrent
    rows = [
        ("task", spec.task), ("method", spec.method), ("control_hz", spec.control_hz),
        ("schema_version", spec.schema_version), ("edgerl_version", spec.edgerl_version),
        ("observation", f"{spec.observation.dim}: {', '.join(spec.observation.names)}"),
        ("obs normalized_in_graph", spec.observation.normalized_in_graph),
        ("action", ", ".join(f"{n} [{lo:g}, {hi:g}] {u}" for n, lo, hi, u in zip(
            spec.action.names, spec.action.low, spec.action.high, spec.action.units))),
        ("edit_obs", f"dim {spec.edit_obs.dim}, lookahead {spec.edit_obs.lookahead}, "
                     f"committed {spec.edit_obs.n_committed}, intent {spec.edit_obs.intent_dim}"),
        ("chunk", f"horizon {spec.chunk.horizon}, dt {spec.chunk.dt_s:g} s, "
                  f"period {spec.chunk.period_s:g} s"),
        ("latency (steps)", f"planner delay {lat.planner_delay_steps} +- "
                            f"{lat.delay_jitter_steps:g}, period {lat.planner_period_steps}, "
                            f"edit {lat.edit_delay_steps}, obs {lat.obs_delay_steps}, "
                            f"action {lat.action_delay_steps}"),
        ("timing", spec.timing.describe()),
        ("tensors", f"in {spec.tensors.inputs} -> out {spec.tensors.outputs}"),
        ("recurrent", rec.kind if rec.kind == "none" else
         f"{rec.kind}: {rec.state_inputs} -> {rec.state_outputs} {rec.state_shapes}"),
        ("residual_bound", spec.residual_bound),
    ]
    planner = _planner_row(spec)
    if planner is not None:
        rows.append(("planner", planner))
    if spec.gate is not None:
        rows += _gate_rows(spec.gate)
    return [{"field": k, "value": v} for k, v in rows]


def _planner_row(spec: Any) -> str | None:
    """``planner.onnx``'s inputs and outputs as the exporter recorded them (the chunk, and the
    planner intent the edit policy reads), or None without one."""
    export = spec.extra.get("export") if isinstance(spec.extra, dict) else None
    info = export.get("planner") if isinstance(export, dict) else None
    if not isinstance(info, dict):
        return None
    outs = [f"chunk {tuple(info.get('output_shape') or [])}"]
    if info.get("intent_dim"):
        outs.append(f"intent (1, {info['intent_dim']})")
    return (f"{info.get('file', 'planner.onnx')}: {info.get('inputs')} ({info.get('input_dim')}) "
            f"-> {', '.join(outs)}")


def _gate_rows(gate: Any) -> list[tuple[str, Any]]:
    """The manifest's ``gate`` section: file, decision interval, observation, budgets."""
    def budget(b: Any) -> str:
        if b.keep:
            return f"{b.name}: keep (no request)"
        lat = b.latency
        delay = (f"delay dist {lat.delay_distribution}" if lat.delay_distribution else
                 f"delay {lat.planner_delay_steps} +- {lat.delay_jitter_steps:g}")
        return (f"{b.name}: {delay} steps, {b.horizon} rows, hold {b.hold}, noise "
                f"{b.noise_std:g}, cost {b.cost:g}{', compensate' if b.compensate else ''}")

    return [("gate", f"{gate.file}: {gate.input} ({gate.dim}) -> {gate.output} "
                     f"({len(gate.budgets)}), argmax, every {gate.decision_steps} steps"),
            ("gate obs", f"fast {gate.fast_indices} + {', '.join(gate.extra)} (age / "
                         f"{gate.age_scale:g}), stale after H+{gate.stale_steps}"),
            *((f"gate budget {j}", budget(b)) for j, b in enumerate(gate.budgets))]


def _trt_compat(bundle: Path, parity: dict[str, Any] | None) -> dict[str, Any] | None:
    policy = bundle / "policy.onnx"
    try:
        import onnx  # noqa: F401  (only to know whether a live check is possible)
    except ImportError:
        return (parity or {}).get("tensorrt_compat")
    if not policy.is_file():
        return None
    from edgerl.export.trt_compat import check_tensorrt_compat

    return check_tensorrt_compat(policy).to_dict()


def run(args: argparse.Namespace) -> int:
    from edgerl.apps.cli.output import print_json, print_table
    from edgerl.runtime.bundle_check import check_parity, resolve_pubkey, verify_bundle

    spec = verify_bundle(args.bundle, pubkey=args.pubkey, check_onnx=True)
    parity = check_parity(args.bundle, spec)
    signed = resolve_pubkey(args.pubkey) is not None
    compat = _trt_compat(args.bundle, parity)
    files = [{"file": name, "bytes": (args.bundle / name).stat().st_size,
              "sha256": digest[:16] + "...", "verified": True}
             for name, digest in spec.files.items()]
    checks = [{"check": name, "candidate": p.get("candidate"),
               "observations": p.get("n_observations"), "max_abs_err": o.get("max_abs_err"),
               "tolerance": o.get("tolerance"), "output": o.get("name"), "ok": o.get("ok")}
              for name, p in ((parity or {}).get("parity") or {}).items()
              for o in p.get("outputs", [])]
    if args.json:
        print_json({"bundle": str(args.bundle), "manifest": spec.to_dict(), "files": files,
                    "parity": checks, "tensorrt_compat": compat, "signature_verified": signed})
        return 0
    print_table(_summary(spec), title=f"edgerl bundle {args.bundle}")
    print(f"signature: {'verified' if signed else 'not checked (no public key configured)'}")
    print_table(files, title="files (sha256 verified)")
    print_table(checks, title="parity")
    if compat is not None:
        status = "ok" if compat.get("ok") else "; ".join(compat.get("errors", []))
        print(f"TensorRT compatibility (opset {compat.get('opset')}, "
              f"ops {', '.join(compat.get('ops', []))}): {status}")
    return 0
