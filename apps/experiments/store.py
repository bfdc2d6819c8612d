"""The experiment store on disk: questions, declared experiments, their notes and results.

::

    experiments/
      <question>/question.toml         [question] name, title, text, doc ("results" or
                                       "benchmarks": which generated doc it belongs in), order
      <question>/<name>.toml           one declared experiment (edgerl.apps.experiments.config)
      <question>/notes/<name>.md       what was run and read, in prose ({{table:ID}} marks
                                       where a table built from the results goes)
      <question>/declared/<name>.md    a declaration written before the run (the rule)
      <question>/legacy/<name>.commands  what the run script it replaced ran (a trace)
      <question>/results/*.json        results files (edgerl.contract.results_store)

Every results file names its experiment; every experiment has its config.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.apps.experiments.config import ExperimentConfig, load_config
from edgerl.contract.errors import UserError
from edgerl.contract.results_store import ResultsFile, read_results

__all__ = ["TABLES", "Question", "Store", "load_store"]

#: the suffix of the results file that holds an experiment's hand-written tables
TABLES = "--tables"


@dataclass
class Question:
    """A question the store answers (a folder of experiments)."""

    name: str
    title: str
    text: str
    doc: str
    order: int
    folder: Path
    extra: dict[str, Any] = field(default_factory=dict)


@dataclass
class Store:
    """Everything in the store, read and checked."""

    root: Path
    questions: list[Question]
    experiments: list[ExperimentConfig]
    results: list[ResultsFile]

    def results_of(self, name: str) -> list[ResultsFile]:
        """The measured results files of one experiment (not its notes' tables), by path."""
        return [r for r in self.results
                if r.experiment == name and not r.path.stem.endswith(TABLES)]

    def tables_of(self, name: str) -> dict[str, list[dict[str, Any]]]:
        """The cell rows of an experiment's hand-written tables, by table ID."""
        out: dict[str, list[dict[str, Any]]] = {}
        for r in self.results:
            if r.experiment == name and r.path.stem.endswith(TABLES):
                for row in r.rows:
                    out.setdefault(str(row["table"]), []).append(row)
        return out

    def experiment(self, name: str) -> ExperimentConfig:
        for e in self.experiments:
            if e.name == name:
                return e
        raise KeyError(name)

    def of_question(self, question: str) -> list[ExperimentConfig]:
        """A question's experiments in their ``order`` (the order they ran), then by date."""
        return sorted((e for e in self.experiments if e.question == question),
                      key=lambda e: (int(e.raw["experiment"].get("order", 0)), e.date, e.name))

    def notes(self, e: ExperimentConfig) -> str:
        path = e.folder / "notes" / f"{e.name}.md"
        return path.read_text() if path.is_file() else ""

    def declared(self, e: ExperimentConfig) -> Path | None:
        path = e.folder / "declared" / f"{e.name}.md"
        return path if path.is_file() else None


def _question(path: Path) -> Question:
    import tomllib

    data = tomllib.loads(path.read_text()).get("question", {})
    for key in ("name", "title", "text", "doc"):
        if not isinstance(data.get(key), str):
            raise UserError(f"{path}: missing field question.{key}")
    if data["name"] != path.parent.name:
        raise UserError(f"{path}: question.name must be its folder's name")
    if data["doc"] not in ("results", "benchmarks"):
        raise UserError(f"{path}: question.doc must be 'results' or 'benchmarks'")
    return Question(name=data["name"], title=data["title"], text=data["text"],
                    doc=data["doc"], order=int(data.get("order", 99)), folder=path.parent,
                    extra={k: v for k, v in data.items()
                           if k not in ("name", "title", "text", "doc", "order")})


def load_store(root: str | Path = "experiments") -> Store:
    """Read the store; a results file whose experiment has no config is an error."""
    root = Path(root)
    questions = sorted((_question(p) for p in root.glob("*/question.toml")),
                       key=lambda q: (q.order, q.name))
    experiments = [load_config(p) for q in questions for p in sorted(q.folder.glob("*.toml"))
                   if p.name != "question.toml"]
    names = {e.name for e in experiments}
    if len(names) != len(experiments):
        raise UserError(f"{root}: two experiments share a name")
    for e in experiments:
        if e.part_of and e.part_of not in names:
            raise UserError(f"{e.path}: part_of names no experiment: {e.part_of!r}")
    results = [read_results(p) for q in questions
               for p in sorted((q.folder / "results").glob("*.json"))]
    for r in results:
        if r.experiment not in names:
            raise UserError(f"{r.path}: experiment {r.experiment!r} has no config")
        if r.question != r.path.parent.parent.name:
            raise UserError(f"{r.path}: question {r.question!r} is not its folder's")
    return Store(root=root, questions=questions, experiments=experiments, results=results)
