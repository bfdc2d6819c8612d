"""The chance, under "no difference", that a group-sequential one-sided z-test crosses its
boundary at any look (issue #20's gate looks: information fractions 192/768, 480/768, 1 with
boundaries 2.18, 2.5, 2.5). Simulated Brownian paths: z_k = W(t_k) / sqrt(t_k).

Usage: ``python benchmarks/gate10/sequential_alpha.py [--paths N] [--seed S]``.
"""

from __future__ import annotations

import argparse

import numpy as np

LOOKS = (192, 480, 768)
BOUNDS = (2.18, 2.5, 2.5)


def crossing_probability(looks: tuple[int, ...], bounds: tuple[float, ...], paths: int,
                         seed: int) -> float:
    """P(z_k > bound_k for some look k) under the null, from ``paths`` simulated paths."""
    t = np.asarray(looks, float) / looks[-1]
    rng = np.random.default_rng(seed)
    steps = rng.standard_normal((paths, len(t))) * np.sqrt(np.diff(np.r_[0.0, t]))
    z = np.cumsum(steps, axis=1) / np.sqrt(t)
    return float((z > np.asarray(bounds)).any(axis=1).mean())


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--paths", type=int, default=2_000_000)
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args()
    print(f"looks {LOOKS}, boundaries {BOUNDS}: overall one-sided alpha "
          f"{crossing_probability(LOOKS, BOUNDS, args.paths, args.seed):.4f}")
    print(f"the first two looks alone: "
          f"{crossing_probability(LOOKS[:2], BOUNDS[:2], args.paths, args.seed):.4f}")


if __name__ == "__main__":
    main()
