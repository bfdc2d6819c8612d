"""The on-MCU policy on the emulated Cortex-M4F (MPS2 AN386 in qemu-system-arm): footprint,
parity with onnxruntime, instructions per inference (docs/firmware.md).

    python -m edgerl.apps.experiments.probes.m4_policy [--onnx policy.onnx | --sizes 4,64,64,1 \
        --act Elu]

Without ``--onnx`` it exports a random chain MLP of ``--sizes`` (weights ~ N(0, 0.3^2)).
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
from pathlib import Path

from edgerl.hil.m4_report import mlp_onnx_bytes, report


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--onnx", type=Path, default=None, help="exported chain-MLP policy.onnx")
    p.add_argument("--sizes", default="4,64,64,1", help="random MLP layer sizes")
    p.add_argument("--act", default="Elu", help="activation between layers (Elu, Tanh, Relu)")
    p.add_argument("--n", type=int, default=1000, help="observations (default 1000)")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="edgerl_m4_onnx_") as tmp:
        onnx_path = args.onnx
        if onnx_path is None:
            sizes = [int(s) for s in args.sizes.split(",")]
            onnx_path = Path(tmp) / "policy.onnx"
            onnx_path.write_bytes(mlp_onnx_bytes(sizes, args.act))
        out = report(onnx_path, args.n)
        out["load_avg_1m"] = os.getloadavg()[0]
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
