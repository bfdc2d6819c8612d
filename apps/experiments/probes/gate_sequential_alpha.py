"""The chance, under "no difference", that a group-sequential one-sided z-test crosses its
boundary at any look. The gate's looks through the HIL were at information fractions 192/768,
480/768 and 1; its analysis took the boundaries 2.18, 2.5, 2.5 (a Pocock-style first look), but
the first look was declared at 2.0. Both are simulated here (Brownian paths, z_k = W(t_k) /
sqrt(t_k)); ``--json`` prints the results row by row.

Usage: ``python -m edgerl.apps.experiments.probes.gate_sequential_alpha [--paths N] [--seed S]
[--json]``.
"""

from __future__ import annotations

import argparse
import json

import numpy as np

LOOKS = (192, 480, 768)
#: boundary sets: as the analysis assumed them, and as the first look was declared
BOUNDS = {"as analysed (2.18, 2.5, 2.5)": (2.18, 2.5, 2.5),
          "as declared (2.0, 2.5, 2.5)": (2.0, 2.5, 2.5)}


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
    p.add_argument("--json", action="store_true", help="one JSON object: alpha per boundary set")
    args = p.parse_args()
    out = {}
    for name, bounds in BOUNDS.items():
        out[name] = {"looks": list(LOOKS), "bounds": list(bounds),
                     "alpha": crossing_probability(LOOKS, bounds, args.paths, args.seed),
                     "alpha_first_two_looks": crossing_probability(LOOKS[:2], bounds[:2],
                                                                   args.paths, args.seed)}
    if args.json:
        print(json.dumps(out))
        return
    for name, row in out.items():
        print(f"{name}: overall one-sided alpha {row['alpha']:.4f}; the first two looks alone "
              f"{row['alpha_first_two_looks']:.4f}")


if __name__ == "__main__":
    main()
