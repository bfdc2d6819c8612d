"""export_bundle: files, manifest, parity for MLP/GRU/LSTM, failure over tolerance."""

from __future__ import annotations

import json

import numpy as np
import onnxruntime as ort
import pytest
import torch
from torch import nn

from edgerl.contract.spec import ChunkSpec, RecurrentSpec, load_bundle_manifest, sha256_file
from edgerl.export.bundle import export_bundle
from edgerl.export.onnx_export import ExportError
from edgerl.export.parity import FP16_TOL
from tests.helpers.export_models import ACT_DIM, IN_DIM, OBS_DIM, NormMLP, make_actor, make_spec


@pytest.fixture(scope="module", params=["mlp", "gru", "lstm"])
def bundle(request, tmp_path_factory, parity_obs):
    kind = request.param
    actor = make_actor(kind)
    out = tmp_path_factory.mktemp(f"bundle_{kind}")
    report = export_bundle(actor, make_spec(), out, parity_obs, rollout_len=100)
    return kind, actor, out, report


class TestBundleContents:
    def test_parity_within_fp32_tolerance(self, bundle):
        kind, _, out, report = bundle
        p = report.parity["policy_onnx"]
        assert p.ok and p.max_abs_err <= 1e-5
        assert p.n_observations == 1000
        assert [o.tolerance for o in p.outputs] == [1e-5] * len(p.outputs)
        if kind == "mlp":
            assert [o.name for o in p.outputs] == ["action"]
            assert p.n_rollouts == 0
        else:
            assert p.rollout_len == 100 and p.n_rollouts == 10
            assert [o.name for o in p.outputs][1:] == (
                ["h_out"] if kind == "gru" else ["h_out", "c_out"])

    def test_manifest_names_and_hashes(self, bundle):
        kind, _, out, _ = bundle
        spec = load_bundle_manifest(out)  # verifies every sha256
        assert "policy.onnx" in spec.files and "parity.json" in spec.files
        assert spec.files["policy.onnx"] == sha256_file(out / "policy.onnx")
        assert spec.recurrent.kind == ("none" if kind == "mlp" else kind)
        expected_states = {"mlp": [], "gru": ["h_in"], "lstm": ["h_in", "c_in"]}[kind]
        assert spec.recurrent.state_inputs == expected_states
        assert spec.tensors.inputs == ["obs", *expected_states]
        assert spec.tensors.outputs[0] == "action"
        assert spec.recurrent.state_shapes == [[1, 1, 16]] * len(expected_states)
        assert spec.extra["export"]["opset"] == 17
        assert spec.extra["export"]["input_dim"] == IN_DIM

    def test_onnx_graph_is_static_batch1_with_manifest_names(self, bundle):
        _, _, out, _ = bundle
        spec = load_bundle_manifest(out)
        sess = ort.InferenceSession(str(out / "policy.onnx"), providers=["CPUExecutionProvider"])
        assert [i.name for i in sess.get_inputs()] == spec.tensors.inputs
        assert [o.name for o in sess.get_outputs()] == spec.tensors.outputs
        assert sess.get_inputs()[0].shape == [1, IN_DIM]
        assert sess.get_outputs()[0].shape == [1, ACT_DIM]

    def test_rollout_with_state_feedback_matches_torch(self, bundle, parity_obs):
        """Independent of the exporter's own parity code: 60 steps, state fed back."""
        kind, actor, out, _ = bundle
        spec = load_bundle_manifest(out)
        sess = ort.InferenceSession(str(out / "policy.onnx"), providers=["CPUExecutionProvider"])
        state_np = [np.zeros(s, np.float32) for s in spec.recurrent.state_shapes]
        state_t = [torch.zeros(s) for s in spec.recurrent.state_shapes]
        threads = torch.get_num_threads()
        torch.set_num_threads(1)  # batch-1 RNN steps crawl with contended threads
        try:
            worst, state_np = self._rollout(actor, sess, spec, parity_obs[500:560], state_np,
                                            state_t)
        finally:
            torch.set_num_threads(threads)
        assert worst <= 1e-5
        if kind != "mlp":  # the state really carries information
            assert float(np.abs(state_np[0]).max()) > 1e-2

    @staticmethod
    def _rollout(actor, sess, spec, xs, state_np, state_t):
        worst = 0.0
        for x in xs:
            x = x[None]
            got = sess.run(None, {n: a for n, a in zip(spec.tensors.inputs, [x, *state_np])})
            with torch.no_grad():
                ref = actor(torch.from_numpy(x), *state_t)
            ref = [ref] if isinstance(ref, torch.Tensor) else [r for r in ref if r is not None]
            worst = max(worst, float(np.abs(got[0] - ref[0].numpy()).max()))
            state_np, state_t = got[1:], ref[1:]
        return worst, state_np

    def test_parity_json_records_every_check(self, bundle):
        kind, _, out, _ = bundle
        doc = json.loads((out / "parity.json").read_text())
        assert doc["ok"] is True
        assert doc["parity"]["policy_onnx"]["n_observations"] == 1000
        assert doc["tensorrt_compat"]["ok"] is True
        assert doc["tensorrt_compat"]["static_shapes"] is True
        assert ("numpy_mlp" in doc["parity"]) == (kind == "mlp")


class OffDuringExport(nn.Module):
    """Computes something different while being exported (a silent export bug)."""

    def __init__(self, offset: float) -> None:
        super().__init__()
        self.inner = NormMLP()
        self.offset = offset

    def forward(self, x):
        y = self.inner(x)
        if torch.onnx.is_in_onnx_export():
            y = y + self.offset
        return y


class TestFailures:
    def test_over_tolerance_fails_and_leaves_no_manifest(self, tmp_path, parity_obs):
        export_bundle(NormMLP(), make_spec(), tmp_path, parity_obs)
        assert (tmp_path / "manifest.json").is_file()
        with pytest.raises(ExportError, match=r"parity over tolerance.*policy_onnx.*action"):
            export_bundle(OffDuringExport(3e-5), make_spec(), tmp_path, parity_obs)
        assert not (tmp_path / "manifest.json").exists()  # the old manifest is gone too
        doc = json.loads((tmp_path / "parity.json").read_text())
        err = doc["parity"]["policy_onnx"]["outputs"][0]["max_abs_err"]
        assert doc["ok"] is False and 2.9e-5 < err < 3.1e-5

    def test_too_few_observations(self, tmp_path, parity_obs):
        with pytest.raises(ExportError, match=">= 1000 observations, got 999"):
            export_bundle(NormMLP(), make_spec(), tmp_path, parity_obs[:999])

    def test_nan_observations(self, tmp_path, parity_obs):
        bad = parity_obs.copy()
        bad[3, 1] = np.nan
        with pytest.raises(ExportError, match="NaN"):
            export_bundle(NormMLP(), make_spec(), tmp_path, bad)

    def test_short_rollouts_refused_for_recurrent(self, tmp_path, parity_obs):
        with pytest.raises(ExportError, match=">= 50 steps"):
            export_bundle(make_actor("gru"), make_spec(), tmp_path, parity_obs, rollout_len=20)

    def test_action_size_mismatch(self, tmp_path, parity_obs):
        with pytest.raises(ExportError, match="outputs 3 actions.*has 2"):
            export_bundle(NormMLP(out_dim=3), make_spec(), tmp_path, parity_obs)

    def test_recurrent_kind_mismatch(self, tmp_path, parity_obs):
        spec = make_spec(recurrent=RecurrentSpec(kind="lstm", state_inputs=["h", "c"],
                                                 state_outputs=["h2", "c2"],
                                                 state_shapes=[[1, 1, 16], [1, 1, 16]]))
        with pytest.raises(ExportError, match="recurrent.kind='lstm'.*'gru'"):
            export_bundle(make_actor("gru"), spec, tmp_path, parity_obs)


class ChunkPlanner(nn.Module):
    """BC-planner-like: ``(B, O + C) -> (B, H, A)`` with a 2-element conditioning input."""

    input_dim = OBS_DIM + 2

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(1)
        self.net = nn.Sequential(nn.Linear(self.input_dim, 16), nn.Tanh(),
                                 nn.Linear(16, 8 * ACT_DIM))

    def forward(self, x):
        return torch.tanh(self.net(x)).reshape(x.shape[0], 8, ACT_DIM)


class TestExtras:
    def test_fp16_planner_and_numpy_files(self, tmp_path, parity_obs):
        planner = ChunkPlanner()
        actor = NormMLP(act=nn.Tanh)
        report = export_bundle(actor, make_spec(), tmp_path, parity_obs, planner=planner,
                               fp16=True)
        spec = load_bundle_manifest(tmp_path)
        assert {"policy_fp16.onnx", "planner.onnx", "policy_mlp.npz"} <= set(spec.files)
        fp16 = report.parity["policy_fp16_onnx"]
        assert fp16.ok and fp16.outputs[0].tolerance == FP16_TOL
        assert 1e-6 < fp16.max_abs_err <= FP16_TOL  # really computed in half precision
        assert report.parity["planner_onnx"].max_abs_err <= 1e-5
        assert report.parity["numpy_mlp"].max_abs_err <= 1e-5
        assert spec.extra["export"]["planner"]["output_shape"] == [1, 8, ACT_DIM]
        assert spec.extra["export"]["planner"]["input_dim"] == OBS_DIM + 2

    def test_planner_chunk_size_checked(self, tmp_path, parity_obs):
        with pytest.raises(ExportError, match=r"planner outputs \[1, 8, 2\].*10\*2"):
            export_bundle(NormMLP(), make_spec(chunk=ChunkSpec(horizon=10, dt_s=0.02,
                                                                period_s=0.06)),
                          tmp_path, parity_obs, planner=ChunkPlanner())

    def test_non_network_planner_is_noted(self, tmp_path, parity_obs):
        report = export_bundle(NormMLP(), make_spec(), tmp_path, parity_obs, planner=object())
        assert not (tmp_path / "planner.onnx").exists()
        assert any("not a torch network" in n for n in report.notes)


class TestParityInputs:
    def test_recorded_then_wider_random(self):
        from edgerl.export.bundle import collect_parity_inputs
        from edgerl.sim.registry import make_task

        env = make_task("cartpole", num_envs=4)
        try:
            obs = collect_parity_inputs(4, env=env, n_recorded=200, n_random=300, seed=2)
        finally:
            env.close()
        assert obs.shape == (500, 4) and obs.dtype == np.float32
        rec, rnd = obs[:200], obs[200:]
        assert np.all(rec.std(axis=0) > 0)  # the env really moved
        # random rows are centred on the recording and twice as wide
        assert np.allclose(rnd.mean(axis=0), rec.mean(axis=0), atol=0.5 * rec.std(axis=0).max())
        assert np.all(rnd.std(axis=0) > 1.5 * rec.std(axis=0))

    def test_env_dim_mismatch(self):
        from edgerl.export.bundle import collect_parity_inputs
        from edgerl.sim.registry import make_task

        env = make_task("cartpole", num_envs=2)
        try:
            with pytest.raises(ExportError, match="has 4 elements but the actor takes 9"):
                collect_parity_inputs(9, env=env, n_recorded=10, n_random=10)
        finally:
            env.close()
