"""Declared step lists with loops: what a screen or a batch of measurements runs, written out.

A config lists steps; each is one command template (or an in-process action the driver
provides) run once per combination of its loops::

    [[run.steps]]
    foreach = {S = [0, 1, 2], M = [1, 2, 3]}   # outer to inner, in the order written
    cells = [{C = "weak", B = "runs/x/seed{S}/weak"}, {C = "m1", B = "..."}]  # innermost
    command = "edgerl hil --bundle {B} --episodes 20 --seed {seed_base} --json"
    stdout = "runs/screen/{C}_{S}.json"         # the command's output, kept
    nice = 15                                   # run under nice -n 15
    unless_exists = "..."                       # skip when this file is there already
    background = true                           # start it and go on; wait_each = "S" waits
    wait_each = "S"                             # at the end of each S (else at the step's end)
    retries = 1                                 # one more try if it fails (a HIL start)
    record = {fields = ["success", "steps"], cell = "{C}", seed = "{S}"}  # rows from its JSON
                                                # (all = true: every number it printed)

    [[run.steps]]                               # a loop around several steps, run in order
    foreach = {S = [0, 1, 2]}                   # in each iteration
    do = [{command = "edgerl finetune ..."}, {command = "edgerl hil ..."}]

``{NAME}`` is filled from the loops, the config's ``vars`` table and the driver's own values (a
value may itself hold ``{...}``); ``{{`` and ``}}`` in a template are literal braces. The
drivers built on this (:mod:`~edgerl.apps.experiments.drivers.rlif_screen`, ...) add their
actions and turn what was recorded into results rows.
"""

from __future__ import annotations

import itertools
import shlex
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from edgerl.apps.experiments.execute import Executor
from edgerl.apps.experiments.rows import flatten
from edgerl.contract.errors import UserError

__all__ = ["Action", "StepsParams", "fill", "resolve", "run_steps"]

#: an action: (executor, the step's filled settings) -> a JSON-able result or None
Action = Callable[[Executor, dict[str, Any]], Any]
STEP_KEYS = {"foreach", "cells", "command", "stdout", "nice", "unless_exists", "background",
             "wait_each", "retries", "record", "env", "label", "do"}


def resolve(env: dict[str, Any]) -> dict[str, Any]:
    """``env`` with the ``{NAME}`` inside its own string values filled from it (a loop value
    may name another: ``B = "runs/x/seed{S}/weak"``)."""
    out = dict(env)
    for _ in range(8):
        changed = False
        for key, value in out.items():
            if isinstance(value, str) and "{" in value:
                try:
                    new = value.format(**out)
                except (KeyError, IndexError) as exc:
                    raise UserError(f"no value for {exc} in {value!r}") from exc
                changed |= new != value
                out[key] = new
        if not changed:
            break
    return out


def fill(value: Any, env: dict[str, Any]) -> Any:
    """``value`` with every ``{NAME}`` filled from ``env`` (strings, in lists and tables);
    ``{{`` and ``}}`` are literal braces."""
    if isinstance(value, str):
        try:
            return value.format(**env)
        except (KeyError, IndexError) as exc:
            raise UserError(f"no value for {exc} in {value!r}") from exc
    if isinstance(value, list):
        return [fill(v, env) for v in value]
    if isinstance(value, dict):
        return {k: fill(v, env) for k, v in value.items()}
    return value


def _combinations(step: dict[str, Any]) -> Iterator[dict[str, Any]]:
    loops = step.get("foreach", {})
    names = list(loops)
    cells = step.get("cells") or [{}]
    for values in itertools.product(*(loops[n] for n in names)):
        for cell in cells:
            yield {**dict(zip(names, values)), **cell}


def _record(step: dict[str, Any], env: dict[str, Any], result: Any,
            sink: list[dict[str, Any]]) -> None:
    spec = step.get("record")
    if not spec or not isinstance(result, dict):
        return
    context = {}
    for key, value in spec.items():
        if key in ("fields", "all"):
            continue
        filled = fill(value, env)
        context[key] = int(filled) if key == "seed" else filled
    if spec.get("all"):
        sink += [{**context, "metric": m, "value": v} for m, v in flatten(result)]
        return
    for name in spec.get("fields", []):
        if name in result:
            sink.append({**context, "metric": name, "value": result[name]})


def run_steps(ex: Executor, steps: list[dict[str, Any]], variables: dict[str, Any],
              actions: dict[str, Action] | None = None) -> list[dict[str, Any]]:
    """Run ``steps`` in order; the rows their ``record`` tables took."""
    actions = actions or {}
    rows: list[dict[str, Any]] = []
    for step in steps:
        if "do" in step:  # a loop around several steps: each iteration runs them in order
            for combo in _combinations(step):
                rows += run_steps(ex, step["do"], resolve({**variables, **combo}), actions)
            continue
        kinds = [k for k in step if k not in STEP_KEYS]
        unknown = [k for k in kinds if k not in actions]
        if unknown or ("command" in step) == bool(kinds):
            raise UserError(f"a step needs 'command' or one action of {sorted(actions)}; "
                            f"got {sorted(step)}")
        waiting: list[Any] = []
        last_outer: Any = None
        for combo in _combinations(step):
            env = resolve({**variables, **combo})
            outer = combo.get(step["wait_each"]) if step.get("wait_each") else None
            if waiting and outer != last_outer:
                for h in waiting:
                    ex.wait(h)
                waiting = []
            last_outer = outer
            if step.get("unless_exists") and ex.exists(fill(step["unless_exists"], env)):
                continue
            if kinds:
                result = actions[kinds[0]](ex, fill(step[kinds[0]], env))
            else:
                argv = shlex.split(fill(step["command"], env))
                stdout = fill(step["stdout"], env) if "stdout" in step else None
                if step.get("background"):
                    waiting.append(ex.start(argv, nice=int(step.get("nice", 0)),
                                            stdout=stdout))
                    continue
                result = ex.run(argv, nice=int(step.get("nice", 0)), stdout=stdout,
                                json_out="--json" in argv and "record" in step,
                                retries=int(step.get("retries", 0)),
                                env=fill(step.get("env"), env) if step.get("env") else None)
            _record(step, env, result, rows)
        for h in waiting:
            ex.wait(h)
    return rows


@dataclass
class StepsParams:
    """The settings every step-list driver shares: ``vars`` and ``steps``."""

    steps: list[dict[str, Any]]
    vars: dict[str, Any] | None = None
    seeds: list[int] | None = None
