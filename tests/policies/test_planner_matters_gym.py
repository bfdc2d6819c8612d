"""The planner matters on a task this project did not build, with the default configuration.

gymnasium's ``Reacher-v5`` with the target marked planner-only (its position and the
fingertip-to-target vector: what a camera gives the planner), the planner 200 ms late. The
new-task protocol's cells at a small budget: a privileged ``nodelay`` expert (the planner's
demonstrations), then ``edit``, ``edit_zero_chunks`` and the planner alone, all with the
default :class:`~edgerl.policies.config.TrainConfig`. Before the planner's intent, the warm
start and the guard, ``edit`` scored the same as ``edit_zero_chunks`` here ("keep the arm
still"); this test keeps that from coming back.
"""

from __future__ import annotations

import pytest
import torch

from edgerl.policies.protocol import ProtocolCell, ProtocolConfig, run_cell

#: ~100 s of CPU on one core (the expert, three cells and their evaluations): the default
#: 300 s per test is too tight on a loaded machine
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200)]

HZ = 50.0  # Reacher-v5: dt 0.02 s


@pytest.fixture(scope="module")
def scores(tmp_path_factory) -> dict[str, float]:
    torch.set_num_threads(1)
    root = tmp_path_factory.mktemp("reacher")
    cfg = ProtocolConfig(task="gym:Reacher-v5", planner_only=[4, 5, 8, 9], seeds=(0,),
                         iterations=10, expert_iterations=120, num_envs=32, episodes=32,
                         train={"bc": {"demo_steps": 200}})
    expert = run_cell(cfg, ProtocolCell("nodelay", 0), root, HZ, None)
    out = {"nodelay": expert["return_mean"]}
    for name in ("edit", "edit_zero_chunks", "planner"):
        out[name] = run_cell(cfg, ProtocolCell(name, 0), root, HZ, expert["run"])["return_mean"]
    return out


def test_edit_beats_the_same_network_without_the_planner(scores):
    assert scores["edit"] > scores["edit_zero_chunks"] + 0.5, scores


def test_edit_is_at_least_the_planner_alone(scores):
    assert scores["edit"] >= scores["planner"], scores
    assert scores["nodelay"] > scores["edit_zero_chunks"], scores  # the expert is one
