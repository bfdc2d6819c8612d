"""How a driver's steps run: for real, or as a dry run that only lists them.

A driver is one procedure written against :class:`Executor`: it asks the executor to run a
command (``edgerl VERB ...`` or ``python ...``), copy a folder, run an in-process action
(weakening a bundle, counting BC targets), read or write a file. :class:`RealExecutor` does
it; :class:`DryRunExecutor` records each step's one-line form, answers every command with a
stand-in JSON object and keeps a virtual file system (what a copy or a command would have
made), so ``--dry-run`` walks the same code path as the run and lists exactly the commands the
run would issue, in order.

Command lines are logical: ``["edgerl", "hil", ...]`` runs ``python -m edgerl.apps hil ...``
with this interpreter, ``["python", ...]`` this interpreter. A step's one-line form is
``[nice -n N ]COMMAND[ > STDOUT][ &]``.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

__all__ = ["DryRunExecutor", "Executor", "RealExecutor", "StepFailed", "render"]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: what a dry run answers for ``edgerl VERB ... --json`` (every key a driver reads)
DRY_RUN_OUTPUTS: dict[str, dict[str, Any]] = {
    "hil": {"success": 0.0, "steps": 0, "operator_takeovers": 0, "operator_records": {},
            "recorded_ticks": 0, "episode_returns": [0.0], "episode_plan_costs": [0.0],
            "return_minus_cost_mean": 0.0, "gate_decided": {}, "plan_cost": 0.0},
    "finetune": {"method": "dry-run"},
    "bench": {"deadline_misses": 0, "skipped_ticks": 0, "max_late_us": 0.0,
              "tick_compute_p50_us": 0.0},
}


class StepFailed(RuntimeError):
    """A command failed (after its retries)."""


def render(argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
           background: bool = False) -> str:
    """A step's one-line form (what ``--dry-run`` prints; a newline inside an argument, as in
    a ``python -c`` snippet, is written ``\\n``)."""
    text = shlex.join([str(a) for a in argv]).replace("\n", "\\n")
    if nice:
        text = f"nice -n {nice} {text}"
    if stdout is not None:
        text += f" > {stdout}"
    return text + (" &" if background else "")


def _real_argv(argv: Sequence[str]) -> list[str]:
    if str(argv[0]) == "taskset":  # taskset -c CPUS COMMAND...
        return ["taskset", str(argv[1]), str(argv[2]), *_real_argv(argv[3:])]
    head, rest = str(argv[0]), [str(a) for a in argv[1:]]
    if head == "edgerl":
        return [sys.executable, "-m", "edgerl.apps", *rest]
    if head == "python":
        return [sys.executable, *rest]
    return [head, *rest]


@dataclass
class Executor:
    """The interface every driver runs against (see the module docstring)."""

    root: Path = field(default_factory=Path.cwd)
    dry_run: bool = False

    def path(self, rel: str | Path) -> Path:
        return Path(rel) if Path(rel).is_absolute() else self.root / rel

    # --- overridden by the two executors --------------------------------------------------
    def run(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
            json_out: bool = False, retries: int = 0, env: dict[str, str] | None = None,
            check: bool = True) -> Any:
        """Run one command; its stdout parsed as JSON when ``json_out``, else its text."""
        raise NotImplementedError

    def start(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
              capture: bool = False) -> Any:
        """Start a command in the background (it runs beside what follows); ``capture``: keep
        its stdout for :meth:`wait`."""
        raise NotImplementedError

    def wait(self, handle: Any) -> tuple[int, str]:
        """Wait for a started command: its exit status and (``capture``) its stdout."""
        raise NotImplementedError

    def copy(self, sources: str | Path | Sequence[str | Path], dst: str | Path, *,
             recursive: bool = True) -> None:
        """``cp [-r] SRC... DST``: into DST when it ends in ``/`` or is a folder, else to it."""
        raise NotImplementedError

    def action(self, argv: Sequence[str], fn: Callable[[], T], dry: T) -> T:
        """An in-process step shown as ``argv``; ``dry`` stands in for its result."""
        raise NotImplementedError

    def exists(self, rel: str | Path) -> bool:
        raise NotImplementedError

    def read_json(self, rel: str | Path) -> Any:
        raise NotImplementedError

    def write_text(self, rel: str | Path, text: str) -> None:
        raise NotImplementedError

    def sleep(self, seconds: float) -> None:
        raise NotImplementedError

    def note(self, text: str) -> None:
        """A comment in the step list (``# ...``): what an analysis step does, a lane."""


@dataclass
class RealExecutor(Executor):
    """Runs every step (commands in the repository root, stdout to the named file)."""

    def run(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
            json_out: bool = False, retries: int = 0, env: dict[str, str] | None = None,
            check: bool = True) -> Any:
        cmd = (["nice", "-n", str(nice)] if nice else []) + _real_argv(argv)
        log.info("$ %s", render(argv, nice=nice, stdout=stdout))
        full_env = {**os.environ, **(env or {})}
        proc = None
        for attempt in range(retries + 1):
            proc = subprocess.run(cmd, capture_output=True, text=True, cwd=self.root,
                                  env=full_env)
            if proc.returncode == 0 or not check:
                break
            log.warning("attempt %d of %s failed (%d): %s", attempt + 1, argv[:2],
                        proc.returncode, proc.stderr[-2000:])
        assert proc is not None
        if check and proc.returncode != 0:
            raise StepFailed(f"{render(argv)} failed ({proc.returncode})")
        if stdout is not None:
            out = self.path(stdout)
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(proc.stdout)
        if not json_out:
            return proc.stdout
        try:
            return json.loads(proc.stdout)
        except json.JSONDecodeError:
            if check:
                raise StepFailed(f"{render(argv)} printed no JSON") from None
            return {}

    def start(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
              capture: bool = False) -> Any:
        cmd = (["nice", "-n", str(nice)] if nice else []) + _real_argv(argv)
        log.info("$ %s", render(argv, nice=nice, stdout=stdout, background=True))
        if capture:
            sink: Any = subprocess.PIPE
        elif stdout is not None:
            self.path(stdout).parent.mkdir(parents=True, exist_ok=True)
            sink = open(self.path(stdout), "w")  # noqa: SIM115 (closed in wait)
        else:
            sink = subprocess.DEVNULL
        proc = subprocess.Popen(cmd, cwd=self.root, stdout=sink, stderr=subprocess.PIPE,
                                text=True)
        return proc, sink

    def wait(self, handle: Any) -> tuple[int, str]:
        proc, sink = handle
        out, err = proc.communicate()
        if hasattr(sink, "close"):
            sink.close()
        if proc.returncode:
            log.warning("a background command failed (%d): %s", proc.returncode, err[-2000:])
        return proc.returncode, out or ""

    def copy(self, sources: str | Path | Sequence[str | Path], dst: str | Path, *,
             recursive: bool = True) -> None:
        srcs = [sources] if isinstance(sources, (str, Path)) else list(sources)
        log.info("$ %s", render(["cp", *(["-r"] if recursive else []), *map(str, srcs),
                                 str(dst)]))
        into = str(dst).endswith("/") or self.path(dst).is_dir() or len(srcs) > 1
        for src in srcs:
            s = self.path(src)
            d = self.path(dst) / s.name if into else self.path(dst)
            if s.is_dir():
                shutil.copytree(s, d, dirs_exist_ok=True)
            else:
                d.parent.mkdir(parents=True, exist_ok=True)
                shutil.copy2(s, d)

    def action(self, argv: Sequence[str], fn: Callable[[], T], dry: T) -> T:
        log.info("$ %s", render(argv))
        return fn()

    def exists(self, rel: str | Path) -> bool:
        return self.path(rel).exists()

    def read_json(self, rel: str | Path) -> Any:
        return json.loads(self.path(rel).read_text())

    def write_text(self, rel: str | Path, text: str) -> None:
        p = self.path(rel)
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)

    def note(self, text: str) -> None:
        log.info("# %s", text)


@dataclass
class DryRunExecutor(Executor):
    """Lists the steps; every command "succeeds" with :data:`DRY_RUN_OUTPUTS`' stand-in."""

    dry_run: bool = True
    lines: list[str] = field(default_factory=list)
    made: set[str] = field(default_factory=set)
    outputs: dict[str, dict[str, Any]] = field(default_factory=lambda: dict(DRY_RUN_OUTPUTS))

    def _norm(self, rel: str | Path) -> str:
        return os.path.normpath(str(rel))

    def _mark(self, rel: str | Path) -> None:
        self.made.add(self._norm(rel))

    def run(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
            json_out: bool = False, retries: int = 0, env: dict[str, str] | None = None,
            check: bool = True) -> Any:
        prefix = " ".join(f"{k}={shlex.quote(v)}" for k, v in (env or {}).items())
        self.lines.append((prefix + " " if prefix else "")
                          + render(argv, nice=nice, stdout=stdout))
        args = [str(a) for a in argv]
        for flag in ("--out", "--record", "--json-out"):
            if flag in args[:-1]:
                self._mark(args[args.index(flag) + 1])
        if stdout is not None:
            self._mark(stdout)
        verb = args[1] if args[0] == "edgerl" and len(args) > 1 else ""
        answer = json.loads(json.dumps(self.outputs.get(verb, {})))
        return answer if json_out else json.dumps(answer)

    def start(self, argv: Sequence[str], *, nice: int = 0, stdout: str | Path | None = None,
              capture: bool = False) -> Any:
        self.lines.append(render(argv, nice=nice, stdout=stdout, background=True))
        args = [str(a) for a in argv]
        if stdout is not None:
            self._mark(stdout)
        verb = args[1] if args[0] == "edgerl" and len(args) > 1 else ""
        return json.dumps(self.outputs.get(verb, {}))

    def wait(self, handle: Any) -> tuple[int, str]:
        return 0, str(handle)

    def copy(self, sources: str | Path | Sequence[str | Path], dst: str | Path, *,
             recursive: bool = True) -> None:
        srcs = [sources] if isinstance(sources, (str, Path)) else list(sources)
        self.lines.append(render(["cp", *(["-r"] if recursive else []), *map(str, srcs),
                                  str(dst)]))
        into = str(dst).endswith("/") or self.exists(dst) or len(srcs) > 1
        for src in srcs:
            name = Path(str(src)).name
            self._mark(os.path.join(self._norm(dst), name) if into else dst)

    def action(self, argv: Sequence[str], fn: Callable[[], T], dry: T) -> T:
        self.lines.append(render(argv))
        return dry

    def exists(self, rel: str | Path) -> bool:
        p = self._norm(rel)
        return any(p == m or p.startswith(m + os.sep) for m in self.made)

    def read_json(self, rel: str | Path) -> Any:
        return {}

    def write_text(self, rel: str | Path, text: str) -> None:
        self._mark(rel)

    def sleep(self, seconds: float) -> None:
        return None

    def note(self, text: str) -> None:
        self.lines.append(f"# {text}")
