"""The categorical PPO head: its math against torch.distributions, and rsl_rl PPO with it
learning a discrete state-dependent choice that a Gaussian-scored argmax is trained on
differently."""

from __future__ import annotations

import pytest
import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from edgerl.policies.categorical import CATEGORICAL, CategoricalDistribution


def test_log_prob_entropy_kl_match_torch():
    torch.manual_seed(0)
    logits = torch.randn(5, 3)
    other = torch.randn(5, 3)
    dist = CategoricalDistribution(3)
    dist.update(logits)
    ref = torch.distributions.Categorical(logits=logits)
    onehot = dist.sample()
    assert onehot.shape == (5, 3) and torch.equal(onehot.sum(-1), torch.ones(5))
    idx = onehot.argmax(-1)
    assert torch.allclose(dist.log_prob(onehot), ref.log_prob(idx), atol=1e-6)
    assert torch.allclose(dist.entropy, ref.entropy(), atol=1e-6)
    old = dist.params
    dist.update(other)
    kl = dist.kl_divergence(old, dist.params)
    ref_kl = torch.distributions.kl_divergence(ref, torch.distributions.Categorical(logits=other))
    assert torch.allclose(kl, ref_kl, atol=1e-6)
    assert torch.equal(dist.deterministic_output(other), other)


def test_samples_follow_the_probabilities():
    torch.manual_seed(1)
    dist = CategoricalDistribution(3)
    dist.update(torch.log(torch.tensor([[0.7, 0.2, 0.1]])).expand(20000, 3))
    freq = dist.sample().mean(0)
    assert torch.allclose(freq, torch.tensor([0.7, 0.2, 0.1]), atol=0.015)


def test_refuses_one_choice_and_use_before_update():
    with pytest.raises(ValueError, match=">= 2 choices"):
        CategoricalDistribution(1)
    with pytest.raises(RuntimeError, match="before update"):
        CategoricalDistribution(2).sample()


def test_mlp_model_with_the_head_starts_near_uniform_and_exports_logits():
    obs = TensorDict({"policy": torch.randn(4, 6)}, batch_size=[4])
    model = MLPModel(obs, {"actor": ["policy"]}, "actor", 3, hidden_dims=[8],
                     distribution_cfg={"class_name": CATEGORICAL})
    out = model(obs, stochastic_output=True)
    assert out.shape == (4, 3) and torch.equal(out.sum(-1), torch.ones(4))
    assert float(model.output_entropy.detach().min()) > 0.99 * float(torch.log(torch.tensor(3.0)))
    logits = model(obs)
    assert logits.shape == (4, 3)
    exported = model.as_onnx(verbose=False).eval()
    assert torch.allclose(exported(obs["policy"]), logits, atol=1e-6)


class _SignBandit:
    """A one-step contextual bandit: obs s in {-1, +1}; choice 0 pays 1 when s < 0, choice 2
    pays 1 when s > 0, choice 1 pays 0.5 always (the safe middle a Gaussian-score argmax
    drifts to when its scores are noisy). Every step ends the episode."""

    num_actions, max_episode_length, cfg = 3, 1, {}

    def __init__(self, n: int) -> None:
        self.num_envs, self.device = n, torch.device("cpu")
        self.episode_length_buf = torch.zeros(n, dtype=torch.long)
        self.gen = torch.Generator().manual_seed(0)
        self._draw()

    def _draw(self) -> None:
        self.s = torch.randint(0, 2, (self.num_envs,), generator=self.gen).float() * 2 - 1

    def get_observations(self) -> TensorDict:
        return TensorDict({"policy": self.s[:, None]}, batch_size=[self.num_envs])

    def step(self, actions: torch.Tensor):
        choice = actions.argmax(-1)
        right = torch.where(self.s > 0, 2, 0)
        rew = torch.where(choice == right, 1.0, torch.where(choice == 1, 0.5, 0.0))
        self._draw()
        return self.get_observations(), rew, torch.ones(self.num_envs, dtype=torch.bool), {}


def test_ppo_with_the_head_learns_the_state_dependent_choice(tmp_path):
    from edgerl.policies.config import ModelConfig, TrainConfig
    from edgerl.policies.ppo_runner import EdgeRunner

    torch.manual_seed(0)
    torch.set_num_threads(1)
    net = ModelConfig(hidden_dims=[16], init_std=1.0, output_scale=1.0)
    tcfg = TrainConfig(task="cartpole", method="nodelay", seed=0, num_envs=64, iterations=15,
                       num_steps_per_env=8, save_interval=100, actor=net, critic=net)
    cfg = tcfg.rsl_rl_cfg(["policy"])
    cfg["actor"]["distribution_cfg"] = {"class_name": CATEGORICAL}
    env = _SignBandit(64)
    runner = EdgeRunner(env, cfg, log_dir=tmp_path, total_iterations=15)
    actor = runner.alg.get_policy()
    obs = TensorDict({"policy": torch.tensor([[-1.0], [1.0]])}, batch_size=[2])
    with torch.no_grad():
        before = actor(obs).softmax(-1)
    runner.learn(15)
    with torch.no_grad():
        after = actor(obs).softmax(-1)
    assert float(before.max()) < 0.4  # near uniform at the start
    assert after.argmax(-1).tolist() == [0, 2]
    assert float(after[0, 0]) > 0.8 and float(after[1, 2]) > 0.8
