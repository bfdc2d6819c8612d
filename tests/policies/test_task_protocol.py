"""The new-task protocol: its cells and budgets, the planner gain and its standard error."""

from __future__ import annotations

import math

import pytest

from edgerl.policies.protocol import (
    CELLS,
    ProtocolCell,
    ProtocolConfig,
    cell_config,
    delay_steps,
    needs_expert_run,
    protocol_cells,
    summarize,
)


def _cfg(**kw) -> ProtocolConfig:
    base = {"task": "gym:Reacher-v5", "planner_only": [4, 5], "seeds": (0, 1), "iterations": 10,
            "train": {"intent_dim": 4, "distill": {"rounds": 2, "steps": 16}}}
    return ProtocolConfig(**{**base, **kw})


def test_cells_and_delays():
    cfg = _cfg()
    cells = protocol_cells(cfg)
    assert [c.name for c in cells] == list(CELLS) * 2 and [c.seed for c in cells[:6]] == [0] * 6
    assert delay_steps(cfg, 50.0) == 10 and delay_steps(_cfg(delay_ms=210), 50.0) == 11
    assert needs_expert_run("gym:Reacher-v5") and not needs_expert_run("cartpole_goal")
    with pytest.raises(ValueError):
        _cfg(seeds=())


def test_each_cell_gets_the_one_configuration_and_its_budget():
    cfg = _cfg()
    edit = cell_config(cfg, ProtocolCell("edit", 1), 50.0, "runs/expert")
    assert (edit.method, edit.delay_steps, edit.seed, edit.iterations) == ("edit", 10, 1, 10)
    assert edit.intent_dim == 4 and edit.distill.rounds == 2 and edit.distill.steps == 16
    assert edit.task_kwargs == {"planner_only": [4, 5], "expert_run": "runs/expert"}
    cold = cell_config(cfg, ProtocolCell("edit_zero_chunks_cold", 1), 50.0, "runs/expert")
    assert cold.method == "edit_zero_chunks" and cold.distill.rounds == 0
    assert cell_config(cfg, ProtocolCell("planner@0", 0), 50.0, "x").delay_steps == 0
    rtc = _cfg(extra_cells=("rtc", "edit_prefix"))
    assert [c.name for c in protocol_cells(rtc)][6:8] == ["rtc", "edit_prefix"]
    prefix = cell_config(rtc, ProtocolCell("edit_prefix", 0), 50.0, "x")
    assert prefix.method == "edit" and prefix.planner_prefix and prefix.prefix_conditioned
    assert cell_config(rtc, ProtocolCell("rtc", 0), 50.0, "x").method == "rtc"
    with pytest.raises(ValueError, match="unknown extra cells"):
        _cfg(extra_cells=("naive",))
    top = cell_config(cfg, ProtocolCell("nodelay", 0), 50.0, None)
    assert top.method == "nodelay" and top.privileged and "expert_run" not in top.task_kwargs
    # the expert's budget covers the edit's PPO steps and its warm-start samples
    warm_iters = math.ceil(2 * 16 * cfg.num_envs / (cfg.num_envs * cfg.steps_per_env))
    assert top.iterations == cfg.iterations + warm_iters


def _rows(values: dict[str, list[float]]) -> list[dict]:
    return [{"cell": name, "seed": s, "return_mean": v, "action_rate": 0.1 * (s + 1)}
            for name, vs in values.items() for s, v in enumerate(vs)]


def test_the_gain_uses_the_stronger_zero_chunk_control_per_seed():
    rows = _rows({"nodelay": [10.0, 20.0], "edit": [8.0, 14.0], "edit_zero_chunks": [0.0, 4.0],
                  "edit_zero_chunks_cold": [2.0, 2.0], "planner": [6.0, 10.0],
                  "planner@0": [9.0, 19.0]})
    s = summarize(rows)
    # seed 0: zero = max(0, 2) = 2 -> g = 6 / 8; seed 1: zero = 4 -> g = 10 / 16
    assert s["g"]["per_seed"] == [0.75, 0.625]
    assert s["g"]["mean"] == pytest.approx(0.6875)
    assert s["g"]["se"] == pytest.approx(0.0625)  # stdev(0.75, 0.625) / sqrt(2)
    assert s["edit_minus_planner"]["per_seed"] == [2.0, 4.0]
    assert s["zero_control"]["per_seed"] == [2.0, 4.0]
    assert s["cells"]["edit"]["mean"] == 11.0 and s["cells"]["edit"]["se"] == pytest.approx(3.0)
    assert s["cells"]["planner"]["action_rate"] == pytest.approx(0.15)
    assert s["headroom"]["per_seed"] == [8.0, 16.0]


def test_the_headroom_shows_an_expert_no_better_than_zero_chunks():
    """Where the privileged policy does not beat the zero-chunk control, g divides noise by
    noise; the headroom (nodelay - zero) says so."""
    rows = _rows({"nodelay": [188.0, 157.0, 159.0], "edit": [217.0, 188.0, 160.0],
                  "edit_zero_chunks": [186.0, 187.0, 214.0], "planner": [217.0, 187.0, 158.0]})
    room = summarize(rows)["headroom"]
    assert room["mean"] < 2 * room["se"]


def test_a_seed_missing_a_cell_is_left_out_of_the_gain():
    rows = _rows({"nodelay": [10.0, 20.0], "edit": [8.0, 14.0], "edit_zero_chunks": [0.0, 4.0],
                  "planner": [6.0]})
    s = summarize(rows)
    assert s["g"]["per_seed"] == [0.8] and s["g"]["se"] == 0.0


def test_finished_rows_are_reused_when_only_jobs_seeds_or_extra_cells_change(tmp_path):
    """A rerun that adds extra cells or seeds, or trains more cells at once, reuses the rows
    already done; one that changes what a cell trains (its iterations) reuses none."""
    import json

    from edgerl.policies.protocol import ROWS_NAME, cell_key, finished_rows

    cfg = ProtocolConfig(task="cartpole_goal", iterations=10, seeds=(0,), jobs=1)
    row = {"cell": "edit", "seed": 0, "return_mean": 1.5, "config": cell_key(cfg)}
    (tmp_path / ROWS_NAME).write_text(json.dumps(row) + "\n")
    wider = ProtocolConfig(task="cartpole_goal", iterations=10, seeds=(0, 1), jobs=2,
                           extra_cells=("rtc",))
    assert finished_rows(wider, tmp_path)[("edit", 0)]["return_mean"] == 1.5
    other = ProtocolConfig(task="cartpole_goal", iterations=20, seeds=(0,), jobs=1)
    assert finished_rows(other, tmp_path) == {}
