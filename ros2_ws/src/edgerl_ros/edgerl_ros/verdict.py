"""The deploy stage's success verdict from the sim robot's episode counts (pure python)."""

from __future__ import annotations

import math

__all__ = ["DEFAULT_MIN_SUCCESS", "episode_verdict"]

#: Fraction of completed episodes that must succeed for ``edgerl deploy`` to report ok:
#: None (the default) reports the episodes as k/n and judges nothing; a user asks for a
#: threshold with ``--min-success``.
DEFAULT_MIN_SUCCESS: float | None = None


def episode_verdict(successes: float, episodes: float,
                    min_success: float | None = DEFAULT_MIN_SUCCESS) -> dict[str, object]:
    """``success`` (rate >= ``min_success`` over at least one completed episode; None when no
    threshold was asked for), ``success_rate`` (successes / episodes, NaN without episodes),
    ``successes_of`` ("k/n").

    ``successes``/``episodes`` are the robot's counters (NaN when it did not report them).

    Raises:
        ValueError: ``min_success`` outside [0, 1].
    """
    if min_success is not None and not 0.0 <= min_success <= 1.0:
        raise ValueError(f"min_success must be in [0, 1], got {min_success}")
    k = int(successes) if math.isfinite(successes) else 0
    n = int(episodes) if math.isfinite(episodes) else 0
    rate = k / n if n > 0 else float("nan")
    ok = None if min_success is None else bool(n > 0 and rate >= min_success - 1e-12)
    return {"success": ok,
            "success_rate": rate, "successes_of": f"{k}/{n}", "min_success": min_success}
