"""``edgerl trt-engine BUNDLE``: what runs without TensorRT (argument checks, the gate's
refusals, the named error where TensorRT / CUDA / onnxruntime's TensorRT EP are missing, the
paths and the sidecar) and the gating logic over stand-ins for the ``tensorrt`` module and the
CUDA check. The build itself needs a GPU with TensorRT and is not run here."""

from __future__ import annotations

import hashlib
import json
import sys
import types
from pathlib import Path

import pytest

from edgerl.apps.cli import main
from edgerl.contract.errors import UserError
from edgerl.export import tensorrt as trt_mod
from edgerl.export import trt_bundle
from edgerl.export.tensorrt import TensorRTUnavailable, cuda_status, tensorrt_status
from edgerl.export.trt_bundle import (
    SIDECAR_FORMAT,
    EnginePlan,
    ModelEngine,
    build_bundle_engines,
    build_status,
    plan_engines,
    sidecar_document,
    write_sidecar,
)
from edgerl.runtime.bundle_check import verify_bundle
from tests.helpers.bundles import write_mlp_bundle

USABLE = build_status()[0]
no_trt_here = pytest.mark.skipif(USABLE, reason="TensorRT and a CUDA GPU are present here")


@pytest.fixture
def bundle(tmp_path) -> Path:
    """A valid edit bundle with a planner (policy.onnx + planner.onnx)."""
    return write_mlp_bundle(tmp_path / "bundle", hidden=(8,), planner=True)


def _snapshot(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest()
            for p in sorted(directory.iterdir()) if p.is_file()}


def _run(capsys, *argv: str) -> tuple[int, str, str]:
    rc = main(["trt-engine", *argv])
    out = capsys.readouterr()
    return rc, out.out, out.err


class TestArguments:
    @pytest.mark.parametrize("value", ["0", "65537", "lots"])
    def test_workspace_out_of_range_is_a_usage_error(self, bundle, tmp_path, capsys, value):
        with pytest.raises(SystemExit) as exc:
            main(["trt-engine", str(bundle), "--workspace-mb", value, "--out",
                  str(tmp_path / "cache")])
        assert exc.value.code == 2
        assert "--workspace-mb" in capsys.readouterr().err
        assert not (tmp_path / "cache").exists()

    @pytest.mark.parametrize("where", [".", "engines"])
    def test_out_inside_the_bundle_is_refused(self, bundle, capsys, where):
        before = _snapshot(bundle)
        rc, _, err = _run(capsys, str(bundle), "--out", str(bundle / where))
        assert rc == 1
        assert "is inside the bundle" in err and "as it was signed" in err
        assert _snapshot(bundle) == before and not (bundle / "engines").exists()

    def test_out_that_is_a_file_is_refused(self, bundle, tmp_path, capsys):
        (tmp_path / "cache").write_text("")
        rc, _, err = _run(capsys, str(bundle), "--out", str(tmp_path / "cache"))
        assert rc == 1 and "not a directory" in err

    def test_missing_bundle(self, tmp_path, capsys):
        rc, _, err = _run(capsys, str(tmp_path / "nope"), "--out", str(tmp_path / "cache"))
        assert rc == 2 and "bundle refused (BundleFileError)" in err


class TestGate:
    """The bundle passes the one gate before anything else: a refused bundle exits 2 (here,
    where TensorRT is missing, the gate's refusal still comes first), nothing is written."""

    def test_modified_network_is_refused(self, bundle, tmp_path, capsys):
        with (bundle / "policy.onnx").open("ab") as f:
            f.write(b"\0")
        rc, _, err = _run(capsys, str(bundle), "--out", str(tmp_path / "cache"))
        assert rc == 2 and "bundle refused (BundleHashError)" in err and "policy.onnx" in err
        assert not (tmp_path / "cache").exists()

    def test_an_engine_dropped_into_the_bundle_is_refused(self, bundle, tmp_path, capsys):
        """What a user might try instead: a raw engine beside the signed manifest."""
        (bundle / "policy.engine").write_bytes(b"engine")
        rc, _, err = _run(capsys, str(bundle), "--out", str(tmp_path / "cache"))
        assert rc == 2 and "bundle refused (UnlistedFileError)" in err
        assert not (tmp_path / "cache").exists()

    def test_manifest_edited_after_signing_is_refused(self, bundle, tmp_path, capsys,
                                                      monkeypatch):
        pytest.importorskip("cryptography")
        from edgerl.runtime.bundle_sign import generate_keypair, sign_manifest

        priv, pub = generate_keypair(tmp_path / "keys")
        sign_manifest(bundle, priv)
        doc = json.loads((bundle / "manifest.json").read_text())
        doc["timing"]["hold_s"] = 4.0  # within bounds: only the signature can tell
        (bundle / "manifest.json").write_text(json.dumps(doc))
        rc, _, err = _run(capsys, str(bundle), "--pubkey", str(pub), "--out",
                          str(tmp_path / "cache"))
        assert rc == 2 and "bundle refused (BundleSignatureError)" in err
        monkeypatch.setenv("EDGERL_BUNDLE_PUBKEY", str(pub))  # the robot's configured key
        rc, _, err = _run(capsys, str(bundle), "--out", str(tmp_path / "cache"))
        assert rc == 2 and "BundleSignatureError" in err
        assert not (tmp_path / "cache").exists()


@no_trt_here
class TestWithoutTensorRT:
    def test_status_names_everything_missing(self):
        ok, msg = build_status()
        assert not ok
        import importlib.util

        import onnxruntime as ort

        if importlib.util.find_spec("tensorrt") is None:
            assert "tensorrt Python package is not importable" in msg
        if "TensorrtExecutionProvider" not in ort.get_available_providers():
            assert "has no TensorrtExecutionProvider (available: " in msg
            assert "CPUExecutionProvider" in msg

    def test_cli_fails_before_writing_and_names_what_is_missing(self, bundle, tmp_path,
                                                                capsys):
        before = _snapshot(bundle)
        rc, out, err = _run(capsys, str(bundle), "--out", str(tmp_path / "cache"))
        assert rc == 1 and out == ""
        assert err.startswith("edgerl trt-engine: error: cannot build TensorRT engines on "
                              "this machine, nothing was written: ")
        assert err.strip().endswith(build_status()[1])
        assert not (tmp_path / "cache").exists()
        assert _snapshot(bundle) == before

    def test_library_refuses_before_creating_the_work_dir(self, bundle, tmp_path):
        spec = verify_bundle(bundle)
        plan = plan_engines(bundle, spec, tmp_path / "cache")
        with pytest.raises(TensorRTUnavailable):
            build_bundle_engines(plan, spec)
        assert not (tmp_path / "cache").exists()

    def test_cuda_status_names_the_library_or_the_device(self):
        ok, msg = cuda_status()
        if ok:
            pytest.skip(f"a CUDA device is visible here: {msg}")
        assert "libcudart" in msg or "no CUDA device is visible" in msg


class TestGating:
    """:func:`tensorrt_status` (torch-free path) and :func:`build_status` over a stand-in
    ``tensorrt`` module: only their decisions and messages are checked, nothing is built."""

    @pytest.fixture
    def fake_trt(self, monkeypatch):
        module = types.ModuleType("tensorrt")
        module.__version__ = "10.3.0"
        monkeypatch.setitem(sys.modules, "tensorrt", module)
        return module

    def test_no_device(self, fake_trt, monkeypatch):
        monkeypatch.setattr(trt_mod, "cuda_status",
                            lambda: (False, "no CUDA device is visible (error 100)"))
        assert tensorrt_status(torch_cuda=False) == (
            False, "tensorrt 10.3.0 imports but no CUDA device is visible (error 100)")

    def test_device_and_version(self, fake_trt, monkeypatch):
        monkeypatch.setattr(trt_mod, "cuda_status", lambda: (True, "CUDA device 0 of 1 "
                                                             "(compute capability 8.7)"))
        assert tensorrt_status(torch_cuda=False) == (
            True, "tensorrt 10.3.0 on CUDA device 0 of 1 (compute capability 8.7)")
        fake_trt.__version__ = "8.6.2"
        ok, msg = tensorrt_status(torch_cuda=False)
        assert not ok and msg == "tensorrt 8.6.2 is too old; edgerl needs >= 10"

    def test_build_status_needs_the_onnxruntime_provider_too(self, fake_trt, monkeypatch):
        monkeypatch.setattr(trt_mod, "cuda_status", lambda: (True, "CUDA device 0 of 1"))
        monkeypatch.setattr(trt_bundle, "_onnxruntime_status",
                            lambda: (False, "onnxruntime 1.23.2 has no TensorrtExecutionProvider"))
        assert build_status() == (False, "onnxruntime 1.23.2 has no TensorrtExecutionProvider")
        monkeypatch.setattr(trt_bundle, "_onnxruntime_status",
                            lambda: (True, "onnxruntime 1.23.0 with TensorrtExecutionProvider"))
        assert build_status() == (True, "tensorrt 10.3.0 on CUDA device 0 of 1; onnxruntime "
                                        "1.23.0 with TensorrtExecutionProvider")


class TestPlan:
    def test_paths_models_and_runtime_settings(self, bundle, tmp_path):
        spec = verify_bundle(bundle)
        plan = plan_engines(bundle, spec, tmp_path / "cache", workspace_mb=2048)
        sha = hashlib.sha256((bundle / "manifest.json").read_bytes()).hexdigest()
        cache = (tmp_path / "cache").resolve()
        assert plan.manifest_sha256 == sha and plan.cache_dir == cache
        assert plan.models == (("policy.onnx", spec.files["policy.onnx"]),
                               ("planner.onnx", spec.files["planner.onnx"]))
        assert plan.work_dir == cache / f"bundle-{sha[:12]}-fp32"
        assert plan.engine_path("policy.onnx") == plan.work_dir / "policy.engine"
        assert plan.engine_path("planner.onnx") == plan.work_dir / "planner.engine"
        assert plan.sidecar_path == plan.work_dir / "trt_engine.json"
        assert plan.runtime_settings() == {
            "ros_parameters": {"device": "tensorrt", "trt_cache_dir": str(cache),
                               "trt_fp16": False, "trt_workspace_mb": 2048},
            "environment": {"EDGERL_TRT_CACHE": str(cache)}}
        fp16 = plan_engines(bundle, spec, tmp_path / "cache", fp16=True)
        assert fp16.work_dir == cache / f"bundle-{sha[:12]}-fp16"
        assert fp16.runtime_settings()["ros_parameters"]["trt_fp16"] is True
        assert not cache.exists()  # planning writes nothing

    def test_default_is_the_runtimes_cache_dir(self, bundle, tmp_path, monkeypatch):
        from edgerl.runtime.inference import TensorRTOptions

        monkeypatch.setenv("EDGERL_TRT_CACHE", str(tmp_path / "env-cache"))
        plan = plan_engines(bundle, verify_bundle(bundle))
        assert plan.cache_dir == (tmp_path / "env-cache").resolve()
        # the directory onnxruntime's TensorRT EP is given when trt_cache_dir is ''
        runtime = TensorRTOptions(cache_dir=None).provider_options()["trt_engine_cache_path"]
        assert Path(runtime).resolve() == plan.cache_dir

    def test_a_bundle_without_networks(self, bundle, tmp_path):
        spec = verify_bundle(bundle)
        spec.files = {"parity.json": spec.files["parity.json"]}
        with pytest.raises(UserError, match="lists none of policy.onnx, planner.onnx"):
            plan_engines(bundle, spec, tmp_path / "cache")

    def test_policy_only_bundle(self, tmp_path):
        b = write_mlp_bundle(tmp_path / "b", hidden=(8,))
        plan = plan_engines(b, verify_bundle(b), tmp_path / "cache")
        assert [m for m, _ in plan.models] == ["policy.onnx"]

    def test_workspace_bounds(self, bundle, tmp_path):
        with pytest.raises(UserError, match="1..65536"):
            plan_engines(bundle, verify_bundle(bundle), tmp_path / "c", workspace_mb=0)


class TestSidecar:
    def _plan(self, tmp_path) -> EnginePlan:
        return EnginePlan(bundle=tmp_path / "b", cache_dir=tmp_path / "cache",
                          manifest_sha256="ab" * 32, task="cartpole", method="edit", fp16=True,
                          workspace_mb=512, models=(("policy.onnx", "cd" * 32),))

    def test_content(self, tmp_path):
        plan = self._plan(tmp_path)
        model = ModelEngine(file="policy.onnx", onnx_sha256="cd" * 32,
                            engine=f"bundle-{'ab' * 6}-fp16/policy.engine", engine_bytes=1234,
                            engine_sha256="ef" * 32, build_s=12.5,
                            ort_provider="TensorrtExecutionProvider", ort_load_s=30.0,
                            ort_cache_files=("x.engine", "x.profile"),
                            max_abs_diff_vs_cpu=1e-3)
        env = {"tensorrt": "10.3.0", "onnxruntime": "1.23.0", "numpy": "1.21.6",
               "device": "tensorrt 10.3.0 on CUDA device 0 of 1 (compute capability 8.7)"}
        doc = sidecar_document(plan, [model], env, "2026-01-01T00:00:00+00:00")
        assert doc["format"] == SIDECAR_FORMAT
        assert doc["bundle"] == str(tmp_path / "b") and doc["manifest_sha256"] == "ab" * 32
        assert (doc["task"], doc["method"], doc["fp16"], doc["workspace_mb"]) == \
            ("cartpole", "edit", True, 512)
        assert doc["cache_dir"] == str(tmp_path / "cache") and doc["environment"] == env
        assert doc["runtime"]["ros_parameters"] == {
            "device": "tensorrt", "trt_cache_dir": str(tmp_path / "cache"), "trt_fp16": True,
            "trt_workspace_mb": 512}
        [m] = doc["models"]
        assert m["ort_cache_files"] == ["x.engine", "x.profile"]
        assert m["engine"].startswith("bundle-abababababab-fp16/") and m["note"] == ""
        path = write_sidecar(tmp_path / "trt_engine.json", doc)
        assert json.loads(path.read_text()) == doc
        assert [p.name for p in tmp_path.iterdir() if p.is_file()] == ["trt_engine.json"]

    def test_sidecar_never_lands_in_the_bundle(self, bundle, tmp_path):
        plan = plan_engines(bundle, verify_bundle(bundle), tmp_path / "cache")
        assert not plan.sidecar_path.is_relative_to(bundle.resolve())
        assert not plan.engine_path("policy.onnx").is_relative_to(bundle.resolve())


def test_help_lists_the_flags(capsys):
    with pytest.raises(SystemExit) as exc:
        main(["trt-engine", "--help"])
    assert exc.value.code == 0
    text = capsys.readouterr().out
    for flag in ("--fp16", "--workspace-mb N", "--out DIR", "--pubkey", "--json"):
        assert flag in text



class TestRuntimeBackends:
    """The onnxruntime step opens each network as the nodes do; on the CPU here (the
    TensorRT device itself is not available), which checks the construction and the
    comparison the build reports."""

    def test_policy_and_planner_open_as_the_nodes_open_them(self, bundle, tmp_path):
        spec = verify_bundle(bundle)
        plan = plan_engines(bundle, spec, tmp_path / "cache")
        policy = trt_bundle._runtime_backend(plan, spec, "policy.onnx", "cpu")
        planner = trt_bundle._runtime_backend(plan, spec, "planner.onnx", "cpu")
        assert policy.provider == planner.provider == "CPUExecutionProvider"
        assert policy.input.shape[-1] == spec.edit_obs.dim
        assert policy.output.shape[-1] == spec.action.dim
        assert planner.input.shape[-1] == spec.observation.dim
        assert planner.output.size == spec.chunk.horizon * spec.action.dim

    @pytest.mark.parametrize("recurrent", [False, True])
    def test_difference_of_two_backends(self, tmp_path, recurrent):
        a_dir = write_mlp_bundle(tmp_path / "a", hidden=(8,), recurrent=recurrent)
        b_dir = write_mlp_bundle(tmp_path / "b", hidden=(8,), recurrent=recurrent, seed=1)
        opened = []
        for d in (a_dir, a_dir, b_dir):
            spec = verify_bundle(d)
            plan = plan_engines(d, spec, tmp_path / "cache")
            opened.append(trt_bundle._runtime_backend(plan, spec, "policy.onnx", "cpu"))
        assert trt_bundle._max_abs_diff(opened[0], opened[1], 16) == 0.0
        assert trt_bundle._max_abs_diff(opened[0], opened[2], 16) > 1e-3
