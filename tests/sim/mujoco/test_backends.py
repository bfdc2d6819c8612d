"""CPU MuJoCo batch backends: they agree, views are live, bad input is rejected."""

from __future__ import annotations

import mujoco
import numpy as np
import pytest

from edgerl.sim.mujoco.backends import BACKENDS, MujocoBatch, load_model


@pytest.fixture(scope="module")
def arm_model() -> mujoco.MjModel:
    return load_model("arm_planar.xml")


def _run(model: mujoco.MjModel, backend: str) -> np.ndarray:
    with MujocoBatch(model, 3, backend=backend, nthread=2) as sim:
        sim.ctrl[:] = [[1.0, -0.5], [0.0, 2.0], [-3.0, 0.3]]
        sim.field("mocap_pos")[:, 0, 0] = [0.1, 0.2, 0.3]
        for _ in range(5):
            sim.step(2)
        return sim.state.copy()


class TestBackends:
    def test_all_backends_give_identical_states(self, arm_model):
        states = {b: _run(arm_model, b) for b in BACKENDS}
        np.testing.assert_array_equal(states["loop"], states["batch"])
        # rollout does not return the solver warm-start; everything else is identical
        with MujocoBatch(arm_model, 1) as sim:
            warm = sim._component_index(mujoco.mjtState.mjSTATE_WARMSTART)
        keep = np.setdiff1d(np.arange(states["batch"].shape[1]), warm)
        np.testing.assert_array_equal(states["rollout"][:, keep], states["batch"][:, keep])

    def test_state_matches_a_plain_mjdata_loop(self, arm_model):
        data = mujoco.MjData(arm_model)
        data.ctrl[:] = [0.0, 2.0]
        for _ in range(10):
            mujoco.mj_step(arm_model, data)
        state = _run(arm_model, "batch")
        with MujocoBatch(arm_model, 3) as sim:
            sim.state[:] = state
            np.testing.assert_array_equal(sim.qpos[1], data.qpos)
            np.testing.assert_array_equal(sim.qvel[1], data.qvel)
            assert sim.field("time")[1] == pytest.approx(10 * arm_model.opt.timestep)

    def test_controls_move_the_arm_and_reset_restores_defaults(self, arm_model):
        with MujocoBatch(arm_model, 2) as sim:
            sim.ctrl[0] = [2.0, 0.0]
            sim.step(10)
            assert sim.qvel[0, 0] > 1.0 and sim.qvel[1, 0] == 0.0
            sim.reset(np.array([0]))
            np.testing.assert_array_equal(sim.qpos[0], arm_model.qpos0)
            assert sim.ctrl[0].tolist() == [0.0, 0.0]


class TestParams:
    def test_per_env_mass_changes_only_that_env(self, arm_model):
        with MujocoBatch(arm_model, 2) as sim:
            sim.param("body_mass")[1] *= 4.0
            sim.param("body_inertia")[1] *= 4.0
            sim.ctrl[:] = 2.0
            sim.step(3)
            assert sim.qvel[1, 0] < 0.8 * sim.qvel[0, 0]

    def test_field_writes_reach_the_state_rows(self, arm_model):
        with MujocoBatch(arm_model, 2, backend="loop") as sim:
            sim.field("mocap_pos")[1, 2] = [0.5, -0.25, 0.0]
            sim.qpos[0] = [0.1, 0.2]
            data = mujoco.MjData(arm_model)
            mujoco.mj_setState(arm_model, data, sim.state[1], mujoco.mjtState.mjSTATE_INTEGRATION)
            assert data.mocap_pos[2].tolist() == [0.5, -0.25, 0.0]
            mujoco.mj_setState(arm_model, data, sim.state[0], mujoco.mjtState.mjSTATE_INTEGRATION)
            assert data.qpos.tolist() == [0.1, 0.2]

    def test_params_need_batch_backend(self, arm_model):
        with MujocoBatch(arm_model, 2, backend="loop") as sim, pytest.raises(ValueError,
                                                                             match="batch"):
            sim.param("body_mass")


class TestErrors:
    def test_unknown_backend(self, arm_model):
        with pytest.raises(ValueError, match="unknown MuJoCo backend 'gpu'"):
            MujocoBatch(arm_model, 2, backend="gpu")

    def test_unknown_field(self, arm_model):
        with MujocoBatch(arm_model, 1) as sim, pytest.raises(KeyError, match="qpoz"):
            sim.field("qpoz")

    def test_bad_sizes(self, arm_model):
        with pytest.raises(ValueError, match="num_envs"):
            MujocoBatch(arm_model, 0)
        with MujocoBatch(arm_model, 1) as sim, pytest.raises(ValueError, match="nsubsteps"):
            sim.step(0)

    @pytest.mark.parametrize("backend", BACKENDS)
    def test_step_after_close(self, arm_model, backend):
        sim = MujocoBatch(arm_model, 2, backend=backend)
        sim.close()
        sim.close()
        with pytest.raises(RuntimeError, match="closed"):
            sim.step(1)

    def test_missing_mjcf_lists_shipped_files(self):
        with pytest.raises(FileNotFoundError, match="ball_plate.xml"):
            load_model("nope.xml")


@pytest.mark.parametrize("backend", BACKENDS)
def test_stepping_a_subset_leaves_the_others_untouched(arm_model, backend):
    with MujocoBatch(arm_model, 4, backend=backend) as sim:
        sim.ctrl[:] = 1.0
        before = sim.state.copy()
        sim.step(2, env_ids=np.array([3, 1, 3]))
        changed = np.any(sim.state != before, axis=1)
        assert changed.tolist() == [False, True, False, True]
        np.testing.assert_array_equal(sim.state[1], sim.state[3])


def test_mjcf_files_are_package_data():
    import importlib.resources

    for name in ("arm_planar.xml", "arm_push.xml", "ball_plate.xml"):
        assert (importlib.resources.files("edgerl.sim.assets") / name).is_file()
        assert load_model(name).nq > 0
