"""What the same-state reference's protocol costs: a raw batch of
MODEL stepped back to back, against the same batch with a recorded state set written before
each step and only the step timed (``edgerl.bench.sim.overhead.StateReplay``'s protocol). Best of 20
blocks of 20 steps, 256 envs, 3 repeats. The replayed states are one snapshot written again
each step, so on a contact model the two sides also step different states; the arm has no
contacts, and its difference is the protocol's. Usage:
``python -m edgerl.apps.experiments.probes.sim_replay_protocol [arm_planar.xml] [SUBSTEPS]``."""

from __future__ import annotations

import sys
import time

import mujoco.batch as mj_batch
import numpy as np

from edgerl.sim.mujoco.backends import load_model


def main() -> None:
    model = load_model(sys.argv[1] if len(sys.argv) > 1 else "arm_planar.xml")
    nstep = int(sys.argv[2]) if len(sys.argv) > 2 else 1
    batch = mj_batch.Batch(model, 256, nthread=2)
    for _ in range(50):
        batch.step(nstep=nstep)
    rows = np.stack([batch.state.copy() for _ in range(20)])

    def back_to_back() -> float:
        start = time.perf_counter()
        for _ in range(20):
            batch.step(nstep=nstep)
        return time.perf_counter() - start

    def replayed() -> float:
        spent = 0.0
        for i in range(20):
            np.copyto(batch.state, rows[i])
            start = time.perf_counter()
            batch.step(nstep=nstep)
            spent += time.perf_counter() - start
        return spent

    for _ in range(3):
        b2b = min(back_to_back() for _ in range(20)) / 20 * 1e6
        rep = min(replayed() for _ in range(20)) / 20 * 1e6
        print(f"back to back {b2b:.1f} us/step, replayed {rep:.1f} us/step "
              f"(+{100 * (rep / b2b - 1):.1f} %)")


if __name__ == "__main__":
    main()
