"""``edgerl bench all`` (``make bench``): the plan of commands it runs, read without running
them (``--dry-run``); every planned command is one the CLI accepts."""

from __future__ import annotations

import shlex

import pytest

from edgerl.apps.cli import build_parser, main
from edgerl.bench.suite import SuiteConfig, plan, run_suite, targets


def _dry_run(capsys, *argv: str) -> list[list[str]]:
    assert main(["bench", "all", "--dry-run", *argv]) == 0
    return [shlex.split(line) for line in capsys.readouterr().out.splitlines()]


def test_dry_run_builds_the_bundle_then_ratios_then_each_target(tmp_path, capsys):
    out = tmp_path / "bench"
    cmds = _dry_run(capsys, "--out", str(out))
    assert all(c[0] == "edgerl" for c in cmds)
    verbs = [" ".join(c[1:3]) for c in cmds]
    assert verbs == ["train cartpole", f"export {out / 'edit_run'}", "bench ratios",
                     "bench sim", "bench sim", "bench sim", "bench loop", "bench loop",
                     "bench serial", "bench planner"]
    train, export, ratios, *measured = cmds
    assert train[train.index("--iterations") + 1] == "60"
    assert train[train.index("--out") + 1] == str(out / "edit_run")
    assert export[export.index("--out") + 1] == str(out / "bundle")
    assert ratios[ratios.index("--bundle") + 1] == str(out / "bundle")
    assert ratios[ratios.index("--record") + 1] == "experiments"
    assert "--sim-repeats" not in ratios  # the full run
    assert all(c[-1] == "--json" for c in measured)
    loops = [c for c in measured if c[2] == "loop"]
    assert [c[c.index("--rate") + 1] for c in loops] == ["1000", "500"]
    assert all(c[c.index("--seconds") + 1] == "30" for c in loops)
    assert "--planner-process" in loops[1] and "--planner-process" not in loops[0]
    assert not (out / "bundle").exists()  # nothing ran


def test_quick_dry_run_shortens_every_run(tmp_path, capsys):
    cmds = _dry_run(capsys, "--quick", "--out", str(tmp_path))
    by_target = {c[2]: c for c in cmds if c[1] == "bench"}
    ratios = by_target["ratios"]
    assert ratios[ratios.index("--sim-repeats") + 1] == "5"
    assert ratios[ratios.index("--loop-seconds") + 1] == "5"
    assert by_target["loop"][by_target["loop"].index("--seconds") + 1] == "5"
    assert by_target["serial"][by_target["serial"].index("--count") + 1] == "1000"
    assert by_target["planner"][by_target["planner"].index("--requests") + 1] == "50"


def test_an_existing_bundle_is_not_rebuilt_and_ratios_only_stops_after_the_ratios(tmp_path,
                                                                                    capsys):
    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "manifest.json").write_text("{}")
    cmds = _dry_run(capsys, "--ratios-only", "--out", str(tmp_path))
    assert [c[1:3] for c in cmds] == [["bench", "ratios"]]


@pytest.mark.parametrize("quick", [False, True])
def test_every_planned_command_parses(tmp_path, quick):
    """The plan names flags the CLI has (a renamed flag would fail ``make bench`` late)."""
    parser = build_parser()
    for argv in plan(SuiteConfig(quick=quick, out=tmp_path)):
        args = parser.parse_args(argv)
        assert callable(args._run)


def test_each_target_summarizes_its_result_json():
    """The summary rows read the keys the targets print (a stand-in result per target)."""
    result = {"steps_per_s": 2e6, "agent_steps_per_s": 8e6, "agents_per_env": 4,
              "overhead_ratio_same_states": 0.9, "overhead_ratio": 0.8,
              "tick_compute_p99_us": 90.0, "jitter_p99_us": 12.5, "deadline_misses": 1,
              "ticks": 30000, "cmd_rtt_p50_us": 300.0, "cmd_rtt_p99_us": 700.0,
              "p50_ms": 3.5, "p99_ms": 3.9, "throughput_rps": 287.0}
    rows = {t.name: t.summarize(result) for t in targets(SuiteConfig())}
    assert rows["sim driving 4096 envs"][0].startswith("2.00M env-steps/s")
    assert rows["sim arm_reach 256 envs"] == (
        "2000k env-steps/s, 0.90 x raw (same states), 0.80 x raw from rest",
        "floor 100k, 0.5 x raw")
    assert rows["sim ball_balance 256 envs"][0].startswith("2000.0k env-steps/s")
    assert rows["loop 1 kHz, planner thread"][0] == (
        "compute p99 90 us, jitter p99 12.5 us, misses 1/30000")
    assert rows["serial pty round trip"] == ("p50 300 us, p99 700 us", "p99 1 ms")
    assert rows["planner (language)"][0] == "p50 3.5 ms, p99 3.9 ms, 287 req/s (loopback)"


def test_a_failing_step_is_a_named_error(tmp_path, monkeypatch):
    """A step that exits non-zero stops the suite with the command named (exit 1 via the
    CLI), and writes no results.json."""
    import subprocess

    from edgerl.contract.errors import UserError

    (tmp_path / "bundle").mkdir()
    (tmp_path / "bundle" / "manifest.json").write_text("{}")

    def fail(cmd, **kwargs):
        raise subprocess.CalledProcessError(3, cmd)

    monkeypatch.setattr(subprocess, "run", fail)
    with pytest.raises(UserError, match=r"exit 3\): edgerl bench ratios --bundle"):
        run_suite(SuiteConfig(out=tmp_path))
    assert not (tmp_path / "results.json").exists()
