"""The runtime side loads a bundle with torch (and onnx) hidden, and refuses bad bundles."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap

import numpy as np
import pytest
import torch

from edgerl.export.bundle import export_bundle
from tests.helpers.export_models import make_actor, make_spec

# Runs in a fresh interpreter: torch/onnx imports fail, as on a [runtime]-only install.
SCRIPT = textwrap.dedent("""
    import json, sys
    sys.modules["torch"] = None
    sys.modules["onnx"] = None
    import numpy as np
    import onnxruntime as ort
    from edgerl.contract.spec import load_bundle_manifest

    bundle, inputs, expected = sys.argv[1], np.load(sys.argv[2]), np.load(sys.argv[3])
    spec = load_bundle_manifest(bundle)
    sess = ort.InferenceSession(bundle + "/policy.onnx", providers=["CPUExecutionProvider"])
    state = [np.zeros(s, np.float32) for s in spec.recurrent.state_shapes]
    err = 0.0
    for x, y in zip(inputs, expected):
        out = sess.run(None, dict(zip(spec.tensors.inputs, [x[None], *state])))
        err = max(err, float(np.abs(out[0][0] - y).max()))
        state = out[1:]
    result = {"direct_err": err, "torch_loaded": "torch" in sys.modules and
              sys.modules["torch"] is not None}
    from edgerl.runtime.bundle import load_bundle

    spec2, net = load_bundle(bundle)
    err2 = 0.0
    net.reset_state()
    for x, y in zip(inputs, expected):
        net.input[...] = x[None]
        err2 = max(err2, float(np.abs(net.infer()[0] - y).max()))
    result["runtime_err"] = err2
    result["torch_loaded"] = result["torch_loaded"] or (sys.modules.get("torch") is not None)
    print(json.dumps(result))
""")

LOAD_ONLY = textwrap.dedent("""
    import sys
    sys.modules["torch"] = None
    from edgerl.runtime.bundle import load_bundle
    from edgerl.contract.spec import BundleError
    try:
        load_bundle(sys.argv[1])
    except Exception as exc:  # a BundleError subclass is printed as "BundleError/<name>"
        kind = "BundleError/" if isinstance(exc, BundleError) else ""
        print(kind + type(exc).__name__ + ": " + str(exc))
    else:
        print("loaded")
""")


def _python(script: str, *args: str) -> str:
    proc = subprocess.run([sys.executable, "-c", script, *args], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip().splitlines()[-1]


@pytest.fixture(scope="module")
def lstm_bundle(tmp_path_factory, parity_obs):
    out = tmp_path_factory.mktemp("rt_lstm")
    actor = make_actor("lstm")
    export_bundle(actor, make_spec(), out, parity_obs)
    xs = parity_obs[:80]  # one 80-step rollout from zero state
    h = c = torch.zeros(1, 1, 16)
    ys = []
    with torch.no_grad():
        for x in xs:
            y, h, c = actor(torch.from_numpy(x[None]), h, c)
            ys.append(y[0].numpy())
    np.save(out.parent / "x.npy", xs)
    np.save(out.parent / "y.npy", np.stack(ys))
    return out


def test_lstm_bundle_runs_without_torch(lstm_bundle):
    doc = json.loads(_python(SCRIPT, str(lstm_bundle), str(lstm_bundle.parent / "x.npy"),
                             str(lstm_bundle.parent / "y.npy")))
    assert doc["torch_loaded"] is False
    assert doc["direct_err"] <= 1e-5
    assert doc["runtime_err"] <= 1e-5  # through edgerl.runtime.bundle.load_bundle


def test_runtime_loader_rejects_tampered_and_newer(lstm_bundle, tmp_path):
    bad = shutil.copytree(lstm_bundle, tmp_path / "tampered")
    data = bytearray((bad / "policy.onnx").read_bytes())
    data[100] ^= 0x01
    (bad / "policy.onnx").write_bytes(bytes(data))
    msg = _python(LOAD_ONLY, str(bad))
    assert msg.startswith("BundleError") and "policy.onnx: sha256 mismatch" in msg

    newer = shutil.copytree(lstm_bundle, tmp_path / "newer")
    doc = json.loads((newer / "manifest.json").read_text())
    doc["schema_version"] += 1
    (newer / "manifest.json").write_text(json.dumps(doc))
    msg = _python(LOAD_ONLY, str(newer))
    assert msg.startswith("BundleError") and "schema_version" in msg and "newer" in msg


def test_inspect_without_torch_or_onnx(lstm_bundle):
    """``edgerl inspect`` on a [runtime]-only install: compat read from parity.json."""
    script = textwrap.dedent("""
        import sys
        sys.modules["torch"] = None
        sys.modules["onnx"] = None
        from edgerl.apps.cli import main
        sys.exit(main(["inspect", sys.argv[1], "--json"]))
    """)
    proc = subprocess.run([sys.executable, "-c", script, str(lstm_bundle)], capture_output=True,
                          text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["manifest"]["recurrent"]["kind"] == "lstm"
    assert doc["tensorrt_compat"]["ok"] is True and "LSTM" in doc["tensorrt_compat"]["ops"]
