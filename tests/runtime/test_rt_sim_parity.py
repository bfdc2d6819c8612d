"""Sim-in-the-loop parity: the EditLoop, stepped with a virtual clock against the bare
cartpole task, reproduces the training LatencyWrapper's commands and return (edit method,
planner delay D = 2 steps, period P = 4)."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("tensordict")

from rt_bundles import write_mlp_bundle  # noqa: E402

from edgerl.chunk import ActionChunk  # noqa: E402
from edgerl.clock import VirtualClock  # noqa: E402
from edgerl.runtime.bundle import load_bundle  # noqa: E402
from edgerl.runtime.chunk_buffer import ChunkBuffer  # noqa: E402
from edgerl.runtime.edit_loop import EditLoop, LoopConfig  # noqa: E402
from edgerl.runtime.safety import SafetyConfig  # noqa: E402
from edgerl.spec import LatencyModel  # noqa: E402

D, P, H, STEPS, BOUND = 2, 4, 10, 150, 0.3


def _make_env():
    from edgerl.sim.registry import make_task

    return make_task("cartpole", num_envs=1, seed=3)


def _planner(lqr: torch.Tensor):
    def plan(obs: torch.Tensor, env_ids=None) -> torch.Tensor:
        decay = 0.95 ** torch.arange(H, dtype=torch.float32)
        a = (-(obs @ lqr)).clamp(-1.0, 1.0)
        return (a[:, None] * decay[None, :])[..., None]  # (n, H, 1)
    return plan


def test_edit_loop_reproduces_training_wrapper(tmp_path):
    from edgerl.sim.wrappers.latency import LatencyCfg, LatencyWrapper

    bundle = write_mlp_bundle(tmp_path / "b", obs_dim=4, action_dim=1, control_hz=50.0,
                              horizon=H, chunk_dt=0.02, residual_bound=BOUND, hidden=(16, 16),
                              seed=5)
    spec, net = load_bundle(bundle, warmup=1)
    sess = ort.InferenceSession(str(bundle / "policy.onnx"), providers=["CPUExecutionProvider"])
    dt = spec.control_dt

    # --- training wrapper rollout -----------------------------------------------------------
    env = _make_env()
    plan = _planner(env._lqr)
    cfg = LatencyCfg(method="edit", latency=LatencyModel(planner_delay_steps=D,
                                                         planner_period_steps=P),
                     horizon=H, edit_bound=BOUND, lookahead=spec.edit_obs.lookahead,
                     n_committed=spec.edit_obs.n_committed, control_dt=dt)
    wrapped = LatencyWrapper(env, cfg, planner=plan)
    obs = wrapped.get_observations()
    train_cmds, train_rew = [], []
    for _ in range(STEPS):
        x = obs["policy"].numpy().astype(np.float32)
        residual = torch.from_numpy(sess.run(None, {"obs": x})[0])
        obs, rew, dones, _ = wrapped.step(residual)
        train_cmds.append(float(wrapped.last_command[0, 0]))
        train_rew.append(float(rew[0]))
        if bool(dones[0]):
            break

    # --- runtime rollout: bare env, EditLoop ticks at t = k * dt ------------------------------
    env = _make_env()
    buf = ChunkBuffer()
    loop = EditLoop(spec, net, buf, clock=VirtualClock(0.0),
                    cfg=LoopConfig(safety=SafetyConfig(stale_policy="policy")))
    in_flight: dict[int, ActionChunk] = {}
    robot = env.get_observations()["policy"]
    loop_cmds, loop_rew = [], []
    for k in range(len(train_cmds)):
        t = k * dt
        loop.obs.write(robot[0].numpy(), t)
        if k % P == 0:  # query on the newest observation; arrives D steps later
            rows = plan(robot).numpy()[0]
            in_flight[k + D] = ActionChunk(actions=rows, t0=t, dt=dt, obs_time=t, step0=k)
        if k in in_flight:
            buf.push(in_flight.pop(k), now=t)
        cmd = loop.tick(t)
        loop_cmds.append(float(cmd[0]))
        out, rew, dones, _ = env.step(torch.from_numpy(cmd.copy())[None])
        robot = out["policy"]
        loop_rew.append(float(rew[0]))

    assert len(train_cmds) >= 50
    np.testing.assert_allclose(loop_cmds, train_cmds, atol=1e-5)
    assert sum(loop_rew) == pytest.approx(sum(train_rew), rel=1e-4, abs=1e-4)
    states = loop.metrics.state_counts
    assert states[1] == D and states[0] == len(train_cmds) - D  # no chunk until the first arrives
