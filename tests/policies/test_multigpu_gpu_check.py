"""edgerl.apps.experiments.probes.gpu_check: the one-shot GPU figures, smoke-run on the CPU."""

from __future__ import annotations

import importlib
import json

import pytest
import torch


def _load():
    return importlib.import_module("edgerl.apps.experiments.probes.gpu_check")


def test_cpu_smoke_reports_rates(tmp_path, capsys):
    torch.set_num_threads(1)
    out = tmp_path / "gpu.json"
    rc = _load().main(["--device", "cpu", "--num-envs", "32", "64", "--steps", "4",
                       "--ppo-num-envs", "16", "--ppo-iterations", "2", "--steps-per-env", "4",
                       "--out", str(out)])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report == json.loads(out.read_text())
    assert report["machine"]["device"] == "cpu" and report["machine"]["torch"]
    rows = {(r["task"], r["num_envs"]): r for r in report["env_steps"]}
    assert set(rows) == {("cartpole", 32), ("cartpole", 64), ("driving", 32), ("driving", 64)}
    assert all(r["steps_per_s"] > 0 for r in rows.values())
    (ppo,) = report["ppo"]
    assert (ppo["num_envs"], ppo["iterations"], ppo["samples_per_iteration"]) == (16, 2, 64)
    assert ppo["ppo_sps"] > 0


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_absent_exits_with_a_message():
    with pytest.raises(SystemExit, match="CUDA is not available"):
        _load().main(["--device", "cuda"])


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_cuda_tasks_adapter_and_ppo(tmp_path, capsys):  # pragma: no cover - GPU machines only
    """On a GPU: the torch tasks, a gymnasium env through the adapter and PPO run on cuda."""
    from edgerl.sim.adapters.gymnasium import GymVecEnv

    env = GymVecEnv("Pendulum-v1", num_envs=4, device="cuda")
    try:
        obs, rew, dones, _ = env.step(torch.zeros(4, 1, device="cuda"))
        assert obs["policy"].device.type == "cuda" and rew.device.type == "cuda"
    finally:
        env.close()
    rc = _load().main(["--device", "cuda", "--num-envs", "4096", "--steps", "5",
                       "--ppo-iterations", "2", "--steps-per-env", "4"])
    assert rc == 0
    report = json.loads(capsys.readouterr().out)
    assert report["machine"]["gpu"] and all(r["steps_per_s"] > 0 for r in report["env_steps"])
