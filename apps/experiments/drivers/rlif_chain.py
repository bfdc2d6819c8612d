"""RLIF against BC through the HIL runtime: weaken a trained edit bundle per seed, collect
operator takeovers with ``edgerl hil --operator --record``, fine-tune with ``edgerl finetune``
(RLIF and BC on the same recordings) and evaluate every bundle with ``edgerl hil``.

Two forms. ``rounds = 0``: one collection from the weakened start (uniformly, ``shrink`` and
``noise``, or only in a ``region``), then RLIF, BC and the optional controls fine-tuned on it.
``rounds = R``: a chain; round ``r`` collects at plant seed ``seed + 100 r`` with the current
RLIF bundle (plus ``explore_std`` noise on its residual while it is in control), then RLIF
(``rlif_args``) is fine-tuned from the current bundle (or the start, ``from_start``) on every
recording so far; BC is fitted once, from the start, on the chain's recordings;
``no_noise_control`` runs the same chain without noise. Evaluation: ``episodes`` episodes at
plant seed ``1000 + seed`` (unseen by the collection), planner latency ``latency_ms``.
A finished round (its ``round.json``) or start is reused on a rerun.

``parallel_seeds``: each seed runs in its own process (``edgerl experiment run CONFIG --lane
S``), ``stagger_s`` apart, as one machine's cores allow; then the ``reeval`` evaluations run one
bundle after another with nothing else of the experiment running (``rlif_reeval``).
``prepare``: copies (and small steps) made before anything runs, e.g. the starts of an earlier
run; ``variants``: the same chain again with some settings changed (a screen).
"""

from __future__ import annotations

import json
import shlex
import statistics
from dataclasses import dataclass, field, fields, replace
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.drivers.rlif_actions import (
    bc_targets,
    hil_args,
    weaken,
    weaken_region,
)
from edgerl.apps.experiments.drivers.rlif_reeval import ReevalSpec, reevaluate
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import RLIF_CELLS, reeval_rows, rlif_seed_rows
from edgerl.contract.errors import UserError

__all__ = ["Params", "run", "run_prepare"]

COLLECT_KEYS = ("success", "steps", "operator_takeovers", "operator_records", "recorded_ticks")
NICE = 15


@dataclass
class Params:
    """The ``[run]`` table of an ``rlif_chain`` config (defaults as the first runs had)."""

    base: str
    seeds: list[int] = field(default_factory=lambda: [0, 1, 2])
    out: str = "runs/rlif"
    shrink: float = 0.35
    noise: float = 0.1
    collect: int = 30
    episodes: int = 20
    steps: int = 2000
    latency_ms: float = 100.0
    operator: str = "theta=0.2,x=1.5,hold=15,gain=0.6,noise=0.2"
    region: str = ""
    controls: bool = False
    own: bool = False
    qmax: bool = False
    rounds: int = 0
    explore_std: float = 0.0
    rlif_args: str = "--method rlif --actor-data own"
    from_start: bool = False
    no_noise_control: bool = False
    eval_rounds: bool = False
    nice: bool = False
    json_out: str = ""                    # per run (``{seed}``: per seed process)
    parallel_seeds: bool = False
    stagger_s: float = 20.0
    prepare: list[dict[str, Any]] = field(default_factory=list)
    reeval: list[dict[str, Any]] = field(default_factory=list)
    variants: list[dict[str, Any]] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.rounds and not self.region:
            raise ValueError("rounds needs region (the region-weakened start)")
        if self.parallel_seeds and "{seed}" not in self.json_out:
            raise ValueError("parallel_seeds needs json_out naming {seed} (each seed's process "
                             "writes its own)")


def _cli(ex: Executor, p: Params, args: list[str], nice: bool = False) -> dict[str, Any]:
    return ex.run([*args, "--json"], nice=NICE if nice and p.nice else 0, json_out=True,
                  retries=1)


def _hil(ex: Executor, p: Params, bundle: str, episodes: int, seed: int, *extra: str,
         nice: bool = False) -> dict[str, Any]:
    return _cli(ex, p, hil_args(bundle, episodes, seed, p.latency_ms, *extra), nice=nice)


def run_prepare(ex: Executor, steps: list[dict[str, Any]], **fmt: Any) -> None:
    """The ``prepare`` steps: ``{copy = [SRC...], to = DST, recursive = true}``,
    ``{python = CODE}`` (a one-line step run as ``python -c``) or ``{command = "edgerl ...",
    nice = N, stdout = FILE, unless_exists = PATH}``; ``{name}`` fields filled."""
    for step in steps:
        if step.get("unless_exists") and ex.exists(str(step["unless_exists"]).format(**fmt)):
            continue
        if "command" in step:
            ex.run(shlex.split(str(step["command"]).format(**fmt)), nice=int(step.get("nice", 0)),
                   stdout=str(step["stdout"]).format(**fmt) if "stdout" in step else None)
        elif "copy" in step:
            srcs = [s.format(**fmt) for s in step["copy"]]
            ex.copy(srcs, str(step["to"]).format(**fmt),
                    recursive=bool(step.get("recursive", True)))
        elif "python" in step:
            ex.run(["python", "-c", str(step["python"]).format(**fmt)])
        else:
            raise UserError(f"a prepare step needs 'copy' or 'python': {step}")


def _chain(ex: Executor, p: Params, d: str, start: str, seed: int, explore_std: float,
           name: str) -> tuple[str, list[str], list[dict[str, Any]]]:
    """``p.rounds`` collect / fine-tune rounds from ``start`` under ``d/name``: the last
    bundle, the recordings, and per round the collection and fine-tuning numbers."""
    bundle, recs, log = start, [], []
    for r in range(p.rounds):
        rd = f"{d}/{name}/round{r}"
        rec, out, done = f"{rd}/interventions.mcap", f"{rd}/bundle", f"{rd}/round.json"
        recs.append(rec)
        if ex.exists(done):
            log.append(ex.read_json(done))
            bundle = out
            continue
        plant = seed + 100 * r
        extra = ("--explore-std", str(explore_std)) if explore_std > 0 else ()
        col = _hil(ex, p, bundle, p.collect, plant, "--operator", f"{p.operator},seed={plant}",
                   "--record", rec, *extra, nice=True)
        src = start if p.from_start else bundle
        ft = _cli(ex, p, ["edgerl", "finetune", "--interventions", *recs, "--bundle", src,
                          "--out", out, *p.rlif_args.split(), "--steps", str(p.steps),
                          "--seed", str(seed)], nice=True)
        entry: dict[str, Any] = {"round": r, "plant_seed": plant,
                                 "collect": {k: col.get(k) for k in COLLECT_KEYS},
                                 "finetune": {k: v for k, v in ft.items() if k != "recordings"}}
        if p.eval_rounds and r < p.rounds - 1:
            entry["eval"] = _hil(ex, p, out, p.episodes, 1000 + seed)["success"]
        ex.write_text(done, json.dumps(entry))
        log.append(entry)
        bundle = out
    return bundle, recs, log


def run_rounds(ex: Executor, p: Params, seed: int) -> dict[str, Any]:
    """One seed of the chain (``rounds > 0``)."""
    d = f"{p.out}/seed{seed}"
    weak = f"{d}/weak"
    res: dict[str, Any] = {"seed": seed}
    if not ex.exists(f"{weak}/manifest.json"):
        res["weaken_region"] = weaken_region(ex, p.base, weak, p.region,
                                             f"{p.out}/base_obs.mcap", seed)
        ex.write_text(f"{d}/weaken.json", json.dumps(res["weaken_region"]))
    else:
        res["weaken_region"] = ex.read_json(f"{d}/weaken.json")
    bundles = {"start": weak}
    bundles["rlif"], recs, res["rounds_rlif"] = _chain(ex, p, d, weak, seed, p.explore_std,
                                                       "rlif")
    res["bc_targets"] = bc_targets(ex, recs, p.base)
    bundles["bc"] = f"{d}/bc"
    if not ex.exists(f"{bundles['bc']}/manifest.json"):
        ft = _cli(ex, p, ["edgerl", "finetune", "--interventions", *recs, "--bundle", weak,
                          "--out", bundles["bc"], "--method", "bc", "--steps", str(p.steps),
                          "--seed", str(seed)], nice=True)
        res["finetune_bc"] = {k: v for k, v in ft.items() if k != "recordings"}
    if p.no_noise_control:
        bundles["rlif_nonoise"], _, res["rounds_rlif_nonoise"] = _chain(
            ex, p, d, weak, seed, 0.0, "rlif_nonoise")
    if p.controls:
        bundles["base"] = p.base
    for name, b in bundles.items():
        res[name] = _hil(ex, p, b, p.episodes, 1000 + seed)["success"]
    return res


def run_seed(ex: Executor, p: Params, seed: int) -> dict[str, Any]:
    """One seed of the single-round form (``rounds = 0``)."""
    d = f"{p.out}/seed{seed}"
    weak, rec = f"{d}/weak", f"{d}/interventions.mcap"
    res: dict[str, Any] = {"seed": seed}
    done = f"{d}/collect.json"
    if ex.exists(done):
        res.update(ex.read_json(done))
    else:
        if p.region:
            res["weaken_region"] = weaken_region(ex, p.base, weak, p.region,
                                                 f"{p.out}/base_obs.mcap", seed)
        else:
            weaken(ex, p.base, weak, p.shrink, p.noise, seed)
        col = _hil(ex, p, weak, p.collect, seed, "--operator", f"{p.operator},seed={seed}",
                   "--record", rec)
        res["collect"] = {k: col.get(k) for k in COLLECT_KEYS}
        ex.write_text(done, json.dumps(res))
    res["bc_targets"] = bc_targets(ex, [rec], p.base)
    bundles = {"start": weak}
    variants = {"rlif": ("--method", "rlif"), "bc": ("--method", "bc")}
    if p.controls:
        variants["rlif_beta0"] = ("--method", "rlif", "--beta", "0")
    if p.own:
        variants["rlif_own"] = ("--method", "rlif", "--actor-data", "own")
    if p.qmax:
        variants["rlif_qmax"] = ("--method", "rlif", "--extract", "qmax")
    for name, extra in variants.items():
        bundles[name] = f"{d}/{name}"
        ft = _cli(ex, p, ["edgerl", "finetune", "--interventions", rec, "--bundle", weak,
                          "--out", bundles[name], *extra, "--steps", str(p.steps), "--seed",
                          str(seed)])
        res[f"finetune_{name}"] = {k: v for k, v in ft.items() if k != "recordings"}
    if p.controls:
        bundles["base"] = p.base
    for name, b in bundles.items():
        res[name] = _hil(ex, p, b, p.episodes, 1000 + seed)["success"]
    return res


def _one_process(ex: Executor, p: Params, seeds: list[int]) -> list[dict[str, Any]]:
    """What one ``rlif_experiment`` process did for ``seeds``: the base recording when the
    region start needs one, then each seed; its per-run JSON."""
    if p.region and not ex.exists(f"{p.out}/base_obs.mcap"):
        _hil(ex, p, p.base, 10, 500, "--record", f"{p.out}/base_obs.mcap")
    rows = [(run_rounds if p.rounds else run_seed)(ex, p, s) for s in seeds]
    if p.json_out:
        cells = [m for m in RLIF_CELLS if m in rows[0]]
        summary = {m: {"mean": statistics.mean(r[m] for r in rows),
                       "std": statistics.pstdev(r[m] for r in rows)} for m in cells}
        target = p.json_out.format(seed=seeds[0] if len(seeds) == 1 else "s", out=p.out)
        ex.write_text(target, json.dumps({"seeds": rows, "summary": summary}, indent=2))
    return rows


def _variant(ex: Executor, p: Params, ctx: RunContext) -> tuple[list[dict[str, Any]],
                                                                list[dict[str, Any]]]:
    if ctx.lane is not None:  # one seed's process: the parent prepared the folders
        return _one_process(ex, p, [ctx.lane]), []
    run_prepare(ex, p.prepare, out=p.out)
    results: list[dict[str, Any]] = []
    if p.parallel_seeds and not ex.dry_run:
        handles = []
        for i, s in enumerate(p.seeds):
            if i:
                ex.sleep(p.stagger_s)
            handles.append(ex.start(["edgerl", "experiment", "run", str(ctx.config.path),
                                     "--lane", str(s)]))
        for h in handles:
            ex.wait(h)
        for s in p.seeds:
            results += ex.read_json(p.json_out.format(seed=s, out=p.out))["seeds"]
    elif p.parallel_seeds:
        for s in p.seeds:
            ex.note(f"seed {s}: its own process (edgerl experiment run CONFIG --lane {s})")
            results += _one_process(ex, p, [s])
    else:
        results = _one_process(ex, p, list(p.seeds))
    evaluations = []
    for i, spec in enumerate(p.reeval):
        label = spec.get("label", f"reeval{i + 1}")
        settings = {"last_round": p.rounds - 1 if p.rounds else None,
                    **{k: v for k, v in spec.items() if k != "label"}}
        rs = ReevalSpec(out=p.out, base=p.base, seeds=list(p.seeds), latency_ms=p.latency_ms,
                        **settings)
        evaluations += reeval_rows(reevaluate(ex, rs), label)
    return results, evaluations


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    """The chain (and its variants); rows: per seed, per round, per evaluation."""
    rows: list[dict[str, Any]] = []
    names = {f.name for f in fields(Params)}
    for i, overrides in enumerate([{}] + list(p.variants)):
        if i and ctx.lane is not None:
            break
        bad = set(overrides) - names - {"label"}
        if bad:
            raise UserError(f"{ctx.config.path}: unknown variant setting(s) {sorted(bad)}")
        q = replace(p, **{k: v for k, v in overrides.items() if k != "label"})
        if i == 0 and p.variants:
            q = replace(q, variants=[])
            continue  # the base table only carries the variants' shared settings
        results, evaluations = _variant(ex, q, ctx)
        tag = {"variant": overrides["label"]} if "label" in overrides else {}
        rows += [{**tag, **r} for res in results for r in rlif_seed_rows(res)]
        rows += [{**tag, **r} for r in evaluations]
    return Outcome(parts={"": rows}, seeds=list(p.seeds))
