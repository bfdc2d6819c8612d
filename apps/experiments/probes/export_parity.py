"""Export parity and exporter comparison for MLP / GRU / LSTM actors (docs/benchmarks.md).

Usage: ``python -m edgerl.apps.experiments.probes.export_parity [--json]``

For each actor kind (rsl_rl-sized: 64-64 ELU MLP; 1x64 GRU/LSTM + 64 head, input D=27 = a
12-obs 2-action edit observation) and each torch exporter, writes a bundle (the default
exporter) or a bare ONNX file and reports export seconds, the op set, file size, the parity
max abs error over 1000 observations (recurrent: 10 rollouts x 100 steps with state fed
back), onnxruntime batch-1 latency, and for the MLP the C header's error (gcc -O2).
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import torch
from torch import nn

from edgerl.contract import ActionSpec, ChunkSpec, EditObsConfig, ObservationSpec, PolicySpec
from edgerl.export.bundle import export_bundle
from edgerl.export.bundle_parity import onnx_runner, torch_runner
from edgerl.export.onnx_export import OnnxExportConfig, PolicyModule, export_onnx, infer_signature
from edgerl.export.parity import check_parity

O_DIM, A_DIM = 12, 2


def spec() -> PolicySpec:
    eo = EditObsConfig(obs_dim=O_DIM, action_dim=A_DIM)
    return PolicySpec(
        task="bench", method="edit", control_hz=50.0,
        observation=ObservationSpec([f"o{i}" for i in range(O_DIM)], ["-"] * O_DIM,
                                    [0.0] * O_DIM, [1.0] * O_DIM),
        action=ActionSpec(["a0", "a1"], ["-", "-"], [-1.0, -1.0], [1.0, 1.0]),
        chunk=ChunkSpec(horizon=10, dt_s=0.02, period_s=0.1), edit_obs=eo)


class Mlp(nn.Module):
    def __init__(self, d: int) -> None:
        super().__init__()
        self.register_buffer("mean", torch.randn(d))
        self.register_buffer("std", torch.rand(d) + 0.5)
        self.net = nn.Sequential(nn.Linear(d, 64), nn.ELU(), nn.Linear(64, 64), nn.ELU(),
                                 nn.Linear(64, A_DIM))

    def forward(self, x):
        return self.net((x - self.mean) / self.std)


class Rnn(nn.Module):
    def __init__(self, d: int, kind: str) -> None:
        super().__init__()
        self.kind = kind
        self.rnn = (nn.GRU if kind == "gru" else nn.LSTM)(d, 64)
        self.head = nn.Sequential(nn.Linear(64, 64), nn.ELU(), nn.Linear(64, A_DIM))

    def forward(self, x, h, c=None):
        if self.kind == "gru":
            y, h = self.rnn(x.unsqueeze(0), h)
            return self.head(y.squeeze(0)), h
        y, (h, c) = self.rnn(x.unsqueeze(0), (h, c))
        return self.head(y.squeeze(0)), h, c


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    d = spec().edit_obs.dim
    obs = np.concatenate([np.sin(np.linspace(0, 30, 500)[:, None] * (1 + np.arange(d)) / 5) * 2,
                          np.random.default_rng(0).standard_normal((500, d)) * 3])
    obs = obs.astype(np.float32)
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        for kind in ("mlp", "gru", "lstm"):
            actor = (Mlp(d) if kind == "mlp" else Rnn(d, kind)).eval()
            sig = infer_signature(actor, d)
            zero = [s.numpy() for s in sig.zero_state()]
            for exporter in ("torchscript", "dynamo"):
                path = Path(tmp) / f"{kind}_{exporter}.onnx"
                t = time.perf_counter()
                export_onnx(actor, path, sig, OnnxExportConfig(
                    exporter=exporter, opset=17 if exporter == "torchscript" else 18))
                seconds = time.perf_counter() - t
                parity = check_parity(torch_runner(PolicyModule(actor, len(zero))),
                                      onnx_runner(path, sig.input_names), obs,
                                      output_names=sig.output_names, zero_state=zero)
                rows.append({
                    "actor": kind, "exporter": exporter, "export_s": round(seconds, 3),
                    "ops": ",".join(sorted({n.op_type for n in onnx.load(str(path)).graph.node})),
                    "bytes": path.stat().st_size, "max_abs_err": parity.max_abs_err})
            bundle = Path(tmp) / f"bundle_{kind}"
            report = export_bundle(actor, spec(), bundle, obs, c_header=kind == "mlp",
                                   fp16=True)
            for name, p in report.parity.items():
                rows.append({"actor": kind, "exporter": f"bundle:{name}",
                             "export_s": round(report.seconds, 3), "ops": p.candidate,
                             "bytes": "", "max_abs_err": p.max_abs_err})
    if args.json:
        json.dump(rows, sys.stdout, indent=2)
        sys.stdout.write("\n")
        return 0
    cols = list(rows[0])
    print(" | ".join(cols))
    for r in rows:
        print(" | ".join(f"{r[c]:.3g}" if isinstance(r[c], float) else str(r[c]) for c in cols))
    return 0


if __name__ == "__main__":
    sys.exit(main())
