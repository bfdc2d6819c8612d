"""What the docs claim, computed from the store's rows: the numbers the review checked."""

from __future__ import annotations

from pathlib import Path

import pytest

from edgerl.apps.experiments.report.claims import gate_looks, grid_cells, rlif_declared
from edgerl.apps.experiments.store import load_store
from edgerl.policies.results import acceptance

ROOT = Path(__file__).resolve().parents[3]


@pytest.fixture(scope="module")
def store():
    return load_store(ROOT / "experiments")


def test_the_gate_is_judged_across_its_seeds_not_only_over_pooled_episodes(store):
    looks = {x["label"].split(" (")[0]: x["reading"] for x in gate_looks(store)}
    first, second, third = (looks[k] for k in ("first look", "second look",
                                               "third and last look"))
    # the declared readings, episodes pooled over the three gates (as the rule had them)
    assert round(first.pooled_z, 2) == 1.40 and round(second.pooled_z, 2) == 2.45
    assert (round(third.pooled.mean, 2), round(third.pooled.se, 2)) == (6.76, 1.91)
    assert round(third.pooled_z, 2) == 3.54 and third.pooled.n == 768
    # across the three trained gates: about 1.2 standard errors, not significant
    assert round(third.seed_level.t, 2) == 1.22 and not third.seed_level.significant
    assert [round(third.per_seed[s].mean, 2) for s in (0, 1, 2)] == [-3.68, 8.85, 15.11]


def test_rlif_is_counted_over_every_declared_run(store):
    runs = rlif_declared(store)
    assert len(runs) == 8
    assert sum(x["above_bc"] for x in runs) == 19 and sum(x["above_start"] for x in runs) == 9
    last = runs[-1]
    assert last["name"] == "rlif-region-flip-greedy-five-rounds"
    assert round(sum(last["rlif"]) / 3, 3) == 0.825 and round(sum(last["start"]) / 3, 2) == 0.65
    assert not last["vs_start"].significant and last["vs_bc"].significant


def test_the_hand_tables_of_the_declared_runs_agree_with_their_raw_rows(store):
    """Each declared run's cell table (written by hand when it ran) holds the means of its two
    re-evaluations, as computed from the raw rows."""
    for run in rlif_declared(store):
        cells = [c for t in store.tables_of(run["name"]).values() for c in t]
        mean_col = {}
        for c in cells:
            if c["row"] and c["col"] == 4 and isinstance(c["value"], float):
                label = next(x["value"] for x in cells
                             if x["table"] == c["table"] and x["row"] == c["row"]
                             and x["col"] == 0)
                mean_col[str(label)] = c["value"]
        start = next(v for k, v in mean_col.items() if k.startswith("start"))
        assert start == pytest.approx(sum(run["start"]) / 3, abs=0.006), run["name"]


def test_nodelay_is_a_reference_the_edit_policy_beats(store):
    cells = grid_cells(store)
    checks = {c["task"]: c for c in acceptance(cells)}
    assert {t for t, c in checks.items() if c["pass"]} == {"cartpole_goal", "ball_goal",
                                                           "driving"}
    assert checks["driving"]["edit"] > checks["driving"]["nodelay"]
    assert checks["arm_reach"]["edit"] > checks["arm_reach"]["nodelay"]


def test_the_planner_gain_needs_an_expert_above_the_zero_chunk_control(store):
    """g divides by (nodelay - zero): on the two declared confirmation tasks the privileged
    expert does not beat the zero-chunk control, so g is undefined there and its check
    fails whatever its value; on cartpole_goal every check holds."""
    from edgerl.apps.experiments.report.planner_gain import gain_rows

    rows = {g["experiment"]: g for g in gain_rows(store)}
    for name in ("planner-gain-dmc-finger-turn-easy", "planner-gain-gym-pusher-v5"):
        checks = rows[name]["checks"]
        assert rows[name]["declared"]
        assert not checks["expert beats zero chunks (> 2 SE)"] and not checks["g >= 0.7"]
    assert rows["planner-gain-gym-pusher-v5"]["summary"]["g"]["mean"] > 0.7  # noise, not a pass
    assert all(rows["planner-gain-cartpole-goal"]["checks"].values())
