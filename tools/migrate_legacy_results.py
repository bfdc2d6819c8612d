"""One-off migration: the legacy results files (docs/results*.json, docs/*.jsonl as git holds
them at :data:`legacy_git.LEGACY`) into the experiment store, one schema, with provenance.

Each file's rows come from the same functions the drivers use (``edgerl.apps.experiments.rows``,
``edgerl.policies.results_rows``); numbers another file's numbers were computed from (the
``summary`` and ``pooled`` blocks) are left out: the docs compute them. Provenance: the commit
that added the data (``git log --follow --diff-filter=A``; per line for a file appended to over
time, ``git blame``), that commit's date, the command the docs or the run script give for it
(machine paths made relative), the machine as the docs describe it (2 cores; the load noted).
Run from the repository root: ``python tools/migrate_legacy_results.py``.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path
from typing import Any

from legacy_git import added, blame_lines, commit_date, load, relative, show

from edgerl.apps.experiments.rows import flatten
from edgerl.contract.results_store import Provenance, write_results
from edgerl.policies.results_rows import rows_from_cells

STORE = Path("experiments")
CPUS = 2


def prov(command: str, commit: str, date: str, load: list[float] | None) -> Provenance:
    return Provenance(command=relative(command), commit=commit, date=date,
                      machine={"cpu_count": CPUS, "load_average": load})


def rel_config(obj: Any) -> Any:
    """A recorded config with machine paths made relative (values as recorded)."""
    return json.loads(relative(json.dumps(obj)))


def write(question: str, name: str, rows: list[dict[str, Any]], p: Provenance, *,
          part: str = "", seeds: list[int] | None = None, config: Any = None,
          source: str = "") -> None:
    path = STORE / question / "results" / f"{name}{'--' + part if part else ''}.json"
    seeds = sorted({int(r["seed"]) for r in rows if "seed" in r}) if seeds is None else seeds
    note = f"migrated from {source} by tools/migrate_legacy_results.py" if source else ""
    write_results(path, experiment=name, question=question,
                  config={"recorded": rel_config(config)} if config else {}, seeds=seeds,
                  rows=rows, provenance=p, notes=note)
    sys.stdout.write(f"{path} {len(rows)}\n")


# --- the planner-matters grid ----------------------------------------------------------------
GRID_COMMANDS = {  # (task, method or None) -> the command that made those cells
    ("cartpole_goal", None): "edgerl results --tasks cartpole_goal --delays 10 --episodes 100 "
                             "--json-out runs/grid/cartpole_goal.json",
    ("driving", None): "edgerl results --tasks driving --delays 6 --episodes 100 --json-out "
                       "runs/grid/driving.json",
    ("ball_balance", None): "edgerl results --tasks ball_balance --delays 10 --methods "
                            "nodelay,edit,edit_zero_chunks,planner --episodes 100 --json-out "
                            "runs/grid/ball_balance.json",
    ("ball_balance", "rtc"): "edgerl results --tasks ball_balance --delays 10 --methods rtc "
                             "--seeds 0 --episodes 100 --json-out runs/grid/ball_rtc.json",
    ("arm_reach", None): "edgerl results --tasks arm_reach --delays 10 --methods "
                         "nodelay,edit,edit_zero_chunks,planner --seeds 0 --episodes 100 "
                         "--json-out runs/grid/arm_reach.json",
    ("ball_goal", None): "edgerl results --tasks ball_goal --delays 10 --methods "
                         "nodelay,edit,edit_zero_chunks,planner --episodes 100 --json-out "
                         "runs/grid_ball/ball_goal.json",
    ("gym:InvertedPendulum-v5", None): "edgerl results --tasks gym:InvertedPendulum-v5 --delays "
                                       "5 --methods nodelay,edit,edit_zero_chunks,planner "
                                       "--task-arg expert_run=runs/grid_gym/ip_expert "
                                       "--episodes 50 --json-out runs/grid_gym/ip.json",
}
DRIVING_RERUN = ("edgerl results --tasks driving --delays 6 --iterations 300 --methods "
                 "nodelay,edit,edit_zero_chunks,planner --episodes 100 --root runs/grid_drv "
                 "--json-out runs/grid_drv/driving.json")
LOADS = {"dedf4fe": [4.0, 9.0], "40f4544": [6.0, 16.0], "460b6f4": [7.0, 16.0]}


def grid() -> None:
    path = "docs/results.json"
    text = show(path)
    cells = json.loads(text)
    shas = blame_lines(path)
    lines = text.splitlines()
    starts = [i for i, line in enumerate(lines) if line.strip().startswith('"task"')]
    for cell, start in zip(cells, starts):
        sha = shas[start]
        if cell["task"] == "driving" and sha.startswith("460b6f4"):
            command = DRIVING_RERUN
        else:
            command = (GRID_COMMANDS.get((cell["task"], cell["method"]))
                       or GRID_COMMANDS[(cell["task"], None)])
        cell["_provenance"] = prov(command, sha, commit_date(sha),
                                   LOADS.get(sha[:7])).to_dict()
        cell["run"] = relative(cell.get("run", "") + "/").rstrip("/")
    final = ("edgerl results --merge docs/results.json,runs/grid_drv/driving.json --json-out "
             "docs/results.json --report-only --notes docs/results_notes.md")
    file_sha = max(set(shas), key=lambda s: commit_date(s))
    write("planner-matters", "planner-matters-grid", rows_from_cells(cells),
          prov(final, file_sha, commit_date(file_sha), None), source=path)
    full = load("docs/results_full_obs.json")
    sha, date = added("docs/results_full_obs.json")
    cmd = ("edgerl results --tasks ball_balance --delays 0,2,5 --episodes 50 --json-out "
           "runs/grid/ball_balance.json\nedgerl results --tasks driving --delays 0,2,6 "
           "--episodes 50 --json-out runs/grid/driving.json\nedgerl results --report-only "
           "--merge runs/grid/ball_balance.json,runs/grid/driving.json --notes NOTES.md")
    write("planner-matters", "planner-matters-full-obs", rows_from_cells(full),
          prov(cmd, sha, date, None), source="docs/results_full_obs.json")


# --- the planning-budget gate through the HIL ----------------------------------------------
def gate_run(batch: str, seed: int, policy: str, offset: int | None, run: dict[str, Any],
             **extra: Any) -> list[dict[str, Any]]:
    ctx = {"batch": batch, **extra, "seed": seed, "policy": policy}
    if offset is not None:
        ctx["plant_seed_offset"] = offset
    return [{**ctx, "metric": m, "value": v} for m, v in flatten(run)]


GATE9_CMD = ("python benchmarks/gate_hil_compare.py --bundles 'runs/gate9_ck{S}_bundle' --seeds S "
             "--policies gate:sample age:fast:12 --episodes 32 --plant-seed-offset OFFSET --kicks "
             "rate=0.004,size=0.8,steps=6,dims=1 --out DIR")
GATE_LOOKS = {
    "docs/results_gate10_hil.json": ("gate-hil-paired-first-look", [0.65, 1.61],
                                     "bash benchmarks/gate10/paired.sh 3000 runs/gate10_hil_e\n"
                                     "bash benchmarks/gate10/paired.sh 3100 runs/gate10_hil_f\n"
                                     "bash benchmarks/gate10/paired.sh 3200 runs/gate10_hil_g"),
    "docs/results_gate11_hil.json": ("gate-hil-paired-second-look", [0.53, 1.17],
                                     "bash benchmarks/gate10/paired.sh 3300 runs/gate11_hil_h\n"
                                     "bash benchmarks/gate10/paired.sh 3400 runs/gate11_hil_i\n"
                                     "bash benchmarks/gate10/paired.sh 3500 runs/gate11_hil_j"),
    "docs/results_gate12_hil.json": ("gate-hil-paired-third-look", [0.60, 1.62],
                                     "bash benchmarks/gate10/batches_s12.sh"),
}


def gate() -> None:
    doc = load("docs/results_gate9_hil.json")
    rows = []
    for key, run in doc.items():
        label, _, rest = key.partition("/")
        batch, _, setting = label.partition("_")
        m = re.match(r"^(?:(\w+?)_)?(\d+)_(.+)$", rest)
        assert m, key
        extra = {"setting": setting} | ({"variant": m.group(1)} if m.group(1) else {})
        rows += gate_run(batch, int(m.group(2)), str(run.get("gate_policy") or m.group(3)),
                         None, run, **extra)
    sha, date = added("docs/results_gate9_hil.json")
    write("planning-gate", "gate-hil-calm-kicks", rows, prov(GATE9_CMD, sha, date, [0.4, 7.8]),
          source="docs/results_gate9_hil.json")
    for path, (name, load_avg, cmd) in GATE_LOOKS.items():
        doc = load(path)
        rows = []
        for batch, b in doc["batches"].items():
            for policy, by_seed in b["runs"].items():
                for seed, run in by_seed.items():
                    offset = b.get("plant_seed_offset", b.get("args", {}).get("plant_seed_offset"))
                    rows += gate_run(batch, int(seed), policy, int(offset), run)
        sha, date = added(path)
        write("planning-gate", name, rows, prov(cmd, sha, date, load_avg), source=path)
        declared = STORE / "planning-gate" / "declared" / f"{name}.md"
        if not declared.exists() and name.endswith("first-look"):
            declared.parent.mkdir(parents=True, exist_ok=True)
            declared.write_text(f"# {name}: declared before batches F and G ran\n\n"
                                + doc["declared"].strip() + "\n")


if __name__ == "__main__":
    grid()
    gate()
    sys.path.insert(0, str(Path(__file__).parent))
    import migrate_legacy_bench
    import migrate_legacy_rlif

    migrate_legacy_rlif.main()
    migrate_legacy_bench.main()
