"""ONNX files of a bundle against the manifest, through onnxruntime's session metadata.

:func:`open_checked` turns any onnxruntime load failure (garbage bytes, a truncated or invalid
graph) into :class:`~edgerl.contract.bundle_errors.OnnxModelError`; :func:`check_io` compares a
session's input/output names and static sizes with what the manifest implies and raises
:class:`~edgerl.contract.bundle_errors.OnnxShapeError` naming the file and tensor. Symbolic
dimensions
(``batch``) match anything; only integer dimensions are compared.

What each file must look like (``O`` observation size, ``E`` edit observation size, ``A``
action size, ``H`` chunk horizon):

================  ======================================================================
file              inputs -> outputs
================  ======================================================================
policy*.onnx      ``tensors.inputs[0]`` (1, O or E) float, recurrent states with
                  ``recurrent.state_shapes`` -> ``tensors.outputs[0]`` (1, A), states
planner.onnx      (edit/planner bundles) one input (1, P) -> one output of H*A elements
                  (P: ``extra.export.planner.input_dim``, default O), then ``intent``
                  (1, I) when ``edit_obs.intent_dim`` I > 0 (and only then: a mismatch is
                  an :class:`~edgerl.contract.bundle_errors.IntentMismatchError`)
planner.onnx      (language_planner) ``obs`` (N, O), ``embedding`` (N, D) -> ``chunk``
                  (N, H, A)
encoder.onnx      ``input_ids``, ``attention_mask`` (N, T) int64 -> (N, D)
================  ======================================================================
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from edgerl.contract.bundle_errors import IntentMismatchError, OnnxModelError, OnnxShapeError
from edgerl.contract.spec import PolicySpec

__all__ = ["check_bundle_onnx", "check_gate_io", "check_io", "check_policy_io", "open_checked"]


def open_checked(path: str | Path) -> Any:
    """A CPU onnxruntime session for ``path`` (no graph optimisation: only the metadata is
    needed); any load failure is an :class:`OnnxModelError`."""
    import onnxruntime as ort

    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_DISABLE_ALL
    opts.intra_op_num_threads = 1
    opts.log_severity_level = 4
    try:
        return ort.InferenceSession(str(path), opts, providers=["CPUExecutionProvider"])
    except Exception as exc:  # onnxruntime raises InvalidProtobuf/Fail/InvalidGraph/...
        first = str(exc).strip().splitlines()[0][:200] if str(exc).strip() else ""
        raise OnnxModelError(f"{path}: not a model onnxruntime can load "
                             f"({type(exc).__name__}: {first})") from None


def _dims(shape: Any) -> list:
    return list(shape) if isinstance(shape, (list, tuple)) else []


def _static(dims: list) -> list[int]:
    return [d for d in dims if isinstance(d, int) and d > 0]


def _numel(dims: list) -> int | None:
    """Elements per batch row (None if any non-batch dim is symbolic)."""
    rest = dims[1:] if len(dims) > 1 else dims
    if not all(isinstance(d, int) and d > 0 for d in rest):
        return None
    return math.prod(rest)


def check_io(path: str | Path, session: Any, inputs: dict[str, list[int] | None],
             outputs: dict[str, list[int] | None], *, ordered: bool = True) -> None:
    """Compare ``session``'s tensors with ``inputs``/``outputs`` (name -> expected trailing
    dims, None = any shape). With ``ordered`` the names must come first, in this order."""
    for kind, want, got in (("input", inputs, session.get_inputs()),
                            ("output", outputs, session.get_outputs())):
        names = [t.name for t in got]
        wanted = list(want)
        if ordered and names[:len(wanted)] != wanted or not set(wanted) <= set(names):
            raise OnnxShapeError(f"{path}: {kind}s are {names}; the manifest expects "
                                 f"{wanted}")
        by_name = {t.name: t for t in got}
        for name, tail in want.items():
            if tail is None:
                continue
            dims = _dims(by_name[name].shape)
            have = dims[-len(tail):] if len(dims) >= len(tail) else dims
            if len(have) != len(tail) or any(isinstance(h, int) and h != t
                                             for h, t in zip(have, tail)):
                raise OnnxShapeError(f"{path}: {kind} {name!r} has shape {dims}; the manifest "
                                     f"implies (..., {', '.join(map(str, tail))})")


def check_policy_io(path: str | Path, sess: Any, spec: PolicySpec) -> None:
    """Check a policy session (``policy.onnx``, ``policy_fp16.onnx``) against ``spec``; the
    runtime passes its own inference session, so no second session is opened."""
    rec = spec.recurrent
    ins = spec.tensors.inputs or ["obs"]
    outs = spec.tensors.outputs or ["action"]
    obs = _dims(sess.get_inputs()[0].shape) if sess.get_inputs() else []
    width = obs[-1] if obs else None
    if isinstance(width, int) and width not in (spec.edit_obs.dim, spec.observation.dim):
        raise OnnxShapeError(f"{path}: input {ins[0]!r} has {width} elements per row; the "
                             f"manifest implies {spec.edit_obs.dim} (edit observation) or "
                             f"{spec.observation.dim} (observation)")
    want_in: dict[str, list[int] | None] = {ins[0]: None}
    want_out: dict[str, list[int] | None] = {outs[0]: [spec.action.dim]}
    for i, o, s in zip(rec.state_inputs, rec.state_outputs, rec.state_shapes):
        want_in[i] = list(s)
        want_out[o] = list(s)
    check_io(path, sess, want_in, want_out, ordered=False)


def _check_intent(path: Path, sess: Any, spec: PolicySpec) -> None:
    """``planner.onnx``'s ``intent`` output must have the manifest's ``edit_obs.intent_dim``
    elements per row (and be absent when that is 0)."""
    from edgerl.runtime.planners.local.onnx import INTENT_OUTPUT

    want = spec.edit_obs.intent_dim
    out = next((o for o in sess.get_outputs()[1:] if o.name == INTENT_OUTPUT), None)
    got = 0 if out is None else _numel(_dims(out.shape))
    if got is not None and got != want:
        has = "no intent output" if out is None else \
            f"an {INTENT_OUTPUT!r} output of {got} elements per row"
        raise IntentMismatchError(f"{path}: has {has}; the manifest's edit_obs.intent_dim is "
                                  f"{want} (the edit policy reads what the planner sends); "
                                  "re-export the bundle with its planner")


def _check_planner(path: Path, spec: PolicySpec) -> int | None:
    """Check ``planner.onnx``; returns the language head's embedding width (else None)."""
    sess = open_checked(path)
    h, a = spec.chunk.horizon, spec.action.dim
    _check_intent(path, sess, spec)
    if spec.method == "language_planner":
        check_io(path, sess, {"obs": [spec.observation.dim], "embedding": None},
                 {"chunk": [h, a]})
        emb = _dims(next(t for t in sess.get_inputs() if t.name == "embedding").shape)
        return emb[-1] if emb and isinstance(emb[-1], int) else None
    info = spec.extra.get("export", {}) if isinstance(spec.extra, dict) else {}
    pinfo = info.get("planner") if isinstance(info, dict) else None
    p_dim = pinfo.get("input_dim") if isinstance(pinfo, dict) else None
    p_dim = p_dim if isinstance(p_dim, int) else spec.observation.dim
    ins, outs = sess.get_inputs(), sess.get_outputs()
    if not ins or not outs:
        raise OnnxShapeError(f"{path}: needs one input and one output")
    check_io(path, sess, {ins[0].name: [p_dim]}, {})
    n = _numel(_dims(outs[0].shape))
    if n is not None and n != h * a:
        raise OnnxShapeError(f"{path}: output {outs[0].name!r} has {n} elements per row; the "
                             f"manifest's chunk needs horizon*action = {h}*{a} = {h * a}")
    return None


def check_gate_io(path: str | Path, sess: Any, spec: PolicySpec) -> None:
    """Check a gate session against the manifest's ``gate``: input ``(..., F + 4)``, output
    one score per budget ``(..., B)``."""
    gate = spec.gate
    if gate is None:
        raise OnnxShapeError(f"{path}: the manifest has no gate section")
    check_io(path, sess, {gate.input: [gate.dim]}, {gate.output: [len(gate.budgets)]})


def check_bundle_onnx(bundle_dir: str | Path, spec: PolicySpec,
                      skip: tuple[str, ...] = ()) -> None:
    """Open every listed ``.onnx`` file (except ``skip``: already checked through the
    runtime's own session) and check it against ``spec`` (see the table)."""
    bundle_dir = Path(bundle_dir)
    emb_dim = None
    for name in spec.files:
        path = bundle_dir / name
        if not name.endswith(".onnx") or name in skip:
            continue
        if name.startswith("policy"):
            check_policy_io(path, open_checked(path), spec)
        elif name == "planner.onnx":
            emb_dim = _check_planner(path, spec)
        elif spec.gate is not None and name == spec.gate.file:
            check_gate_io(path, open_checked(path), spec)
        elif name != "encoder.onnx":
            open_checked(path)
    if "encoder.onnx" in spec.files:
        path = bundle_dir / "encoder.onnx"
        sess = open_checked(path)
        outs = sess.get_outputs()
        if not outs:
            raise OnnxShapeError(f"{path}: has no output")
        check_io(path, sess, {"input_ids": None, "attention_mask": None},
                 {outs[0].name: [emb_dim] if emb_dim else None}, ordered=False)
