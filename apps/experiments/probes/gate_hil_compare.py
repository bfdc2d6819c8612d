"""The planning-budget gate against its baselines through the HIL runtime: per gate
seed S, ``edgerl hil`` on the gate's bundle (``edgerl gate export``) with each
``--gate-policy`` on the same plant seed (1000 + S: road, other cars and the kick stream), the
scenario's disturbance (``--kicks``) on the applied command, and a table of return minus the
planning price (``return_minus_cost_mean``: the sim gate's return), success and the budget
mix, per seed and mean +- std over seeds.

Each run's JSON is kept in ``OUT/S_POLICY.json`` and reused when present (a stopped
comparison resumes); ``--json-out`` writes the table's numbers.

Usage (from the repo root)::

    python -m edgerl.apps.experiments.probes.gate_hil_compare --bundles runs/gate9_ck{S}_bundle \
        --seeds 0 1 2 --policies gate:sample age:fast:12 gate --episodes 32 \
        --kicks rate=0.004,size=0.8,steps=6,dims=1 --out runs/gate9_hil
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def run_one(bundle: str, policy: str, seed: int, args: argparse.Namespace, path: Path) -> dict:
    """``edgerl hil`` for one (bundle, policy, plant seed); its JSON (cached in ``path``)."""
    if path.exists():
        return json.loads(path.read_text())
    cmd = [sys.executable, "-m", "edgerl.apps", "hil", "--bundle", bundle, "--episodes",
           str(args.episodes), "--seed", str(seed), "--gate-policy", policy, "--link-probe",
           "0", "--no-estop-check", "--action-noise", str(args.action_noise), "--json"]
    if args.kicks:
        cmd += ["--kicks", args.kicks]
    print("$", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    for attempt in (1, 2):  # one retry: a HIL start can time out on a loaded machine
        t0 = time.time()
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            out = json.loads(proc.stdout)
            out["wall_s"] = round(time.time() - t0, 1)
            out["utc_end"] = time.strftime("%H:%M:%S", time.gmtime())
            out["load_end"] = Path("/proc/loadavg").read_text().split()[0]
            path.write_text(json.dumps(out))
            return out
        print(f"attempt {attempt} failed ({proc.returncode}):\n{proc.stderr[-2000:]}",
              file=sys.stderr, flush=True)
    raise RuntimeError(f"{' '.join(cmd[2:])} failed twice")


def mix(out: dict) -> str:
    """Decision shares per budget, ``keep/fast/slow`` order of the bundle."""
    decided = out.get("gate_decided") or {}
    total = max(sum(decided.values()), 1)
    return "/".join(f"{v / total:.2f}" for v in decided.values())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--bundles", required=True,
                   help="bundle path with {S} for the gate seed, e.g. runs/gate9_ck{S}_bundle")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--policies", nargs="+", default=["gate:sample", "age:fast:12", "gate"])
    p.add_argument("--episodes", type=int, default=32)
    p.add_argument("--kicks", default="rate=0.004,size=0.8,steps=6,dims=1")
    p.add_argument("--action-noise", type=float, default=0.0)
    p.add_argument("--plant-seed-offset", type=int, default=1000)
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--json-out", type=Path)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    table: dict[str, dict[int, dict]] = {}
    for pol in args.policies:
        for s in args.seeds:
            path = args.out / f"{s}_{pol.replace(':', '_')}.json"
            out = run_one(args.bundles.format(S=s), pol, s + args.plant_seed_offset, args, path)
            table.setdefault(pol, {})[s] = out
    print(f"| policy | {' | '.join(f'seed {s}' for s in args.seeds)} | mean +- std (return - "
          f"costs) | success (mean) | keep/fast/slow share |")
    print("|---" * (len(args.seeds) + 4) + "|")
    summary = {}
    for pol, runs in table.items():
        rets = [runs[s]["return_minus_cost_mean"] for s in args.seeds]
        succ = [runs[s]["success"] for s in args.seeds]
        cells = [f"{r:.2f} ({runs[s]['success']:.3f})" for s, r in zip(args.seeds, rets)]
        std = statistics.pstdev(rets) if len(rets) > 1 else 0.0
        print(f"| {pol} | {' | '.join(cells)} | {statistics.mean(rets):.2f} +- {std:.2f} | "
              f"{statistics.mean(succ):.3f} | {', '.join(mix(runs[s]) for s in args.seeds)} |")
        summary[pol] = {"return_minus_cost": rets, "success": succ,
                        "mean": statistics.mean(rets), "std": std}
    paired = paired_difference(table, args.policies, args.seeds) if len(table) >= 2 else {}
    if paired:
        a, b = args.policies[:2]
        print(f"\npaired per episode (same plant seed, kick stream), {a} minus {b}: "
              "mean +- standard error")
        for s in args.seeds:
            d = paired["seeds"][s]
            print(f"  seed {s}: {d['mean']:+.2f} +- {d['se']:.2f} ({d['n']} episodes)")
        d = paired["pooled"]
        print(f"  pooled: {d['mean']:+.2f} +- {d['se']:.2f} ({d['n']} episodes)")
    if args.json_out:
        args.json_out.write_text(json.dumps({"args": {k: str(v) for k, v in vars(args).items()},
                                             "summary": summary, "paired": paired,
                                             "runs": table}, indent=1))


def episode_net_returns(out: dict) -> list[float]:
    """Each episode's return minus its planning price (``episode_plan_costs``; runs from
    recorded before the HIL JSON carried it lack it: the run's mean price per episode stands
    in)."""
    rets = out["episode_returns"]
    costs = out.get("episode_plan_costs") or [out.get("plan_cost", 0.0) / len(rets)] * len(rets)
    return [r - c for r, c in zip(rets, costs)]


def paired_difference(table: dict, policies: list[str], seeds: list[int]) -> dict:
    """Per seed and pooled: mean and standard error of the per-episode difference of net
    returns, ``policies[0]`` minus ``policies[1]``, episode k against episode k (the same
    plant seed and kick stream; the roads stay paired while both reset alike)."""
    a, b = policies[:2]
    out: dict = {"policies": [a, b], "seeds": {}}
    pooled: list[float] = []
    for s in seeds:
        diffs = [x - y for x, y in zip(episode_net_returns(table[a][s]),
                                       episode_net_returns(table[b][s]))]
        pooled += diffs
        out["seeds"][s] = mean_se(diffs)
    out["pooled"] = mean_se(pooled)
    return out


def mean_se(xs: list[float]) -> dict:
    n = len(xs)
    se = statistics.stdev(xs) / n ** 0.5 if n > 1 else float("nan")
    return {"mean": statistics.mean(xs), "se": se, "n": n}


if __name__ == "__main__":
    main()
