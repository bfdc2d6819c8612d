"""An experiment's declared config (``experiments/<question>/<name>.toml``) and the driver
settings it holds.

::

    [experiment]
    name = "rlif-region-flip-greedy"       # kebab-case; the results files carry it
    question = "rlif"                      # the folder it sits in
    title = "..."                          # one line
    date = "2026-12-05"                    # when it ran (UTC), or is declared to run
    status = "declared; not met"           # what came of it, one line
    summary = "..."                        # optional: a sentence for the docs
    part_of = "rlif-region-flip-greedy"    # optional: shown inside that experiment's section
    order = 12                             # optional: its place among the question's ones

    [run]                                  # optional: what `edgerl experiment run` does
    driver = "rlif_chain"
    ...                                    # the driver's settings (its Params dataclass)

    [legacy]                               # optional: the run script this config replaced
    script = "benchmarks/rlif15/run15.sh"  # (the trace of what it ran: legacy/<name>.commands)

    [report]                               # optional: how the docs show its results
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from edgerl.contract.config_groups import build, setting_names
from edgerl.contract.errors import UserError

__all__ = ["ExperimentConfig", "load_config", "params_from"]

NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}$")
P = TypeVar("P")


@dataclass
class ExperimentConfig:
    """One declared experiment."""

    path: Path
    name: str
    question: str
    title: str
    date: str
    status: str = ""
    summary: str = ""
    part_of: str = ""
    run: dict[str, Any] = field(default_factory=dict)
    legacy: dict[str, Any] = field(default_factory=dict)
    report: dict[str, Any] = field(default_factory=dict)
    raw: dict[str, Any] = field(default_factory=dict)

    @property
    def driver(self) -> str:
        return str(self.run.get("driver", ""))

    @property
    def folder(self) -> Path:
        """The question's folder (the config's own)."""
        return self.path.parent

    def results_path(self, suffix: str = "") -> Path:
        """Where the driver writes its results: ``results/<name>[--suffix].json``."""
        return self.folder / "results" / f"{self.name}{'--' + suffix if suffix else ''}.json"


def _toml(path: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(path.read_text())
    except (OSError, tomllib.TOMLDecodeError) as exc:
        raise UserError(f"{path}: {exc}") from exc


def load_config(path: str | Path) -> ExperimentConfig:
    """Read and check one config (a :class:`UserError` names the file and the field)."""
    path = Path(path)
    data = _toml(path)
    exp = data.get("experiment")
    if not isinstance(exp, dict):
        raise UserError(f"{path}: missing table [experiment]")
    for key in ("name", "question", "title", "date"):
        if not isinstance(exp.get(key), str) or not exp[key]:
            raise UserError(f"{path}: missing field experiment.{key}")
    if not NAME.match(exp["name"]) or not NAME.match(exp["question"]):
        raise UserError(f"{path}: experiment.name and experiment.question must be kebab-case")
    if path.stem != exp["name"]:
        raise UserError(f"{path}: the file must be named after the experiment "
                        f"({exp['name']}.toml)")
    if path.parent.name != exp["question"]:
        raise UserError(f"{path}: the config must sit in its question's folder "
                        f"(experiments/{exp['question']}/)")
    if not DATE.match(exp["date"]):
        raise UserError(f"{path}: experiment.date must be YYYY-MM-DD")
    unknown = set(data) - {"experiment", "run", "legacy", "report"}
    if unknown:
        raise UserError(f"{path}: unknown table(s) {sorted(unknown)}")
    return ExperimentConfig(path=path, name=exp["name"], question=exp["question"],
                            title=exp["title"], date=exp["date"],
                            status=str(exp.get("status", "")),
                            summary=str(exp.get("summary", "")),
                            part_of=str(exp.get("part_of", "")), run=dict(data.get("run", {})),
                            legacy=dict(data.get("legacy", {})),
                            report=dict(data.get("report", {})), raw=data)


def params_from(cls: type[P], table: dict[str, Any], where: str) -> P:
    """The driver's ``Params`` from a config's ``[run]`` table (``driver`` left out; a
    setting in one of the dataclass's groups by its own name:
    :func:`edgerl.contract.config_groups.build`); a key the dataclass does not have is an
    error naming it."""
    names = setting_names(cls)
    given = {k: v for k, v in table.items() if k != "driver"}
    unknown = sorted(set(given) - names)
    if unknown:
        raise UserError(f"{where}: unknown setting(s) {unknown} for driver "
                        f"{table.get('driver')!r}; known: {sorted(names)}")
    try:
        return build(cls, **given)
    except (TypeError, ValueError) as exc:
        raise UserError(f"{where}: {exc}") from exc
