"""The fast loop's edit step on the emulated Cortex-M4F: parity with the Python /
onnxruntime path on N random ticks (host build and M4), instructions per edit tick, and the
flash / RAM of the firmware linked with the edit policy (docs/firmware.md, "Fast loop").

    python -m edgerl.apps.experiments.probes.m4_edit --bundle DIR [--n 1000]

The quoted figures used a random cartpole-shaped edit bundle (obs 4, action 1, 50 Hz, chunk
10 x 20 ms, 32-32 ELU, seed 2: ``tests/helpers/bundles.py::write_mlp_bundle``).
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path


def main(argv: list[str] | None = None) -> int:
    from edgerl.bench.hil.edit_step import edit_parity
    from edgerl.hil.fast_loop import fast_loop_firmware
    from edgerl.hil.firmware import FirmwareConfig
    from edgerl.hil.m4_report import footprint
    from edgerl.hil.qemu import qemu_elf

    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundle", type=Path, required=True, help="an exported edit bundle")
    p.add_argument("--n", type=int, default=1000, help="random ticks (default 1000)")
    args = p.parse_args(argv)
    bundle = args.bundle
    host = edit_parity(bundle, args.n)
    m4 = edit_parity(bundle, args.n, m4=True)
    fw = fast_loop_firmware(bundle, FirmwareConfig(n_cmd=1), "qemu-m4")
    out = {"bundle": str(args.bundle), "host": host,
           "qemu_m4": m4, "firmware_with_edit": footprint(fw.elf),
           "firmware_without": footprint(qemu_elf(False)),
           "load_avg_1m": os.getloadavg()[0]}
    out["edit_flash_bytes"] = (out["firmware_with_edit"]["flash"]
                               - out["firmware_without"]["flash"])
    print(json.dumps(out, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
