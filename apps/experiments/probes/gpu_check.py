"""One-shot GPU check: torch tasks at 4096..65536 envs and PPO, as one JSON object.

On a GPU machine::

    python -m edgerl.apps.experiments.probes.gpu_check        # cuda, 4096 16384 65536
    python -m edgerl.apps.experiments.probes.gpu_check --out gpu_check.json

Smoke test on the CPU (what the test suite and this repo's docs run)::

    python -m edgerl.apps.experiments.probes.gpu_check --device cpu --num-envs 256 --steps 20 \
        --ppo-iterations 2

For every torch task (``cartpole``, ``driving``) and env count it reports ``steps_per_s``
(env-steps/s through the whole task with zero actions, auto-resets included; the same
measurement as ``edgerl bench sim``) and, per env count in ``--ppo-num-envs`` (default: the
smallest and the largest), PPO samples/s (``ppo_sps``: rsl-rl-lib PPO, ``nodelay`` method,
collection + update, mean of the iterations after the first). Device and versions are
recorded so the figures can go into docs/benchmarks.md with the machine they came from.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

log = logging.getLogger("gpu_check")

TASKS = ("cartpole", "driving")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--device", default="cuda", help="torch device (default cuda)")
    p.add_argument("--num-envs", type=int, nargs="+", default=[4096, 16384, 65536],
                   help="env counts for the stepping rate (default 4096 16384 65536)")
    p.add_argument("--tasks", nargs="+", default=list(TASKS), help="torch tasks to step")
    p.add_argument("--steps", type=int, default=200, help="timed steps per measurement")
    p.add_argument("--ppo-task", default="cartpole", help="task PPO trains (default cartpole)")
    p.add_argument("--ppo-num-envs", type=int, nargs="*", default=None,
                   help="env counts for PPO (default: smallest and largest --num-envs)")
    p.add_argument("--ppo-iterations", type=int, default=5, help="PPO iterations (default 5)")
    p.add_argument("--steps-per-env", type=int, default=24, help="PPO rollout length")
    p.add_argument("--out", type=Path, default=None, help="also write the JSON here")
    return p.parse_args(argv)


def machine(device: str) -> dict[str, Any]:
    """Device name, versions and date for the record."""
    import torch

    info: dict[str, Any] = {"date_utc": time.strftime("%Y-%m-%d %H:%M", time.gmtime()),
                            "host": platform.node(), "python": platform.python_version(),
                            "torch": torch.__version__, "device": device,
                            "cpu_threads": torch.get_num_threads()}
    if torch.device(device).type == "cuda":
        props = torch.cuda.get_device_properties(torch.device(device))
        info.update(gpu=props.name, gpu_memory_gib=round(props.total_memory / 2**30, 1),
                    cuda=torch.version.cuda, gpu_count=torch.cuda.device_count())
    return info


def check_device(device: str) -> None:
    """Exit with a clear message when CUDA is asked for but absent."""
    import torch

    if torch.device(device).type == "cuda" and not torch.cuda.is_available():
        raise SystemExit(f"gpu_check: --device {device}: CUDA is not available (torch "
                         f"{torch.__version__}, CUDA build {torch.version.cuda or 'none'}); "
                         "use --device cpu for a smoke run")


def env_rates(tasks: list[str], counts: list[int], device: str, steps: int) -> list[dict]:
    """``edgerl.bench.sim.throughput.measure`` for every task x env count."""
    from edgerl.bench.sim.throughput import measure

    rows = []
    for task in tasks:
        for n in counts:
            row = measure(task, n, device=device, steps=steps, warmup=max(2, steps // 10))
            keep = {k: row[k] for k in ("task", "num_envs", "steps_per_s",
                                        "raw_physics_steps_per_s") if k in row}
            log.info("%s", keep)
            rows.append(keep)
    return rows


def ppo_rate(task: str, num_envs: int, device: str, iterations: int, steps_per_env: int
             ) -> dict[str, Any]:
    """PPO samples/s on ``task`` with ``num_envs`` envs (mean over iterations 2..)."""
    from edgerl.policies.config import TrainConfig
    from edgerl.policies.train import train

    cfg = TrainConfig(task=task, method="nodelay", num_envs=num_envs, iterations=iterations,
                      device=device, num_steps_per_env=steps_per_env,
                      save_interval=max(iterations, 1))
    with tempfile.TemporaryDirectory(prefix="gpu_check_") as tmp:
        result = train(cfg, out=Path(tmp) / "run", show_progress=False)
    sps = [row["sps"] for row in result.history]
    timed = sps[1:] or sps
    row = {"task": task, "num_envs": num_envs, "iterations": len(sps),
           "samples_per_iteration": num_envs * steps_per_env,
           "ppo_sps": round(statistics.mean(timed), 1), "ppo_sps_first": sps[0] if sps else None}
    log.info("%s", row)
    return row


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    args = parse_args(argv)
    check_device(args.device)
    ppo_counts = args.ppo_num_envs
    if ppo_counts is None:
        ppo_counts = sorted({min(args.num_envs), max(args.num_envs)})
    report = {"machine": machine(args.device),
              "env_steps": env_rates(args.tasks, args.num_envs, args.device, args.steps),
              "ppo": [ppo_rate(args.ppo_task, n, args.device, args.ppo_iterations,
                               args.steps_per_env) for n in ppo_counts]}
    text = json.dumps(report, indent=2)
    if args.out is not None:
        args.out.write_text(text + "\n")
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
