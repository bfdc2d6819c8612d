"""RLIF vs BC through the HIL runtime (issue #20, part 3): per seed, weaken a trained edit
bundle, collect interventions from the scripted suboptimal operator with ``edgerl hil
--operator --record``, fine-tune with ``edgerl finetune --method rlif`` and ``--method bc``
on the same recording, and evaluate the three bundles with ``edgerl hil`` (no operator).

With ``--rounds R`` (session 9) the collection is a loop instead: round ``r`` collects with
the current RLIF bundle (plus ``--explore-std`` noise on its residual while it is in control,
``edgerl hil --explore-std``), then RLIF is fine-tuned from the current bundle on ALL the
recordings so far; BC is fitted once, from the start, on the same recordings (the data of the
RLIF chain: "the same intervention data"). ``--no-noise-control`` runs a second chain with
the same rounds but no exploration noise (its own collections).

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

NICE: list[str] = []  # ["nice", "-n", "15"] with --nice: collection and fine-tuning


def _cli(*args: str, nice: bool = False) -> dict:
    """``python -m edgerl.apps ARGS --json`` -> the printed JSON object (``nice``: under NICE)."""
    prefix = NICE if nice else []
    cmd = [*prefix, sys.executable, "-m", "edgerl.apps", *args, "--json"]
    print("$", *prefix, "edgerl", " ".join(cmd[len(prefix) + 3:]), file=sys.stderr, flush=True)
    for attempt in (1, 2):  # one retry: a HIL run can fail to start on a loaded machine
        proc = subprocess.run(cmd, capture_output=True, text=True)
        if proc.returncode == 0:
            return json.loads(proc.stdout)
        print(f"attempt {attempt} failed ({proc.returncode}):\n{proc.stderr[-2000:]}",
              file=sys.stderr, flush=True)
    raise RuntimeError(f"edgerl {' '.join(args)} failed twice")


def _hil(bundle: Path, episodes: int, seed: int, latency_ms: float, *extra: str,
         nice: bool = False) -> dict:
    return _cli("hil", "--bundle", str(bundle), "--episodes", str(episodes), "--seed",
                str(seed), "--planner-latency-ms", str(latency_ms), "--no-estop-check",
                "--link-probe", "0", *extra, nice=nice)


def _weaken(base: Path, out: Path, shrink: float, noise: float, seed: int) -> None:
    import torch

    from edgerl.export.bundle_mlp import export_like, load_bundle_mlp, weaken

    torch.set_num_threads(1)
    actor, spec = load_bundle_mlp(base)
    export_like(weaken(actor, noise, seed, shrink), spec, out, seed=seed)


def _weaken_region(base: Path, out: Path, region: str, obs_rec: Path, seed: int) -> dict:
    """The start that is bad only in a region (``export/weaken_region.py``), distilled on
    the edit observations of ``obs_rec`` (a recording of the base bundle)."""
    import torch

    from edgerl.contract.intervention_log import load_transitions
    from edgerl.export.bundle_mlp import export_like, load_bundle_mlp
    from edgerl.export.weaken_region import RegionSpec, weaken_region

    torch.set_num_threads(1)
    actor, spec = load_bundle_mlp(base)
    obs = load_transitions([obs_rec], spec.edit_obs.fast_dim)["edit_obs"]
    weak, stats = weaken_region(actor, spec, obs, RegionSpec.parse(region), seed=seed)
    export_like(weak, spec, out, inputs=obs, seed=seed)
    return stats


def _bc_targets(recs: list[Path], base: Path) -> dict:
    """What BC regresses on (the override steps' residuals ``u``) and how it compares with
    the base (unweakened) policy's own residual in the same states."""
    import numpy as np
    import torch

    from edgerl.contract.intervention_log import load_transitions
    from edgerl.export.bundle_mlp import load_bundle_mlp
    from edgerl.policies.rlif import intervention_dataset

    actor, spec = load_bundle_mlp(base)
    data = intervention_dataset(load_transitions(recs, spec.edit_obs.fast_dim),
                                spec.residual_bound)
    m = data["intervened"] > 0
    u = data["u"][m][:, 0].numpy()
    with torch.no_grad():
        ref = actor(data["s"][m])[:, 0].clamp(-1, 1).numpy()
    return {"override_steps": int(m.sum()), "mean_u": float(u.mean()),
            "mean_abs_u": float(np.abs(u).mean()), "at_bound": float((np.abs(u) >= 0.999).mean()),
            "base_mean_u": float(ref.mean()),
            "sign_agrees_with_base": float((np.sign(u) == np.sign(ref)).mean()),
            "mse_to_base": float(((u - ref) ** 2).mean())}


COLLECT_KEYS = ("success", "steps", "operator_takeovers", "operator_records", "recorded_ticks")


def _chain(a: argparse.Namespace, d: Path, start: Path, seed: int, explore_std: float,
           name: str) -> tuple[Path, list[Path], list[dict]]:
    """``a.rounds`` collect / fine-tune rounds from ``start`` under ``d / name``; returns the
    last bundle, the recordings and per round the collection and fine-tuning numbers.
    Round ``r`` collects at plant seed ``seed + 100 r`` (operator and noise seeded alike).
    A finished round (its ``round.json``) is reused on a rerun."""
    bundle, recs, log = start, [], []
    for r in range(a.rounds):
        rd = d / name / f"round{r}"
        rd.mkdir(parents=True, exist_ok=True)
        rec, out, done = rd / "interventions.mcap", rd / "bundle", rd / "round.json"
        recs.append(rec)
        if done.exists():
            log.append(json.loads(done.read_text()))
            bundle = out
            continue
        plant = seed + 100 * r
        extra = ("--explore-std", str(explore_std)) if explore_std > 0 else ()
        col = _hil(bundle, a.collect, plant, a.latency_ms, "--operator",
                   f"{a.operator},seed={plant}", "--record", str(rec), *extra, nice=True)
        src = start if a.from_start else bundle  # session 15b: refit from the start
        ft = _cli("finetune", "--interventions", *map(str, recs), "--bundle", str(src),
                  "--out", str(out), *a.rlif_args.split(), "--steps", str(a.steps),
                  "--seed", str(seed), nice=True)
        entry = {"round": r, "plant_seed": plant, "collect": {k: col.get(k)
                                                              for k in COLLECT_KEYS},
                 "finetune": {k: v for k, v in ft.items() if k != "recordings"}}
        if a.eval_rounds and r < a.rounds - 1:
            entry["eval"] = _hil(out, a.episodes, 1000 + seed, a.latency_ms)["success"]
        done.write_text(json.dumps(entry))
        log.append(entry)
        bundle = out
    return bundle, recs, log


def run_rounds(a: argparse.Namespace, seed: int) -> dict:
    """Session 9: several rounds with exploration noise (see the module docstring)."""
    d = a.out / f"seed{seed}"
    weak = d / "weak"
    res: dict = {"seed": seed}
    if not (weak / "manifest.json").exists():
        res["weaken_region"] = _weaken_region(a.base, weak, a.region, a.out / "base_obs.mcap",
                                              seed)
        (d / "weaken.json").write_text(json.dumps(res["weaken_region"]))
    else:
        res["weaken_region"] = json.loads((d / "weaken.json").read_text())
    bundles = {"start": weak}
    bundles["rlif"], recs, res["rounds_rlif"] = _chain(a, d, weak, seed, a.explore_std, "rlif")
    res["bc_targets"] = _bc_targets(recs, a.base)
    bundles["bc"] = d / "bc"
    if not (bundles["bc"] / "manifest.json").exists():
        ft = _cli("finetune", "--interventions", *map(str, recs), "--bundle", str(weak),
                  "--out", str(bundles["bc"]), "--method", "bc", "--steps", str(a.steps),
                  "--seed", str(seed), nice=True)
        res["finetune_bc"] = {k: v for k, v in ft.items() if k != "recordings"}
    if a.no_noise_control:
        bundles["rlif_nonoise"], _, res["rounds_rlif_nonoise"] = _chain(a, d, weak, seed, 0.0,
                                                                        "rlif_nonoise")
    if a.controls:
        bundles["base"] = a.base
    for name, b in bundles.items():
        res[name] = _hil(b, a.episodes, 1000 + seed, a.latency_ms)["success"]
    print(json.dumps(res), file=sys.stderr, flush=True)
    return res


def run_seed(a: argparse.Namespace, seed: int) -> dict:
    d = a.out / f"seed{seed}"
    weak, rec = d / "weak", d / "interventions.mcap"
    res: dict = {"seed": seed}
    done = d / "collect.json"  # a rerun reuses a finished start + collection
    if done.exists():
        res.update(json.loads(done.read_text()))
    else:
        if a.region:
            res["weaken_region"] = _weaken_region(a.base, weak, a.region,
                                                  a.out / "base_obs.mcap", seed)
        else:
            _weaken(a.base, weak, a.shrink, a.noise, seed)
        col = _hil(weak, a.collect, seed, a.latency_ms, "--operator",
                   f"{a.operator},seed={seed}", "--record", str(rec))
        res["collect"] = {k: col.get(k) for k in ("success", "steps", "operator_takeovers",
                                                  "operator_records", "recorded_ticks")}
        done.write_text(json.dumps(res))
    eval_seed = 1000 + seed  # unseen by the collection (plant seed `seed`)
    res["bc_targets"] = _bc_targets([rec], a.base)
    bundles = {"start": weak}
    variants = {"rlif": ("--method", "rlif"), "bc": ("--method", "bc")}
    if a.controls:
        variants["rlif_beta0"] = ("--method", "rlif", "--beta", "0")
    if a.own:
        variants["rlif_own"] = ("--method", "rlif", "--actor-data", "own")
    if a.qmax:
        variants["rlif_qmax"] = ("--method", "rlif", "--extract", "qmax")
    for name, extra in variants.items():
        bundles[name] = d / name
        ft = _cli("finetune", "--interventions", str(rec), "--bundle", str(weak), "--out",
                  str(bundles[name]), *extra, "--steps", str(a.steps), "--seed", str(seed))
        res[f"finetune_{name}"] = {k: v for k, v in ft.items() if k != "recordings"}
    if a.controls:
        bundles["base"] = a.base
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
    p.add_argument("--region", default="",
                   help="weaken only in a region instead (export/weaken_region.py RegionSpec, "
                        "e.g. 'mode=flip,min_angle=0.05'); distilled on a recording of BASE")
    p.add_argument("--controls", action="store_true",
                   help="also RLIF with beta 0 and the base bundle, on the same eval seeds "
                        "(with --rounds: the base bundle only)")
    p.add_argument("--own", action="store_true",
                   help="also RLIF over the policy's own steps (rlif --actor-data own)")
    p.add_argument("--qmax", action="store_true",
                   help="also RLIF with TD3+BC policy extraction (rlif --extract qmax)")
    p.add_argument("--rounds", type=int, default=0,
                   help="session 9: this many collect / fine-tune rounds with the current "
                        "RLIF bundle (0: the single-round experiment); needs --region")
    p.add_argument("--explore-std", type=float, default=0.0,
                   help="rounds: exploration noise on the residual at collection "
                        "(edgerl hil --explore-std)")
    p.add_argument("--rlif-args", default="--method rlif --actor-data own",
                   help="rounds: the RLIF chain's finetune options")
    p.add_argument("--from-start", action="store_true",
                   help="rounds: fine-tune each round from the start bundle (on all recordings "
                        "so far) instead of from the current one; collection still uses the "
                        "current one")
    p.add_argument("--no-noise-control", action="store_true",
                   help="rounds: also the same chain without exploration noise")
    p.add_argument("--eval-rounds", action="store_true",
                   help="rounds: also evaluate the RLIF bundle after each earlier round")
    p.add_argument("--nice", action="store_true",
                   help="rounds: run collection and fine-tuning under nice -n 15 (the "
                        "evaluations stay at normal priority)")
    p.add_argument("--json-out", type=Path, default=None)
    a = p.parse_args()
    if a.nice:
        NICE[:] = ["nice", "-n", "15"]
    if a.rounds and not a.region:
        p.error("--rounds needs --region (the session-8 region-weakened start)")
    start = time.time()
    if a.region and not (a.out / "base_obs.mcap").exists():
        _hil(a.base, 10, 500, a.latency_ms, "--record", str(a.out / "base_obs.mcap"))
    rows = [(run_rounds if a.rounds else run_seed)(a, s) for s in a.seeds]
    cells = [m for m in ("start", "rlif", "bc", "rlif_nonoise", "rlif_beta0", "rlif_own",
                         "rlif_qmax", "base") if m in rows[0]]
    summary = {m: {"mean": statistics.mean(r[m] for r in rows),
                   "std": statistics.pstdev(r[m] for r in rows)} for m in cells}
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
