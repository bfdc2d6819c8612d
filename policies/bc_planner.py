"""A learned chunk planner: an MLP trained by behaviour cloning on scripted-expert demos.

The network maps a plain vector ``x = [robot obs (O) | conditioning (C)]`` to an ``(H, A)``
chunk; ``C = 0`` for the robot-only planner. The language planner appends an instruction
embedding as the conditioning vector (``cond_dim > 0``) and reuses :func:`fit_bc`.

Demos (:func:`collect_expert_demos`): the plain task runs its scripted expert (optionally with
DART-style noise on the executed action); the label for the observation at step ``k`` is the
expert's actions at steps ``k .. k+H-1`` of the same episode (the last one held past the
episode's end), i.e. the open-loop chunk the expert actually executed.

Intent (``intent_dim`` I > 0): the network is an encoder and a decoder. The encoder maps the
whole input to ``z = tanh(enc(x))`` (I,), a bottleneck the planner exports beside its chunk;
the decoder maps ``[z | fast obs | conditioning]`` to the chunk. Since the decoder reads the
fast observation itself, ``z`` is pushed to carry what the fast policy cannot see (the goal,
the target, the route): the *intent* the edit policy reads with the chunk
(:class:`edgerl.contract.edit_obs.EditObsConfig.intent_dim`). With ``intent_stale_steps`` S
the decoder is trained on ``z`` of an observation up to S steps older than its fast
observation and label, so ``z`` keeps what stays true while the planner thinks.

Real-time chunking (``rtc``): the planner is also given the *committed prefix*, the D actions
the robot executes while the planner thinks. :func:`prefix_inputs` takes them from the demos'
executed (noisy) actions, so the planner learns the continuation of a prefix it did not choose
(the label rows after the prefix are the expert's actions in the states that prefix led to).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from edgerl.contract.logs import progress

__all__ = [
    "BCChunkPlanner",
    "ExpertDemos",
    "IntentPlanFn",
    "chunk_labels",
    "collect_expert_demos",
    "elu_mlp",
    "fit_bc",
    "init_bounded_mlp",
    "prefix_inputs",
    "stale_inputs",
]

log = logging.getLogger(__name__)


def elu_mlp(in_dim: int, hidden_dims: Sequence[int], out_dim: int) -> nn.Sequential:
    """``in_dim`` -> ELU hidden layers ``hidden_dims`` -> linear ``out_dim`` (layers created
    in that order)."""
    layers: list[nn.Module] = []
    width = in_dim
    for h in hidden_dims:
        layers += [nn.Linear(width, h), nn.ELU()]
        width = h
    return nn.Sequential(*layers, nn.Linear(width, out_dim))


def init_bounded_mlp(module: nn.Module, in_dim: int, hidden_dims: list[int], out_dim: int,
                     action_low: list[float], action_high: list[float]) -> None:
    """Give ``module`` the parts of a bounded chunk MLP, created in this order: ``mlp``
    (``in_dim`` -> ELU hidden layers ``hidden_dims`` -> ``out_dim``), the input normalisation
    buffers ``in_mean`` / ``in_std`` (``in_dim``; identity until set) and the action box
    ``act_center`` / ``act_half`` (A,) from the limits, for ``act_center + act_half * tanh(.)``.
    """
    module.mlp = elu_mlp(in_dim, hidden_dims, out_dim)
    low = torch.as_tensor(action_low, dtype=torch.float32)
    high = torch.as_tensor(action_high, dtype=torch.float32)
    module.register_buffer("in_mean", torch.zeros(in_dim))
    module.register_buffer("in_std", torch.ones(in_dim))
    module.register_buffer("act_center", (high + low) / 2)
    module.register_buffer("act_half", (high - low) / 2)


class BCChunkPlanner(nn.Module):
    """MLP ``(B, O + C) -> (B, H, A)`` with fixed input normalisation and bounded output.

    The output is ``center + half_range * tanh(mlp(x_norm))`` so every chunk row lies inside
    the action limits. Normalisation statistics are buffers (saved in the state dict).

    Args:
        obs_dim: Robot observation size O.
        action_dim: Action size A.
        horizon: Chunk rows H.
        action_low / action_high: Per-element action limits (A,).
        hidden_dims: MLP hidden sizes.
        cond_dim: Size C of an optional conditioning vector appended to the observation.
        intent_dim: Size I of the intent bottleneck (0: a plain MLP, no intent).
        fast_indices: The observation elements the decoder reads beside the intent (the
            task's fast subset; empty = every element). Only with ``intent_dim`` > 0.
    """

    def __init__(self, obs_dim: int, action_dim: int, horizon: int,
                 action_low: list[float], action_high: list[float],
                 hidden_dims: list[int] | tuple[int, ...] = (256, 256), cond_dim: int = 0,
                 intent_dim: int = 0, fast_indices: list[int] | tuple[int, ...] = ()) -> None:
        super().__init__()
        self.obs_dim, self.action_dim, self.horizon = obs_dim, action_dim, horizon
        self.cond_dim = cond_dim
        self.hidden_dims = list(hidden_dims)
        self.intent_dim = int(intent_dim)
        self.fast_indices = [int(i) for i in fast_indices] or list(range(obs_dim))
        if self.intent_dim < 0 or any(not 0 <= i < obs_dim for i in self.fast_indices):
            raise ValueError(f"intent_dim must be >= 0 and fast_indices within [0, {obs_dim}), "
                             f"got {intent_dim} and {list(fast_indices)}")
        decoder_in = (self.intent_dim + len(self.fast_indices) + cond_dim if self.intent_dim
                      else obs_dim + cond_dim)
        init_bounded_mlp(self, decoder_in, self.hidden_dims, horizon * action_dim,
                         action_low, action_high)
        # normalisation is over the whole input (obs | conditioning), whatever the decoder reads
        self.register_buffer("in_mean", torch.zeros(obs_dim + cond_dim))
        self.register_buffer("in_std", torch.ones(obs_dim + cond_dim))
        if self.intent_dim:
            self.encoder = elu_mlp(obs_dim + cond_dim, self.hidden_dims, self.intent_dim)
            self.register_buffer("fast_idx", torch.as_tensor(self.fast_indices,
                                                             dtype=torch.long))

    @property
    def input_dim(self) -> int:
        """Size of the network input ``O + C``."""
        return self.obs_dim + self.cond_dim

    def set_input_stats(self, x: torch.Tensor) -> None:
        """Fix the input normalisation from data ``x`` (N, O + C)."""
        self.in_mean.copy_(x.mean(0))
        self.in_std.copy_(x.std(0).clamp_min(1e-3))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        """The intent ``(B, I)`` in ``[-1, 1]`` of input ``(B, O + C)`` (intent planners)."""
        return torch.tanh(self.encoder((x - self.in_mean) / self.in_std))

    def decode(self, x: torch.Tensor, intent: torch.Tensor | None) -> torch.Tensor:
        """Chunk ``(B, H, A)`` inside the limits from input ``(B, O + C)`` and, for an intent
        planner, an intent ``(B, I)`` (which may come from another, older input)."""
        xn = (x - self.in_mean) / self.in_std
        if self.intent_dim:
            fast = xn.index_select(-1, self.fast_idx)
            xn = torch.cat([intent, fast, xn[..., self.obs_dim:]], dim=-1)
        raw = self.mlp(xn).view(*x.shape[:-1], self.horizon, self.action_dim)
        return self.act_center + self.act_half * torch.tanh(raw)

    def forward_intent(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(chunk (B, H, A), intent (B, I))`` of input ``(B, O + C)``; intent ``None``
        without an intent head."""
        intent = self.encode(x) if self.intent_dim else None
        return self.decode(x, intent), intent

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Chunk ``(B, H, A)`` inside the action limits from input ``(B, O + C)``."""
        return self.forward_intent(x)[0]

    def plan(self, obs: torch.Tensor, env_ids: torch.Tensor | None = None,
             prefix: torch.Tensor | None = None) -> torch.Tensor:
        """Batched planner callable for the sim wrappers: ``(N, O) -> (N, H, A)`` (no grad).

        ``prefix`` ``(N, D, A)``: the committed prefix of a real-time-chunking planner
        (``cond_dim = D * A``), flattened into the conditioning vector.
        """
        return self.plan_with_intent(obs, env_ids, prefix)[0]

    def plan_fn(self) -> Any:
        """The sim wrappers' batched planner: :meth:`plan`, or for an intent planner an
        :class:`IntentPlanFn` returning ``(chunks, intent)``."""
        return IntentPlanFn(self) if self.intent_dim else self.plan

    def plan_with_intent(self, obs: torch.Tensor, env_ids: torch.Tensor | None = None,
                         prefix: torch.Tensor | None = None
                         ) -> tuple[torch.Tensor, torch.Tensor | None]:
        """``(chunks (N, H, A), intent (N, I) or None)`` for ``obs`` (N, O) (no grad)."""
        x = obs.to(self.in_mean.device, torch.float32)
        if prefix is not None:
            x = torch.cat([x, prefix.reshape(x.shape[0], -1).to(x)], dim=-1)
        if x.shape[-1] != self.input_dim:
            raise ValueError(f"planner input has {x.shape[-1]} features, expected "
                             f"{self.input_dim} (obs {self.obs_dim} + conditioning "
                             f"{self.cond_dim})")
        with torch.no_grad():
            return self.forward_intent(x)

    def config(self) -> dict:
        """Constructor arguments (JSON), saved next to the weights."""
        out = {"obs_dim": self.obs_dim, "action_dim": self.action_dim, "horizon": self.horizon,
               "action_low": (self.act_center - self.act_half).tolist(),
               "action_high": (self.act_center + self.act_half).tolist(),
               "hidden_dims": self.hidden_dims, "cond_dim": self.cond_dim}
        if self.intent_dim:
            out.update(intent_dim=self.intent_dim, fast_indices=self.fast_indices)
        return out


class IntentPlanFn:
    """An intent planner as the sim wrappers' batched planner: ``(obs (N, O), env_ids,
    prefix) -> (chunks (N, H, A), intent (N, I))``; ``intent_dim`` tells the wrappers."""

    def __init__(self, net: BCChunkPlanner) -> None:
        self.net = net
        self.intent_dim = net.intent_dim

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor | None = None,
                 prefix: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor]:
        chunks, intent = self.net.plan_with_intent(obs, env_ids, prefix)
        assert intent is not None
        return chunks, intent


@dataclass
class ExpertDemos:
    """Expert rollouts, time-major.

    Attributes:
        obs: ``(T, N, O)`` robot observations.
        actions: ``(T, N, A)`` expert labels (the noise-free expert action).
        dones: ``(T, N)`` True where the episode ended after that step.
        executed: ``(T, N, A)`` the actions really applied (labels + DART noise, clipped).
    """

    obs: torch.Tensor
    actions: torch.Tensor
    dones: torch.Tensor
    executed: torch.Tensor | None = None


def collect_expert_demos(env, steps: int, noise: float = 0.0, seed: int = 0,
                         show_progress: bool = True) -> ExpertDemos:
    """Roll the env's scripted expert for ``steps`` steps on all ``env.num_envs`` envs.

    ``noise`` is the std of Gaussian noise, as a fraction of each action's range, added to the
    *executed* action (clipped to the limits); the stored label stays the clean expert action.
    """
    spec = env.spec
    device = env.device
    low = torch.as_tensor(spec.action_low, dtype=torch.float32, device=device)
    high = torch.as_tensor(spec.action_high, dtype=torch.float32, device=device)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    obs_l, act_l, done_l, exe_l = [], [], [], []
    obs = env.get_observations()["policy"]
    for _ in progress(range(steps), total=steps, desc="expert demos", disable=not show_progress
                      or None):
        expert = env.expert_action().to(torch.float32)
        executed = expert
        if noise > 0:
            eps = torch.randn(expert.shape, generator=gen).to(device)
            executed = torch.clamp(expert + noise * (high - low) * eps, low, high)
        obs_l.append(obs.clone())
        act_l.append(expert.clone())
        exe_l.append(executed.clone())
        td, _, dones, _ = env.step(executed)
        obs = td["policy"]
        done_l.append(dones.bool().clone())
    return ExpertDemos(torch.stack(obs_l), torch.stack(act_l), torch.stack(done_l),
                       torch.stack(exe_l))


def prefix_inputs(executed: torch.Tensor, dones: torch.Tensor, length: int) -> torch.Tensor:
    """Committed prefixes ``(T, N, length * A)``: at step ``k``, the actions executed at
    ``k .. k+length-1``, zero from the episode's end (or the data's) on."""
    steps, n, a = executed.shape
    out = torch.zeros(steps, n, length, a, dtype=executed.dtype, device=executed.device)
    for k in range(steps):
        alive = torch.ones(n, dtype=torch.bool, device=executed.device)
        for i in range(length):
            t = k + i
            if t >= steps:
                break
            if i:
                alive = alive & ~dones[t - 1]
            out[k, :, i] = executed[t] * alive[:, None]
    return out.reshape(steps, n, length * a)


def chunk_labels(actions: torch.Tensor, dones: torch.Tensor, horizon: int) -> torch.Tensor:
    """Open-loop chunk labels ``(T, N, H, A)`` from time-major ``actions (T, N, A)``.

    Row ``i`` of the label at step ``k`` is ``actions[k + i]`` while the episode lasts; after
    the episode's last step (``dones``) or past the end of the data, the last valid row holds.
    """
    steps = actions.shape[0]
    out = actions.unsqueeze(2).repeat(1, 1, horizon, 1)
    for k in range(steps):
        alive = torch.ones(actions.shape[1], dtype=torch.bool, device=actions.device)
        prev = actions[k]
        for i in range(1, horizon):
            t = k + i
            if t < steps:
                alive = alive & ~dones[t - 1]
                row = torch.where(alive[:, None], actions[t], prev)
            else:
                row = prev
            out[k, :, i] = row
            prev = row
    return out


def stale_inputs(inputs: torch.Tensor, dones: torch.Tensor, max_steps: int,
                 generator: torch.Generator) -> torch.Tensor:
    """For time-major ``inputs (T, N, X)``: the input of a step up to ``max_steps`` earlier in
    the same episode (uniform in ``0..max_steps``, clamped at the episode's first step and at
    the data's start), ``(T, N, X)``: what an intent computed that long ago saw."""
    steps, n = inputs.shape[:2]
    # first step of each (t, env)'s episode
    start = torch.zeros(steps, n, dtype=torch.long)
    for k in range(1, steps):
        start[k] = torch.where(dones[k - 1].cpu(), torch.full((n,), k), start[k - 1])
    back = torch.randint(0, max_steps + 1, (steps, n), generator=generator)
    src = torch.maximum(torch.arange(steps)[:, None] - back, start)
    return inputs[src.to(inputs.device), torch.arange(n, device=inputs.device)[None, :]]


def fit_bc(planner: BCChunkPlanner, inputs: torch.Tensor, targets: torch.Tensor, *,
           epochs: int = 30, batch_size: int = 512, learning_rate: float = 1e-3, seed: int = 0,
           show_progress: bool = True, intent_inputs: torch.Tensor | None = None) -> list[float]:
    """Fit ``planner`` to ``targets (M, H, A)`` from ``inputs (M, O + C)`` by MSE.

    The input normalisation is set from ``inputs`` first. ``intent_inputs (M, O + C)``
    (intent planners): the encoder reads these (e.g. older observations, :func:`stale_inputs`)
    and the decoder ``inputs``. Returns the mean training loss of each epoch (a list of
    ``epochs`` floats).
    """
    if intent_inputs is not None and (not planner.intent_dim
                                      or intent_inputs.shape != inputs.shape):
        raise ValueError("intent_inputs need an intent planner and the inputs' shape, got "
                         f"intent_dim {planner.intent_dim} and {tuple(intent_inputs.shape)}")
    if inputs.shape[0] != targets.shape[0]:
        raise ValueError(f"inputs ({inputs.shape[0]}) and targets ({targets.shape[0]}) differ "
                         "in length")
    if inputs.shape[-1] != planner.input_dim:
        raise ValueError(f"inputs have {inputs.shape[-1]} features, the planner expects "
                         f"{planner.input_dim}")
    planner.set_input_stats(inputs)
    opt = torch.optim.Adam(planner.parameters(), lr=learning_rate)
    gen = torch.Generator(device="cpu").manual_seed(int(seed))
    scale = planner.act_half
    losses: list[float] = []
    m = inputs.shape[0]
    planner.train()
    for _ in progress(range(epochs), total=epochs, desc="bc planner",
                      disable=not show_progress or None):
        perm = torch.randperm(m, generator=gen).to(inputs.device)
        total, count = 0.0, 0
        for start in range(0, m, batch_size):
            idx = perm[start:start + batch_size]
            if intent_inputs is None:
                pred = planner(inputs[idx])
            else:
                pred = planner.decode(inputs[idx], planner.encode(intent_inputs[idx]))
            loss = (((pred - targets[idx]) / scale) ** 2).mean()
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
            count += idx.numel()
        losses.append(total / count)
    planner.eval()
    log.info("bc planner: loss %.4g -> %.4g over %d epochs (%d samples)", losses[0], losses[-1],
             epochs, m)
    return losses
