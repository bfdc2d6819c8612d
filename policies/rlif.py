"""Learning from operator interventions: RLIF (off-policy RL with the intervention as the
reward) and the HG-DAgger-style BC baseline, on recorded control steps.

Data (:func:`intervention_dataset`, from :func:`edgerl.contract.intervention_log.load_transitions`):
per control step the edit observation ``s`` ``(D,)``, the action executed in the policy's
own units ``u = clip((command - chunk_row) / residual_bound, -1, 1)`` ``(A,)`` (the
operator's command during a takeover, the policy's otherwise), and the RLIF reward: ``-1``
on the step just before an override starts (the action the operator judged bad), ``0``
elsewhere (Luo et al. 2023).

The policy update regresses on ``target`` ``(A,)``: ``u`` on the operator's steps and, on the
policy's own steps, the residual the loop composed the command from (the network's output plus the
exploration noise, before the ``[-1, 1]`` bound; recording format 2). Regressing on the bounded
``u`` instead is biased: where the output is near the bound, the bound clips the noise on one side
only, so ``E[clip(mu + noise)]`` is nearer zero than ``mu`` and every round shrinks the policy
(measured: -0.09 to -0.23 on average on the ``rlif-region-flip`` recordings' own steps, the mean
|output| falling 0.67 -> 0.61 over three rounds). Recordings without the residual fall back to
``u``. The critic sees the executed ``u``.

* ``rlif``: implicit Q-learning (Kostrikov et al. 2021): twin ``Q(s, u)`` with a Polyak
  target, ``V(s)`` by expectile regression on the target Q, then advantage-weighted
  regression of the policy (``exp(beta * (Q - V) / std(Q - V))``, capped) on every executed
  action,
  starting from the bundle's weights. ``extract="qmax"`` extracts the policy
  as TD3+BC does instead (Fujimoto & Gu 2021): maximise the critic's ``Q(s, pi(s))``
  (scaled by ``alpha / mean|Q|``) plus the squared error to the executed action. AWR can only
  reweight the actions in the data, so in a state where the policy always did the same bad
  thing it cannot find another; the Q-gradient can (RLIF's RLPD actor also maximises Q).
  ``extract="greedy"`` is a one-step policy improvement with a trust threshold
  (:func:`greedy_targets`): on every recorded state the target is the starting actor's own
  output, replaced by the critic's best action on a grid where that action's ``Q`` beats the
  start's by more than ``margin`` standard deviations of the data's advantages; the actor
  regresses on these targets. Why (measured on the ``rlif-region-flip`` recordings): AWR on
  the policy's own steps cannot repair a region the operator covers; the policy held 112-231
  of the region's 1.2-1.6k recorded states (the operator takes over soon after the policy
  enters it), and three rounds left the region's sign agreement with the unweakened policy
  where it started; the critic, trained on every step, ranks the right push higher on 67-88 %
  of the region's operator-covered states. The greedy step uses that knowledge there and
  leaves the states where the critic cannot tell the actions apart at the start's output.
* ``bc``: regress the policy on the operator's override commands only (the takeover
  steps), the same number of updates from the same start.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass

import numpy as np
import torch
from torch import nn

from edgerl.policies.bc_planner import elu_mlp

__all__ = ["FINETUNE_METHODS", "FinetuneConfig", "FinetuneResult", "finetune", "greedy_targets",
           "intervention_dataset"]

log = logging.getLogger(__name__)

FINETUNE_METHODS = ("rlif", "bc")
EXTRACTIONS = ("awr", "qmax", "greedy")
ACTOR_DATA = ("all", "own")


@dataclass
class FinetuneConfig:
    """Fine-tuning options.

    Attributes:
        method: ``rlif`` or ``bc``.
        steps: Gradient steps (both methods; the critic trains for as many first).
        batch: Minibatch size.
        gamma: Discount (per control step).
        expectile: IQL expectile of ``V`` (0.5 = mean; higher = closer to the max).
        beta: Inverse temperature of the advantage weights, on advantages divided by their
            std over the data (so the sparse -1 reward's small Q differences still count).
        max_weight: Cap of the advantage weights.
        lr_actor / lr_critic: Adam learning rates.
        hidden: Critic hidden sizes.
        tau: Polyak rate of the target critic.
        seed: Torch seed (minibatches, critic init).
        extract: ``rlif`` policy extraction: ``awr`` (advantage-weighted regression, the
            default), ``qmax`` (TD3+BC: ``-alpha Q(s, pi(s)) / mean|Q| + |pi(s) - u|^2``) or
            ``greedy`` (regress every recorded state on :func:`greedy_targets`; ignores
            ``actor_data``, ``beta``).
        margin: ``greedy``: how many standard deviations of the data's advantages the best
            grid action's ``Q`` must beat the start's by before it replaces the start's output.
        grid: ``greedy``: candidate values per action dimension, evenly over ``[-1, 1]``.
        critics: ``greedy``: independently initialised critics (seeds ``seed .. seed + K -
            1``, each on its own minibatches); the best grid action is the one with the
            highest mean ``Q``, and it replaces the start's only where **every** critic's gain
            clears the margin (a change the critics disagree on is not made). 1 = one critic.
        alpha: ``qmax``: weight of the Q term against the regression term.
        actor_data: ``rlif``: which steps the policy update regresses on: ``all`` executed
            actions (the default) or only the policy's ``own`` (the operator's steps then
            only shape the critic: the takeover is the negative reward, its command is not
            imitated).
        anchor: ``rlif``: weight of a trust region added to the actor's loss: the mean
            squared distance of its output to the starting actor's, on a minibatch of every
            recorded state (0 = off; without it the chain's output was measured drifting
            round after round).
    """

    method: str = "rlif"
    steps: int = 2000
    batch: int = 256
    gamma: float = 0.95
    expectile: float = 0.8
    beta: float = 1.0
    max_weight: float = 50.0
    lr_actor: float = 1e-4
    lr_critic: float = 3e-4
    hidden: tuple[int, ...] = (128, 128)
    tau: float = 0.005
    seed: int = 0
    extract: str = "awr"
    alpha: float = 2.5
    actor_data: str = "all"
    anchor: float = 0.0
    margin: float = 2.0
    grid: int = 21
    critics: int = 1

    def __post_init__(self) -> None:
        if self.method not in FINETUNE_METHODS:
            raise ValueError(f"finetune method {self.method!r} is not one of "
                             f"{', '.join(FINETUNE_METHODS)}")
        if self.steps < 1 or self.batch < 1:
            raise ValueError("finetune: steps and batch must be >= 1")
        if not 0 < self.gamma < 1 or not 0 < self.expectile < 1:
            raise ValueError("finetune: gamma and expectile must be in (0, 1)")
        if self.extract not in EXTRACTIONS:
            raise ValueError(f"finetune extract {self.extract!r} is not one of "
                             f"{', '.join(EXTRACTIONS)}")
        if self.actor_data not in ACTOR_DATA:
            raise ValueError(f"finetune actor_data {self.actor_data!r} is not one of "
                             f"{', '.join(ACTOR_DATA)}")
        if self.alpha < 0:
            raise ValueError(f"finetune: alpha must be >= 0, got {self.alpha}")
        if not (np.isfinite(self.anchor) and self.anchor >= 0):
            raise ValueError(f"finetune: anchor must be a finite number >= 0, got {self.anchor}")
        if not (np.isfinite(self.margin) and self.margin >= 0):
            raise ValueError(f"finetune: margin must be a finite number >= 0, got {self.margin}")
        if self.grid < 2:
            raise ValueError(f"finetune: grid must be >= 2 candidate values, got {self.grid}")
        if self.critics < 1:
            raise ValueError(f"finetune: critics must be >= 1, got {self.critics}")
        if self.critics > 1 and self.extract != "greedy":
            raise ValueError("finetune: critics > 1 is used only by extract 'greedy'")


@dataclass
class FinetuneResult:
    """The fine-tuned actor and what the run saw."""

    actor: nn.Module
    critic: nn.Module | None
    stats: dict[str, float]


def intervention_dataset(steps: dict[str, np.ndarray], bound: float) -> dict[str, torch.Tensor]:
    """Tensors ``s`` (N, D), ``u`` (N, A), ``target`` (N, A), ``r`` (N,), ``s2`` (N, D),
    ``done`` (N,), ``intervened`` (N,) from control steps (:func:`load_transitions`); the
    reward is -1 on a step whose next step in the same episode starts an override;
    ``target`` is ``u`` with the own steps' logged pre-bound residual where it is finite."""
    if bound <= 0:
        raise ValueError(f"residual bound must be > 0, got {bound}")
    s = steps["edit_obs"].astype(np.float32)
    if len(s) < 2:
        raise ValueError(f"{len(s)} control steps: too few to learn from")
    u = np.clip((steps["command"] - steps["chunk_row"]) / bound, -1.0, 1.0)
    done = steps["done"].astype(bool).copy()
    same = np.append(steps["episode"][1:] == steps["episode"][:-1], False)
    done |= ~same
    r = np.zeros(len(s), np.float32)
    r[:-1][same[:-1] & steps["start"][1:]] = -1.0
    s2 = np.concatenate([s[1:], s[-1:]])
    s2[done] = s[done]
    target = u.copy()
    residual = steps.get("residual")
    if residual is not None:
        own = ~steps["intervened"].astype(bool) & np.isfinite(residual).all(1)
        target[own] = residual[own]
    t = {"s": s, "u": u.astype(np.float32), "target": target.astype(np.float32), "r": r,
         "s2": s2,
         "done": done.astype(np.float32), "intervened": steps["intervened"].astype(np.float32)}
    return {k: torch.as_tensor(v) for k, v in t.items()}


class ValueNet(nn.Module):
    """``V(s)`` ``(N,)``, inputs standardized with the data's statistics."""

    def __init__(self, d_s: int, hidden: tuple[int, ...], mean: torch.Tensor,
                 std: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.v = elu_mlp(d_s, hidden, 1)

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return self.v((s - self.mean) / self.std)[:, 0]


class TwinQ(nn.Module):
    """``min(Q1, Q2)(s, u)``, inputs standardized with the data's statistics."""

    def __init__(self, d_s: int, d_a: int, hidden: tuple[int, ...], mean: torch.Tensor,
                 std: torch.Tensor) -> None:
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.q1, self.q2 = elu_mlp(d_s + d_a, hidden, 1), elu_mlp(d_s + d_a, hidden, 1)

    def both(self, s: torch.Tensor, u: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x = torch.cat(((s - self.mean) / self.std, u), -1)
        return self.q1(x)[:, 0], self.q2(x)[:, 0]

    def forward(self, s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return torch.minimum(*self.both(s, u))


def _expectile(diff: torch.Tensor, tau: float) -> torch.Tensor:
    w = torch.where(diff > 0, tau, 1.0 - tau)
    return (w * diff * diff).mean()


def _train_critic(data: dict[str, torch.Tensor], cfg: FinetuneConfig, gen: torch.Generator,
                  init_seed: int | None = None) -> tuple[TwinQ, ValueNet, dict[str, float]]:
    """IQL critic on ``data``; ``gen`` draws the minibatches, ``init_seed`` (if given) seeds
    the weights' initialisation (else the global torch generator's state)."""
    if init_seed is not None:
        torch.manual_seed(init_seed)
    s, u = data["s"], data["u"]
    mean, std = s.mean(0), s.std(0) + 1e-3
    q = TwinQ(s.shape[1], u.shape[1], cfg.hidden, mean, std)
    q_t = copy.deepcopy(q).requires_grad_(False)
    v_net = ValueNet(s.shape[1], cfg.hidden, mean, std)
    opt = torch.optim.Adam([*q.parameters(), *v_net.parameters()], lr=cfg.lr_critic)
    n = s.shape[0]
    for _ in range(cfg.steps):
        i = torch.randint(n, (min(cfg.batch, n),), generator=gen)
        with torch.no_grad():
            target_q = q_t(s[i], u[i])
            next_v = v_net(data["s2"][i])
            y = data["r"][i] + cfg.gamma * (1.0 - data["done"][i]) * next_v
        v = v_net(s[i])
        q1, q2 = q.both(s[i], u[i])
        loss = _expectile(target_q - v, cfg.expectile) + ((q1 - y) ** 2 + (q2 - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
        with torch.no_grad():
            for p, pt in zip(q.parameters(), q_t.parameters()):
                pt.lerp_(p, cfg.tau)
    return q_t, v_net, {"critic_loss": float(loss.detach())}


def greedy_targets(start: nn.Module, critic: nn.Module | list[nn.Module], s: torch.Tensor,
                   threshold: float, grid: int) -> tuple[torch.Tensor, torch.Tensor]:
    """One-step policy improvement with a trust threshold.

    Args:
        start: The starting actor, ``(N, D) -> (N, A)`` raw residual.
        critic: ``Q(s, u)`` ``(N,)`` with ``u`` in ``[-1, 1]``, or a list of such critics: the
            candidate with the highest mean ``Q`` is the best, and it must clear the
            threshold under every critic.
        s: States ``(N, D)``.
        threshold: The ``Q`` gain a candidate needs over the start's (clipped) action.
        grid: Candidate values per action dimension, evenly over ``[-1, 1]``; the candidates
            change one dimension of the start's action at a time (all of it for ``A = 1``).

    Returns:
        ``(targets (N, A), changed (N,) bool)``: the start's raw output, or the best candidate
        where it beats the start by more than ``threshold``.
    """
    critics = critic if isinstance(critic, list) else [critic]
    with torch.no_grad():
        y0 = start(s)
        a0 = y0.clamp(-1.0, 1.0)
        q0 = torch.stack([c(s, a0) for c in critics])  # (K, N)
        best_q, best_a = q0.clone(), a0.clone()
        for k in range(a0.shape[1]):
            for g in torch.linspace(-1.0, 1.0, grid).tolist():
                cand = a0.clone()
                cand[:, k] = g
                qc = torch.stack([c(s, cand) for c in critics])
                better = qc.mean(0) > best_q.mean(0)
                best_q = torch.where(better, qc, best_q)
                best_a = torch.where(better[:, None], cand, best_a)
        changed = ((best_q - q0) > threshold).all(0)
        return torch.where(changed[:, None], best_a, y0), changed


def finetune(actor: nn.Module, steps: dict[str, np.ndarray], bound: float,
             cfg: FinetuneConfig | None = None) -> FinetuneResult:
    """Fine-tune a copy of ``actor`` (``(N, D) -> (N, A)`` raw residual) on recorded control
    steps with ``cfg.method``; ``bound`` is the bundle's residual bound."""
    cfg = cfg or FinetuneConfig()
    gen = torch.Generator().manual_seed(cfg.seed)
    torch.manual_seed(cfg.seed)
    data = intervention_dataset(steps, bound)
    # the critic scores the executed u; the actor regresses on the target (see the module)
    s, u = data["s"], data["target"] if cfg.method == "rlif" else data["u"]
    stats: dict[str, float] = {"transitions": float(len(s)),
                               "intervened": float(data["intervened"].sum()),
                               "intervention_starts": float(-data["r"].sum())}
    start = actor
    actor = copy.deepcopy(actor).train()
    critic = None
    if cfg.method == "bc":
        mask = data["intervened"] > 0
        if not bool(mask.any()):
            raise ValueError("bc: the recordings hold no override steps to imitate")
        s, u = s[mask], u[mask]
        weight = torch.ones(len(s))
    else:
        critic, v_fn, cstats = _train_critic(data, cfg, gen)
        stats.update(cstats)
        with torch.no_grad():
            adv = critic(s, data["u"]) - v_fn(s)
            weight = torch.exp(cfg.beta * adv / (adv.std() + 1e-8)).clamp(max=cfg.max_weight)
        stats.update(adv_intervention_start=float(adv[data["r"] < 0].mean())
                     if bool((data["r"] < 0).any()) else float("nan"),
                     adv_other=float(adv[data["r"] == 0].mean()),
                     weight_mean=float(weight.mean()))
        if cfg.extract == "greedy":  # every recorded state (s is data["s"] here)
            members = [critic] + [_train_critic(data, cfg, torch.Generator().manual_seed(
                cfg.seed + k), init_seed=cfg.seed + k)[0] for k in range(1, cfg.critics)]
            u, changed = greedy_targets(start, members, s, cfg.margin * float(adv.std()),
                                        cfg.grid)
            weight = torch.ones(len(s))
            stats["greedy_changed"] = float(changed.float().mean())
        elif cfg.actor_data == "own":
            own = data["intervened"] == 0
            s, u, weight = s[own], u[own], weight[own]
    anchored = cfg.method == "rlif" and cfg.anchor > 0
    if anchored:  # the trust region's states and the starting actor's outputs on them
        s_all = data["s"]
        with torch.no_grad():
            y_start = start(s_all)
    opt = torch.optim.Adam(actor.parameters(), lr=cfg.lr_actor)
    n = len(s)
    stats["actor_transitions"] = float(n)
    qmax = cfg.method == "rlif" and cfg.extract == "qmax"
    if qmax:
        critic.requires_grad_(False)
    for _ in range(cfg.steps):
        i = torch.randint(n, (min(cfg.batch, n),), generator=gen)
        pi = actor(s[i])
        err = ((pi - u[i]) ** 2).sum(-1)
        if qmax:
            q = critic(s[i], pi.clamp(-1.0, 1.0))  # u lives in [-1, 1]
            loss = err.mean() - cfg.alpha * q.mean() / (q.abs().mean().detach() + 1e-6)
        else:
            loss = (weight[i] * err).mean() / weight[i].mean()
        if anchored:
            j = torch.randint(len(s_all), (min(cfg.batch, len(s_all)),), generator=gen)
            loss = loss + cfg.anchor * ((actor(s_all[j]) - y_start[j]) ** 2).sum(-1).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()
    stats["actor_loss"] = float(loss.detach())
    log.info("finetune %s: %s", cfg.method, stats)
    return FinetuneResult(actor.eval(), critic, stats)
