"""Seed-level statistics for the results docs: mean, standard error and a t test across seeds.

The unit of replication is what was trained (a seed's policy, gate or bundle), so a claim's
uncertainty is the spread of per-seed values, never of episodes pooled across seeds. With
``n`` seeds the standard error is ``sd / sqrt(n)`` (``sd`` with ``n - 1``), and a difference is
*significant* when a two-sided t test with ``n - 1`` degrees of freedom (paired by seed where
the seeds share their start, Welch's otherwise) gives p < 0.05. Pure Python (the t
distribution through the regularized incomplete beta function).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["ALPHA", "Estimate", "Test", "estimate", "paired_test", "t_sf", "welch_test"]

ALPHA = 0.05


@dataclass(frozen=True)
class Estimate:
    """Mean and standard error of per-seed values."""

    mean: float
    se: float
    n: int

    def text(self, digits: int = 2, signed: bool = False) -> str:
        """``m ± se (n=k)``; ``m (n=1)`` for a single seed."""
        m = f"{self.mean:+.{digits}f}" if signed else f"{self.mean:.{digits}f}"
        if self.n < 2:
            return f"{m} (n={self.n})"
        return f"{m} ± {self.se:.{digits}f} (n={self.n})"


@dataclass(frozen=True)
class Test:
    """A difference across seeds and its two-sided t test."""

    diff: Estimate
    t: float
    df: float
    p: float

    @property
    def significant(self) -> bool:
        return self.p < ALPHA

    def verdict(self) -> str:
        """``significant (p = ...)``, ``not significant (p = ...)`` or why no test."""
        if self.diff.n < 2:
            return "one seed: no test"
        if math.isnan(self.p):
            return "no spread across seeds: no test"
        word = "significant" if self.significant else "not significant"
        return f"{word} (t = {self.t:.2f}, p = {self.p:.2g})"


def estimate(values: Sequence[float]) -> Estimate:
    """Mean ± standard error of ``values`` (one per seed)."""
    xs = [float(v) for v in values]
    if not xs:
        return Estimate(float("nan"), float("nan"), 0)
    se = statistics.stdev(xs) / math.sqrt(len(xs)) if len(xs) > 1 else float("nan")
    return Estimate(statistics.fmean(xs), se, len(xs))


def _betacf(a: float, b: float, x: float) -> float:
    """Continued fraction of the incomplete beta function (Numerical Recipes 6.4)."""
    tiny, qab, qap, qam = 1e-300, a + b, a + 1.0, a - 1.0
    c, d = 1.0, 1.0 - qab * x / qap
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 300):
        m2 = 2 * m
        aa = m * (b - m) * x / ((qam + m2) * (a + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        h *= d * c
        aa = -(a + m) * (qab + m) * x / ((a + m2) * (qap + m2))
        d = 1.0 + aa * d
        d = 1.0 / (d if abs(d) > tiny else tiny)
        c = 1.0 + aa / c
        c = c if abs(c) > tiny else tiny
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-14:
            break
    return h


def _betainc(a: float, b: float, x: float) -> float:
    """The regularized incomplete beta function I_x(a, b)."""
    if x <= 0.0:
        return 0.0
    if x >= 1.0:
        return 1.0
    lbt = (math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) + a * math.log(x)
           + b * math.log(1.0 - x))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(lbt) * _betacf(a, b, x) / a
    return 1.0 - math.exp(lbt) * _betacf(b, a, 1.0 - x) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with ``df`` degrees of freedom."""
    x = df / (df + t * t)
    tail = 0.5 * _betainc(df / 2.0, 0.5, x)
    return tail if t >= 0 else 1.0 - tail


def _test(diff: Estimate, df: float) -> Test:
    if diff.n < 2 or not diff.se > 0:
        return Test(diff, float("nan"), df, float("nan"))
    t = diff.mean / diff.se
    return Test(diff, t, df, min(1.0, 2.0 * t_sf(abs(t), df)))


def paired_test(a: Sequence[float], b: Sequence[float]) -> Test:
    """``a - b`` seed by seed (the same seed's start, data or plant seeds on both sides)."""
    if len(a) != len(b):
        raise ValueError("paired values need one per seed on both sides")
    diff = estimate([x - y for x, y in zip(a, b)])
    return _test(diff, diff.n - 1)


def welch_test(a: Sequence[float], b: Sequence[float]) -> Test:
    """``mean(a) - mean(b)`` for independently trained seeds (Welch's t, its df)."""
    ea, eb = estimate(a), estimate(b)
    if ea.n < 2 or eb.n < 2:
        return Test(Estimate(ea.mean - eb.mean, float("nan"), min(ea.n, eb.n)),
                    float("nan"), float("nan"), float("nan"))
    va, vb = ea.se ** 2, eb.se ** 2
    se = math.sqrt(va + vb)
    diff = Estimate(ea.mean - eb.mean, se, min(ea.n, eb.n))
    if not se > 0:
        return Test(diff, float("nan"), float("nan"), float("nan"))
    df = (va + vb) ** 2 / (va ** 2 / (ea.n - 1) + vb ** 2 / (eb.n - 1)) if va or vb else 1.0
    t = diff.mean / se
    return Test(diff, t, df, min(1.0, 2.0 * t_sf(abs(t), df)))
