"""The latency wrapper tests' clock env, stamping planner and reference schedule."""

from __future__ import annotations

import numpy as np
import torch
from tensordict import TensorDict

from edgerl.contract.spec import LatencyModel
from edgerl.sim.vec_env import EdgeVecEnv, TaskSpec
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper, required_horizon

DT = 0.02


class StepEnv(EdgeVecEnv):
    """A clock: obs = [step within episode, env index]; episodes last ``length`` steps.

    Records every action it receives, so tests see exactly what was applied when.
    """

    def __init__(self, num_envs: int = 3, length: int = 1000) -> None:
        self.num_envs, self.num_actions, self.device = num_envs, 1, torch.device("cpu")
        self.max_episode_length, self.cfg = length, None
        self.spec = TaskSpec("clock", ["t", "env"], ["step", "-"], ["a"], ["-"], [-1e9], [1e9],
                             1.0 / DT, length)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.applied: list[torch.Tensor] = []

    def _obs(self) -> TensorDict:
        obs = torch.stack([self.episode_length_buf.float(),
                           torch.arange(self.num_envs, dtype=torch.float32)], dim=-1)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs])

    def get_observations(self) -> TensorDict:
        return self._obs()

    def reset(self, env_ids: torch.Tensor | None = None) -> TensorDict:
        self.episode_length_buf[slice(None) if env_ids is None else env_ids] = 0
        return self._obs()

    def _step(self, actions):
        self.applied.append(actions.clone())
        self.episode_length_buf += 1
        dones = self.episode_length_buf >= self.max_episode_length
        self.episode_length_buf[dones] = 0
        return self._obs(), torch.zeros(self.num_envs), dones, {"time_outs": dones}

    def expert_action(self) -> torch.Tensor:
        return torch.zeros(self.num_envs, 1)


class StampPlanner:
    """Writes the step it saw into its chunk: row i = 1000 * (seen step + 1) + i."""

    def __init__(self, horizon: int) -> None:
        self.horizon = horizon
        self.calls: list[tuple[np.ndarray, np.ndarray]] = []  # (env_ids, chunks)

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        rows = torch.arange(self.horizon, dtype=torch.float32)
        chunks = (1000.0 * (obs[:, 0:1] + 1.0) + rows[None, :])[..., None]
        self.calls.append((env_ids.numpy().copy(), chunks.numpy().copy()))
        return chunks


def run(method: str, latency: LatencyModel, steps: int, horizon: int = 0, length: int = 1000,
        num_envs: int = 3, actions=None, **cfg_kwargs):
    env = StepEnv(num_envs, length)
    h = horizon or required_horizon(latency, cfg_kwargs.get("lookahead", 2))
    planner = StampPlanner(h)
    cfg = LatencyCfg(method=method, latency=latency, horizon=h, **cfg_kwargs)
    wrapper = LatencyWrapper(env, cfg, planner)
    commands, observations = [], [wrapper.get_observations()]
    for t in range(steps):
        act = torch.zeros(num_envs, 1) if actions is None else actions(t)
        obs, _, _, _ = wrapper.step(act)
        commands.append(wrapper.last_command[:, 0].clone())
        observations.append(obs)
    return wrapper, env, planner, torch.stack(commands), observations


def expected_command(t: int, d: int, p: int, h: int, stale: int) -> float:
    """The reference schedule: newest query k (multiple of P) with k + D <= t."""
    if t < d:
        return 0.0
    k = p * ((t - d) // p)
    if t - k >= h + stale:
        return 0.0
    return 1000.0 * (k + 1) + min(t - k, h - 1)
