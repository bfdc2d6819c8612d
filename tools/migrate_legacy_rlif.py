"""One-off migration, RLIF part: docs/results_rlif*.json(l) into the experiment store (see
``tools/migrate_legacy_results.py``). The run scripts' and the docs' commands are quoted as they
were (machine paths made relative); the declarations move to ``declared/``.
"""

from __future__ import annotations

import json
from typing import Any

from legacy_git import added, blame_lines, commit_date, load, show
from migrate_legacy_results import STORE, prov, write

from edgerl.apps.experiments.rows import flatten, reeval_rows, rlif_seed_rows

Q = "rlif"
EXP = "python benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds 0 1 2"
OP = "theta=0.2,x=1.5,hold=15,gain=0.6,damping=1,noise=0.2"
REG = "mode=flip,min_angle=0.1,steps=6000,jitter=0.5"

#: single-run files: path -> (experiment, part, command, load during the run)
SINGLE = {
    "docs/results_rlif_damping0.json": (
        "rlif-uniform-weaken", "damping0",
        f'{EXP} --out runs/rlif_d0 --operator "theta=0.2,x=1.5,hold=15,gain=0.6,damping=0,'
        f'noise=0.2" --json-out runs/rlif_d0/results.json', [6.0, 9.0]),
    "docs/results_rlif_mild.json": (
        "rlif-uniform-weaken", "mild",
        f'{EXP} --out runs/rlif_mild --operator "{OP}" --json-out runs/rlif_mild/results.json',
        [6.0, 9.0]),
    "docs/results_rlif_bias.json": (
        "rlif-bad-to-copy-operators", "bias",
        f'{EXP} --out runs/rlif_bias --operator "{OP},bias=0.3" --json-out '
        'runs/rlif_bias/results.json', [2.0, 8.0]),
    "docs/results_rlif_bangbang.json": (
        "rlif-bad-to-copy-operators", "bangbang",
        f'{EXP} --out runs/rlif_bang --operator "{OP},bangbang=1" --json-out '
        'runs/rlif_bang/results.json', [2.0, 8.0]),
    "docs/results_rlif_bias06.json": (
        "rlif-bad-to-copy-operators", "bias06",
        f'{EXP} --out runs/rlif_bias06 --operator "{OP},bias=0.6" --json-out '
        'runs/rlif_bias06/results.json', [1.0, 8.0]),
    "docs/results_rlif8_regionflip.json": (
        "rlif-region-flip-one-round", "",
        f'{EXP} --out runs/rlif8_flip --region "{REG}" --operator "{OP},flip=4" --controls '
        '--json-out runs/rlif8_flip/results.json\nSEEDS="1 2" NAME=own ARGS="--actor-data own" '
        'benchmarks/rlif_beta0_control.sh runs/rlif8_flip', [4.5, 7.8]),
    "docs/results_rlif8_regionflip_mild.json": (
        "rlif-region-flip-good-operator", "",
        f'{EXP} --out runs/rlif8_mild --region "{REG}" --operator "{OP}" --own --json-out '
        'runs/rlif8_mild/results.json', [0.8, 4.8]),
}
#: declared chains: path -> (experiment, run script, load during the runs, declaration file)
CHAINS = {
    "docs/results_rlif13.json": ("rlif-region-flip-startled-operator",
                                 "bash benchmarks/rlif13/run13.sh", [0.2, 2.3],
                                 "benchmarks/rlif13/declared.md"),
    "docs/results_rlif14.json": ("rlif-region-flip-screened-operator",
                                 "bash benchmarks/rlif14/run14.sh", [0.1, 1.3],
                                 "benchmarks/rlif14/declared.md"),
    "docs/results_rlif14b.json": ("rlif-region-flip-unbiased-target",
                                  "bash benchmarks/rlif14/run14b.sh", [0.05, 0.6],
                                  "benchmarks/rlif14/declared_b.md"),
    "docs/results_rlif14c.json": ("rlif-region-flip-trust-region",
                                  "bash benchmarks/rlif14/run14c.sh", [0.1, 0.7],
                                  "benchmarks/rlif14/declared_c.md"),
    "docs/results_rlif14d.json": ("rlif-region-flip-weaker-start",
                                  "bash benchmarks/rlif14/run14d.sh", [0.1, 0.6],
                                  "benchmarks/rlif14/declared_d.md"),
    "docs/results_rlif15.json": ("rlif-region-flip-greedy", "bash benchmarks/rlif15/run15.sh 3",
                                 [0.02, 0.46], "benchmarks/rlif15/declared.md"),
    "docs/results_rlif15b.json": ("rlif-region-flip-greedy-from-start",
                                  'bash benchmarks/rlif15/run15b.sh "--margin 3"', [0.04, 0.57],
                                  "benchmarks/rlif15/declared_b.md"),
    "docs/results_rlif15c.json": ("rlif-region-flip-greedy-five-rounds",
                                  "bash benchmarks/rlif15/run15c.sh", [0.06, 0.51],
                                  "benchmarks/rlif15/declared_c.md"),
}


def _seed_rows(results: list[dict[str, Any]], **tag: Any) -> list[dict[str, Any]]:
    return [{**tag, **r} for res in results for r in rlif_seed_rows(res)]


def singles() -> None:
    for path, (name, part, cmd, load_avg) in SINGLE.items():
        doc = load(path)
        rows = _seed_rows(doc["seeds"])
        if "screens_seed0_eval1000" in doc:
            screens = doc["screens_seed0_eval1000"]
            rows += [{"screen": key, "seed": 0, "metric": m, "value": v}
                     for key, value in screens.items() if key != "note"
                     for m, v in flatten(value)]
        sha, date = added(path)
        write(Q, name, rows, prov(cmd, sha, date, load_avg), part=part, config=doc["config"],
              source=path)


def chains() -> None:
    for path, (name, cmd, load_avg, declared) in CHAINS.items():
        doc = load(path)
        rows = _seed_rows([s for run in doc["runs"] for s in run["seeds"]])
        for label in ("reeval", "reeval2"):
            rows += reeval_rows(doc[label], label)
        sha, date = added(path)
        write(Q, name, rows, prov(cmd, sha, date, load_avg),
              config={"runs": [r["config"] for r in doc["runs"]],
                      "reeval": doc["reeval"]["config"]}, source=path)
        out = STORE / Q / "declared" / f"{name}.md"
        out.parent.mkdir(parents=True, exist_ok=True)
        if not out.exists():
            out.write_text(show(declared))
    doc = load("docs/results_rlif15c_confirm.json")
    sha, date = added("docs/results_rlif15c_confirm.json")
    cmd = ("python benchmarks/rlif_reeval.py --out runs/rlif15c --base runs/rlif_base_bundle "
           "--seeds 0 1 2 --only weak rlif/round4/bundle bc --episodes 40 --eval-seed-offset "
           "3000 --json-out runs/rlif15c/confirm3000.json")
    write(Q, "rlif-region-flip-greedy-confirm", reeval_rows(doc, "confirm"),
          prov(cmd, sha, date, [0.01, 0.41]), config=doc["config"],
          source="docs/results_rlif15c_confirm.json")


def rounds9() -> None:
    path = "docs/results_rlif9_rounds.json"
    doc = load(path)
    sha, date = added(path)
    main_runs = doc["main_run"]
    rows = _seed_rows([s for run in main_runs.values() for s in run["seeds"]])
    for label in ("reeval", "reeval2"):
        rows += reeval_rows(doc[label], label)
    cmd = "\n".join(["bash benchmarks/rlif9/full9.sh"] + [
        "python benchmarks/rlif_reeval.py --out runs/rlif9 --base runs/rlif_base_bundle "
        f"--seeds 0 1 2 --json-out runs/rlif9/{j}.json" for j in ("reeval", "reeval2")])
    write(Q, "rlif-region-flip-noise-rounds", rows, prov(cmd, sha, date, [1.5, 5.7]),
          config={"runs": [r["config"] for r in main_runs.values()]}, source=path)
    rows = [{"seed": int(seed[4:]), "method": cell, "metric": f"finetune.{m}", "value": v}
            for seed, fits in doc["same_data_finetunes"].items() for cell, ft in fits.items()
            for m, v in flatten(ft)]
    for label in ("reeval_same", "reeval_nn_same"):
        rows += reeval_rows(doc[label], label)
    cmd = ("bash benchmarks/rlif9/samedata.sh\nbash benchmarks/rlif9/nonoise_same.sh\n"
           "python benchmarks/rlif_reeval.py --out runs/rlif9 --base runs/rlif_base_bundle "
           "--seeds 0 1 2 --only same_rlif_all same_rlif_own --json-out "
           "runs/rlif9/reeval_same.json\npython benchmarks/rlif_reeval.py --out runs/rlif9 "
           "--base runs/rlif_base_bundle --seeds 0 1 2 --only nn_same_rlif_all nn_same_bc "
           "--json-out runs/rlif9/reeval_nn_same.json")
    write(Q, "rlif-region-flip-same-data", rows, prov(cmd, sha, date, [1.0, 3.4]), source=path)
    path = "docs/results_rlif9_all_rounds.json"
    doc = load(path)
    sha, date = added(path)
    write(Q, "rlif-region-flip-all-steps",
          _seed_rows([s for run in doc.values() for s in run["seeds"]]),
          prov("bash benchmarks/rlif9/full9_all.sh", sha, date, [3.5, 4.5]),
          config={"runs": [r["config"] for r in doc.values()]}, source=path)


def screens() -> None:
    path = "docs/results_rlif9_screens.json"
    doc = load(path)
    sha, date = added(path)
    op = doc["operator_screen"]
    rows = [{"cell": name, "seed": 0, "metric": m, "value": v}
            for name, run in op["runs"].items() for m, v in flatten(run)]
    cmd = "bash benchmarks/rlif9/opscreen.sh\nbash benchmarks/rlif9/opscreen2.sh"
    write(Q, "rlif-operator-screen", rows, prov(cmd, sha, date, [1.1, 2.1]), source=path)
    rows = [{"variant": std, **r} for std, run in doc["noise_screen"]["runs"].items()
            for r in _seed_rows(run["seeds"])]
    first = doc["first_screen_theta0.2_flip2_noise0.5"]
    rows += [{"variant": "first-check theta 0.2 flip 2 noise 0.5", **r}
             for r in _seed_rows(first["seeds"])]
    write(Q, "rlif-noise-screen", rows,
          prov("bash benchmarks/rlif9/noisescreen.sh", sha, date, [1.5, 1.7]), source=path)
    for path, cmd, name, cells in (
            ("docs/results_rlif14_screen.jsonl", "bash benchmarks/rlif14/screen14.sh",
             "rlif-region-flip-operator-screen", None),
            ("docs/results_rlif15_screen.jsonl", "bash benchmarks/rlif15/screen15.sh",
             "rlif-region-flip-greedy-screen", ("weak", "m1", "m2", "m3")),
            ("docs/results_rlif15_screen.jsonl", "bash benchmarks/rlif15/screen15b.sh",
             "rlif-region-flip-critics-screen", ("k3m2", "k3m3"))):
        lines = [json.loads(x) for x in show(path).splitlines() if x.strip()]
        shas = blame_lines(path)
        rows, first = [], None
        for i, obj in enumerate(lines):
            cell = obj.get("cell", obj.get("name"))
            if cells is not None and cell not in cells:
                continue
            first = shas[i] if first is None else first
            ctx = {"cell": cell, "seed": int(obj.get("seed", 0))}
            rows += [{**ctx, "metric": k, "value": v} for k, v in obj.items()
                     if k not in ("cell", "name", "seed")]
        sha, date = first, commit_date(first)
        write(Q, name, rows, prov(cmd, sha, date, None), source=path)


def main() -> None:
    singles()
    chains()
    rounds9()
    screens()
