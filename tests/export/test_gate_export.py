"""``edgerl gate export``: a trained gate -> gate.onnx + the manifest's gate section + parity,
into a new gate-only bundle or an existing bundle of the same task; the runtime reads it."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch
from tensordict import TensorDict

from edgerl.apps.cli import main
from edgerl.contract.gate_obs import GATE_EXTRA_OBS
from edgerl.contract.serde import SchemaError
from edgerl.contract.spec import PolicySpec
from edgerl.export.gate import export_gate, gate_parity_observations
from edgerl.export.onnx_export import ExportError
from edgerl.policies.gate.policy import load_gate_actor, train_gate
from edgerl.runtime.bundle_check import verify_bundle
from edgerl.runtime.gate.budget_gate import BudgetGate
from tests.helpers.gate_bundles import driving_gate_spec
from tests.helpers.gate_env import tiny_cfg
from tests.helpers.task_bundles import write_task_bundle

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def gate_run(tmp_path_factory):
    out = tmp_path_factory.mktemp("gate_run") / "run"
    train_gate(tiny_cfg(), out)
    return out


def test_export_writes_a_gate_bundle_the_runtime_runs_like_torch(gate_run, tmp_path):
    res = export_gate(gate_run, tmp_path / "b", create=True, n_parity=32)
    assert res.scores.max_abs_err <= 1e-5 and res.argmax.max_abs_err == 0 and res.ok
    spec = verify_bundle(tmp_path / "b", check_onnx=True)  # hashes, parity, gate I/O
    assert spec.method == "planner" and set(spec.files) == {"gate.onnx", "parity.json"}
    assert spec.gate.names == ["keep", "fast", "slow"] and spec.gate.decision_steps == 2
    assert spec.gate.extra == list(GATE_EXTRA_OBS) and spec.chunk.horizon == 48
    assert tiny_cfg().head == "categorical" and spec.gate.outputs == "logits"  # samplable
    assert spec.extra["task_kwargs"] == tiny_cfg().task_kwargs
    parity = json.loads((tmp_path / "b" / "parity.json").read_text())
    assert parity["ok"] and set(parity["parity"]) == {"gate_onnx", "gate_argmax"}
    # independently of the exporter's check: the torch actor vs the runtime's BudgetGate
    cfg, actor = load_gate_actor(gate_run)
    obs = gate_parity_observations(cfg, 24, seed=5)
    with torch.no_grad():
        ref = actor(TensorDict({"policy": torch.from_numpy(obs)}, batch_size=[len(obs)]))
    gate = BudgetGate(tmp_path / "b", spec)
    got = np.stack([gate.scores(x).copy() for x in obs])
    np.testing.assert_allclose(got, ref.numpy(), atol=1e-5, rtol=0)
    assert (got.argmax(-1) == ref.numpy().argmax(-1)).all()


def test_export_into_an_existing_bundle_and_refusals(gate_run, tmp_path):
    edit = write_task_bundle(tmp_path / "edit", "driving", horizon=48)
    before = verify_bundle(edit)
    res = export_gate(gate_run, edit, n_parity=16)
    spec = verify_bundle(edit, check_onnx=True)
    assert spec.gate == res.spec.gate and spec.method == before.method
    assert set(spec.files) == set(before.files) | {"gate.onnx"}
    assert spec.files["policy.onnx"] == before.files["policy.onnx"]
    checks = json.loads((edit / "parity.json").read_text())["parity"]
    assert {"gate_onnx", "gate_argmax"} < set(checks) and len(checks) > 2
    with pytest.raises(ExportError, match="bundle task 'cartpole', gate task 'driving'"):
        export_gate(gate_run, write_task_bundle(tmp_path / "cp", "cartpole"), n_parity=4)
    with pytest.raises(ExportError, match="chunk.horizon 10 is shorter"):
        export_gate(gate_run, write_task_bundle(tmp_path / "short", "driving", horizon=10),
                    n_parity=4)


def test_gate_export_cli_and_inspect(gate_run, tmp_path, capsys):
    assert main(["gate", "export", str(gate_run), "--out", str(tmp_path / "b"), "--parity",
                 "8", "--json"]) == 0
    out = json.loads(capsys.readouterr().out)
    assert out["budgets"] == ["keep", "fast", "slow"] and out["obs_dim"] == 7
    assert [r["ok"] for r in out["parity"]] == [True, True]
    assert main(["inspect", str(tmp_path / "b")]) == 0
    text = capsys.readouterr().out
    assert "gate.onnx: obs (7) -> scores (3)" in text and "slow: delay 8" in text
    assert main(["gate", "export", str(tmp_path), "--out", str(tmp_path / "c")]) == 1
    assert "not a gate run" in capsys.readouterr().err


def test_manifest_gate_section_round_trip_and_errors():
    spec, gate = driving_gate_spec()
    back = PolicySpec.from_json(spec.to_json())
    assert back.gate == gate and back.gate.budgets[2].latency.planner_delay_steps == 8
    plain = PolicySpec.from_json(spec.to_json())
    plain.gate = None
    assert "gate" not in plain.to_dict()  # gate-less manifests keep their old JSON
    data = spec.to_dict()
    data["gate"]["fast_indices"] = [2, 3, 10]
    with pytest.raises(SchemaError, match=r"gate.fast_indices: 10 is outside"):
        PolicySpec.from_dict(data)
    data = spec.to_dict()
    data["gate"]["extra"] = ["chunk_age", "rows_left"]
    with pytest.raises(SchemaError, match="gate.extra: this edgerl builds"):
        PolicySpec.from_dict(data)
    data = spec.to_dict()
    data["gate"]["budgets"][2]["horizon"] = 64
    with pytest.raises(SchemaError, match=r"gate.budgets: a plan of 64 rows exceeds"):
        PolicySpec.from_dict(data)
    data = spec.to_dict()
    data["gate"]["budgets"][1]["name"] = "keep"
    with pytest.raises(SchemaError, match="names unique"):
        PolicySpec.from_dict(data)
