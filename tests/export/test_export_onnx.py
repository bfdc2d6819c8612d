"""export_onnx / infer_signature: signatures, exporters, opsets, dynamic batch."""

from __future__ import annotations

import numpy as np
import onnx
import onnxruntime as ort
import pytest
import torch
from torch import nn

from edgerl.export.onnx_export import (
    ExportError,
    OnnxExportConfig,
    export_onnx,
    infer_signature,
)
from tests.helpers.export_models import ACT_DIM, IN_DIM, NormMLP, RecurrentActor


def _session(path):
    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


class TestSignature:
    def test_mlp(self):
        sig = infer_signature(NormMLP(), IN_DIM)
        assert (sig.kind, sig.input_dim, sig.action_dim) == ("none", IN_DIM, ACT_DIM)
        assert sig.input_names == ["obs"] and sig.output_names == ["action"]

    def test_gru_drops_none_output_and_finds_state_shape(self):
        sig = infer_signature(RecurrentActor("gru", hidden=8, layers=2), IN_DIM)
        assert sig.kind == "gru"
        assert sig.state_inputs == ["h_in"] and sig.state_outputs == ["h_out"]
        assert sig.state_shapes == [[2, 1, 8]]

    def test_lstm(self):
        sig = infer_signature(RecurrentActor("lstm", hidden=4), IN_DIM)
        assert sig.output_names == ["action", "h_out", "c_out"]
        assert sig.state_shapes == [[1, 1, 4], [1, 1, 4]]

    def test_two_rnns_refused(self):
        actor = nn.Module()
        actor.a, actor.b = nn.GRU(3, 4), nn.GRU(4, 4)
        with pytest.raises(ExportError, match="2 recurrent layers"):
            infer_signature(actor, 3)

    def test_batch_first_refused(self):
        actor = RecurrentActor("gru")
        actor.rnn = nn.GRU(IN_DIM, 16, batch_first=True)
        with pytest.raises(ExportError, match="batch_first=False"):
            infer_signature(actor, IN_DIM)

    def test_wrong_input_dim_is_named(self):
        with pytest.raises(ExportError, match=r"failed on a \(1, 5\) observation"):
            infer_signature(NormMLP(), 5)

    def test_bad_action_shape(self):
        class Flat(nn.Module):
            def forward(self, x):
                return x.sum(dim=1)

        with pytest.raises(ExportError, match=r"shape \(1, A\), got \(1,\)"):
            infer_signature(Flat(), 4)


class TestExport:
    def test_opset_range(self):
        with pytest.raises(ExportError, match="opset 21 is outside"):
            OnnxExportConfig(opset=21)
        with pytest.raises(ExportError, match="exporter must be one of"):
            OnnxExportConfig(exporter="jit")

    @pytest.mark.parametrize("opset", [13, 20])
    def test_opset_recorded(self, tmp_path, opset):
        actor = NormMLP()
        path = export_onnx(actor, tmp_path / "p.onnx", infer_signature(actor, IN_DIM),
                           OnnxExportConfig(opset=opset))
        model = onnx.load(str(path))
        assert model.opset_import[0].version == opset
        onnx.checker.check_model(model)

    def test_torchscript_graph_is_minimal(self, tmp_path):
        actor = RecurrentActor("lstm")
        path = export_onnx(actor, tmp_path / "p.onnx", infer_signature(actor, IN_DIM))
        ops = {n.op_type for n in onnx.load(str(path)).graph.node}
        assert ops <= {"LSTM", "Gemm", "Elu", "Squeeze", "Unsqueeze", "Constant"}
        assert "LSTM" in ops  # one fused node, not an unrolled loop

    def test_dynamo_exporter_matches_torch(self, tmp_path):
        actor = NormMLP().eval()
        sig = infer_signature(actor, IN_DIM)
        path = export_onnx(actor, tmp_path / "d.onnx", sig,
                           OnnxExportConfig(exporter="dynamo", opset=18))
        assert not list(tmp_path.glob("*.data"))  # weights inside the one file
        x = np.linspace(-3, 3, IN_DIM, dtype=np.float32)[None]
        got = _session(path).run(None, {"obs": x})[0]
        with torch.no_grad():
            ref = actor(torch.from_numpy(x)).numpy()
        assert np.abs(got - ref).max() <= 1e-5

    def test_dynamic_batch_variant(self, tmp_path):
        actor = NormMLP().eval()
        sig = infer_signature(actor, IN_DIM)
        path = export_onnx(actor, tmp_path / "b.onnx", sig, OnnxExportConfig(dynamic_batch=True))
        sess = _session(path)
        assert sess.get_inputs()[0].shape == ["batch", IN_DIM]
        x = np.random.default_rng(3).standard_normal((7, IN_DIM)).astype(np.float32)
        got = sess.run(None, {"obs": x})[0]
        with torch.no_grad():
            ref = actor(torch.from_numpy(x)).numpy()
        assert got.shape == (7, ACT_DIM) and np.abs(got - ref).max() <= 1e-5
