"""``edgerl gate eval`` on a tiny trained run: every row, JSON and table; bad run dirs."""

from __future__ import annotations

import json

import pytest

from edgerl.apps.cli import main
from edgerl.policies.gate.policy import train_gate
from tests.helpers.gate_env import tiny_cfg

pytestmark = pytest.mark.slow


def test_gate_eval_json_and_table(tmp_path, capsys):
    train_gate(tiny_cfg(), tmp_path / "run")
    assert main(["gate", "eval", str(tmp_path / "run"), "--episodes", "2", "--eval-envs", "2",
                 "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert [r["policy"] for r in rows][:3] == ["gate", "fixed:fast", "fixed:slow"]
    assert rows[-1]["policy"] == "random" and len(rows) == 5
    assert main(["gate", "eval", str(tmp_path / "run"), "--episodes", "1", "--eval-envs",
                 "1"]) == 0
    out = capsys.readouterr().out
    assert "edgerl gate (driving, seed 0)" in out and "random" in out


def test_gate_eval_refuses_a_non_run(tmp_path, capsys):
    assert main(["gate", "eval", str(tmp_path)]) == 1
    assert "not a gate run" in capsys.readouterr().err


def test_gate_train_refuses_bad_budget_latencies(tmp_path, capsys):
    assert main(["gate", "train", "--out", str(tmp_path / "r"), "--budget-latency", "slow"]) == 1
    assert "expected NAME=FILE" in capsys.readouterr().err
    assert main(["gate", "train", "--out", str(tmp_path / "r"), "--budget-latency",
                 f"medium={tmp_path}/x.json"]) == 1
    assert "no budget named medium" in capsys.readouterr().err


def test_gate_train_on_the_chicanes_road_round_trips_its_scenario(tmp_path):
    from edgerl.policies.gate.policy import load_gate, make_gate_env

    assert main(["gate", "train", "--out", str(tmp_path / "ch"), "--road", "chicanes",
                 "--iterations", "1", "--num-envs", "2", "--steps-per-env", "2",
                 "--episodes", "0", "--json"]) == 0
    cfg, gate = load_gate(tmp_path / "ch")
    assert cfg.task_kwargs["road_shape"] == "chicanes"
    gcfg = cfg.gate_cfg(0)
    assert gcfg.preview_steps == (8, 16, 24, 32) and gcfg.budgets[2].delay == 16
    env = make_gate_env(cfg, 2, 0)
    assert env.policy_obs_dim == 3 + 4 + 8
    assert gate(env, env.get_observations()).shape == (2,)


def test_gate_train_head_flag_matches_the_library_and_round_trips(tmp_path):
    import argparse

    from edgerl.apps.cli.gate import add_arguments
    from edgerl.policies.gate.policy import HEADS, GateRunCfg, load_gate

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    train = next(a for a in parser._subparsers._group_actions[0].choices["train"]._actions
                 if a.dest == "head")
    assert tuple(train.choices) == HEADS and train.default == GateRunCfg().head
    assert main(["gate", "train", "--out", str(tmp_path / "g"), "--head", "gaussian",
                 "--iterations", "1", "--num-envs", "2", "--steps-per-env", "2",
                 "--episodes", "0", "--json"]) == 0
    cfg, _ = load_gate(tmp_path / "g")
    assert cfg.head == "gaussian"
    with pytest.raises(ValueError, match="unknown gate head 'beta'"):
        GateRunCfg(head="beta")
    # a run saved before gate.json named its head loads as the Gaussian head it was trained with
    doc = json.loads((tmp_path / "g" / "gate.json").read_text())
    del doc["cfg"]["head"]
    (tmp_path / "g" / "gate.json").write_text(json.dumps(doc))
    assert load_gate(tmp_path / "g")[0].head == "gaussian"
