"""``edgerl experiment run CONFIG``: load the config, run (or list) its driver's steps, write
what it measured through the results store.

The driver returns an :class:`Outcome`: the rows of one results file or several (``parts``,
each written to ``results/<name>--<part>.json``), and the seeds they cover. The runner fills
the provenance (the command line, the git revision, the UTC time, the load average sampled at
the start and at the end) and refuses to overwrite a results file unless told to.
"""

from __future__ import annotations

import importlib
import logging
from pathlib import Path
from typing import Any

from edgerl.apps.experiments.config import ExperimentConfig, load_config, params_from
from edgerl.apps.experiments.context import Outcome, RunContext
from edgerl.apps.experiments.execute import DryRunExecutor, Executor, RealExecutor
from edgerl.apps.experiments.registry import DRIVERS
from edgerl.contract.errors import UserError
from edgerl.contract.results_store import Provenance, write_results

__all__ = ["dry_run_lines", "driver_module", "run_experiment"]

log = logging.getLogger(__name__)


def driver_module(name: str) -> Any:
    """The module implementing driver ``name``."""
    if name not in DRIVERS:
        raise UserError(f"unknown driver {name!r}; known: {', '.join(sorted(DRIVERS))}")
    return importlib.import_module(DRIVERS[name])


def _prepare(path: str | Path, root: Path) -> tuple[ExperimentConfig, Any, Any]:
    cfg = load_config(path)
    if not cfg.run:
        raise UserError(f"{cfg.path}: no [run] table: this experiment is a record only "
                        "(its commands are in its notes)")
    module = driver_module(cfg.driver)
    params = params_from(module.Params, cfg.run, str(cfg.path))
    return cfg, module, params


def dry_run_lines(path: str | Path, root: str | Path = ".") -> list[str]:
    """The steps ``edgerl experiment run PATH`` would take, one line each, in order."""
    root = Path(root)
    cfg, module, params = _prepare(path, root)
    ex = DryRunExecutor(root=root)
    module.run(params, ex, RunContext(config=cfg, root=root))
    return ex.lines


def run_experiment(path: str | Path, *, root: str | Path = ".", lane: int | None = None,
                   results: str | Path | None = None, force: bool = False,
                   argv: list[str] | None = None, executor: Executor | None = None
                   ) -> list[Path]:
    """Run the experiment; returns the results files written (none for a lane)."""
    root = Path(root)
    cfg, module, params = _prepare(path, root)
    prov = Provenance.now(argv=argv, root=root) if argv is not None else Provenance.now(
        root=root)
    targets = {}
    if lane is None:
        base = Path(results) if results else cfg.results_path()
        targets = {"": base}
    ex = executor or RealExecutor(root=root)
    outcome: Outcome = module.run(params, ex, RunContext(config=cfg, root=root, lane=lane,
                                                         argv=list(argv or [])))
    if lane is not None:
        return []
    prov.sample_load()  # the load at the end of the run, beside the one at its start
    written = []
    for part, rows in outcome.parts.items():
        target = targets[""] if not part else targets[""].with_name(
            f"{targets[''].stem}--{part}.json")
        if target.exists() and not force:
            raise UserError(f"{target} exists; pass --force to replace it or --results to "
                            "write elsewhere")
        write_results(target, experiment=cfg.name, question=cfg.question,
                      config={"experiment": cfg.raw.get("experiment", {}), "run": cfg.run},
                      seeds=outcome.seeds, rows=rows, provenance=prov)
        written.append(target)
        log.info("wrote %s (%d rows)", target, len(rows))
    return written
