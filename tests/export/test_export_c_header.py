"""policy.h: generated C99 compiled with gcc and compared with torch."""

from __future__ import annotations

import shutil
import subprocess

import numpy as np
import pytest
import torch
from torch import nn

from edgerl.export.c_header import (
    C_FLAGS,
    CHeaderError,
    parse_mlp_chain,
    run_c_header,
    write_c_header,
)
from edgerl.export.onnx_export import export_onnx, infer_signature
from tests.helpers.export_models import IN_DIM, NormMLP, RecurrentActor

pytestmark = pytest.mark.skipif(shutil.which("gcc") is None, reason="gcc not installed")


class Mixed(nn.Module):
    """Every activation the header supports, plus output scaling and clipping."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(4)
        self.inner = NormMLP(act=nn.ReLU, hidden=24)
        self.l2 = nn.Linear(2, 6)
        self.l3 = nn.Linear(6, 2, bias=False)

    def forward(self, x):
        h = self.inner(x)
        h = torch.nn.functional.leaky_relu(h, 0.1)
        h = torch.sigmoid(self.l2(h)) * 2.0 - 0.5
        h = torch.tanh(-self.l3(h)) / 0.5 - 0.25
        return torch.clamp(h * 3.0, -0.9, 0.8)


def _onnx(tmp_path, actor):
    return export_onnx(actor, tmp_path / "policy.onnx", infer_signature(actor, IN_DIM))


@pytest.mark.parametrize("actor_cls", [NormMLP, Mixed])
def test_matches_torch(tmp_path, parity_obs, actor_cls):
    actor = actor_cls().eval()
    info = write_c_header(_onnx(tmp_path, actor), tmp_path / "policy.h")
    got = run_c_header(info.path, parity_obs)
    with torch.no_grad():
        ref = actor(torch.from_numpy(parity_obs)).numpy()
    assert got.shape == ref.shape == (1000, 2)
    assert np.abs(got - ref).max() <= 1e-5
    assert np.abs(ref).max() > 0.1  # not a degenerate all-zero comparison


def test_header_contents(tmp_path):
    info = write_c_header(_onnx(tmp_path, NormMLP(hidden=8)), tmp_path / "policy.h",
                          provenance="test")
    text = info.path.read_text()
    for needle in (f"#define EDGERL_POLICY_IN_DIM {IN_DIM}", "#define EDGERL_POLICY_OUT_DIM 2",
                   "#define EDGERL_POLICY_MAX_WIDTH 11",
                   "static inline void edgerl_policy_forward(const float *in, float *out)"):
        assert needle in text
    code = text.split("*/", 2)[2]  # after the two comment lines
    assert "malloc(" not in code and "double" not in code and "#include <stdlib.h>" not in code
    # normaliser (sub, div) + 3 dense + 2 ELU; params = 2*11 + (11*8+8) + (8*8+8) + (8*2+2)
    assert info.layers == ["sub", "div", "dense", "elu", "dense", "elu", "dense"]
    assert info.n_params == 22 + 96 + 72 + 18


def test_two_translation_units_link(tmp_path):
    """The firmware may include policy.h from several .c files: no duplicate symbols."""
    write_c_header(_onnx(tmp_path, NormMLP(hidden=8)), tmp_path / "policy.h")
    (tmp_path / "a.c").write_text('#include "policy.h"\nvoid a(const float *i, float *o);\n'
                                  "void a(const float *i, float *o)\n"
                                  "{ edgerl_policy_forward(i, o); }\n")
    (tmp_path / "b.c").write_text('#include "policy.h"\nvoid a(const float *i, float *o);\n'
                                  "int main(void) { float i[EDGERL_POLICY_IN_DIM] = {0};\n"
                                  "float o[EDGERL_POLICY_OUT_DIM]; a(i, o);\n"
                                  "edgerl_policy_forward(i, o); return 0; }\n")
    proc = subprocess.run(["gcc", *C_FLAGS, str(tmp_path / "a.c"), str(tmp_path / "b.c"), "-o",
                           str(tmp_path / "x"), "-lm"], capture_output=True, text=True,
                          check=False)
    assert proc.returncode == 0, proc.stderr


def test_recurrent_refused(tmp_path):
    path = _onnx(tmp_path, RecurrentActor("gru"))
    with pytest.raises(CHeaderError, match="recurrent policies are not supported"):
        parse_mlp_chain(path)


def test_unsupported_op_named(tmp_path):
    class Soft(nn.Module):
        def __init__(self):
            super().__init__()
            self.l = nn.Linear(IN_DIM, 3)

        def forward(self, x):
            return torch.softmax(self.l(x), dim=-1)

    with pytest.raises(CHeaderError, match="op Softmax is not supported"):
        parse_mlp_chain(_onnx(tmp_path, Soft()))
