"""``edgerl export`` on a real (tiny) training run, and ``edgerl inspect`` on good/bad bundles."""

from __future__ import annotations

import json
import shutil

import pytest

from edgerl.apps.cli import main
from edgerl.contract.spec import SCHEMA_VERSION, load_bundle_manifest
from edgerl.export.bundle import export_bundle
from edgerl.export.tensorrt import tensorrt_status
from tests.helpers.export_models import make_actor, make_spec

QUIET = ["--log-level", "WARNING"]


@pytest.fixture(scope="module")
def bundle_dir(tmp_path_factory, parity_obs):
    out = tmp_path_factory.mktemp("cli_bundle")
    export_bundle(make_actor("gru"), make_spec(), out, parity_obs)
    return out


@pytest.fixture
def bundle_copy(bundle_dir, tmp_path):
    return shutil.copytree(bundle_dir, tmp_path / "bundle")


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
    """Cartpole trained for one PPO iteration through ``edgerl train``."""
    run = tmp_path_factory.mktemp("runs") / "cartpole_edit"
    rc = main([*QUIET, "train", "cartpole", "--method", "edit", "--delay-steps", "2",
               "--num-envs", "4", "--iterations", "1", "--steps-per-env", "4", "--out",
               str(run), "--no-progress", "--json"])
    assert rc == 0
    return run


@pytest.mark.slow
class TestExportVerb:
    """A real run exported through the CLI."""

    def test_export_json_and_bundle(self, run_dir, tmp_path, capsys):
        out = tmp_path / "b"
        capsys.readouterr()
        rc = main([*QUIET, "export", str(run_dir), "--out", str(out), "--c-header",
                   "--recorded", "200", "--random", "800", "--num-envs", "4", "--json"])
        assert rc == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["ok"] is True
        assert doc["parity"]["policy_onnx"]["n_observations"] == 1000
        for check in ("policy_onnx", "c_header", "numpy_mlp"):
            assert doc["parity"][check]["outputs"][0]["max_abs_err"] <= 1e-5
        spec = load_bundle_manifest(out)
        assert spec.task == "cartpole" and spec.method == "edit"
        assert spec.latency.planner_delay_steps == 2
        assert {"policy.onnx", "policy.h", "policy_mlp.npz", "parity.json"} <= set(spec.files)

    def test_too_few_parity_observations(self, run_dir, tmp_path, capsys):
        rc = main([*QUIET, "export", str(run_dir), "--out", str(tmp_path / "x"),
                   "--recorded", "10", "--random", "10"])
        assert rc == 1
        assert ">= 1000 parity observations" in capsys.readouterr().err


class TestExportErrors:
    @pytest.mark.parametrize("method, flags, reason", [
        ("nodelay", ["--privileged"], "privileged upper bound"),
        ("edit_zero_chunks", [], "all-zero chunks")])
    def test_controls_are_not_deployable(self, tmp_path, capsys, method, flags, reason):
        run = tmp_path / method
        assert main([*QUIET, "train", "cartpole_goal", "--method", method, *flags,
                     "--delay-steps", "2", "--num-envs", "4", "--iterations", "1",
                     "--steps-per-env", "4", "--out", str(run), "--no-progress", "--json"]) == 0
        capsys.readouterr()
        rc = main([*QUIET, "export", str(run), "--out", str(tmp_path / "b")])
        assert rc == 1
        err = capsys.readouterr().err
        assert "is not deployable" in err and reason in err and not (tmp_path / "b").exists()

    def test_missing_run(self, tmp_path, capsys):
        rc = main([*QUIET, "export", str(tmp_path / "nope"), "--out", str(tmp_path / "b")])
        assert rc == 1
        err = capsys.readouterr().err
        assert "edgerl export: error: cannot load run" in err and "nope" in err

    @pytest.mark.skipif(tensorrt_status()[0], reason="TensorRT present here")
    def test_trt_missing_is_named(self, tmp_path, capsys):
        rc = main([*QUIET, "export", str(tmp_path / "run"), "--out", str(tmp_path / "b"),
                   "--trt"])
        assert rc == 1
        err = capsys.readouterr().err
        assert "--trt:" in err and "tensorrt" in err and not (tmp_path / "b").exists()


class TestInspect:
    def test_table(self, bundle_dir, capsys):
        assert main(["inspect", str(bundle_dir)]) == 0
        out = capsys.readouterr().out
        flat = " ".join(out.replace("│", " ").split())  # the table wraps long values
        assert "H 8, P 3, D 0 (max 0) steps, stale after H+3, merge replace" in flat
        for needle in ("toy", "gru: ['h_in'] -> ['h_out'] [[1, 1, 16]]", "policy.onnx",
                       "parity.json", "policy_onnx", "TensorRT compatibility (opset 17"):
            assert needle in out

    def test_json(self, bundle_dir, capsys):
        assert main(["inspect", str(bundle_dir), "--json"]) == 0
        doc = json.loads(capsys.readouterr().out)
        assert doc["manifest"]["recurrent"]["kind"] == "gru"
        timing = doc["manifest"]["timing"]
        assert timing["horizon"] == doc["manifest"]["chunk"]["horizon"]
        assert timing["latency"] == doc["manifest"]["latency"]
        assert timing["stale_steps"] == load_bundle_manifest(bundle_dir).timing.stale_steps
        assert {f["file"] for f in doc["files"]} == {"policy.onnx", "parity.json"}
        assert all(f["verified"] for f in doc["files"])
        assert {c["output"] for c in doc["parity"]} == {"action", "h_out"}
        assert all(c["max_abs_err"] <= 1e-5 for c in doc["parity"])
        assert doc["tensorrt_compat"]["ok"] is True

    def test_tampered_onnx_rejected(self, bundle_copy, capsys):
        data = bytearray((bundle_copy / "policy.onnx").read_bytes())
        data[-10] ^= 0xFF
        (bundle_copy / "policy.onnx").write_bytes(bytes(data))
        assert main(["inspect", str(bundle_copy)]) == 2  # a refused bundle exits 2
        err = capsys.readouterr().err
        assert "policy.onnx: sha256 mismatch" in err

    def test_newer_schema_rejected(self, bundle_copy, capsys):
        manifest = bundle_copy / "manifest.json"
        doc = json.loads(manifest.read_text())
        doc["schema_version"] = SCHEMA_VERSION + 1
        manifest.write_text(json.dumps(doc))
        assert main(["inspect", str(bundle_copy)]) == 2  # a refused bundle exits 2
        err = capsys.readouterr().err
        assert f"schema_version: {SCHEMA_VERSION + 1} is newer" in err

    def test_missing_file_rejected(self, bundle_copy, capsys):
        (bundle_copy / "parity.json").unlink()
        assert main(["inspect", str(bundle_copy)]) == 2  # a refused bundle exits 2
        assert "parity.json: listed in the manifest but missing" in capsys.readouterr().err

    def test_missing_bundle(self, tmp_path, capsys):
        assert main(["inspect", str(tmp_path / "none")]) == 2  # a refused bundle exits 2
        assert "bundle directory not found" in capsys.readouterr().err
