"""Isaac Lab / mjlab ``RslRlVecEnvWrapper`` adapter: layout extraction and stepping.

Neither framework runs in ``.venv`` (mjlab is exercised for real by ``make test-mjlab`` in
``.venv-mjlab``). Here a small class implements the *surface* the adapter reads from their
``RslRlVecEnvWrapper`` (num_envs, num_actions, device, max_episode_length, get_observations,
step, reset, clip_actions, unwrapped.{step_dt, observation_manager, action_manager}), with
trivial integrator dynamics; rsl_rl and edgerl's wrappers are the real ones.
"""

from __future__ import annotations

import pytest
import torch
from tensordict import TensorDict

from edgerl.contract.spec import LatencyModel
from edgerl.sim.adapters.rsl_rl_wrapper import (
    FrameworkUnavailable,
    RslRlEnvAdapter,
    extract_layout,
    make_mjlab_task,
)
from edgerl.sim.registry import get_task_info
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper


class _Term:
    def __init__(self, names: list[str], attr: str) -> None:
        setattr(self, attr, names)


class _ObsManager:
    def __init__(self, group: str) -> None:
        self.active_terms = {group: ["cart_pos", "pole_angle", "vel"], "critic": ["x"]}
        self.group_obs_term_dim = {group: [(1,), (2,), (2,)], "critic": [(5,)]}


class _ActionManager:
    def __init__(self, attr: str) -> None:
        self.active_terms = ["effort", "gripper"]
        self.action_term_dim = [2, 1]
        self._terms = {"effort": _Term(["slider", "hinge"], attr), "gripper": object()}

    def get_term(self, name: str):
        return self._terms[name]


class _Unwrapped:
    step_dt = 0.02

    def __init__(self, owner: FakeRslRlWrapper, group: str, attr: str) -> None:
        self.owner = owner
        self.observation_manager = _ObsManager(group)
        self.action_manager = _ActionManager(attr)

    def reset(self, env_ids=None):
        self.owner.state[env_ids] = 0.0
        self.owner.episode_length_buf[env_ids] = 0
        return self.owner.get_observations(), {}


class FakeRslRlWrapper:
    """The RslRlVecEnvWrapper surface: obs group ``group``, episodes of 4 steps."""

    def __init__(self, num_envs: int = 3, group: str = "actor", attr: str = "target_names",
                 managers: bool = True, clip_actions: float | None = 2.0) -> None:
        self.num_envs, self.num_actions, self.device = num_envs, 3, torch.device("cpu")
        self.max_episode_length = 4
        self.clip_actions = clip_actions
        self.group = group
        self.state = torch.zeros(num_envs, 5)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.unwrapped = _Unwrapped(self, group, attr) if managers else self
        self.step_dt = 0.02
        self.applied: list[torch.Tensor] = []

    def get_observations(self) -> TensorDict:
        return TensorDict({self.group: self.state.clone(), "critic": 2 * self.state},
                          batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        self.applied.append(actions.clone())
        self.state[:, :3] += actions
        self.episode_length_buf += 1
        dones = self.episode_length_buf >= self.max_episode_length
        self.state[dones] = 0.0
        self.episode_length_buf[dones] = 0
        return self.get_observations(), self.state[:, 0].clone(), dones.long(), {"log": {}}

    def reset(self):
        self.state.zero_()
        return self.get_observations(), {}

    def close(self) -> None:
        self.closed = True


class TestLayout:
    def test_mjlab_style_names(self):
        env = RslRlEnvAdapter(FakeRslRlWrapper(), name="mjlab:Fake")
        s = env.spec
        assert env.layout.source == "managers" and env.policy_group == "actor"
        assert s.obs_names == ["cart_pos", "pole_angle[0]", "pole_angle[1]", "vel[0]", "vel[1]"]
        assert s.action_names == ["effort/slider", "effort/hinge", "gripper"]
        assert (s.action_low, s.action_high) == ([-2.0] * 3, [2.0] * 3)  # +-clip_actions
        assert s.control_hz == pytest.approx(50.0) and s.max_episode_steps == 4

    def test_isaaclab_style_joint_names_and_policy_group(self):
        env = RslRlEnvAdapter(FakeRslRlWrapper(group="policy", attr="_joint_names"),
                              action_low=[-1, -1, 0], action_high=[1, 1, 0.5])
        assert env.policy_group == "policy"
        assert env.spec.action_names == ["effort/slider", "effort/hinge", "gripper"]
        assert env.spec.action_low == [-1.0, -1.0, 0.0]

    def test_generic_names_without_managers(self):
        fake = FakeRslRlWrapper(managers=False)
        layout = extract_layout(fake, "actor", 5, 3)
        assert layout.source == "generic"
        assert layout.obs_names == [f"obs{i}" for i in range(5)]
        assert layout.action_names == ["act0", "act1", "act2"]

    def test_mismatched_term_dims_fall_back(self):
        fake = FakeRslRlWrapper()
        fake.unwrapped.observation_manager.group_obs_term_dim["actor"] = [(1,), (1,), (1,)]
        assert extract_layout(fake, "actor", 5, 3).obs_names[0] == "obs0"

    def test_bad_limits_and_group(self):
        with pytest.raises(ValueError, match="low < high"):
            RslRlEnvAdapter(FakeRslRlWrapper(), action_low=[1, 1, 1], action_high=[0, 0, 0])
        with pytest.raises(ValueError, match="not in the env's groups"):
            RslRlEnvAdapter(FakeRslRlWrapper(), policy_group="proprio")


class TestStepping:
    def test_policy_group_remapped_and_extras_filled(self):
        fake = FakeRslRlWrapper()
        env = RslRlEnvAdapter(fake)
        obs, rew, dones, extras = env.step(torch.full((3, 3), 5.0))
        assert set(obs.keys()) == {"policy", "critic"}
        assert torch.equal(fake.applied[-1], torch.full((3, 3), 2.0))  # clipped to the limits
        assert obs["policy"][:, 0].tolist() == [2.0, 2.0, 2.0]
        assert extras["time_outs"].tolist() == [False] * 3
        assert extras["success"].tolist() == [False] * 3
        after = env.reset(torch.tensor([1]))["policy"]
        assert after[1].abs().sum() == 0 and after[0, 0] == 2.0

    def test_edit_latency_wrapper_on_top(self):
        fake = FakeRslRlWrapper()
        env = RslRlEnvAdapter(fake)
        chunk = torch.tensor([0.5, -0.5, 0.25])

        def plan(obs, env_ids=None):
            return chunk.expand(obs.shape[0], 8, 3).clone()

        cfg = LatencyCfg(method="edit", latency=LatencyModel(planner_delay_steps=1,
                                                             planner_period_steps=1),
                         horizon=8, edit_bound=0.1)
        wrapped = LatencyWrapper(env, cfg, planner=plan)
        assert wrapped.dt == pytest.approx(0.02)
        for _ in range(3):
            wrapped.step(torch.ones(3, 3))  # residual +1 -> +edit_bound
        assert torch.allclose(fake.applied[-1], chunk + 0.1)

    def test_no_expert_message(self):
        with pytest.raises(NotImplementedError, match="expert_run"):
            RslRlEnvAdapter(FakeRslRlWrapper()).expert_action()


class TestGates:
    def test_mjlab_family_gated_with_instructions(self):
        try:
            import mjlab  # noqa: F401
        except ImportError:
            with pytest.raises(KeyError, match="make test-mjlab"):
                get_task_info("mjlab:Mjlab-Cartpole-Balance")
            with pytest.raises(FrameworkUnavailable, match=".venv-mjlab"):
                make_mjlab_task("mjlab:Mjlab-Cartpole-Balance")
        else:  # pragma: no cover - only inside .venv-mjlab
            assert get_task_info("mjlab:Mjlab-Cartpole-Balance").backend == "mjlab"

    def test_isaaclab_family_gated(self):
        try:
            import isaaclab  # noqa: F401
        except ImportError:
            with pytest.raises(KeyError, match="Isaac Lab is not importable"):
                get_task_info("isaaclab:Isaac-Cartpole-v0")
        else:  # pragma: no cover
            assert get_task_info("isaaclab:Isaac-Cartpole-v0").backend == "isaaclab"
