"""An edit policy whose network outputs inf is counted as non-finite, not "ok"."""

from __future__ import annotations

import numpy as np
from test_rt_edit_loop import ramp_chunk

from edgerl.contract.clock import VirtualClock
from edgerl.contract.spec import PolicySpec, sha256_file
from edgerl.runtime.bundle import load_bundle
from edgerl.runtime.chunk_buffer import ChunkBuffer
from edgerl.runtime.edit_loop import EditLoop
from tests.helpers.bundles import mlp_onnx, random_mlp, write_mlp_bundle


def _inf_bundle(path):
    """An edit bundle whose network adds +inf to its first output."""
    write_mlp_bundle(path, hidden=(8,))
    spec = PolicySpec.load(path)
    ws, bs = random_mlp([spec.edit_obs.dim, 8, spec.action.dim])
    bs[-1][0] = np.inf
    (path / "policy.onnx").write_bytes(mlp_onnx(ws, bs))
    (path / "policy_mlp.npz").unlink()
    spec.files = {f.name: sha256_file(f) for f in sorted(path.iterdir())
                  if f.name != "manifest.json"}
    spec.save(path)
    return path


def test_inf_residual_is_nonfinite_not_ok(tmp_path):
    """main clipped the residual (inf -> 1) before the finiteness check and counted the tick
    "ok"."""
    spec, net = load_bundle(_inf_bundle(tmp_path / "inf"), warmup=1)
    loop = EditLoop(spec, net, ChunkBuffer(), clock=VirtualClock(0.0))
    loop.buffer.push(ramp_chunk(t0=0.0, start=30))
    loop.obs.write(np.zeros(4, np.float32), 0.0)
    cmd = loop.tick(0.0)
    assert loop.state == "nonfinite_action"
    assert loop.safety.interventions()["nonfinite_action"] == 1
    np.testing.assert_array_equal(cmd, loop.safety.safe)  # held the (safe) start command
    for k in range(1, 200):  # keeps failing: the ladder ends in the e-stop
        loop.buffer.push(ramp_chunk(t0=k * 0.01, start=30))
        loop.tick(k * 0.01)
    assert loop.safety.estopped and loop.state == "estop"
