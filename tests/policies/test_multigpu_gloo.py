"""Multi-process PPO (rsl-rl-lib's multi-GPU path) on the CPU: torchrun, gloo, 2 ranks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch

WORKER = textwrap.dedent('''
    import os, sys
    import torch
    torch.set_num_threads(1)
    from edgerl.policies.config import ModelConfig, TrainConfig
    from edgerl.policies.train import train

    out, dump = sys.argv[1], sys.argv[2]
    cfg = TrainConfig(task="cartpole", method="nodelay", iterations=2, num_envs=8,
                      num_steps_per_env=8, actor=ModelConfig(hidden_dims=[16, 16]),
                      critic=ModelConfig(hidden_dims=[16, 16]))
    res = train(cfg, out=out, show_progress=False)
    rank = int(os.environ["RANK"])
    state = {k: v.detach().cpu().clone() for k, v in res.policy.state_dict().items()}
    torch.save({"state": state, "rows": len(res.history),
                "world": torch.distributed.get_world_size(),
                "backend": torch.distributed.get_backend()}, f"{dump}/rank{rank}.pt")
    torch.distributed.destroy_process_group()
''')


@pytest.mark.slow
def test_two_gloo_ranks_end_with_identical_weights(tmp_path):
    (tmp_path / "worker.py").write_text(WORKER)
    run_dir = tmp_path / "run"
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
           str(tmp_path / "worker.py"), str(run_dir), str(tmp_path)]
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stderr[-3000:]
    r0 = torch.load(tmp_path / "rank0.pt")
    r1 = torch.load(tmp_path / "rank1.pt")
    assert (r0["world"], r0["backend"]) == (2, "gloo")
    assert r0["rows"] == 2 and r1["rows"] == 0  # only rank 0 logs
    assert r0["state"].keys() == r1["state"].keys() and len(r0["state"]) > 4
    for key in r0["state"]:  # each rank saw its own envs (seed + rank); gradients averaged
        assert torch.equal(r0["state"][key], r1["state"][key]), key
    # rank 0 alone wrote the run; its final checkpoint holds the same weights
    assert (run_dir / "config.json").is_file() and (run_dir / "summary.json").is_file()
    ckpt = torch.load(run_dir / "model_1.pt", weights_only=False)["actor_state_dict"]
    for key, value in ckpt.items():
        if key in r0["state"]:
            assert torch.equal(value, r0["state"][key]), key


def test_cuda_device_must_match_local_rank(monkeypatch):
    from edgerl.policies.ppo_runner import init_distributed

    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("RANK", "1")
    monkeypatch.setenv("LOCAL_RANK", "1")
    with pytest.raises(ValueError, match="LOCAL_RANK 1"):
        init_distributed("cuda:0")
