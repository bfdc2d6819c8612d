"""``edgerl.bench.count_ratio``: the miss-rate ratio of two counts, judged by an exact test."""

from __future__ import annotations

import math

import pytest

from edgerl.bench.count_ratio import binom_sf, rate_ratio_test

N = 10_000  # ticks per side, as a 10 s block at 1 kHz


@pytest.mark.parametrize("k1, k2, met, verdict", [
    (0, 0, True, "inconclusive"),   # no misses on either side: no evidence either way
    (3, 1, True, "inconclusive"),   # point ratio 3, but four events say nothing
    (7, 0, False, "above"),         # a measured run: 7 against none is significant
    (30, 10, False, "above"),       # ratio 3 on 40 events: p = 0.035
    (100, 10, False, "above"),
    (10, 10, True, "inconclusive"),  # equal rates, too few events to show them below 1.5x
    (20, 200, True, "below"),
])
def test_verdicts_on_fixed_counts(k1, k2, met, verdict):
    t = rate_ratio_test(k1, N, k2, N)
    assert t.met is met and t.verdict == verdict
    assert t.met == (t.low <= 1.5)  # the p-value and the lower bound agree
    assert t.ratio == pytest.approx((k1 + 0.5) / (k2 + 0.5))


def test_bounds_match_the_exact_binomial_interval():
    # 3 vs 1: K = 4, Clopper-Pearson 90 % interval of p is (0.24860, 0.98726) (scipy 1.17)
    t = rate_ratio_test(3, N, 1, N)
    assert t.low == pytest.approx(0.24860 / (1 - 0.24860), rel=1e-4)
    assert t.high == pytest.approx(0.98726 / (1 - 0.98726), rel=2e-3)
    assert t.p_above == pytest.approx(0.6 ** 4 + 4 * 0.6 ** 3 * 0.4)
    # 30 vs 10: P(X >= 30 | 40, 0.6), the one-sided p-value of ratio <= 1.5
    p = sum(math.comb(40, i) * 0.6 ** i * 0.4 ** (40 - i) for i in range(30, 41))
    assert rate_ratio_test(30, N, 10, N).p_above == pytest.approx(p)
    assert rate_ratio_test(0, N, 5, N).low == 0.0 and rate_ratio_test(5, N, 0, N).high is None


def test_unequal_trials_scale_the_rates():
    # the same rates in twice the bare ticks: the same verdict, the ratio of rates
    a, b = rate_ratio_test(30, N, 20, 2 * N), rate_ratio_test(30, N, 10, N)
    assert a.met is b.met is False and a.ratio == pytest.approx(30.5 / 20.5 * 2)
    assert a.as_dict()["n2"] == 2 * N and isinstance(a.as_dict()["low"], float)


def test_binom_sf_edges():
    assert binom_sf(0, 5, 0.3) == 1.0 and binom_sf(6, 5, 0.3) == 0.0
    assert binom_sf(5, 5, 0.5) == pytest.approx(1 / 32)


@pytest.mark.parametrize("args, message", [
    ((-1, N, 0, N), "k1 must be a count"), ((0, 0, 0, N), "n1 must be a count"),
    ((0, N, 1.5, N), "k2 must be a count"), ((0, N, 0, N, 0.0), "limit must be > 0"),
])
def test_bad_counts_are_named(args, message):
    with pytest.raises(ValueError, match=message):
        rate_ratio_test(*args)
