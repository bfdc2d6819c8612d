"""The fast loop's edit step on the emulated Cortex-M4F: parity with the Python /
onnxruntime path on N random ticks (host build and M4), instructions per edit tick, and the
flash / RAM of the firmware linked with the edit policy (docs/firmware.md, "Fast loop").

    .venv/bin/python benchmarks/m4_edit.py [--bundle DIR] [--n 1000]

Without ``--bundle`` it writes a random cartpole-shaped edit bundle (obs 4, action 1, 50 Hz,
chunk 10 x 20 ms, 32-32 ELU) with ``tests/helpers/bundles.py``.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def main(argv: list[str] | None = None) -> int:
    from edgerl.bench.hil.edit_step import edit_parity
    from edgerl.hil.fast_loop import fast_loop_firmware
    from edgerl.hil.firmware import FirmwareConfig
    from edgerl.hil.m4_report import footprint
    from edgerl.hil.qemu import qemu_elf

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, default=None, help="an exported edit bundle")
    p.add_argument("--n", type=int, default=1000, help="random ticks (default 1000)")
    p.add_argument("--hidden", default="32,32", help="random bundle's hidden sizes")
    args = p.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="edgerl_m4_edit_") as tmp:
        bundle = args.bundle
        if bundle is None:
            sys.path.insert(0, str(ROOT))  # tests.helpers
            from tests.helpers.bundles import write_mlp_bundle

            bundle = write_mlp_bundle(Path(tmp) / "edit", obs_dim=4, action_dim=1,
                                      hidden=tuple(int(h) for h in args.hidden.split(",")),
                                      control_hz=50.0, horizon=10, period_s=0.1, seed=2)
        host = edit_parity(bundle, args.n)
        m4 = edit_parity(bundle, args.n, m4=True)
        fw = fast_loop_firmware(bundle, FirmwareConfig(n_cmd=1), "qemu-m4")
        out = {"bundle": str(args.bundle or f"random 4-{args.hidden}-1"), "host": host,
               "qemu_m4": m4, "firmware_with_edit": footprint(fw.elf),
               "firmware_without": footprint(qemu_elf(False)),
               "load_avg_1m": os.getloadavg()[0]}
        out["edit_flash_bytes"] = (out["firmware_with_edit"]["flash"]
                                   - out["firmware_without"]["flash"])
        print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
