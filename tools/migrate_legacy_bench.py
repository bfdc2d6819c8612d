"""One-off migration, measurement part: docs/bench_history.jsonl (one ``edgerl bench ratios`` run
a line: one results file each, the commit that added the line as its commit) and
docs/solve_time_grid.jsonl (the time-to-solve grid; each grid's rows carry the commit that added
them) into the experiment store (see ``tools/migrate_legacy_results.py``).
"""

from __future__ import annotations

import json

from legacy_git import blame_lines, commit_date, show
from migrate_legacy_results import prov, write

from edgerl.apps.experiments.rows import flatten

RATIOS = "edgerl bench ratios"
LOOP_ONLY = " --sim-tasks '' --train-tasks ''"
#: the command of each history line, in order (docs/benchmarks.md names them)
HISTORY_COMMANDS = (
    [f"{RATIOS} --bundle runs/bench/bundle --rt-priority 50"]
    + [f'{RATIOS} --train-tasks ""'] * 2
    + [f'{RATIOS} --bundle B --rt-priority 50 --sim-tasks "" --train-tasks "" --hil-runs 2 '
       "--history docs/bench_history.jsonl --png docs/img/bench_trend.png"] * 3
    + [f'{RATIOS} --bundle B --rt-priority 50 --sim-tasks "" --train-tasks "" '
       "--history docs/bench_history.jsonl --png docs/img/bench_trend.png"]
    + [f'{RATIOS} --bundle B --rt-priority 50 --sim-tasks "" --train-tasks "" --loop-pairs 3 '
       "--hil-runs 0 --history docs/bench_history.jsonl --png docs/img/bench_trend.png"] * 3
    + [f"{RATIOS} --bundle B --rt-priority 50 --loop-pairs 3 --hil-runs 2"] * 2
    + [f"{RATIOS} --train-tasks '' --hil-runs 0"]
    + [f"{RATIOS} --bundle B --rt-priority 50 --loop-pairs 3 --hil-runs 2"] * 2
    + [f"{RATIOS}{LOOP_ONLY} --hil-runs 0 --ros2-seconds 0 --bundle B --rt-priority 50 "
       "--loop-pairs 3"] * 3
    + [f"{RATIOS} --bundle B --rt-priority 50 --loop-pairs 3 --hil-runs 2"] * 4)
SOLVE = {"bb": "python benchmarks/solve_time_grid.py --task ball_balance",
         "cp": "python benchmarks/solve_time_grid.py --task cartpole"}


def history() -> None:
    path = "docs/bench_history.jsonl"
    lines = [x for x in show(path).splitlines() if x.strip()]
    shas = blame_lines(path)
    assert len(lines) == len(HISTORY_COMMANDS), (len(lines), len(HISTORY_COMMANDS))
    for i, (text, sha, cmd) in enumerate(zip(lines, shas, HISTORY_COMMANDS)):
        run = json.loads(text)
        rows = [{"ratio": name, "metric": m, "value": v}
                for name, ratio in sorted(run["ratios"].items()) for m, v in flatten(ratio)]
        rows += [{"metric": "utc", "value": run["utc"]}, {"metric": "git", "value": run["git"]},
                 {"metric": "seconds", "value": run["seconds"]},
                 {"metric": "load_before", "value": run["load_before"]},
                 {"metric": "load_after", "value": run["load_after"]}]
        stamp = run["utc"].replace("-", "").replace(":", "").rstrip("Z").lower()
        p = prov(cmd, sha, commit_date(sha), [run["load_before"][0], run["load_after"][0]])
        write("runtime-timing", "bench-ratios", rows, p, part=f"{i + 1:02d}-{stamp}", seeds=[],
              source=f"{path} line {i + 1}")


def solve_grid() -> None:
    path = "docs/solve_time_grid.jsonl"
    lines = [json.loads(x) for x in show(path).splitlines() if x.strip()]
    shas = blame_lines(path)
    first = shas[0]
    rows = []
    for obj, sha in zip(lines, shas):
        ctx = {"grid": obj["grid"], "task": obj["task"], "name": obj["name"], "seed": obj["seed"],
               "spec": json.dumps(obj["spec"], sort_keys=True)}
        extra = {} if sha == first else {"provenance": prov(
            SOLVE[obj["grid"][:2]], sha, commit_date(sha), None).to_dict()}
        rows += [{**ctx, "metric": k, "value": v, **extra} for k, v in obj.items()
                 if k not in ("grid", "task", "name", "seed", "spec")]
    write("training-speed", "solve-time-grid", rows,
          prov(SOLVE[lines[0]["grid"][:2]], first, commit_date(first), None), source=path)


def main() -> None:
    history()
    solve_grid()
