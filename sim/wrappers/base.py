"""Pass-through wrapper and the batched delay line every latency wrapper is built from.

A wrapper relies only on what any rsl_rl ``VecEnv`` has (ours, Isaac Lab's or mjlab's
``RslRlVecEnvWrapper``): ``num_envs``, ``num_actions``, ``device``, ``get_observations()``,
``step(actions) -> (obs, rew, dones, extras)`` with auto-reset of the envs flagged in
``dones`` (the returned observation of such an env is its first observation of the new
episode). Anything else (``spec``, ``expert_action``, ``randomizer``...) is optional and is
looked up on :attr:`VecEnvWrapper.unwrapped`.
"""

from __future__ import annotations

from typing import Any

import torch
from tensordict import TensorDict

from edgerl.sim.vec_env import ActionError

__all__ = ["DelayLine", "VecEnvWrapper", "check_action_batch", "done_ids", "forwarded_property"]


def done_ids(dones: torch.Tensor) -> torch.Tensor:
    """Indices (int64 (n,)) of the envs flagged in ``dones`` (N,) of any dtype."""
    return dones.to(torch.bool).nonzero().squeeze(-1)


def check_action_batch(actions: Any, num_envs: int, num_actions: int) -> None:
    """Raise :class:`ActionError` unless ``actions`` is a finite (num_envs, num_actions) tensor."""
    if not isinstance(actions, torch.Tensor):
        raise ActionError(f"actions must be a torch.Tensor, got {type(actions).__name__}")
    if tuple(actions.shape) != (num_envs, num_actions):
        raise ActionError(f"actions must have shape {(num_envs, num_actions)}, got "
                          f"{tuple(actions.shape)}")
    if not torch.isfinite(actions).all():
        bad = (~torch.isfinite(actions)).nonzero()[0].tolist()
        raise ActionError(f"actions[{bad[0]}, {bad[1]}] is not finite")


def forwarded_property(name: str) -> property:
    """A read / write property that forwards attribute ``name`` to the wrapped ``self.env``
    (``episode_length_buf``: rsl_rl's runner reads it and assigns it for random starts)."""

    def fget(self: Any) -> Any:
        return getattr(self.env, name)

    def fset(self: Any, value: Any) -> None:
        setattr(self.env, name, value)

    return property(fget, fset)


class VecEnvWrapper:
    """Forwards the rsl_rl ``VecEnv`` interface to ``env``; subclasses override pieces.

    Attributes not defined on the wrapper (``spec``, ``expert_action``, ``cfg``...) are
    looked up on the wrapped env, so wrappers stack in any order.
    """

    def __init__(self, env: Any) -> None:
        for name in ("num_envs", "num_actions", "device", "get_observations", "step"):
            if not hasattr(env, name):
                raise TypeError(f"{type(env).__name__} is not an rsl_rl VecEnv: no {name!r}")
        self.env = env
        self.num_envs = int(env.num_envs)
        self.num_actions = int(env.num_actions)
        self.device = torch.device(env.device)

    @property
    def unwrapped(self) -> Any:
        """The innermost env."""
        env = self.env
        while isinstance(env, VecEnvWrapper):
            env = env.env
        return env

    @property
    def max_episode_length(self) -> int | torch.Tensor:
        return self.env.max_episode_length

    episode_length_buf = forwarded_property("episode_length_buf")

    @property
    def cfg(self) -> Any:
        return self.env.cfg

    def __getattr__(self, name: str) -> Any:
        # Only called when normal lookup fails; never recurse on our own private state.
        if name.startswith("_") or name == "env":
            raise AttributeError(name)
        return getattr(self.env, name)

    def get_observations(self) -> TensorDict:
        return self.env.get_observations()

    def step(self, actions: torch.Tensor) -> tuple[TensorDict, torch.Tensor, torch.Tensor, dict]:
        return self.env.step(actions)

    def close(self) -> None:
        close = getattr(self.env, "close", None)
        if close is not None:
            close()


class DelayLine:
    """Per-env shift register of vectors: what was pushed ``d`` pushes ago, ``d`` per env.

    ``buf[:, j]`` holds the value pushed ``j`` pushes before the newest (``j = 0``).

    Args:
        num_envs: N. dim: vector size. max_delay: largest delay ever read (>= 0).
        device: Torch device.
    """

    def __init__(self, num_envs: int, dim: int, max_delay: int,
                 device: torch.device | str) -> None:
        if max_delay < 0:
            raise ValueError(f"max_delay must be >= 0, got {max_delay}")
        self.max_delay = int(max_delay)
        self.buf = torch.zeros(num_envs, self.max_delay + 1, dim, device=device)

    def push(self, value: torch.Tensor) -> None:
        """Shift every env by one and store ``value`` (N, dim) as the newest entry."""
        if self.max_delay > 0:
            self.buf[:, 1:] = self.buf[:, :-1].clone()
        self.buf[:, 0] = value

    def fill(self, env_ids: torch.Tensor, value: torch.Tensor) -> None:
        """Set every entry of ``env_ids`` to ``value`` (n, dim) (episode start)."""
        self.buf[env_ids] = value[:, None, :].to(self.buf.dtype)

    def read(self, delay: torch.Tensor | int) -> torch.Tensor:
        """Entry ``delay`` pushes old, (N, dim); ``delay`` is an int or int64 (N,)."""
        if isinstance(delay, int):
            return self.buf[:, delay].clone()
        idx = delay.clamp(0, self.max_delay).view(-1, 1, 1).expand(-1, 1, self.buf.shape[-1])
        return torch.gather(self.buf, 1, idx).squeeze(1)

    def newest(self, count: int) -> torch.Tensor:
        """The ``count`` newest entries, newest first, (N, count, dim)."""
        return self.buf[:, :count].clone()
