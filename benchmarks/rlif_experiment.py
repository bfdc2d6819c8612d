"""RLIF vs BC through the HIL runtime (issue #20, part 3): per seed, weaken a trained edit
bundle, collect interventions from the scripted suboptimal operator with ``edgerl hil
--operator --record``, fine-tune with ``edgerl finetune --method rlif`` and ``--method bc``
on the same recording, and evaluate the three bundles with ``edgerl hil`` (no operator).

Usage (from the repo root; BASE from `edgerl train cartpole --method edit --delay-steps 5`
and `edgerl export`)::

    python benchmarks/rlif_experiment.py --base runs/rlif_base_bundle --seeds 0 1 2 \
        --out runs/rlif --json-out runs/rlif/results.json
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from pathlib import Path


def _cli(*args: str) -> dict:
    """``python -m edgerl ARGS --json`` -> the printed JSON object."""
    cmd = [sys.executable, "-m", "edgerl", *args, "--json"]
    print("$", " ".join(cmd[2:]), file=sys.stderr, flush=True)
    for attempt in (1, 2):  # one retry: a HIL run can fail to start on a loaded machine
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            return json.loads(proc.stdout)
        print(f"attempt {attempt} failed ({proc.returncode}):\n{proc.stderr[-2000:]}",
              file=sys.stderr, flush=True)
    raise RuntimeError(f"{' '.join(cmd[2:])} failed twice")


def _hil(bundle: Path, episodes: int, seed: int, latency_ms: float, *extra: str) -> dict:
    return _cli("hil", "--bundle", str(bundle), "--episodes", str(episodes), "--seed",
                str(seed), "--planner-latency-ms", str(latency_ms), "--no-estop-check",
                "--link-probe", "0", *extra)


def _weaken(base: Path, out: Path, shrink: float, noise: float, seed: int) -> None:
    import torch

    from edgerl.export.bundle_mlp import export_like, load_bundle_mlp, weaken

    torch.set_num_threads(1)
    actor, spec = load_bundle_mlp(base)
    export_like(weaken(actor, noise, seed, shrink), spec, out, seed=seed)


def run_seed(a: argparse.Namespace, seed: int) -> dict:
    d = a.out / f"seed{seed}"
    weak, rec = d / "weak", d / "interventions.mcap"
    _weaken(a.base, weak, a.shrink, a.noise, seed)
    eval_seed = 1000 + seed  # unseen by the collection (plant seed `seed`)
    res: dict = {"seed": seed}
    col = _hil(weak, a.collect, seed, a.latency_ms, "--operator",
               f"{a.operator},seed={seed}", "--record", str(rec))
    res["collect"] = {k: col.get(k) for k in ("success", "steps", "operator_takeovers",
                                              "operator_records", "recorded_ticks")}
    bundles = {"start": weak}
    for method in ("rlif", "bc"):
        bundles[method] = d / method
        ft = _cli("finetune", "--interventions", str(rec), "--bundle", str(weak), "--out",
                  str(bundles[method]), "--method", method, "--steps", str(a.steps),
                  "--seed", str(seed))
        res[f"finetune_{method}"] = {k: v for k, v in ft.items() if k != "recordings"}
    for name, b in bundles.items():
        res[name] = _hil(b, a.episodes, eval_seed, a.latency_ms)["success"]
    print(json.dumps(res), file=sys.stderr, flush=True)
    return res


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", type=Path, required=True, help="trained edit bundle")
    p.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    p.add_argument("--out", type=Path, default=Path("runs/rlif"))
    p.add_argument("--shrink", type=float, default=0.35, help="weakening: output scale")
    p.add_argument("--noise", type=float, default=0.1, help="weakening: weight noise")
    p.add_argument("--collect", type=int, default=30, help="episodes with the operator")
    p.add_argument("--episodes", type=int, default=20, help="evaluation episodes per bundle")
    p.add_argument("--steps", type=int, default=2000, help="finetune gradient steps")
    p.add_argument("--latency-ms", type=float, default=100.0, help="HIL planner latency")
    p.add_argument("--operator", default="theta=0.2,x=1.5,hold=15,gain=0.6,noise=0.2")
    p.add_argument("--json-out", type=Path, default=None)
    a = p.parse_args()
    start = time.time()
    rows = [run_seed(a, s) for s in a.seeds]
    summary = {m: {"mean": statistics.mean(r[m] for r in rows),
                   "std": statistics.pstdev(r[m] for r in rows)} for m in ("start", "rlif", "bc")}
    out = {"config": {k: str(v) for k, v in vars(a).items()}, "seeds": rows,
           "summary": summary, "wall_s": round(time.time() - start, 1)}
    text = json.dumps(out, indent=2)
    if a.json_out is not None:
        a.json_out.parent.mkdir(parents=True, exist_ok=True)
        a.json_out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
