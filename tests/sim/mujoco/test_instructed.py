"""Instructed MuJoCo tasks: one instruction per env, read and overridden by id."""

from __future__ import annotations

import numpy as np
import pytest

from edgerl.sim import make_task


def test_set_instruction_changes_text_and_ids_and_refuses_unknown_ids():
    env = make_task("arm_reach", num_envs=3, seed=0)
    try:
        env.set_instruction(np.array([0, 2]), np.array([1, 3]))
        assert env.instruction_ids().tolist()[0] == 1 and env.instruction_ids().tolist()[2] == 3
        assert env.instruction(2) == env.spec.instructions[3]
        with pytest.raises(ValueError, match=r"instruction ids must be in \[0, 4\)"):
            env.set_instruction([1], [4])
    finally:
        env.close()
