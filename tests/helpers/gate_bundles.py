"""A gate-only driving bundle with a hand-written linear gate (no training run needed).

The gate is one ``Gemm`` whose scores follow a readable rule over the gate observation
``[fast obs | age | rows_left | has_chunk | in_flight]`` (age in units of ``age_scale``):

* ``keep`` = 2 has_chunk + 2 in_flight
* ``fast`` = 4 age
* ``slow`` = 1.5 - 2 has_chunk

So: no plan and nothing in flight -> slow; while a plan is in flight -> keep; a plan older
than 10 steps (age > 0.5) -> fast; a stale plan -> slow again. Every budget gets chosen in a
few decisions. ``parity.json`` holds a real onnxruntime-vs-numpy check of the same weights.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np

from edgerl.contract.gate_obs import GATE_FILE, GateSpec
from edgerl.contract.spec import PolicySpec, sha256_file
from tests.helpers.bundles import mlp_onnx, onnx_parity, write_parity

__all__ = ["driving_gate_spec", "rule_gate_weights", "write_gate_bundle"]


def driving_gate_spec() -> tuple[PolicySpec, GateSpec]:
    """The gated driving scenario's gate-only manifest (no files yet) and its gate."""
    from edgerl.export.gate import gate_only_spec
    from edgerl.policies.gate.policy import GateRunCfg
    from edgerl.sim.gate.env import gate_spec
    from edgerl.sim.registry import make_task

    cfg = GateRunCfg()
    task = make_task(cfg.task, num_envs=1, **cfg.task_kwargs)
    fast = list(task.spec.fast_obs_indices)
    task.close()
    gate = gate_spec(cfg.gate_cfg(0), fast)
    return dataclasses.replace(gate_only_spec(cfg, gate), gate=gate), gate


def rule_gate_weights(gate: GateSpec) -> tuple[np.ndarray, np.ndarray]:
    """``(W (B, F + 4), b (B,))`` of the rule in the module doc (budgets keep, fast, slow)."""
    f = len(gate.fast_indices)
    age, has, flight = f, f + 2, f + 3
    w = np.zeros((len(gate.budgets), gate.dim), np.float32)
    b = np.zeros(len(gate.budgets), np.float32)
    j = {name: i for i, name in enumerate(gate.names)}
    w[j["keep"], has] = w[j["keep"], flight] = 2.0
    w[j["fast"], age] = 4.0
    w[j["slow"], has], b[j["slow"]] = -2.0, 1.5
    return w, b


def write_gate_bundle(path: str | Path, outputs: str = "scores") -> Path:
    """Write the rule-gate bundle into ``path`` (gate.onnx, parity.json, manifest.json);
    ``outputs="logits"`` declares its scores a categorical gate's logits."""
    path = Path(path)
    path.mkdir(parents=True, exist_ok=True)
    spec, gate = driving_gate_spec()
    gate = dataclasses.replace(gate, outputs=outputs)
    spec = dataclasses.replace(spec, gate=gate)
    w, b = rule_gate_weights(gate)
    data = mlp_onnx([w], [b], in_name=gate.input, out_name=gate.output)
    (path / GATE_FILE).write_bytes(data)
    x = np.random.default_rng(0).standard_normal((64, gate.dim)).astype(np.float32)
    write_parity(path, {"gate_onnx": onnx_parity(data, lambda r, h: (r @ w.T + b, h), x)})
    spec.files = {n: sha256_file(path / n) for n in (GATE_FILE, "parity.json")}
    spec.save(path)
    return path
