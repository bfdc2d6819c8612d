"""Write small but real bundles for runtime tests and benchmarks (uses ``onnx``, which the
tests may import; runtime code may not).

``write_mlp_bundle(dir)`` writes ``policy.onnx`` (Gemm/Elu MLP, torch layout weights),
``policy_mlp.npz`` (the same weights for the numpy backend), optionally ``planner.onnx``,
``parity.json`` (each ONNX file run through onnxruntime against a numpy forward pass of the
same weights, as the exporter records its checks) and ``manifest.json`` with sha256 hashes of
every file.

Run as a module from the repo root to make a bundle for ``edgerl bench loop``:
``.venv/bin/python -m tests.helpers.bundles /tmp/edit_bundle``.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from edgerl.contract.spec import RecurrentSpec, TensorSpec, sha256_file
from edgerl.runtime.inference import save_mlp_npz
from tests.helpers.specs import make_spec


def mlp_onnx(weights: list[np.ndarray], biases: list[np.ndarray], in_name: str = "obs",
             out_name: str = "action", activation: str = "Elu") -> bytes:
    """ONNX bytes of ``y = W_n(...act(W_0 x + b_0)...) + b_n`` (weights ``(out, in)``)."""
    nodes, inits, prev = [], [], in_name
    last = len(weights) - 1
    for i, (w, b) in enumerate(zip(weights, biases)):
        inits += [numpy_helper.from_array(w.astype(np.float32), f"w{i}"),
                  numpy_helper.from_array(b.astype(np.float32), f"b{i}")]
        out = out_name if i == last else f"h{i}"
        nodes.append(helper.make_node("Gemm", [prev, f"w{i}", f"b{i}"], [out], transB=1))
        prev = out
        if i < last:
            nodes.append(helper.make_node(activation, [prev], [f"a{i}"]))
            prev = f"a{i}"
    graph = helper.make_graph(
        nodes, "mlp", [helper.make_tensor_value_info(in_name, TensorProto.FLOAT,
                                                     [1, weights[0].shape[1]])],
        [helper.make_tensor_value_info(out_name, TensorProto.FLOAT, [1, weights[-1].shape[0]])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    onnx.checker.check_model(model)
    return model.SerializeToString()


def intent_planner_onnx(weights: list[np.ndarray], biases: list[np.ndarray],
                        w_intent: np.ndarray, b_intent: np.ndarray) -> bytes:
    """:func:`mlp_onnx` (``obs -> chunk``) with a second output ``intent = tanh(W obs + b)``
    (``W`` ``(I, O)``), as the exporter writes an intent planner's ``planner.onnx``."""
    model = onnx.load_from_string(mlp_onnx(weights, biases, out_name="chunk"))
    graph = model.graph
    graph.initializer.extend([numpy_helper.from_array(w_intent.astype(np.float32), "wi"),
                              numpy_helper.from_array(b_intent.astype(np.float32), "bi")])
    graph.node.extend([helper.make_node("Gemm", ["obs", "wi", "bi"], ["zi"], transB=1),
                       helper.make_node("Tanh", ["zi"], ["intent"])])
    graph.output.append(helper.make_tensor_value_info("intent", TensorProto.FLOAT,
                                                      [1, w_intent.shape[0]]))
    onnx.checker.check_model(model)
    return model.SerializeToString()


def gru_onnx(in_dim: int, hidden: int, out_dim: int, seed: int = 0) -> bytes:
    """A one-step recurrent cell ``h' = tanh(W x + U h)``, ``y = V h'`` with state I/O
    ``h_in`` / ``h_out`` of shape ``(1, hidden)``."""
    rng = np.random.default_rng(seed)
    w = rng.standard_normal((hidden, in_dim)).astype(np.float32) * 0.3
    u = rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3
    v = rng.standard_normal((out_dim, hidden)).astype(np.float32) * 0.3
    zb = numpy_helper.from_array(np.zeros(hidden, np.float32), "zb")
    zo = numpy_helper.from_array(np.zeros(out_dim, np.float32), "zo")
    nodes = [helper.make_node("Gemm", ["obs", "w", "zb"], ["wx"], transB=1),
             helper.make_node("Gemm", ["h_in", "u", "zb"], ["uh"], transB=1),
             helper.make_node("Add", ["wx", "uh"], ["s"]),
             helper.make_node("Tanh", ["s"], ["h_out"]),
             helper.make_node("Gemm", ["h_out", "v", "zo"], ["action"], transB=1)]
    inits = [numpy_helper.from_array(w, "w"), numpy_helper.from_array(u, "u"),
             numpy_helper.from_array(v, "v"), zb, zo]
    f = TensorProto.FLOAT
    graph = helper.make_graph(
        nodes, "rnn",
        [helper.make_tensor_value_info("obs", f, [1, in_dim]),
         helper.make_tensor_value_info("h_in", f, [1, hidden])],
        [helper.make_tensor_value_info("action", f, [1, out_dim]),
         helper.make_tensor_value_info("h_out", f, [1, hidden])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 9
    return model.SerializeToString()


def gru_weights(in_dim: int, hidden: int, out_dim: int, seed: int = 0):
    """``(w, u, v)`` of :func:`gru_onnx` with the same seed."""
    rng = np.random.default_rng(seed)
    return tuple(rng.standard_normal(s).astype(np.float32) * 0.3
                 for s in ((hidden, in_dim), (hidden, hidden), (out_dim, hidden)))


def mlp_forward(ws: list[np.ndarray], bs: list[np.ndarray], x: np.ndarray) -> np.ndarray:
    """numpy reference of :func:`mlp_onnx` (ELU between layers)."""
    for i, (w, b) in enumerate(zip(ws, bs)):
        x = x @ w.T + b
        if i < len(ws) - 1:
            x = np.where(x > 0, x, np.expm1(np.minimum(x, 0)))
    return x


def onnx_parity(onnx_bytes: bytes, reference, x: np.ndarray, state: int = 0,
                tolerance: float = 1e-5) -> dict:
    """One ``parity.json`` check: onnxruntime vs ``reference(x, h) -> (y, h)`` over the rows
    of ``x`` (state fed back when ``state`` > 0)."""
    import onnxruntime as ort

    sess = ort.InferenceSession(onnx_bytes, providers=["CPUExecutionProvider"])
    names = [i.name for i in sess.get_inputs()]
    h = np.zeros((1, state), np.float32)
    h_ref = h.copy()
    err = 0.0
    for row in x:
        feed = {names[0]: row[None].astype(np.float32)}
        if state:
            feed[names[1]] = h
        outs = sess.run(None, feed)
        y_ref, h_ref = reference(row[None], h_ref)
        err = max(err, float(np.max(np.abs(outs[0] - y_ref))))
        if state:
            h = outs[1]
    return {"reference": "numpy", "candidate": "onnxruntime", "n_observations": len(x),
            "max_abs_err": err, "ok": err <= tolerance,
            "outputs": [{"name": "action", "max_abs_err": err, "tolerance": tolerance,
                         "ok": err <= tolerance}]}


def write_parity(path: Path, checks: dict[str, dict]) -> None:
    """``parity.json`` as the exporter writes it (``ok`` only if every check passed)."""
    doc = {"ok": all(c["ok"] for c in checks.values()), "parity": checks,
           "tensorrt_compat": None, "notes": ["written by tests/helpers/bundles.py"]}
    (path / "parity.json").write_text(json.dumps(doc, indent=2) + "\n")


def random_mlp(sizes: list[int], seed: int = 0, scale: float = 0.3):
    rng = np.random.default_rng(seed)
    ws = [(rng.standard_normal((o, i)) * scale).astype(np.float32)
          for i, o in zip(sizes[:-1], sizes[1:])]
    bs = [(rng.standard_normal(o) * 0.1).astype(np.float32) for o in sizes[1:]]
    return ws, bs


def edit_manifest(bundle: str | Path, change: Callable[[dict[str, Any]], object]) -> Path:
    """Rewrite ``bundle``'s ``manifest.json`` with ``change`` applied to its parsed document,
    as a hand-edited or tampered bundle would be (hashes are not updated); returns the
    bundle's path."""
    path = Path(bundle) / "manifest.json"
    doc = json.loads(path.read_text())
    change(doc)
    path.write_text(json.dumps(doc))
    return Path(bundle)


def write_mlp_bundle(path: str | Path, *, hidden: tuple[int, ...] = (64, 64), seed: int = 0,
                     planner: bool = False, recurrent: bool = False, npz: bool = True,
                     raw_obs_input: bool = False, planner_intent_dim: int | None = None,
                     **spec_kw) -> Path:
    """Write a complete bundle into ``path`` (created); returns the path.

    With ``planner``, ``planner.onnx`` exports an ``intent`` of ``planner_intent_dim``
    values beside its chunk (default: the manifest's ``intent_dim``; another size makes a
    bundle the bundle check must refuse)."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    spec = make_spec(**spec_kw)
    d_in = spec.observation.dim if raw_obs_input else spec.edit_obs.dim
    a = spec.action.dim
    x = np.random.default_rng(seed + 7).standard_normal((32, d_in)).astype(np.float32)
    checks = {}
    if recurrent:
        (path / "policy.onnx").write_bytes(gru_onnx(d_in, hidden[0], a, seed))
        w, u, v = gru_weights(d_in, hidden[0], a, seed)

        def cell(xr, h):
            h2 = np.tanh(xr @ w.T + h @ u.T)
            return h2 @ v.T, h2

        checks["policy_onnx"] = onnx_parity((path / "policy.onnx").read_bytes(), cell, x,
                                            state=hidden[0])
        spec.recurrent = RecurrentSpec(kind="gru", state_inputs=["h_in"], state_outputs=["h_out"],
                                       state_shapes=[[1, hidden[0]]])
        spec.tensors = TensorSpec(inputs=["obs", "h_in"], outputs=["action", "h_out"])
    else:
        ws, bs = random_mlp([d_in, *hidden, a], seed)
        (path / "policy.onnx").write_bytes(mlp_onnx(ws, bs))
        checks["policy_onnx"] = onnx_parity((path / "policy.onnx").read_bytes(),
                                            lambda xr, h: (mlp_forward(ws, bs, xr), h), x)
        if npz:
            save_mlp_npz(path / "policy_mlp.npz", ws, bs, "elu")
    if planner:
        pw, pb = random_mlp([spec.observation.dim, 256, 256, spec.chunk.horizon * a], seed + 1)
        n_intent = spec.edit_obs.intent_dim if planner_intent_dim is None else planner_intent_dim
        if n_intent:
            (wi,), (bi,) = random_mlp([spec.observation.dim, n_intent], seed + 2)
            (path / "planner.onnx").write_bytes(intent_planner_onnx(pw, pb, wi, bi))
        else:
            (path / "planner.onnx").write_bytes(mlp_onnx(pw, pb, out_name="chunk"))
        xp = x[:, :spec.observation.dim] if d_in >= spec.observation.dim else \
            np.random.default_rng(seed).standard_normal((32, spec.observation.dim))
        checks["planner_onnx"] = onnx_parity((path / "planner.onnx").read_bytes(),
                                             lambda xr, h: (mlp_forward(pw, pb, xr), h), xp,
                                             tolerance=1e-4)  # 256-wide: summation order
    write_parity(path, checks)
    spec.files = {f.name: sha256_file(f) for f in sorted(path.iterdir())
                  if f.name != "manifest.json"}
    spec.save(path)
    return path


if __name__ == "__main__":
    out = write_mlp_bundle(sys.argv[1] if len(sys.argv) > 1 else "edit_bundle", planner=True,
                           control_hz=1000.0, horizon=50, chunk_dt=0.01, period_s=0.1,
                           obs_dim=12, action_dim=4, hidden=(128, 128))
    print(out)


def write_state_trigger_bundle(path: str | Path) -> Path:
    """A 50 Hz cartpole-sized edit bundle (obs 4, action 1, 8 hidden, no planner) whose
    manifest asks for the ``state`` trigger (the edit loop ticks on each new observation)."""
    import dataclasses

    from tests.helpers.specs import make_spec

    kw = dict(obs_dim=4, action_dim=1, control_hz=50.0, horizon=10, period_s=0.1,
              residual_bound=0.05)
    base = make_spec(**kw)
    return write_mlp_bundle(path, hidden=(8,), latency=base.latency,
                            timing=dataclasses.replace(base.timing, trigger="state"), **kw)
