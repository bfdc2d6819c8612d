"""arm_reach's compiled step (sim/tasks/arm_kernels.py) against the task's definition written
out in numpy: kinematics, hold counter, reward, success, time-outs, over random states and at
the boundaries (the hold reaching ``hold_steps``, the last step of an episode)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from edgerl.sim.tasks.arm import LINK1, LINK2, ArmReachCfg, ArmReachEnv, arm_fk
from edgerl.sim.tasks.arm_kernels import arm_reach_observe, arm_reach_transition

TOL, HOLD, COST, BONUS, MAX_LEN = 0.03, 5, 0.01 / 9.0, 5.0, 150


def _inputs(n: int, seed: int) -> dict[str, np.ndarray]:
    rng = np.random.default_rng(seed)
    qpos = rng.uniform(-np.pi, np.pi, (n, 2))
    goal = arm_fk(qpos) + rng.normal(0.0, 0.03, (n, 2))  # about half within TOL
    return {"qpos": qpos, "qvel": rng.normal(0.0, 2.0, (n, 2)),
            "act": rng.uniform(-3.0, 3.0, (n, 2)), "goal": goal,
            "const": rng.normal(size=(n, 14)).astype(np.float32),
            "hold": rng.integers(0, HOLD + 1, n), "ep_len": rng.integers(MAX_LEN - 4, MAX_LEN, n)}


def _reference(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """The task's step as its docstring defines it, in float64 numpy."""
    q = x["qpos"]
    tip = arm_fk(q)
    critic = np.concatenate([np.stack([np.cos(q[:, 0]), np.sin(q[:, 0]), np.cos(q[:, 1]),
                                       np.sin(q[:, 1])], axis=1), x["qvel"], tip, x["const"]],
                            axis=1)
    dist = np.linalg.norm(tip - x["goal"], axis=1)
    hold = np.where(dist < TOL, x["hold"] + 1, 0)
    success = hold >= HOLD
    ep_len = x["ep_len"] + 1
    time_outs = (ep_len >= MAX_LEN) & ~success
    reward = -COST * np.sum(x["act"] ** 2, axis=1) - dist + BONUS * success
    return {"critic": critic, "hold": hold, "success": success, "ep_len": ep_len,
            "time_outs": time_outs, "dones": success | time_outs, "reward": reward}


def _run(x: dict[str, np.ndarray]) -> tuple[dict[str, np.ndarray], int]:
    n = x["qpos"].shape[0]
    out = {"critic": np.empty((n, 22), np.float32), "policy": np.empty((n, 16), np.float32),
           "reward": np.empty(n, np.float32), "success": np.empty(n, bool),
           "time_outs": np.empty(n, bool), "dones": np.empty(n, bool),
           "hold": x["hold"].copy(), "ep_len": x["ep_len"].copy()}
    ndone = arm_reach_transition(x["qpos"], x["qvel"], x["act"], x["goal"], x["const"],
                                 out["hold"], out["ep_len"], TOL, HOLD, COST, BONUS, MAX_LEN,
                                 LINK1, LINK2, out["critic"], out["policy"], out["reward"],
                                 out["success"], out["time_outs"], out["dones"])
    return out, ndone


class TestTransitionKernel:
    @pytest.mark.parametrize("seed", [0, 1, 2])
    def test_matches_the_numpy_definition(self, seed):
        x = _inputs(300, seed)
        out, ndone = _run(x)
        ref = _reference(x)
        np.testing.assert_allclose(out["critic"], ref["critic"], atol=1e-6)
        np.testing.assert_array_equal(out["policy"], out["critic"][:, :16])
        np.testing.assert_allclose(out["reward"], ref["reward"], atol=1e-5)
        for key in ("hold", "success", "ep_len", "time_outs", "dones"):
            np.testing.assert_array_equal(out[key], ref[key], err_msg=key)
        assert ndone == int(ref["dones"].sum())
        # the draws cover every branch
        assert 0 < ref["success"].sum() < 300 and ref["time_outs"].any()

    def test_boundaries_hold_and_last_step(self):
        x = _inputs(4, 3)
        x["goal"] = arm_fk(x["qpos"])  # all four at the goal
        x["goal"][3] += 0.5  # env 3 far away
        x["hold"] = np.array([HOLD - 1, HOLD - 2, HOLD - 1, HOLD])
        x["ep_len"] = np.array([MAX_LEN - 1, MAX_LEN - 1, 0, MAX_LEN - 1])
        out, ndone = _run(x)
        # env 0 succeeds on its last step: a success, not a time-out
        assert out["success"].tolist() == [True, False, True, False]
        assert out["time_outs"].tolist() == [False, True, False, True]
        assert out["hold"].tolist() == [HOLD, HOLD - 1, HOLD, 0]  # far away: the hold resets
        assert ndone == 4
        np.testing.assert_allclose(out["reward"][:3] - BONUS * out["success"][:3],
                                   -COST * np.sum(x["act"][:3] ** 2, axis=1), atol=1e-5)

    def test_observe_kernel_writes_the_same_rows(self):
        x = _inputs(50, 4)
        out, _ = _run(x)
        critic, policy = np.empty((50, 22), np.float32), np.empty((50, 16), np.float32)
        arm_reach_observe(x["qpos"], x["qvel"], x["const"], critic, policy, LINK1, LINK2)
        np.testing.assert_array_equal(critic, out["critic"])
        np.testing.assert_array_equal(policy, out["policy"])


class TestEnvUsesTheKernel:
    def test_observations_are_fresh_contiguous_and_consistent(self):
        env = ArmReachEnv(num_envs=6, seed=1, cfg=ArmReachCfg(hold_steps=1000))
        obs1, _, _, _ = env.step(torch.full((6, 2), 0.5))
        first = obs1["policy"].clone()
        obs2, _, _, _ = env.step(torch.full((6, 2), -0.5))
        # a returned observation is never written again by a later step
        torch.testing.assert_close(obs1["policy"], first)
        assert obs2["policy"].is_contiguous() and obs2["critic"].is_contiguous()
        torch.testing.assert_close(obs2["policy"], obs2["critic"][:, :16])
        # recomputing from the state (get_observations) gives the step's observation
        again = env.get_observations()
        torch.testing.assert_close(again["critic"], obs2["critic"])
        np.testing.assert_allclose(obs2["policy"][:, 6:8].numpy(), arm_fk(env.sim.qpos),
                                   atol=1e-6)
