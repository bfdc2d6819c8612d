"""rsl-rl-lib's ``OnPolicyRunner`` with edgerl's logging: ``metrics.jsonl``, TensorBoard
scalars, a tqdm bar (SPS, return, success) and no console dumps.

PPO itself is the library's (``rsl_rl.algorithms.PPO``); this module only replaces the
runner's ``Logger`` so every iteration appends one JSON line::

    {"iteration", "env_steps", "time_s", "cpu_s", "sps", "return_mean", "episode_length",
     "success_rate", "episodes", "action_std", "learning_rate", "losses": {...}}

``return_mean`` / ``success_rate`` are over the last 100 finished episodes (rsl_rl's window);
``success_rate`` counts an episode as a success when ``extras["success"]`` is set on the step
that ended it. Values are ``null`` until an episode has finished.
"""

from __future__ import annotations

import contextlib
import copy
import io
import json
import logging
import statistics
import time
from collections import deque
from pathlib import Path
from typing import Any

import torch
from rsl_rl.runners import OnPolicyRunner
from rsl_rl.utils.logger import Logger

__all__ = ["BEST_NAME", "METRICS_NAME", "EdgeRunner"]

log = logging.getLogger(__name__)

METRICS_NAME = "metrics.jsonl"
BEST_NAME = "model_best.pt"


def distributed_env() -> tuple[int, int, int]:
    """``(RANK, WORLD_SIZE, LOCAL_RANK)`` as ``torchrun`` sets them; ``(0, 1, 0)`` otherwise."""
    import os

    return (int(os.getenv("RANK", "0")), int(os.getenv("WORLD_SIZE", "1")),
            int(os.getenv("LOCAL_RANK", "0")))


def init_distributed(device: str | torch.device) -> None:
    """Join ``torchrun``'s process group (idempotent): NCCL for CUDA, gloo for the CPU.

    A CUDA ``device`` must be ``cuda:{LOCAL_RANK}`` (one GPU per process, as rsl_rl expects).
    """
    rank, world, local = distributed_env()
    dev = torch.device(device)
    if dev.type == "cuda":
        if dev.index != local:
            raise ValueError(f"device {device!r} does not match LOCAL_RANK {local}: each "
                             f"torchrun process trains on cuda:{local}")
        torch.cuda.set_device(local)
    if not torch.distributed.is_initialized():
        backend = "nccl" if dev.type == "cuda" else "gloo"
        torch.distributed.init_process_group(backend=backend, rank=rank, world_size=world)
        log.info("rank %d/%d joined the %s process group", rank, world, backend)


class _TargetReached(Exception):
    """Raised by the logger to end ``learn`` early once the success target is met."""


class _RunLogger(Logger):
    """rsl_rl ``Logger`` writing ``metrics.jsonl`` + TensorBoard and driving a progress bar."""

    def __init__(self, *args: Any, total_iterations: int = 0, show_progress: bool = True,
                 stop_at_success: float = 0.0, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.stop_at_success = float(stop_at_success)
        #: Called with the iteration when the training score sets a new best (saves a model).
        self.on_best: Any = None
        self.best: tuple[float, float] | None = None
        self.successbuffer: deque[float] = deque(maxlen=100)
        self.total_iterations = total_iterations
        self.show_progress = show_progress
        self.bar: Any = None
        self.t_start = time.perf_counter()
        self.cpu_start = time.process_time()
        self.history: list[dict[str, Any]] = []

    def _store_code_state(self) -> list[str]:
        """Skip rsl_rl's git-diff dump (it prints and looks at site-packages)."""
        return []

    def init_logging_writer(self) -> None:
        super().init_logging_writer()
        self.t_start = time.perf_counter()
        self.cpu_start = time.process_time()
        if self.show_progress:
            from tqdm.auto import tqdm

            self.bar = tqdm(total=self.total_iterations, desc="ppo", unit="it",
                            dynamic_ncols=True)

    def process_env_step(self, rewards: torch.Tensor, dones: torch.Tensor, extras: dict,
                         intrinsic_rewards: torch.Tensor | None = None) -> None:
        if self.writer is not None:
            ended = dones > 0
            if bool(ended.any()):
                success = extras.get("success")
                if success is None:
                    values = [float("nan")] * int(ended.sum())
                else:
                    values = success.to(self.device)[ended].float().cpu().tolist()
                self.successbuffer.extend(values)
        super().process_env_step(rewards, dones, extras, intrinsic_rewards)

    def log(self, it: int, start_it: int, total_it: int, collect_time: float, learn_time: float,
            loss_dict: dict, learning_rate: float, action_std: torch.Tensor,
            rnd_weight: float | None, **_: Any) -> None:
        if self.writer is None:
            return
        collection = self.cfg["num_steps_per_env"] * self.num_envs
        self.tot_timesteps += collection
        self.tot_time += collect_time + learn_time
        sps = collection / max(collect_time + learn_time, 1e-9)
        ret = statistics.mean(self.rewbuffer) if self.rewbuffer else None
        length = statistics.mean(self.lenbuffer) if self.lenbuffer else None
        succ_known = [s for s in self.successbuffer if s == s]
        succ = statistics.mean(succ_known) if succ_known else None
        row = {"iteration": it, "env_steps": self.tot_timesteps,
               "time_s": round(time.perf_counter() - self.t_start, 3),
               "cpu_s": round(time.process_time() - self.cpu_start, 3), "sps": round(sps, 1),
               "return_mean": ret, "episode_length": length, "success_rate": succ,
               "episodes": len(self.rewbuffer), "action_std": float(action_std.detach().mean()),
               "learning_rate": float(learning_rate),
               "losses": {k: float(v) for k, v in loss_dict.items()}}
        for key, value in row["losses"].items():
            self.writer.add_scalar(f"Loss/{key}", value, it)
        self.writer.add_scalar("Loss/learning_rate", learning_rate, it)
        self.writer.add_scalar("Policy/mean_std", row["action_std"], it)
        self.writer.add_scalar("Perf/total_fps", sps, it)
        self.writer.add_scalar("Perf/collection_time", collect_time, it)
        self.writer.add_scalar("Perf/learning_time", learn_time, it)
        if ret is not None:
            self.writer.add_scalar("Train/mean_reward", ret, it)
            self.writer.add_scalar("Train/mean_episode_length", length, it)
        if succ is not None:
            self.writer.add_scalar("Train/success_rate", succ, it)
        self._log_episode_extras(it)
        with open(Path(self.log_dir) / METRICS_NAME, "a") as fh:
            fh.write(json.dumps(row, allow_nan=False) + "\n")
        self.history.append(row)
        if self.bar is not None:
            self.bar.set_postfix(sps=f"{sps:.0f}", ret="-" if ret is None else f"{ret:.2f}",
                                 succ="-" if succ is None else f"{succ:.2f}", refresh=False)
            self.bar.update(1)
        log.debug("iteration %d: %s", it, row)
        if ret is not None and (len(succ_known) >= 20 or not succ_known):
            score = (succ if succ_known else 0.0, ret)
            if self.best is None or score > self.best:
                self.best = score
                if self.on_best is not None:
                    self.on_best(it)
        if (self.stop_at_success > 0 and succ is not None and len(succ_known) >= 20
                and succ >= self.stop_at_success):
            log.info("success rate %.2f >= %.2f at iteration %d (%.1f s): stopping", succ,
                     self.stop_at_success, it, row["time_s"])
            raise _TargetReached

    def _log_episode_extras(self, it: int) -> None:
        """Mean of each ``extras["log"]`` / ``extras["episode"]`` key over the iteration."""
        sums: dict[str, list[float]] = {}
        for info in self.ep_extras:
            for key, value in info.items():
                t = torch.as_tensor(value, dtype=torch.float32).flatten()
                if t.numel():
                    sums.setdefault(key, []).append(float(t.mean()))
        for key, values in sums.items():
            name = key if "/" in key else f"Episode/{key}"
            self.writer.add_scalar(name, sum(values) / len(values), it)
        self.ep_extras.clear()

    def stop_logging_writer(self) -> None:
        super().stop_logging_writer()
        if self.bar is not None:
            self.bar.close()
            self.bar = None
        if self.writer is not None and hasattr(self.writer, "close"):
            self.writer.close()


class EdgeRunner(OnPolicyRunner):
    """``OnPolicyRunner`` whose logger writes ``metrics.jsonl`` and shows a progress bar.

    Args:
        env: An rsl_rl-compatible VecEnv (``policy`` observation group).
        train_cfg: rsl_rl 5.5.1 config dict (:meth:`TrainConfig.rsl_rl_cfg`).
        log_dir: Run directory (checkpoints ``model_{it}.pt``, events, metrics); ``None``
            disables all writing.
        device: Torch device.
        total_iterations: For the progress bar's length.
        show_progress: Show the tqdm bar.
        stop_at_success: End training (saving the model) once the success rate over the last
            100 finished episodes (at least 20) reaches this; 0 = never.
    """

    def __init__(self, env: Any, train_cfg: dict, log_dir: str | Path | None, device: str = "cpu",
                 total_iterations: int = 0, show_progress: bool = True,
                 stop_at_success: float = 0.0) -> None:
        sink = io.StringIO()
        with contextlib.redirect_stdout(sink):  # rsl_rl prints the model summaries
            super().__init__(env, train_cfg, None if log_dir is None else str(log_dir), device)
        log.debug("rsl_rl construction output:\n%s", sink.getvalue())
        self.logger = _RunLogger(
            log_dir=None if log_dir is None else str(log_dir), cfg=self.cfg,
            env_cfg=getattr(env, "cfg", None), num_envs=env.num_envs,
            is_distributed=self.is_distributed, gpu_world_size=self.gpu_world_size,
            gpu_global_rank=self.gpu_global_rank, device=self.device,
            total_iterations=total_iterations, show_progress=show_progress,
            stop_at_success=stop_at_success)
        self.stopped_early = False
        self._best_state: dict[str, Any] | None = None
        if log_dir is not None:
            self.logger.on_best = self._save_best

    def _save_best(self, it: int) -> None:
        """Remember the model after the iteration with the best training success rate (ties:
        higher return) over the last 100 episodes; :meth:`_write_best` writes it as
        ``model_best.pt``. An in-memory copy (~1 ms) instead of a ``torch.save`` per new best
        (~5 ms, most early iterations): written at each checkpoint and when ``learn`` ends."""
        state = copy.deepcopy(self.alg.save())
        state["iter"] = it
        state["infos"] = {"best_iteration": it}
        self._best_state = state

    def _write_best(self) -> None:
        """Write the remembered best model (if any is pending) to ``model_best.pt``."""
        state, self._best_state = self._best_state, None
        if state is not None and self.logger.log_dir is not None:
            torch.save(state, str(Path(self.logger.log_dir) / BEST_NAME))

    def save(self, path: str, infos: dict | None = None) -> None:
        """rsl_rl's checkpoint, plus the pending ``model_best.pt``."""
        super().save(path, infos)
        self._write_best()

    def _configure_multi_gpu(self) -> None:
        """rsl_rl's multi-GPU setup for ``torchrun`` (WORLD_SIZE/RANK/LOCAL_RANK), plus CPU.

        Same ``cfg["multi_gpu"]`` as rsl_rl's; the process group is NCCL on
        ``cuda:{LOCAL_RANK}`` and gloo on the CPU (so multi-process training also runs, and
        is tested, without GPUs); an already-initialised group is reused.
        """
        rank, world, local = distributed_env()
        if world <= 1:
            super()._configure_multi_gpu()
            return
        self.gpu_world_size, self.gpu_global_rank, self.gpu_local_rank = world, rank, local
        self.is_distributed = True
        self.cfg["multi_gpu"] = {"global_rank": rank, "local_rank": local, "world_size": world}
        init_distributed(self.device)

    @property
    def history(self) -> list[dict[str, Any]]:
        """The metrics rows logged so far (same as ``metrics.jsonl``)."""
        return self.logger.history

    def learn(self, num_learning_iterations: int, init_at_random_ep_len: bool = False) -> None:
        self.logger.total_iterations = num_learning_iterations
        try:
            super().learn(num_learning_iterations, init_at_random_ep_len)
        except _TargetReached:
            self.stopped_early = True
            it = self.current_learning_iteration
            self.save(str(Path(self.logger.log_dir) / f"model_{it}.pt"))
            self.logger.stop_logging_writer()
        finally:
            self._write_best()
            if self.logger.bar is not None:
                self.logger.bar.close()
                self.logger.bar = None
