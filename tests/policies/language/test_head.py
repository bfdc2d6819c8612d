"""GroundedChunkHead: chunk shape, rows inside the action limits, grounding on a slot."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")

from edgerl.policies.language.config import LanguagePlannerConfig  # noqa: E402
from edgerl.policies.language.head import GroundedChunkHead, untrained_head  # noqa: E402


def _head() -> GroundedChunkHead:
    torch.manual_seed(0)
    return GroundedChunkHead(obs_dim=6, robot_index=[0, 1], slot_index=[[2, 3], [4, 5]],
                             embed_dim=3, horizon=4, action_dim=2, action_low=[-1.0, -0.5],
                             action_high=[1.0, 0.5], hidden_dims=[8]).eval()


def test_chunks_have_the_horizon_and_stay_inside_the_limits():
    head = _head()
    with torch.no_grad():
        chunk = head(100.0 * torch.randn(5, 6), torch.randn(5, 3))
    assert chunk.shape == (5, 4, 2)
    assert bool((chunk[..., 0].abs() <= 1.0).all()) and bool((chunk[..., 1].abs() <= 0.5).all())


def test_features_read_the_robot_state_and_the_weighted_slots():
    head = _head()
    with torch.no_grad():
        head.ground.weight.zero_()
        head.ground.bias.copy_(torch.tensor([50.0, -50.0]))  # all weight on slot 0
        obs = torch.arange(6.0)[None]
        feats = head.features(obs, torch.zeros(1, 3))
    torch.testing.assert_close(feats, torch.tensor([[0.0, 1.0, 2.0, 3.0]]))


def test_config_rebuilds_the_same_network():
    head = _head()
    twin = GroundedChunkHead(**head.config())
    twin.load_state_dict(head.state_dict())
    obs, emb = torch.randn(3, 6), torch.randn(3, 3)
    with torch.no_grad():
        torch.testing.assert_close(twin.eval()(obs, emb), head(obs, emb))


def test_untrained_head_fits_the_task():
    head, spec = untrained_head(LanguagePlannerConfig(hidden_dims=[16]), embed_dim=5)
    assert head.obs_dim == spec.obs_dim and head.action_dim == spec.action_dim
    assert len(head.robot_list) + sum(len(s) for s in head.slot_list) == spec.obs_dim
    with torch.no_grad():
        assert head(torch.zeros(2, spec.obs_dim), torch.zeros(2, 5)).shape == (2, 8, 2)
