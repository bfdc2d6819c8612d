"""BC chunk planner: labels, bounded output, and a loss that decreases on expert data."""

from __future__ import annotations

import pytest
import torch

from edgerl.policies.bc_planner import (
    BCChunkPlanner,
    chunk_labels,
    collect_expert_demos,
    fit_bc,
)
from edgerl.sim.registry import make_task


class TestChunkLabels:
    def test_rows_follow_the_episode_and_hold_at_its_end(self):
        # 1 env, actions 0..5; the episode ends after step 2 (dones[2] = True).
        actions = torch.arange(6, dtype=torch.float32).view(6, 1, 1)
        dones = torch.zeros(6, 1, dtype=torch.bool)
        dones[2] = True
        labels = chunk_labels(actions, dones, horizon=3)
        assert labels.shape == (6, 1, 3, 1)
        assert labels[0, 0, :, 0].tolist() == [0, 1, 2]
        assert labels[1, 0, :, 0].tolist() == [1, 2, 2]  # step 3 is the next episode
        assert labels[2, 0, :, 0].tolist() == [2, 2, 2]
        assert labels[3, 0, :, 0].tolist() == [3, 4, 5]
        assert labels[5, 0, :, 0].tolist() == [5, 5, 5]  # past the data: hold


class TestNetwork:
    def test_output_shape_and_limits(self):
        net = BCChunkPlanner(3, 2, 4, [-1.0, 0.0], [1.0, 2.0], hidden_dims=[8])
        with torch.no_grad():
            net.mlp[-1].bias.fill_(50.0)  # saturate
        out = net(torch.randn(5, 3))
        assert out.shape == (5, 4, 2)
        assert torch.all(out[..., 0] <= 1.0) and torch.all(out[..., 1] <= 2.0)
        assert torch.all(out[..., 1] >= 0.0)

    def test_conditioning_vector_is_appended(self):
        net = BCChunkPlanner(3, 1, 2, [-1.0], [1.0], hidden_dims=[8], cond_dim=4)
        assert net.input_dim == 7
        assert net(torch.zeros(2, 7)).shape == (2, 2, 1)
        with pytest.raises(RuntimeError):
            net(torch.zeros(2, 3))

    def test_state_dict_round_trip(self):
        torch.manual_seed(0)
        net = BCChunkPlanner(4, 1, 3, [-1.0], [1.0], hidden_dims=[8])
        net.set_input_stats(torch.randn(20, 4) * 3 + 1)
        clone = BCChunkPlanner(**net.config())
        clone.load_state_dict(net.state_dict())
        x = torch.randn(6, 4)
        assert torch.equal(net(x), clone(x))


def test_bc_loss_decreases_on_expert_demos():
    torch.manual_seed(0)
    env = make_task("cartpole", num_envs=16, seed=3)
    demos = collect_expert_demos(env, steps=60, noise=0.1, seed=0, show_progress=False)
    assert demos.obs.shape == (60, 16, 4) and demos.actions.shape == (60, 16, 1)
    # the label is the clean expert action: within the limits and not constant
    assert demos.actions.abs().max() <= 1.0 and demos.actions.std() > 0.01
    labels = chunk_labels(demos.actions, demos.dones, horizon=6)
    net = BCChunkPlanner(4, 1, 6, [-1.0], [1.0], hidden_dims=[64, 64])
    losses = fit_bc(net, demos.obs.reshape(-1, 4), labels.reshape(-1, 6, 1), epochs=15,
                    batch_size=128, seed=0, show_progress=False)
    assert len(losses) == 15
    assert losses[-1] < 0.5 * losses[0]
    # the fitted planner's first row tracks the expert on fresh states
    env2 = make_task("cartpole", num_envs=32, seed=99)
    plan = net.plan(env2.get_observations()["policy"])
    err = (plan[:, 0] - env2.expert_action()).abs().mean()
    assert err < 0.5 * env2.expert_action().abs().mean() + 0.05


def test_fit_rejects_mismatched_inputs():
    net = BCChunkPlanner(4, 1, 2, [-1.0], [1.0], hidden_dims=[8])
    with pytest.raises(ValueError, match="differ in length"):
        fit_bc(net, torch.zeros(5, 4), torch.zeros(4, 2, 1), show_progress=False)
    with pytest.raises(ValueError, match="expects 4"):
        fit_bc(net, torch.zeros(5, 3), torch.zeros(5, 2, 1), show_progress=False)


class TestCommittedPrefix:
    """Real-time chunking: prefixes from the executed actions, conditioning the planner."""

    def test_prefix_inputs_follow_episodes(self):
        from edgerl.policies.bc_planner import prefix_inputs

        executed = torch.arange(1.0, 7.0).reshape(6, 1, 1)  # T=6, N=1, A=1: 1..6
        dones = torch.zeros(6, 1, dtype=torch.bool)
        dones[2, 0] = True  # the episode ends after step 2
        out = prefix_inputs(executed, dones, 3)
        assert out.shape == (6, 1, 3)
        assert out[0, 0].tolist() == [1.0, 2.0, 3.0]
        assert out[1, 0].tolist() == [2.0, 3.0, 0.0]  # step 3 is another episode
        assert out[3, 0].tolist() == [4.0, 5.0, 6.0]
        assert out[5, 0].tolist() == [6.0, 0.0, 0.0]  # past the data's end

    def test_plan_with_prefix_checks_sizes(self):
        from edgerl.policies.bc_planner import BCChunkPlanner

        net = BCChunkPlanner(4, 1, 6, [-1.0], [1.0], hidden_dims=[8], cond_dim=3)
        obs, prefix = torch.zeros(2, 4), torch.zeros(2, 3, 1)
        assert net.plan(obs, None, prefix).shape == (2, 6, 1)
        with pytest.raises(ValueError, match="expected 7"):
            net.plan(obs)


class TestIntent:
    def test_the_decoder_reads_the_intent_and_the_fast_observation_only(self):
        torch.manual_seed(0)
        net = BCChunkPlanner(4, 1, 3, [-1.0], [1.0], hidden_dims=[8], intent_dim=2,
                             fast_indices=[0, 1])
        x = torch.randn(5, 4)
        chunks, intent = net.forward_intent(x)
        assert chunks.shape == (5, 3, 1) and intent.shape == (5, 2)
        assert intent.abs().max() <= 1.0  # tanh
        # the planner-only elements (2, 3) reach the chunk only through the intent
        other = x.clone()
        other[:, 2:] = torch.randn(5, 2)
        assert torch.equal(net.decode(other, intent), chunks)
        assert not torch.equal(net.encode(other), intent)
        # plan() and forward() give the chunk; the sim wrappers' plan_fn() both
        assert torch.equal(net.plan(x), net(x))
        fn = net.plan_fn()
        assert fn.intent_dim == 2 and torch.equal(fn(x)[1], intent)
        plain = BCChunkPlanner(4, 1, 3, [-1.0], [1.0], hidden_dims=[8])
        assert plain.plan_fn() == plain.plan and plain.plan_with_intent(x)[1] is None
        clone = BCChunkPlanner(**net.config())
        clone.load_state_dict(net.state_dict())
        assert torch.equal(clone(x), net(x)) and net.config()["fast_indices"] == [0, 1]

    def test_bad_sizes_are_refused(self):
        with pytest.raises(ValueError, match="fast_indices within"):
            BCChunkPlanner(3, 1, 2, [-1.0], [1.0], intent_dim=2, fast_indices=[0, 5])

    def test_stale_inputs_come_from_the_same_episode(self):
        from edgerl.policies.bc_planner import stale_inputs

        # 1 env, 6 steps, the episode ends after step 2; inputs = the step index
        inputs = torch.arange(6, dtype=torch.float32).view(6, 1, 1)
        dones = torch.zeros(6, 1, dtype=torch.bool)
        dones[2] = True
        gen = torch.Generator().manual_seed(0)
        for _ in range(20):
            out = stale_inputs(inputs, dones, 2, gen)[:, 0, 0]
            for k, v in enumerate(out.tolist()):
                start = 0 if k <= 2 else 3
                assert max(start, k - 2) <= v <= k, (k, v)
        assert torch.equal(stale_inputs(inputs, dones, 0, gen), inputs)

    def test_fit_with_older_intent_inputs(self):
        torch.manual_seed(0)
        net = BCChunkPlanner(3, 1, 2, [-1.0], [1.0], hidden_dims=[16], intent_dim=2,
                             fast_indices=[0])
        x = torch.randn(256, 3)
        targets = torch.tanh(x[:, 1:2] + x[:, 2:3])[:, None, :].expand(-1, 2, 1).clone()
        losses = fit_bc(net, x, targets, epochs=40, batch_size=64, intent_inputs=x.clone(),
                        show_progress=False)
        assert losses[-1] < 0.5 * losses[0]
        with pytest.raises(ValueError, match="intent_inputs need an intent planner"):
            fit_bc(BCChunkPlanner(3, 1, 2, [-1.0], [1.0]), x, targets, intent_inputs=x,
                   show_progress=False)
