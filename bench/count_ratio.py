"""The ratio of two event rates from counts, with an exact confidence bound.

A deadline-miss rate measured over 10,000 ticks is a count of 0-10 events: the ratio of two
such counts moves by whole units from one run to the next, and a floor on a zero count makes
the verdict depend on the floor. :func:`rate_ratio_test` instead treats the two counts as
Poisson (or binomial with rare events) and uses the standard conditional test: given the total
``K = k1 + k2``, ``k1`` is ``Binomial(K, p)`` with ``p = r n1 / (r n1 + n2)`` for the true rate
ratio ``r``. The Clopper-Pearson bounds of ``p`` map to bounds of ``r``, and the one-sided
p-value of ``H0: r <= limit`` is ``P(X >= k1 | K, p(limit))``.

The verdict "met" means *not significantly above* ``limit`` (``p_above > alpha``, the same as
the one-sided lower bound ``low <= limit``): few counts cannot fail the target, so beside it
``verdict`` says whether the data show the ratio ``"below"`` the limit (upper bound <= limit),
``"above"`` it (lower bound > limit) or are ``"inconclusive"``. Pure Python (no scipy), so
the on-device runtime can use it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

__all__ = ["RateRatio", "binom_sf", "rate_ratio_test"]


def binom_sf(k: int, n: int, p: float) -> float:
    """``P(X >= k)`` for ``X ~ Binomial(n, p)`` (exact sum in log space; 1 for k <= 0)."""
    if k <= 0:
        return 1.0
    if k > n or p <= 0.0:
        return 0.0
    if p >= 1.0:
        return 1.0
    lp, lq = math.log(p), math.log1p(-p)
    lgn = math.lgamma(n + 1)
    return min(1.0, sum(math.exp(lgn - math.lgamma(i + 1) - math.lgamma(n - i + 1)
                                 + i * lp + (n - i) * lq) for i in range(k, n + 1)))


def _solve(f, target: float, lo: float = 0.0, hi: float = 1.0) -> float:
    """``p`` in [lo, hi] with increasing ``f(p) = target`` (bisection to 1e-12)."""
    for _ in range(200):
        mid = 0.5 * (lo + hi)
        if f(mid) < target:
            lo = mid
        else:
            hi = mid
        if hi - lo < 1e-12:
            break
    return 0.5 * (lo + hi)


@dataclass(frozen=True)
class RateRatio:
    """Rate ratio ``(k1 / n1) / (k2 / n2)`` of two counts and its test against ``limit``.

    Attributes:
        k1, n1: events and trials (misses, ticks) of the measured side.
        k2, n2: the same for the reference side.
        ratio: point estimate ``((k1 + 0.5) / n1) / ((k2 + 0.5) / n2)`` (the usual continuity
            correction: finite with a zero count; 0 vs 0 in equal trials gives 1).
        low: one-sided ``1 - alpha`` lower confidence bound of the true ratio (0 when k1 = 0).
        high: one-sided ``1 - alpha`` upper bound (``None`` = unbounded, when k2 = 0).
        limit, alpha: the target ratio and the test's level.
        p_above: p-value of ``H0: ratio <= limit`` (small = significantly above the limit).
        met: ``p_above > alpha``: the measured side is not significantly above ``limit`` x.
        verdict: ``"below"`` (high <= limit), ``"above"`` (low > limit) or ``"inconclusive"``.
    """

    k1: int
    n1: int
    k2: int
    n2: int
    ratio: float
    low: float
    high: float | None
    limit: float
    alpha: float
    p_above: float
    met: bool
    verdict: str

    def as_dict(self) -> dict[str, object]:
        """JSON-ready fields (floats rounded to 4 significant digits)."""
        return {k: (float(f"{v:.4g}") if isinstance(v, float) else v)
                for k, v in asdict(self).items()}


def rate_ratio_test(k1: int, n1: int, k2: int, n2: int, limit: float = 1.5,
                    alpha: float = 0.05) -> RateRatio:
    """Test whether ``k1`` events in ``n1`` trials are a rate above ``limit`` x the rate of
    ``k2`` in ``n2`` (see the module docstring). Raises ``ValueError`` naming a bad input."""
    for name, v in (("k1", k1), ("k2", k2)):
        if int(v) != v or v < 0:
            raise ValueError(f"{name} must be a count >= 0, got {v!r}")
    for name, v in (("n1", n1), ("n2", n2)):
        if int(v) != v or v < 1:
            raise ValueError(f"{name} must be a count >= 1, got {v!r}")
    if not limit > 0 or not 0 < alpha < 0.5:
        raise ValueError(f"limit must be > 0 and alpha in (0, 0.5), got {limit}, {alpha}")
    k1, n1, k2, n2 = int(k1), int(n1), int(k2), int(n2)
    total = k1 + k2

    def to_ratio(p: float) -> float:  # p = r n1 / (r n1 + n2)  <=>  r = p n2 / ((1 - p) n1)
        return p * n2 / ((1.0 - p) * n1)

    p_low = 0.0 if k1 == 0 else _solve(lambda p: binom_sf(k1, total, p), alpha)
    # upper bound: P(X <= k1 | p_high) = alpha, i.e. sf(k1 + 1) = 1 - alpha
    p_high = 1.0 if k2 == 0 else _solve(lambda p: binom_sf(k1 + 1, total, p), 1.0 - alpha)
    low = to_ratio(p_low)
    high = None if k2 == 0 else to_ratio(p_high)
    p0 = limit * n1 / (limit * n1 + n2)
    p_above = binom_sf(k1, total, p0)
    met = p_above > alpha
    verdict = ("above" if not met else
               "below" if high is not None and high <= limit else "inconclusive")
    return RateRatio(k1=k1, n1=n1, k2=k2, n2=n2,
                     ratio=((k1 + 0.5) / n1) / ((k2 + 0.5) / n2), low=low, high=high,
                     limit=float(limit), alpha=float(alpha), p_above=p_above, met=met,
                     verdict=verdict)
