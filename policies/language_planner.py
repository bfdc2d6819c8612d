"""Language-conditioned chunk planner: MiniLM instruction embedding + robot obs -> (H, A) chunk.

Training (:func:`train_language_planner`): the task's scripted expert is rolled out
(:func:`~edgerl.policies.bc_planner.collect_expert_demos`, DART noise on the executed action);
each sample's conditioning is the embedding of a *training* paraphrase of that env's
instruction, drawn at random per sample, so the head learns the instruction's meaning rather
than one phrasing. The head (:class:`GroundedChunkHead`) grounds the instruction on one of the
observation's object slots and plans from the robot state and that object; it is trained by
behaviour cloning (:func:`fit_grounded_head`, with the BC planner's chunk labels and loss
scaling) plus an auxiliary grounding cross-entropy.

Evaluation (:func:`evaluate_language_planner`): the planner alone, no delay: every ``period``
steps (and at each episode start) it plans from the current observation and the env's
instruction, phrased with a paraphrase held out from training; the env executes the chunk's
rows open-loop until the next plan.
"""

from __future__ import annotations

import logging
import time
from dataclasses import asdict, dataclass, field
from typing import Any

import numpy as np
import torch
from torch import nn

from edgerl.chunk import ActionChunk
from edgerl.edit_obs import EditObsConfig
from edgerl.logs import progress
from edgerl.planner import PlannerHealth, PlannerInfo
from edgerl.policies.bc_planner import chunk_labels, collect_expert_demos, init_bounded_mlp
from edgerl.policies.evaluate import EvalResult, evaluate
from edgerl.policies.language_encoder import SentenceEncoder, load_encoder
from edgerl.runtime.planners.language import InstructionTokenizer
from edgerl.spec import ActionSpec, ChunkSpec, LatencyModel, ObservationSpec, PolicySpec

__all__ = [
    "GroundedChunkHead",
    "InstructionSet",
    "LanguageChunkPlanner",
    "LanguagePlanFn",
    "LanguagePlannerConfig",
    "RemotePlanFn",
    "evaluate_language_planner",
    "collect_language_demos",
    "fit_grounded_head",
    "instruction_sets",
    "make_language_spec",
    "make_task_env",
    "slot_layout",
    "train_language_planner",
    "untrained_head",
]

log = logging.getLogger(__name__)


@dataclass
class LanguagePlannerConfig:
    """Everything that defines a language planner run (saved in the bundle manifest).

    Attributes:
        task: Registered language task (needs ``instruction_id`` and ``PARAPHRASES``).
        horizon: Chunk rows H.
        period: Replanning period P in control steps (P <= H).
        demo_envs / demo_steps: Expert rollout size (samples = envs x steps).
        expert_noise: DART noise on the executed expert action (fraction of the range).
        hidden_dims: Head MLP sizes.
        epochs / batch_size / learning_rate: BC optimisation.
        n_held_out: Paraphrases per instruction held out from training (evaluation only).
        eval_envs / eval_episodes: Held-out evaluation size.
        seed: Seeds demos, training and evaluation.
    """

    task: str = "arm_reach"
    horizon: int = 8
    period: int = 4
    demo_envs: int = 64
    demo_steps: int = 600
    expert_noise: float = 0.1
    hidden_dims: list[int] = field(default_factory=lambda: [256, 256])
    epochs: int = 60
    batch_size: int = 512
    learning_rate: float = 1e-3
    n_held_out: int = 3
    eval_envs: int = 50
    eval_episodes: int = 200
    seed: int = 0

    def __post_init__(self) -> None:
        if self.horizon < 1 or not 1 <= self.period <= self.horizon:
            raise ValueError(f"need 1 <= period ({self.period}) <= horizon ({self.horizon})")
        for key in ("demo_envs", "demo_steps", "epochs", "eval_envs", "eval_episodes"):
            if getattr(self, key) < 1:
                raise ValueError(f"{key} must be >= 1, got {getattr(self, key)}")


@dataclass
class InstructionSet:
    """Paraphrases per instruction id and their embeddings.

    Attributes:
        texts: ``texts[i]`` = the phrasings of instruction ``i``.
        embeddings: ``(I, K, 384)`` float32, ``embeddings[i, k]`` embeds ``texts[i][k]``
            (``K`` = phrasings per instruction; all instructions have the same count).
    """

    texts: list[list[str]]
    embeddings: torch.Tensor

    def flat(self) -> list[str]:
        return [t for group in self.texts for t in group]


def _language_module(task: str) -> Any:
    """The module with ``task``'s paraphrases (its registry entry's ``language``)."""
    import importlib

    from edgerl.sim.registry import get_task_info, list_tasks

    try:
        module = get_task_info(task).language
    except KeyError:
        module = ""
    if not module:
        known = ", ".join(t.name for t in list_tasks() if t.language)
        raise ValueError(f"no paraphrase data for task {task!r} (known: {known})")
    return importlib.import_module(module)


def instruction_sets(task: str, encoder: SentenceEncoder, tokenizer: InstructionTokenizer,
                     n_held_out: int = 3) -> tuple[InstructionSet, InstructionSet]:
    """``(train, held_out)`` paraphrase sets of ``task`` with their embeddings."""
    lang = _language_module(task)
    train, held = lang.paraphrase_split(n_held_out)
    out = []
    for split in (train, held):
        texts = [list(split[inst]) for inst in lang.INSTRUCTIONS]
        flat = [t for group in texts for t in group]
        emb = torch.from_numpy(encoder.embed(flat, tokenizer))
        out.append(InstructionSet(texts, emb.view(len(texts), len(texts[0]), -1)))
    return out[0], out[1]


def make_task_env(task: str, num_envs: int, seed: int) -> Any:
    """The registered task env (no wrappers)."""
    from edgerl.sim.registry import make_task

    return make_task(task, num_envs=num_envs, seed=seed)


def _instruction_ids(env: Any) -> torch.Tensor:
    """A copy (the env updates its numpy array in place at resets)."""
    return torch.tensor(np.asarray(env.instruction_id), dtype=torch.int64)


def collect_language_demos(env: Any, steps: int, noise: float, seed: int,
                           show_progress: bool = True) -> tuple[Any, torch.Tensor]:
    """Expert demos plus the instruction id of every sample, ``(T, N)`` int64.

    The id at step ``k`` is read before the step (an auto-reset after the step draws a new one
    for the next episode), by stepping the env through a thin recording shim.
    """
    ids: list[torch.Tensor] = []

    class _Recorder:
        def __init__(self, inner: Any) -> None:
            self._inner = inner

        def __getattr__(self, name: str) -> Any:
            return getattr(self._inner, name)

        def step(self, actions: torch.Tensor) -> Any:
            ids.append(_instruction_ids(self._inner))
            return self._inner.step(actions)

    demos = collect_expert_demos(_Recorder(env), steps, noise=noise, seed=seed,
                                 show_progress=show_progress)
    return demos, torch.stack(ids)


class GroundedChunkHead(nn.Module):
    """``(obs (B, O), embedding (B, C)) -> chunk (B, H, A)``: ground the instruction on an
    object slot, then plan from the robot state and the grounded object.

    ``w = softmax(W e + b)`` over the ``K`` object slots of the observation (slot ``k`` =
    ``obs[slot_index[k]]``, ``S`` values each); the grounded object is ``sum_k w_k slot_k``;
    an MLP on ``[robot state | grounded object]`` (normalised) gives ``center + half *
    tanh(.)`` so every row lies inside the action limits.

    Why not a plain MLP on ``[obs | embedding]`` (:class:`~edgerl.policies.bc_planner.
    BCChunkPlanner` with ``cond_dim``): choosing one target's coordinates by the instruction is
    a multiplicative gate an MLP learns poorly from demos (measured on arm_reach, see
    docs/planner.md); the soft selection makes it a linear read-out of the embedding.

    Args:
        robot_index: Observation indices of the robot state (R,).
        slot_index: ``(K, S)`` observation indices of the object slots.
        embed_dim: Instruction embedding size C.
        horizon / action_dim: Chunk shape.
        action_low / action_high: Action limits (A,).
        hidden_dims: MLP sizes.
    """

    def __init__(self, obs_dim: int, robot_index: list[int], slot_index: list[list[int]],
                 embed_dim: int, horizon: int, action_dim: int, action_low: list[float],
                 action_high: list[float], hidden_dims: list[int] | tuple[int, ...] = (256, 256)
                 ) -> None:
        super().__init__()
        self.obs_dim, self.embed_dim = obs_dim, embed_dim
        self.horizon, self.action_dim = horizon, action_dim
        self.robot_list, self.slot_list = list(robot_index), [list(s) for s in slot_index]
        self.hidden_dims = list(hidden_dims)
        self.register_buffer("robot_index", torch.as_tensor(self.robot_list, dtype=torch.int64))
        self.register_buffer("slot_index", torch.as_tensor(self.slot_list, dtype=torch.int64))
        n_slots, slot_dim = self.slot_index.shape
        self.ground = nn.Linear(embed_dim, n_slots)
        init_bounded_mlp(self, len(self.robot_list) + slot_dim, self.hidden_dims,
                         horizon * action_dim, action_low, action_high)

    def grounding_logits(self, embedding: torch.Tensor) -> torch.Tensor:
        """``(B, K)`` slot scores of the instruction."""
        return self.ground(embedding)

    def features(self, obs: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        """``[robot state | grounded object]`` before normalisation, ``(B, R + S)``."""
        w = torch.softmax(self.grounding_logits(embedding), dim=-1)  # (B, K)
        slots = obs[:, self.slot_index]  # (B, K, S)
        goal = (w.unsqueeze(-1) * slots).sum(1)
        return torch.cat([obs[:, self.robot_index], goal], dim=-1)

    def set_input_stats(self, feats: torch.Tensor) -> None:
        self.in_mean.copy_(feats.mean(0))
        self.in_std.copy_(feats.std(0).clamp_min(1e-3))

    def forward(self, obs: torch.Tensor, embedding: torch.Tensor) -> torch.Tensor:
        z = self.mlp((self.features(obs, embedding) - self.in_mean) / self.in_std)
        z = z.view(obs.shape[0], self.horizon, self.action_dim)
        return self.act_center + self.act_half * torch.tanh(z)

    def config(self) -> dict[str, Any]:
        """Constructor arguments (JSON)."""
        return {"obs_dim": self.obs_dim, "robot_index": self.robot_list,
                "slot_index": self.slot_list, "embed_dim": self.embed_dim,
                "horizon": self.horizon, "action_dim": self.action_dim,
                "action_low": (self.act_center - self.act_half).tolist(),
                "action_high": (self.act_center + self.act_half).tolist(),
                "hidden_dims": self.hidden_dims}


def slot_layout(task: str, obs_names: list[str]) -> tuple[list[int], list[list[int]]]:
    """``(robot_index, slot_index)`` of ``task``'s observation: one slot per instruction."""
    lang = _language_module(task)
    slots = [[obs_names.index(f"{c}_target_{a}") for a in "xy"] for c in lang.COLORS]
    used = {i for s in slots for i in s}
    return [i for i in range(len(obs_names)) if i not in used], slots


def fit_grounded_head(head: GroundedChunkHead, obs: torch.Tensor, embeddings: torch.Tensor,
                      instruction_ids: torch.Tensor, targets: torch.Tensor, *, epochs: int,
                      batch_size: int, learning_rate: float, grounding_weight: float = 0.1,
                      seed: int = 0, show_progress: bool = True) -> list[float]:
    """Behaviour cloning: chunk MSE (scaled by the action half-range, as ``fit_bc``) plus
    ``grounding_weight`` x cross-entropy of the slot scores against the demo's instruction id.

    ``obs (M, O)``, ``embeddings (M, C)``, ``instruction_ids (M,)``, ``targets (M, H, A)``.
    Returns the mean loss per epoch.
    """
    with torch.no_grad():
        onehot = torch.nn.functional.one_hot(instruction_ids, head.slot_index.shape[0]).float()
        slots = obs[:, head.slot_index]
        true_goal = (onehot.unsqueeze(-1) * slots).sum(1)
        head.set_input_stats(torch.cat([obs[:, head.robot_index], true_goal], dim=-1))
    opt = torch.optim.Adam(head.parameters(), lr=learning_rate)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, T_max=epochs)
    gen = torch.Generator().manual_seed(int(seed))
    m = obs.shape[0]
    losses: list[float] = []
    head.train()
    for _ in progress(range(epochs), total=epochs, desc="language planner",
                      disable=not show_progress or None):
        perm = torch.randperm(m, generator=gen)
        total = 0.0
        for start in range(0, m, batch_size):
            idx = perm[start:start + batch_size]
            pred = head(obs[idx], embeddings[idx])
            loss = (((pred - targets[idx]) / head.act_half) ** 2).mean()
            loss = loss + grounding_weight * nn.functional.cross_entropy(
                head.grounding_logits(embeddings[idx]), instruction_ids[idx])
            opt.zero_grad()
            loss.backward()
            opt.step()
            total += loss.item() * idx.numel()
        sched.step()
        losses.append(total / m)
    head.eval()
    log.info("language planner: loss %.4g -> %.4g over %d epochs (%d samples)", losses[0],
             losses[-1], epochs, m)
    return losses


def train_language_planner(cfg: LanguagePlannerConfig, *, encoder: SentenceEncoder | None = None,
                           tokenizer: InstructionTokenizer | None = None,
                           show_progress: bool = True
                           ) -> tuple[GroundedChunkHead, dict[str, Any]]:
    """Collect demos, fit the head; returns ``(head, info)`` (info is JSON: sizes, losses)."""
    if encoder is None or tokenizer is None:
        encoder, tokenizer = load_encoder()
    t_start = time.perf_counter()
    train_set, _ = instruction_sets(cfg.task, encoder, tokenizer, cfg.n_held_out)
    env = make_task_env(cfg.task, cfg.demo_envs, cfg.seed + 10_000)
    spec = env.spec
    demos, ids = collect_language_demos(env, cfg.demo_steps, cfg.expert_noise, cfg.seed,
                                        show_progress)
    env.close()
    labels = chunk_labels(demos.actions, demos.dones, cfg.horizon)  # (T, N, H, A)
    low = torch.as_tensor(spec.action_low, dtype=torch.float32)
    high = torch.as_tensor(spec.action_high, dtype=torch.float32)
    labels = torch.maximum(torch.minimum(labels, high), low)
    gen = torch.Generator().manual_seed(cfg.seed)
    flat_ids = ids.reshape(-1)
    k = torch.randint(0, train_set.embeddings.shape[1], flat_ids.shape, generator=gen)
    cond = train_set.embeddings[flat_ids, k]  # (M, 384): a random training phrasing each
    robot_index, slot_index = slot_layout(cfg.task, spec.obs_names)
    head = GroundedChunkHead(spec.obs_dim, robot_index, slot_index, cond.shape[-1], cfg.horizon,
                             spec.action_dim, spec.action_low, spec.action_high,
                             hidden_dims=cfg.hidden_dims)
    losses = fit_grounded_head(head, demos.obs.reshape(-1, spec.obs_dim), cond, flat_ids,
                               labels.reshape(-1, cfg.horizon, spec.action_dim),
                               epochs=cfg.epochs, batch_size=cfg.batch_size,
                               learning_rate=cfg.learning_rate, seed=cfg.seed,
                               show_progress=show_progress)
    info = {"samples": int(flat_ids.numel()), "loss_first": losses[0], "loss_last": losses[-1],
            "train_phrasings": train_set.flat(), "train_s": time.perf_counter() - t_start,
            "net": head.config()}
    return head, info


def evaluate_language_planner(head: GroundedChunkHead, phrasings: InstructionSet,
                              cfg: LanguagePlannerConfig, *, episodes: int | None = None,
                              seed: int | None = None,
                              show_progress: bool = True) -> EvalResult:
    """Success of the planner alone (no delay) with the given phrasings of each instruction.

    Env ``e`` uses phrasing ``k = (e + episode) % K`` of its instruction, so every phrasing is
    exercised; the chunk is recomputed every ``cfg.period`` steps and at episode starts.
    """
    episodes = episodes or cfg.eval_episodes
    seed = cfg.seed + 20_000 if seed is None else seed
    env = make_task_env(cfg.task, min(cfg.eval_envs, episodes), seed)
    n = env.num_envs
    n_phr = phrasings.embeddings.shape[1]
    chunk = torch.zeros(n, cfg.horizon, env.spec.action_dim)
    age = torch.full((n,), cfg.period, dtype=torch.int64)
    episode = torch.zeros(n, dtype=torch.int64)
    rows = torch.arange(n)
    head.eval()

    def act(obs: torch.Tensor) -> torch.Tensor:
        fresh = torch.as_tensor(env.episode_length_buf).reshape(-1).cpu() == 0
        episode.add_(fresh.long())
        need = fresh | (age >= cfg.period)
        if bool(need.any()):
            idx = need.nonzero().flatten()
            k = (idx + episode[idx]) % n_phr
            emb = phrasings.embeddings[_instruction_ids(env)[idx], k]
            with torch.no_grad():
                chunk[idx] = head(obs[idx].float().cpu(), emb)
            age[idx] = 0
        action = chunk[rows, age.clamp(max=cfg.horizon - 1)]
        age.add_(1)
        return action

    try:
        return evaluate(env, act, episodes, show_progress=show_progress)
    finally:
        env.close()


class LanguagePlanFn:
    """The language planner as the sim wrappers' batched planner callable
    (``edgerl.sim.wrappers.PlanFn``): ``plan(obs (n, O), env_ids (n,)) -> (n, H, A)``.

    Env ``e`` is instructed with phrasing ``e % K`` of its current instruction (read from the
    base env's ``instruction_id``), so a training run on held-out phrasings exercises all.
    """

    def __init__(self, head: GroundedChunkHead, phrasings: InstructionSet, env: Any) -> None:
        self.head = head.eval()
        self.phrasings = phrasings
        self.env = env

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(env_ids).reshape(-1).cpu().long()
        instr = _instruction_ids(self.env)[ids]
        emb = self.phrasings.embeddings[instr, ids % self.phrasings.embeddings.shape[1]]
        with torch.no_grad():
            return self.head(obs.detach().float().cpu(), emb).to(obs.device)


class RemotePlanFn:
    """A planner served by ``edgerl serve-planner`` as the sim wrappers' batched planner
    callable: one ``plan_batch`` round trip per call for all queried envs (Found-RL's
    training-time planner service: the planner runs in its own process, here or on a GPU box).

    ``client`` is a started :class:`~edgerl.runtime.remote_planner.RemotePlanner`; env ``e``
    is instructed with phrasing ``e % K`` of its current instruction.
    """

    def __init__(self, client: Any, phrasings: InstructionSet, env: Any) -> None:
        self.client = client
        self.phrasings = phrasings
        self.env = env

    def __call__(self, obs: torch.Tensor, env_ids: torch.Tensor) -> torch.Tensor:
        ids = torch.as_tensor(env_ids).reshape(-1).cpu().long()
        instr = _instruction_ids(self.env)[ids].tolist()
        k = self.phrasings.embeddings.shape[1]
        texts = [self.phrasings.texts[i][e % k] for i, e in zip(instr, ids.tolist())]
        chunks = self.client.plan_batch(obs.detach().float().cpu().numpy(), texts, now=0.0)
        return torch.from_numpy(chunks).to(obs.device)


class LanguageChunkPlanner:
    """Torch reference :class:`~edgerl.planner.Planner`: encoder + head, single sample.

    ``plan(obs (O,), instruction, now)`` -> chunk with ``t0 = obs_time = now``. Embeddings are
    cached per instruction text. The ONNX bundle's
    :class:`~edgerl.runtime.language_planner.OnnxLanguagePlanner` is its deployed twin.
    """

    def __init__(self, head: GroundedChunkHead, encoder: SentenceEncoder,
                 tokenizer: InstructionTokenizer, dt_s: float, period_s: float,
                 expected_latency_s: float = 0.0) -> None:
        self.head = head.eval()
        self.encoder = encoder.eval()
        self.tokenizer = tokenizer
        self.info = PlannerInfo(horizon=head.horizon, action_dim=head.action_dim, dt_s=dt_s,
                                period_s=period_s, expected_latency_s=expected_latency_s)
        self._cache: dict[str, torch.Tensor] = {}

    def embed(self, instruction: str) -> torch.Tensor:
        if instruction not in self._cache:
            self._cache[instruction] = torch.from_numpy(
                self.encoder.embed([instruction], self.tokenizer)[0])
        return self._cache[instruction]

    def plan(self, observation: np.ndarray, instruction: str, now: float) -> ActionChunk:
        obs = torch.as_tensor(np.asarray(observation, np.float32).reshape(1, -1))
        if obs.shape[1] != self.head.obs_dim:
            raise ValueError(f"observation has {obs.shape[1]} values, expected "
                             f"{self.head.obs_dim}")
        with torch.no_grad():
            rows = self.head(obs, self.embed(instruction)[None])[0]
        return ActionChunk(actions=rows.numpy(), t0=now, dt=self.info.dt_s, obs_time=now,
                           source="language_planner")

    def health(self) -> PlannerHealth:
        return PlannerHealth.OK


def config_dict(cfg: LanguagePlannerConfig) -> dict[str, Any]:
    """JSON form of the config (for the manifest)."""
    return asdict(cfg)


def untrained_head(cfg: LanguagePlannerConfig, embed_dim: int = 384
                   ) -> tuple[GroundedChunkHead, Any]:
    """A randomly initialised head for ``cfg.task`` and the task's ``TaskSpec`` (for latency
    benchmarks: inference cost does not depend on the weights)."""
    env = make_task_env(cfg.task, 1, cfg.seed)
    spec = env.spec
    env.close()
    robot_index, slot_index = slot_layout(cfg.task, spec.obs_names)
    head = GroundedChunkHead(spec.obs_dim, robot_index, slot_index, embed_dim, cfg.horizon,
                             spec.action_dim, spec.action_low, spec.action_high,
                             hidden_dims=cfg.hidden_dims).eval()
    return head, spec


def make_language_spec(cfg: LanguagePlannerConfig, task_spec: Any,
                       expected_latency_s: float = 0.0) -> PolicySpec:
    """The bundle manifest of a language planner for ``task_spec`` (a sim ``TaskSpec``)."""
    hz = float(task_spec.control_hz)
    n_obs, n_act = task_spec.obs_dim, task_spec.action_dim
    return PolicySpec(
        task=cfg.task, method="language_planner", control_hz=hz,
        observation=ObservationSpec(names=list(task_spec.obs_names),
                                    units=list(task_spec.obs_units), mean=[0.0] * n_obs,
                                    std=[1.0] * n_obs, normalized_in_graph=True),
        action=ActionSpec(names=list(task_spec.action_names),
                          units=list(task_spec.action_units), low=list(task_spec.action_low),
                          high=list(task_spec.action_high)),
        chunk=ChunkSpec(horizon=cfg.horizon, dt_s=1.0 / hz, period_s=cfg.period / hz,
                        expected_latency_s=expected_latency_s),
        edit_obs=EditObsConfig(obs_dim=n_obs, action_dim=n_act),
        latency=LatencyModel(planner_period_steps=cfg.period),
        extra={"language_planner": config_dict(cfg)})
