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
run; ``variants``: the same chain again with some settings changed (a screen). The settings
(:class:`~.rlif_chain_params.Params`) sit in groups by concern; a config names each by its own
name.
"""

from __future__ import annotations

import json
import shlex
import statistics
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.drivers.rlif_actions import (
    bc_targets,
    hil_args,
    weaken,
    weaken_region,
)
from edgerl.apps.experiments.drivers.rlif_chain_params import Params
from edgerl.apps.experiments.drivers.rlif_reeval import ReevalSpec, reevaluate
from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import RLIF_CELLS, reeval_rows, rlif_seed_rows
from edgerl.contract.config_groups import change, setting_names
from edgerl.contract.errors import UserError

__all__ = ["Params", "run", "run_prepare"]

COLLECT_KEYS = ("success", "steps", "operator_takeovers", "operator_records", "recorded_ticks")
NICE = 15


def _cli(ex: Executor, p: Params, args: list[str], nice: bool = False) -> dict[str, Any]:
    return ex.run([*args, "--json"], nice=NICE if nice and p.processes.nice else 0,
                  json_out=True, retries=1)


def _hil(ex: Executor, p: Params, bundle: str, episodes: int, seed: int, *extra: str,
         nice: bool = False) -> dict[str, Any]:
    latency_ms = p.evaluation.latency_ms
    return _cli(ex, p, hil_args(bundle, episodes, seed, latency_ms, *extra), nice=nice)


def _collect(ex: Executor, p: Params, bundle: str, plant: int, rec: str, *extra: str,
             nice: bool = False) -> dict[str, Any]:
    """The operator's takeovers in ``collect`` HIL episodes of ``bundle`` at plant seed
    ``plant``, recorded to ``rec``; the collection's numbers (:data:`COLLECT_KEYS`)."""
    c = p.collection
    col = _hil(ex, p, bundle, c.collect, plant, "--operator", f"{c.operator},seed={plant}",
               "--record", rec, *extra, nice=nice)
    return {k: col.get(k) for k in COLLECT_KEYS}


def _finetune(ex: Executor, p: Params, recs: list[str], start: str, out: str,
              args: Sequence[str], seed: int, nice: bool = False) -> dict[str, Any]:
    """``edgerl finetune`` of ``start`` on ``recs`` into ``out`` with ``args``; its numbers
    (the recordings' list left out)."""
    ft = _cli(ex, p, ["edgerl", "finetune", "--interventions", *recs, "--bundle", start,
                      "--out", out, *args, "--steps", str(p.finetuning.steps),
                      "--seed", str(seed)], nice=nice)
    return {k: v for k, v in ft.items() if k != "recordings"}


def _evaluate(ex: Executor, p: Params, bundles: dict[str, str], seed: int) -> dict[str, Any]:
    """Each bundle's HIL success at plant seed ``1000 + seed`` (the base's too with
    ``controls``)."""
    if p.cells.controls:
        bundles = {**bundles, "base": p.base}
    return {name: _hil(ex, p, b, p.evaluation.episodes, 1000 + seed)["success"]
            for name, b in bundles.items()}


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
        col = _collect(ex, p, bundle, plant, rec, *extra, nice=True)
        src = start if p.finetuning.from_start else bundle
        ft = _finetune(ex, p, recs, src, out, p.finetuning.rlif_args.split(), seed, nice=True)
        entry: dict[str, Any] = {"round": r, "plant_seed": plant, "collect": col,
                                 "finetune": ft}
        if p.evaluation.eval_rounds and r < p.rounds - 1:
            entry["eval"] = _hil(ex, p, out, p.evaluation.episodes, 1000 + seed)["success"]
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
        res["weaken_region"] = weaken_region(ex, p.base, weak, p.weakening.region,
                                             f"{p.out}/base_obs.mcap", seed)
        ex.write_text(f"{d}/weaken.json", json.dumps(res["weaken_region"]))
    else:
        res["weaken_region"] = ex.read_json(f"{d}/weaken.json")
    bundles = {"start": weak}
    bundles["rlif"], recs, res["rounds_rlif"] = _chain(ex, p, d, weak, seed,
                                                       p.collection.explore_std, "rlif")
    res["bc_targets"] = bc_targets(ex, recs, p.base)
    bundles["bc"] = f"{d}/bc"
    if not ex.exists(f"{bundles['bc']}/manifest.json"):
        res["finetune_bc"] = _finetune(ex, p, recs, weak, bundles["bc"], ("--method", "bc"),
                                       seed, nice=True)
    if p.cells.no_noise_control:
        bundles["rlif_nonoise"], _, res["rounds_rlif_nonoise"] = _chain(
            ex, p, d, weak, seed, 0.0, "rlif_nonoise")
    res.update(_evaluate(ex, p, bundles, seed))
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
        if p.weakening.region:
            res["weaken_region"] = weaken_region(ex, p.base, weak, p.weakening.region,
                                                 f"{p.out}/base_obs.mcap", seed)
        else:
            weaken(ex, p.base, weak, p.weakening.shrink, p.weakening.noise, seed)
        res["collect"] = _collect(ex, p, weak, seed, rec)
        ex.write_text(done, json.dumps(res))
    res["bc_targets"] = bc_targets(ex, [rec], p.base)
    bundles = {"start": weak}
    variants = {"rlif": ("--method", "rlif"), "bc": ("--method", "bc")}
    if p.cells.controls:
        variants["rlif_beta0"] = ("--method", "rlif", "--beta", "0")
    if p.cells.own:
        variants["rlif_own"] = ("--method", "rlif", "--actor-data", "own")
    if p.cells.qmax:
        variants["rlif_qmax"] = ("--method", "rlif", "--extract", "qmax")
    for name, extra in variants.items():
        bundles[name] = f"{d}/{name}"
        res[f"finetune_{name}"] = _finetune(ex, p, [rec], weak, bundles[name], extra, seed)
    res.update(_evaluate(ex, p, bundles, seed))
    return res


def _one_process(ex: Executor, p: Params, seeds: list[int]) -> list[dict[str, Any]]:
    """What one ``rlif_experiment`` process did for ``seeds``: the base recording when the
    region start needs one, then each seed; its per-run JSON."""
    if p.weakening.region and not ex.exists(f"{p.out}/base_obs.mcap"):
        _hil(ex, p, p.base, 10, 500, "--record", f"{p.out}/base_obs.mcap")
    rows = [(run_rounds if p.rounds else run_seed)(ex, p, s) for s in seeds]
    if p.processes.json_out:
        cells = [m for m in RLIF_CELLS if m in rows[0]]
        summary = {m: {"mean": statistics.mean(r[m] for r in rows),
                       "std": statistics.pstdev(r[m] for r in rows)} for m in cells}
        target = p.processes.json_out.format(seed=seeds[0] if len(seeds) == 1 else "s", out=p.out)
        ex.write_text(target, json.dumps({"seeds": rows, "summary": summary}, indent=2))
    return rows


def _variant(ex: Executor, p: Params, ctx: RunContext) -> tuple[list[dict[str, Any]],
                                                                list[dict[str, Any]]]:
    if ctx.lane is not None:  # one seed's process: the parent prepared the folders
        return _one_process(ex, p, [ctx.lane]), []
    run_prepare(ex, p.prepare, out=p.out)
    results: list[dict[str, Any]] = []
    if p.processes.parallel_seeds and not ex.dry_run:
        handles = []
        for i, s in enumerate(p.seeds):
            if i:
                ex.sleep(p.processes.stagger_s)
            handles.append(ex.start(["edgerl", "experiment", "run", str(ctx.config.path),
                                     "--lane", str(s)]))
        for h in handles:
            ex.wait(h)
        for s in p.seeds:
            results += ex.read_json(p.processes.json_out.format(seed=s, out=p.out))["seeds"]
    elif p.processes.parallel_seeds:
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
        rs = ReevalSpec(out=p.out, base=p.base, seeds=list(p.seeds),
                        latency_ms=p.evaluation.latency_ms, **settings)
        evaluations += reeval_rows(reevaluate(ex, rs), label)
    return results, evaluations


def run(p: Params, ex: Executor, ctx: RunContext) -> Outcome:
    """The chain (and its variants); rows: per seed, per round, per evaluation."""
    rows: list[dict[str, Any]] = []
    names = setting_names(Params)
    for i, overrides in enumerate([{}] + list(p.variants)):
        if i and ctx.lane is not None:
            break
        bad = set(overrides) - names - {"label"}
        if bad:
            raise UserError(f"{ctx.config.path}: unknown variant setting(s) {sorted(bad)}")
        q = change(p, **{k: v for k, v in overrides.items() if k != "label"})
        if i == 0 and p.variants:
            q = replace(q, variants=[])
            continue  # the base table only carries the variants' shared settings
        results, evaluations = _variant(ex, q, ctx)
        tag = {"variant": overrides["label"]} if "label" in overrides else {}
        rows += [{**tag, **r} for res in results for r in rlif_seed_rows(res)]
        rows += [{**tag, **r} for r in evaluations]
    return Outcome(parts={"": rows}, seeds=list(p.seeds))
