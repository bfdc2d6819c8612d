"""The edit actor's warm start (a DAgger student of the planner without delay) and the
validation guard that deploys the best of final / best / warm-start / planner-alone."""

from __future__ import annotations

import pytest
import torch
from rsl_rl.models import MLPModel
from tensordict import TensorDict

from edgerl.contract.spec import LatencyModel
from edgerl.policies.config import DistillConfig, GuardConfig
from edgerl.policies.distill import distill_actor
from edgerl.policies.guard import DEPLOY_NAME, select_deployed, zero_residual
from edgerl.sim.vec_env import EdgeVecEnv, TaskSpec
from edgerl.sim.wrappers import LatencyCfg, LatencyWrapper


class Aim(EdgeVecEnv):
    """obs = [step, 1]; reward = -|applied - aim|; 8-step episodes."""

    def __init__(self, num_envs: int = 4, aim: float = 0.5) -> None:
        self.num_envs, self.num_actions, self.device, self.cfg = num_envs, 1, "cpu", None
        self.max_episode_length, self.aim = 8, aim
        self.spec = TaskSpec("aim", ["t", "one"], ["", ""], ["a"], [""], [-1.0], [1.0], 50.0, 8)
        self.episode_length_buf = torch.zeros(num_envs, dtype=torch.long)
        self.applied: list[torch.Tensor] = []

    def get_observations(self) -> TensorDict:
        obs = torch.stack([self.episode_length_buf.float(), torch.ones(self.num_envs)], -1)
        return TensorDict({"policy": obs}, batch_size=[self.num_envs])

    def reset(self, env_ids=None) -> TensorDict:
        self.episode_length_buf[slice(None) if env_ids is None else env_ids] = 0
        return self.get_observations()

    def _step(self, actions):
        self.applied.append(actions.clone())
        rew = -(actions[:, 0] - self.aim).abs()
        self.episode_length_buf += 1
        dones = self.episode_length_buf >= self.max_episode_length
        self.episode_length_buf[dones] = 0
        return self.get_observations(), rew, dones.long(), {"time_outs": dones}

    def expert_action(self) -> torch.Tensor:
        return torch.full((self.num_envs, 1), self.aim)


def _edit_env(row: float, aim: float = 0.5) -> LatencyWrapper:
    """An edit method whose planner's every row is ``row`` (no delay, bound 1)."""
    def plan(obs, env_ids):
        return torch.full((obs.shape[0], 4, 1), row)

    cfg = LatencyCfg(method="edit", latency=LatencyModel(planner_delay_steps=0,
                                                         planner_period_steps=1),
                     horizon=4, edit_bound=1.0)
    return LatencyWrapper(Aim(aim=aim), cfg, planner=plan)


def _actor(env) -> MLPModel:
    torch.manual_seed(0)
    return MLPModel(env.get_observations(), {"actor": ["policy"]}, "actor", 1, hidden_dims=[16],
                    obs_normalization=True,
                    distribution_cfg={"class_name": "GaussianDistribution", "init_std": 0.3,
                                      "std_type": "scalar"})


def test_the_student_learns_the_teachers_residual_on_top_of_the_chunk_row():
    env = _edit_env(row=-0.2)
    actor = _actor(env)
    losses = distill_actor(env, actor, lambda e: torch.full((e.num_envs, 1), 0.5),
                           DistillConfig(rounds=2, steps=16, epochs=60, learning_rate=3e-3),
                           show_progress=False)
    assert len(losses) == 2 and losses[-1] < 0.01
    # round 0 acted as the teacher: the env got the teacher's action (row + residual 0.7)
    assert torch.allclose(env.unwrapped.applied[0], torch.full((4, 1), 0.5))
    with torch.no_grad():
        out = actor(env.get_observations())
    assert torch.allclose(out, torch.full((4, 1), 0.7), atol=0.1)  # (0.5 - (-0.2)) / 1
    assert distill_actor(env, actor, lambda e: e, DistillConfig(rounds=0)) == []


def test_zero_residual_zeroes_only_the_output_layer():
    actor = _actor(_edit_env(row=0.0))
    state = zero_residual(actor.state_dict())
    last = max((k for k in state if k.startswith("mlp.") and k.endswith(".weight")),
               key=lambda k: int(k.split(".")[1]))
    assert state[last].abs().sum() == 0 and state[last.replace("weight", "bias")].abs().sum() == 0
    first = "mlp.0.weight"
    assert torch.equal(state[first], actor.state_dict()[first])
    assert actor.state_dict()[last].abs().sum() > 0  # the original is untouched


@pytest.mark.parametrize(("row", "expected"), [(0.5, "planner"), (-0.5, "edit")])
def test_the_guard_deploys_the_better_of_the_planner_alone_and_the_edit(tmp_path, row,
                                                                         expected):
    """A good planner (row = the aim) beats an edit that pushes it away; a bad one loses to
    the edit that corrects it. Either way the deployed actor is the better one."""
    env = _edit_env(row=row)
    actor = _actor(env)
    edit = zero_residual(actor.state_dict())
    edit[max((k for k in edit if k.endswith(".bias") and k.startswith("mlp.")),
             key=lambda k: int(k.split(".")[1]))].fill_(1.0)  # residual +1 everywhere
    cands = {"edit": edit, "planner": zero_residual(actor.state_dict())}
    out = select_deployed(env, actor, cands, GuardConfig(episodes=4), tmp_path)
    assert out["deployed"] == expected, out["scores"]
    saved = torch.load(tmp_path / DEPLOY_NAME, weights_only=False)
    assert saved["infos"]["deployed"] == expected
    assert all(torch.equal(saved["actor_state_dict"][k], cands[expected][k]) for k in edit)
    assert out["scores"][expected]["return_mean"] > out["scores"][
        "edit" if expected == "planner" else "planner"]["return_mean"]


def test_config_bounds():
    with pytest.raises(ValueError):
        DistillConfig(steps=0)
    with pytest.raises(ValueError):
        GuardConfig(episodes=-1)


def test_an_env_can_be_evaluated_again_after_an_evaluation():
    """The guard evaluates several candidates on one env: the second reset must not trip on
    the inference tensors the first evaluation left in the env."""
    from edgerl.policies.evaluate import evaluate
    from edgerl.sim.adapters.gymnasium import GymVecEnv

    env = GymVecEnv("InvertedPendulum-v5", num_envs=2, seed=0)
    try:
        for _ in range(2):
            out = evaluate(env, lambda obs: torch.zeros(obs.shape[0], 1), 2,
                           show_progress=False)
            assert out.episodes == 2 and out.return_mean > 0
    finally:
        env.close()


def test_pairs_link_each_sample_to_the_step_before_it_in_its_episode():
    from edgerl.policies.distill import _pairs

    steps = []
    for t in range(4):
        first = torch.tensor([t == 0, t == 2])  # env 1 starts a new episode at step 2
        steps.append({"x": torch.full((2, 1), float(t)), "y": torch.zeros(2, 1),
                      "v": torch.full((2, 1), 10.0 * t), "row": torch.full((2, 1), float(t)),
                      "first": first})
    d = _pairs(steps)
    assert d["x"][:, 0].tolist() == [0, 0, 1, 1, 2, 2, 3, 3]
    assert d["x0"][2:, 0].tolist() == [0, 0, 1, 1, 2, 2]
    assert d["linked"].tolist() == [False, False, True, True, True, False, True, True]
    assert d["dv"][2:, 0].tolist() == [10.0] * 6 and d["drow"][2:, 0].tolist() == [1.0] * 6


def test_the_smoothness_term_makes_the_students_error_steadier():
    """A teacher the student cannot follow exactly (a step-by-step zigzag its inputs do not
    show): with the smoothness term its command changes less from step to step."""
    rates = {}
    for smooth in (0.0, 5.0):
        env = _edit_env(row=0.0)
        actor = _actor(env)
        def teacher(e, zig={"k": 0}):  # noqa: B006 -- the zigzag's own step counter
            zig["k"] += 1
            return torch.full((e.num_envs, 1), 0.3 if zig["k"] % 2 else -0.3)

        distill_actor(env, actor, teacher, DistillConfig(rounds=2, steps=16, epochs=40,
                                                         smooth=smooth,
                                                         learning_rate=3e-3),
                      show_progress=False)
        outs = []
        obs = env.get_observations()
        with torch.no_grad():
            for _ in range(6):
                outs.append(actor(obs))
                obs, *_ = env.step(outs[-1])
        rates[smooth] = float(torch.stack(outs).diff(dim=0).abs().mean())
    assert rates[5.0] < rates[0.0], rates


def test_the_guard_deploys_the_best_candidate_that_is_smooth_enough(monkeypatch, tmp_path):
    """Scores as validation would give them (in evaluation order: candidates, then the
    reference): the jerky best loses to the best smooth one; with none smooth, the best wins."""
    import edgerl.policies.guard as guard

    env = _edit_env(row=0.0)
    actor = _actor(env)
    state = actor.state_dict()
    cands = {"final": state, "best": state, "warm": state}

    def run(summaries):
        it = iter(summaries)
        monkeypatch.setattr(guard, "_evaluate", lambda *a: next(it))
        return select_deployed(env, actor, cands, GuardConfig(episodes=2), tmp_path,
                               reference=lambda e: torch.zeros(e.num_envs, 1),
                               reference_name="expert")

    def s(ret, rate):
        return {"success_rate": float("nan"), "return_mean": ret, "action_rate": rate}

    out = run([s(-5, 0.03), s(-3, 0.09), s(-4, 0.02), s(-2, 0.02)])  # reference: rate 0.02
    assert out["deployed"] == "warm" and out["smooth_enough"] == ["warm"]
    assert (out["reference"]["name"], out["reference"]["action_rate"]) == ("expert", 0.02)
    out = run([s(-5, 0.5), s(-3, 0.9), s(-4, 0.7), s(-2, 0.02)])
    assert out["deployed"] == "best" and out["smooth_enough"] == []


def test_the_intent_teacher_decodes_the_held_chunks_intent_on_the_fresh_observation():
    """Before a chunk arrives the teacher is the planner without delay; once one is held, it
    is the planner's decoder on the newest observation and *that chunk's* intent (planned
    steps ago), which differs from the fresh planner's row."""
    from edgerl.policies.bc_planner import BCChunkPlanner
    from edgerl.policies.distill import intent_teacher

    torch.manual_seed(0)
    net = BCChunkPlanner(2, 1, 4, [-1.0], [1.0], hidden_dims=[8], intent_dim=2,
                         fast_indices=[0])
    net.in_std.fill_(4.0)  # step counts 0..7 in a usable range
    cfg = LatencyCfg(method="edit", latency=LatencyModel(planner_delay_steps=2,
                                                         planner_period_steps=4),
                     horizon=4, edit_bound=1.0, intent_dim=2)
    env = LatencyWrapper(Aim(), cfg, planner=net.plan_fn())
    env.reset()
    teach = intent_teacher(net)
    fresh = net.plan(env.get_observations()["robot"])[:, 0]
    assert not bool(env.scheduler.has_chunk().any())
    assert torch.allclose(teach(env), fresh)
    for _ in range(3):
        env.step(torch.zeros(4, 1))
    assert bool(env.scheduler.has_chunk().all())
    robot = env.get_observations()["robot"]
    held = env.scheduler.cur_intent
    want = net.decode(robot, held)[:, 0]
    assert torch.allclose(teach(env), want)
    assert not torch.allclose(want, net.plan(robot)[:, 0], atol=1e-4)  # the intent is stale
