"""The results format: one versioned JSON schema for every measured result, with provenance.

A results file holds what one experiment run measured and where it came from::

    {"format": "edgerl.results", "version": 1,
     "experiment": "rlif-region-flip-greedy",        # kebab-case name of the experiment
     "question": "rlif",                             # the question folder it answers
     "config": {...},                                # the declared config it ran
     "command": "edgerl experiment run ...",         # the exact command line that made it
     "commit": "<40 hex>[-dirty]",                   # git revision of the code that ran
     "date": "2026-12-05T14:19:16Z",                 # UTC, ISO 8601
     "seeds": [0, 1, 2],                             # the seeds (units trained) it covers
     "machine": {"cpu_count": 2, "load_average": [0.4, 0.6]},
     "rows": [{"method": "rlif", "seed": 0, "metric": "success", "value": 0.7}, ...]}

``machine.load_average`` is the 1-minute load average sampled during the run (the writer samples
it when provenance starts and when the file is written; ``null`` where a migrated record did not
note it). No host names and no absolute paths are recorded. A row names a ``metric`` and its
``value`` (a number, bool, string, null or a list of numbers) and any context keys (``method``,
``task``, ``seed``, ``round``, ...); a row appended by a later run carries that run's
``provenance`` (the same four fields: command, commit, date, machine).

:func:`write_results` fills the provenance itself (``git rev-parse``, ``os.getloadavg``,
``sys.argv``); :func:`read_results` refuses a file that lacks a field, naming the file and the
field. Pure Python: the edge install reads results files too.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

__all__ = ["FORMAT", "VERSION", "Provenance", "ResultsFile", "ResultsFormatError", "dumps",
           "git_commit", "iter_results", "read_results", "relative_command", "write_results"]

FORMAT = "edgerl.results"
VERSION = 1
#: top-level fields, in file order, with the types each may hold
FIELDS: dict[str, tuple[type, ...]] = {
    "format": (str,), "version": (int,), "experiment": (str,), "question": (str,),
    "config": (dict,), "command": (str,), "commit": (str,), "date": (str,), "seeds": (list,),
    "machine": (dict,), "rows": (list,)}
OPTIONAL_FIELDS: dict[str, tuple[type, ...]] = {"notes": (str,)}
MACHINE_FIELDS: dict[str, tuple[type, ...]] = {"cpu_count": (int, type(None)),
                                               "load_average": (list, type(None))}
PROVENANCE_FIELDS = ("command", "commit", "date", "machine")
NAME = re.compile(r"^[a-z0-9]+(-[a-z0-9]+)*$")
COMMIT = re.compile(r"^([0-9a-f]{40}(-dirty)?|unknown)$")
DATE = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}Z$")
_SCALAR = (int, float, str, bool, type(None))


class ResultsFormatError(ValueError):
    """A results file that does not follow the schema; the message names the file and field."""


@dataclass
class Provenance:
    """Where a result came from: the command line, the code, the time and the machine."""

    command: str
    commit: str
    date: str
    machine: dict[str, Any]

    def to_dict(self) -> dict[str, Any]:
        return {"command": self.command, "commit": self.commit, "date": self.date,
                "machine": dict(self.machine)}

    def sample_load(self) -> None:
        """Add the current 1-minute load average to ``machine.load_average``."""
        load = _load1()
        if load is not None:
            self.machine["load_average"] = [*(self.machine.get("load_average") or []), load]

    @classmethod
    def now(cls, argv: Sequence[str] | None = None, root: str | Path | None = None,
            program: str = "edgerl") -> Provenance:
        """Provenance of the running process: ``argv`` (default ``sys.argv[1:]``, prefixed by
        ``program``) made relative to ``root`` (default the working directory), the git revision
        of ``root``, the UTC time, the CPU count and the load average now."""
        root = Path(root) if root is not None else Path.cwd()
        args = list(sys.argv[1:] if argv is None else argv)
        prov = cls(command=relative_command([program, *args] if program else args, root),
                   commit=git_commit(root), date=utc_now(),
                   machine={"cpu_count": os.cpu_count(), "load_average": []})
        prov.sample_load()
        return prov


@dataclass
class ResultsFile:
    """A results file as read: its fields, and the path it came from."""

    path: Path
    experiment: str
    question: str
    config: dict[str, Any]
    command: str
    commit: str
    date: str
    seeds: list[int]
    machine: dict[str, Any]
    rows: list[dict[str, Any]]
    notes: str = ""
    extra: dict[str, Any] = field(default_factory=dict)

    def select(self, **where: Any) -> list[dict[str, Any]]:
        """The rows whose keys equal every ``where`` value."""
        return [r for r in self.rows if all(r.get(k) == v for k, v in where.items())]


def utc_now() -> str:
    """The current UTC time as ``YYYY-MM-DDTHH:MM:SSZ``."""
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _load1() -> float | None:
    try:
        return round(os.getloadavg()[0], 2)
    except (AttributeError, OSError):
        return None


def git_commit(root: str | Path) -> str:
    """The checked-out revision of ``root`` (``-dirty`` when tracked files differ from it),
    ``unknown`` outside a git checkout."""
    try:
        sha = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True,
                             text=True, timeout=10, check=True).stdout.strip()
        dirty = subprocess.run(["git", "diff", "--quiet", "HEAD", "--"], cwd=root,
                               capture_output=True, timeout=30).returncode != 0
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    return sha + ("-dirty" if dirty else "") if COMMIT.match(sha) else "unknown"


def relative_command(argv: Sequence[str], root: str | Path) -> str:
    """``argv`` as one shell-quoted line, with every absolute path under ``root`` written
    relative to it (a results file names no machine's directories)."""
    base = str(Path(root).resolve())
    out = []
    for arg in argv:
        text = str(arg)
        if base and base != "/" and base in text:
            text = text.replace(base + os.sep, "").replace(base, ".")
        out.append(text)
    return shlex.join(out)


def _check_type(where: str, name: str, value: Any, types: tuple[type, ...]) -> None:
    if isinstance(value, bool) and bool not in types and int in types:
        raise ResultsFormatError(f"{where}: field {name!r} must be {types[0].__name__}")
    if not isinstance(value, types):
        names = " or ".join("null" if t is type(None) else t.__name__ for t in types)
        raise ResultsFormatError(f"{where}: field {name!r} must be {names}, "
                                 f"not {type(value).__name__}")


def _check_value(where: str, value: Any) -> None:
    if isinstance(value, list):
        if not all(isinstance(v, _SCALAR) for v in value):
            raise ResultsFormatError(f"{where}: field 'value' may be a list of scalars only")
    elif not isinstance(value, _SCALAR):
        raise ResultsFormatError(f"{where}: field 'value' must be a scalar or a list")


def _check_machine(where: str, machine: dict[str, Any]) -> None:
    for name, types in MACHINE_FIELDS.items():
        if name not in machine:
            raise ResultsFormatError(f"{where}: missing field 'machine.{name}'")
        _check_type(where, f"machine.{name}", machine[name], types)


def _check_provenance(where: str, prov: dict[str, Any]) -> None:
    for name in PROVENANCE_FIELDS:
        if name not in prov:
            raise ResultsFormatError(f"{where}: missing field {name!r}")
        _check_type(where, name, prov[name], FIELDS[name])
    if not COMMIT.match(prov["commit"]):
        raise ResultsFormatError(f"{where}: field 'commit' is not a git revision: "
                                 f"{prov['commit']!r}")
    if not DATE.match(prov["date"]):
        raise ResultsFormatError(f"{where}: field 'date' is not UTC ISO 8601 "
                                 f"(YYYY-MM-DDTHH:MM:SSZ): {prov['date']!r}")
    _check_machine(where, prov["machine"])


def validate(data: Any, where: str) -> None:
    """Raise :class:`ResultsFormatError` (naming ``where`` and the field) unless ``data`` is a
    results document of this schema."""
    if not isinstance(data, dict):
        raise ResultsFormatError(f"{where}: not a results document (a JSON object)")
    for name, types in FIELDS.items():
        if name not in data:
            raise ResultsFormatError(f"{where}: missing field {name!r}")
        _check_type(where, name, data[name], types)
    for name, types in OPTIONAL_FIELDS.items():
        if name in data:
            _check_type(where, name, data[name], types)
    if data["format"] != FORMAT:
        raise ResultsFormatError(f"{where}: field 'format' is {data['format']!r}, not {FORMAT!r}")
    if data["version"] != VERSION:
        raise ResultsFormatError(f"{where}: field 'version' is {data['version']}; this reader "
                                 f"knows version {VERSION}")
    for name in ("experiment", "question"):
        if not NAME.match(data[name]):
            raise ResultsFormatError(f"{where}: field {name!r} must be kebab-case: "
                                     f"{data[name]!r}")
    _check_provenance(where, data)
    if not all(isinstance(s, int) and not isinstance(s, bool) for s in data["seeds"]):
        raise ResultsFormatError(f"{where}: field 'seeds' must be a list of integers")
    for i, row in enumerate(data["rows"]):
        at = f"{where}: rows[{i}]"
        if not isinstance(row, dict):
            raise ResultsFormatError(f"{at}: a row must be an object")
        for name in ("metric", "value"):
            if name not in row:
                raise ResultsFormatError(f"{at}: missing field {name!r}")
        _check_type(at, "metric", row["metric"], (str,))
        _check_value(at, row["value"])
        for key, value in row.items():
            if key == "provenance":
                _check_type(at, "provenance", value, (dict,))
                _check_provenance(f"{at}.provenance", value)
            elif key != "value" and not isinstance(value, _SCALAR):
                raise ResultsFormatError(f"{at}: field {key!r} must be a scalar")


def read_results(path: str | Path) -> ResultsFile:
    """Read and check one results file (:class:`ResultsFormatError` names file and field)."""
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except json.JSONDecodeError as exc:
        raise ResultsFormatError(f"{path}: not JSON ({exc})") from exc
    validate(data, str(path))
    known = set(FIELDS) | set(OPTIONAL_FIELDS)
    return ResultsFile(path=path, experiment=data["experiment"], question=data["question"],
                       config=data["config"], command=data["command"], commit=data["commit"],
                       date=data["date"], seeds=list(data["seeds"]), machine=data["machine"],
                       rows=data["rows"], notes=data.get("notes", ""),
                       extra={k: v for k, v in data.items() if k not in known})


def iter_results(root: str | Path) -> list[ResultsFile]:
    """Every results file under ``root`` (``**/results/*.json``), sorted by path."""
    return [read_results(p) for p in sorted(Path(root).glob("**/results/*.json"))]


def dumps(doc: dict[str, Any]) -> str:
    """The document as text: fields in schema order, the config indented, one row a line."""
    order = [*FIELDS, *OPTIONAL_FIELDS]
    keys = [k for k in order if k in doc] + sorted(k for k in doc if k not in order)
    lines = []
    for key in keys:
        if key == "rows":
            rows = [json.dumps(r, allow_nan=False, ensure_ascii=False) for r in doc["rows"]]
            body = "[\n" + ",\n".join("  " + r for r in rows) + "\n ]" if rows else "[]"
            lines.append(f' "rows": {body}')
        else:
            text = json.dumps(doc[key], indent=1, allow_nan=False, ensure_ascii=False)
            lines.append(f" {json.dumps(key)}: " + text.replace("\n", "\n "))
    return "{\n" + ",\n".join(lines) + "\n}\n"


def write_results(path: str | Path, *, experiment: str, question: str,
                  config: dict[str, Any], seeds: Iterable[int],
                  rows: Iterable[dict[str, Any]], provenance: Provenance | None = None,
                  notes: str = "") -> dict[str, Any]:
    """Write one results file; provenance is filled from this process (command line, git
    revision, time, CPU count, load average now) unless given. Returns the document written
    (checked first)."""
    prov = provenance if provenance is not None else Provenance.now()
    doc: dict[str, Any] = {"format": FORMAT, "version": VERSION, "experiment": experiment,
                           "question": question, "config": config, **prov.to_dict(),
                           "seeds": sorted(set(int(s) for s in seeds)), "rows": list(rows)}
    if notes:
        doc["notes"] = notes
    validate(json.loads(json.dumps(doc, allow_nan=False)), str(path))
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(doc))
    return doc
