"""Re-evaluate the bundles of a ``benchmarks/rlif_experiment.py --rounds`` run one after
another (nothing else of the experiment running), ``edgerl hil`` at normal priority, with the
UTC time and the load average beside each: the experiment runs its evaluations while other
seeds collect or fine-tune, and a real-time HIL evaluation on a loaded 2-core machine is
measurably worse (session 9: the same start scored 0.35 alone, 0.05 beside two other seeds).

Usage: ``python benchmarks/rlif_reeval.py --out runs/rlif9 --base runs/rlif_base_bundle
--seeds 0 1 2 [--rounds-too] --json-out docs/results_rlif9_eval.json``
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path


def bundles(out: Path, base: Path, seed: int, rounds_too: bool,
            only: list[str] | None = None) -> dict[str, Path]:
    """The cells of one seed: start, RLIF (last round), BC, RLIF without noise, base (and
    with ``rounds_too`` the earlier rounds' RLIF bundles); ``only``: just these bundle
    directories under the seed's folder instead."""
    d = out / f"seed{seed}"
    if only:
        return {name: d / name for name in only}
    last = max(int(p.name[5:]) for p in (d / "rlif").glob("round*"))
    cells = {"start": d / "weak", "rlif": d / "rlif" / f"round{last}" / "bundle", "bc": d / "bc",
             "rlif_nonoise": d / "rlif_nonoise" / f"round{last}" / "bundle", "base": base}
    if rounds_too:
        for r in range(last):
            cells[f"rlif_round{r + 1}"] = d / "rlif" / f"round{r}" / "bundle"
            cells[f"rlif_nonoise_round{r + 1}"] = d / "rlif_nonoise" / f"round{r}" / "bundle"
    return cells


def evaluate(bundle: Path, episodes: int, seed: int, latency_ms: float) -> dict:
    """One ``edgerl hil`` evaluation (one retry if it fails to start)."""
    cmd = [sys.executable, "-m", "edgerl.apps", "hil", "--bundle", str(bundle), "--episodes",
           str(episodes), "--seed", str(seed), "--planner-latency-ms", str(latency_ms),
           "--no-estop-check", "--link-probe", "0", "--json"]
    for _ in (1, 2):
        t = time.strftime("%H:%M:%S", time.gmtime())
        load = os.getloadavg()[0]
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            res = json.loads(proc.stdout)
            return {"success": res["success"], "steps": res["steps"], "utc": t,
                    "load1": round(load, 2)}
        print(proc.stderr[-2000:], file=sys.stderr, flush=True)
    raise RuntimeError(f"{' '.join(cmd[2:])} failed twice")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, required=True, help="the experiment's --out")
    p.add_argument("--base", type=Path, required=True)
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--episodes", type=int, default=20)
    p.add_argument("--latency-ms", type=float, default=100.0)
    p.add_argument("--eval-seed-offset", type=int, default=1000,
                   help="plant seed = this + the seed (default 1000, the experiment's own "
                        "evaluation seeds; session 15c's confirmation used 3000)")
    p.add_argument("--rounds-too", action="store_true")
    p.add_argument("--only", nargs="+", default=None, metavar="DIR",
                   help="evaluate just these bundle folders under each seed's folder")
    p.add_argument("--json-out", type=Path, required=True)
    a = p.parse_args()
    rows = []
    for seed in a.seeds:
        row: dict = {"seed": seed}
        for name, b in bundles(a.out, a.base, seed, a.rounds_too, a.only).items():
            row[name] = evaluate(b, a.episodes, a.eval_seed_offset + seed, a.latency_ms)
            print(seed, name, row[name], file=sys.stderr, flush=True)
            a.json_out.write_text(json.dumps({"seeds": rows + [row]}, indent=1))
        rows.append(row)
    names = [k for k in rows[0] if k != "seed"]
    summary = {k: {"mean": statistics.mean(r[k]["success"] for r in rows),
                   "std": statistics.pstdev(r[k]["success"] for r in rows)} for k in names}
    a.json_out.write_text(json.dumps({"config": {k: str(v) for k, v in vars(a).items()},
                                      "seeds": rows, "summary": summary}, indent=1))
    print(json.dumps(summary, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
