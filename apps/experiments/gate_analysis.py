"""The paired gate-vs-heuristic comparison through the HIL, from results rows.

Each run (one ``edgerl hil`` of one gate seed's bundle under one ``--gate-policy``, on plant
seeds ``offset + S``) is a set of rows with ``batch``, ``seed`` and ``policy``; its episodes'
net return is the return minus the planning price (``episode_plan_costs``; older runs lack it
and the run's mean price per episode stands in). Episode ``k`` of policy A is paired with
episode ``k`` of policy B on the same plant seed and kick stream.

Two readings: the *episode-level* one that the declared rule used (per seed and pooled over all
episodes: mean ± standard error of the paired differences), and the *seed-level* one (the gate
seed is the unit trained): the three seeds' mean differences, their mean ± standard error and
a t test with 2 degrees of freedom.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from edgerl.apps.experiments.stats import Estimate, Test, estimate, paired_test

__all__ = ["PairedReading", "episode_net_returns", "paired_reading", "runs_from_rows"]

Run = dict[str, Any]


def runs_from_rows(rows: Iterable[dict[str, Any]]) -> dict[tuple[str, int, str], Run]:
    """(batch, seed, policy) -> the run's fields (metric -> value)."""
    runs: dict[tuple[str, int, str], Run] = {}
    for r in rows:
        if "batch" in r and "policy" in r and "seed" in r:
            runs.setdefault((str(r["batch"]), int(r["seed"]), str(r["policy"])), {})[
                r["metric"]] = r["value"]
    return runs


def episode_net_returns(run: Run) -> list[float]:
    """Each episode's return minus its planning price."""
    rets = [float(x) for x in run["episode_returns"]]
    costs = run.get("episode_plan_costs") or [float(run.get("plan_cost", 0.0)) / len(rets)] * len(
        rets)
    return [r - c for r, c in zip(rets, costs)]


@dataclass(frozen=True)
class PairedReading:
    """The paired difference A - B over some batches."""

    batches: tuple[str, ...]
    per_seed: dict[int, Estimate]     # episode-level, per gate seed
    pooled: Estimate                  # episode-level, every episode of every seed
    seed_level: Test                  # the per-seed means, tested across seeds

    @property
    def pooled_z(self) -> float:
        return self.pooled.mean / self.pooled.se


def paired_reading(runs: dict[tuple[str, int, str], Run], batches: Sequence[str],
                   seeds: Sequence[int], a: str, b: str) -> PairedReading:
    """A minus B over ``batches``, paired episode by episode within each (batch, seed)."""
    diffs: dict[int, list[float]] = {s: [] for s in seeds}
    for batch in batches:
        for s in seeds:
            xa = episode_net_returns(runs[(batch, s, a)])
            xb = episode_net_returns(runs[(batch, s, b)])
            diffs[s] += [x - y for x, y in zip(xa, xb)]
    per_seed = {s: estimate(d) for s, d in diffs.items()}
    pooled = estimate([x for d in diffs.values() for x in d])
    means = [per_seed[s].mean for s in seeds]
    return PairedReading(tuple(batches), per_seed, pooled,
                         paired_test(means, [0.0] * len(means)))
