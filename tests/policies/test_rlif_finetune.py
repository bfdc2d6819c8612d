"""Fine-tuning on interventions: on a synthetic recording where one action always makes the
operator take over, the RLIF critic ranks that action below the other and the policy moves
away from it; BC moves toward the operator; `edgerl finetune` exports a loadable bundle."""

from __future__ import annotations

import json

import numpy as np
import pytest
import torch

from edgerl.contract.intervention_log import InterventionRecorder
from edgerl.export.bundle_mlp import load_bundle_mlp
from edgerl.policies.rlif import FinetuneConfig, finetune, greedy_targets, intervention_dataset
from tests.helpers.bundles import write_mlp_bundle

BOUND = 0.5


def synthetic_ticks(d: int, episodes: int = 40, length: int = 25, seed: int = 0):
    """The policy plays u = +-0.6 at random; after +0.6 the operator takes over for one step
    with -0.3 (intervened, start); nothing else happens."""
    rng = np.random.default_rng(seed)
    rows = {k: [] for k in ("edit_obs", "policy_out", "residual", "chunk_row", "command",
                            "intervened", "start", "episode", "t")}
    t = 0.0
    for ep in range(episodes):
        take_over = False
        for _ in range(length):
            obs = rng.standard_normal(d).astype(np.float32)
            u = -0.3 if take_over else rng.choice([-0.6, 0.6])
            rows["edit_obs"].append(obs)
            rows["policy_out"].append([u])
            rows["residual"].append([u])
            rows["chunk_row"].append([0.0])
            rows["command"].append([BOUND * u])
            rows["intervened"].append(take_over)
            rows["start"].append(take_over)
            rows["episode"].append(ep)
            rows["t"].append(t)
            t += 0.02
            take_over = not take_over and u > 0
    return {k: np.asarray(v) for k, v in rows.items()}


@pytest.fixture
def bundle(tmp_path):
    return write_mlp_bundle(tmp_path / "b", hidden=(16,), obs_dim=4, action_dim=1,
                            control_hz=50.0, horizon=10, period_s=0.1, residual_bound=BOUND)


def _steps(ticks):
    out = dict(ticks)
    out["done"] = np.append(ticks["episode"][1:] != ticks["episode"][:-1], True)
    return out


def test_rlif_critic_ranks_the_intervened_action_lower_and_policy_moves_away(bundle):
    torch.manual_seed(0)
    actor, spec = load_bundle_mlp(bundle)
    ticks = synthetic_ticks(spec.edit_obs.dim)
    data = intervention_dataset(_steps(ticks), BOUND)
    assert float(data["r"].sum()) == -float(ticks["start"].sum())  # -1 before each takeover
    cfg = FinetuneConfig(steps=300, batch=128, seed=0)
    res = finetune(actor, _steps(ticks), BOUND, cfg)
    s = data["s"]
    with torch.no_grad():
        q_bad = res.critic(s, torch.full((len(s), 1), 0.6))
        q_good = res.critic(s, torch.full((len(s), 1), -0.6))
        before, after = actor(s).mean(), res.actor(s).mean()
    assert float((q_bad < q_good).float().mean()) > 0.9
    assert res.stats["adv_intervention_start"] < res.stats["adv_other"]
    assert float(after) < float(before) - 0.1  # away from the action that got it taken over

    bc = finetune(actor, _steps(ticks), BOUND, FinetuneConfig(method="bc", steps=300, seed=0))
    with torch.no_grad():
        assert abs(float(bc.actor(s).mean()) + 0.3) < 0.1  # imitates the operator's -0.3
    assert bc.critic is None


def test_finetune_cli_exports_a_loadable_bundle(bundle, tmp_path, capsys):
    from edgerl.apps.cli import main
    from edgerl.runtime.bundle import load_bundle

    spec = load_bundle_mlp(bundle)[1]
    rec = tmp_path / "rec.mcap"
    with InterventionRecorder(rec) as r:
        r.write_ticks(synthetic_ticks(spec.edit_obs.dim, episodes=8))
    out = tmp_path / "ft"
    assert main(["finetune", "--interventions", str(rec), "--bundle", str(bundle), "--out",
                 str(out), "--steps", "50", "--json"]) == 0
    report = json.loads(capsys.readouterr().out)
    assert report["method"] == "rlif" and report["intervention_starts"] > 0
    spec2, net = load_bundle(out)  # hashes, parity and manifest checked on load
    assert spec2.edit_obs == spec.edit_obs and spec2.residual_bound == BOUND
    net.input[0] = 0.0
    assert np.isfinite(net.infer()).all()
    assert main(["finetune", "--interventions", str(tmp_path / "none.mcap"), "--bundle",
                 str(bundle), "--out", str(out)]) == 1
    assert "none.mcap: no such file" in capsys.readouterr().err


def test_rlif_qmax_extraction_moves_away_from_the_intervened_action(bundle):
    torch.manual_seed(0)
    actor, spec = load_bundle_mlp(bundle)
    steps = _steps(synthetic_ticks(spec.edit_obs.dim))
    s = intervention_dataset(steps, BOUND)["s"]
    res = finetune(actor, steps, BOUND, FinetuneConfig(steps=300, batch=128, seed=0,
                                                       extract="qmax", hidden=(32, 32)))
    with torch.no_grad():
        before, after = actor(s).mean(), res.actor(s).mean()
    assert float(after) < float(before) - 0.1  # the Q-gradient points away from +0.6
    with pytest.raises(ValueError, match="extract 'sac' is not one of awr, qmax, greedy"):
        FinetuneConfig(extract="sac")
    with pytest.raises(ValueError, match="alpha must be >= 0"):
        FinetuneConfig(alpha=-1.0)


def test_rlif_own_actor_data_keeps_the_good_own_action_not_the_operators(bundle):
    """With ``actor_data="own"`` the policy regresses on its own steps only: it moves toward
    its own -0.6 (never taken over), not to the operator's -0.3."""
    torch.manual_seed(0)
    actor, spec = load_bundle_mlp(bundle)
    steps = _steps(synthetic_ticks(spec.edit_obs.dim))
    s = intervention_dataset(steps, BOUND)["s"]
    res = finetune(actor, steps, BOUND, FinetuneConfig(steps=150, batch=128, seed=0,
                                                       actor_data="own", beta=3.0, lr_actor=1e-3,
                                                       hidden=(32, 32)))
    with torch.no_grad():
        after = float(res.actor(s).mean())
    assert after < -0.4  # past the operator's -0.3, toward -0.6
    own = float((steps["intervened"] == 0).sum())
    assert res.stats["actor_transitions"] == own < res.stats["transitions"]
    with pytest.raises(ValueError, match="actor_data 'theirs' is not one of all, own"):
        FinetuneConfig(actor_data="theirs")


def _recording(s: np.ndarray, policy_out: np.ndarray, residual: np.ndarray,
               intervened: np.ndarray, start: np.ndarray, length: int) -> dict[str, np.ndarray]:
    """Control steps as :func:`load_transitions` gives them, from per-step arrays (``s`` (N, D),
    ``policy_out`` / ``residual`` (N, 1), ``intervened`` / ``start`` (N,)): episodes of
    ``length`` steps, chunk rows 0, ``command = BOUND * clip(residual, -1, 1)``; a takeover
    start on an episode's first step is dropped."""
    n = len(s)
    ep = np.arange(n) // length
    first = np.append(True, ep[1:] != ep[:-1])
    return {"edit_obs": s, "policy_out": policy_out, "residual": residual,
            "chunk_row": np.zeros((n, 1), np.float32),
            "command": BOUND * np.clip(residual, -1.0, 1.0), "intervened": intervened,
            "start": start & ~first, "episode": ep, "t": np.arange(n) * 0.02,
            "done": np.append(first[1:], True)}


def _noisy_own_steps(n: int, d: int, mu: float, std: float,
                     seed: int = 0) -> dict[str, np.ndarray]:
    """Own steps only: the network outputs ``mu`` everywhere, the loop adds N(0, std^2) and
    bounds the sum to [-1, 1] (``command = BOUND * clip(mu + noise)``), logging both."""
    rng = np.random.default_rng(seed)
    residual = (mu + std * rng.standard_normal(n)).astype(np.float32)[:, None]
    s = rng.standard_normal((n, d)).astype(np.float32)
    return _recording(s, np.full((n, 1), mu, np.float32), residual, np.zeros(n, bool),
                      np.zeros(n, bool), length=25)


def test_dataset_target_is_the_pre_bound_residual_on_own_steps_only():
    steps = _steps(synthetic_ticks(4, episodes=6))
    steps["residual"] = steps["residual"] + 0.25  # distinguishable from u
    data = intervention_dataset(steps, BOUND)
    own = data["intervened"] == 0
    torch.testing.assert_close(data["target"][own], data["u"][own] + 0.25)
    torch.testing.assert_close(data["target"][~own], data["u"][~own])  # the operator's u
    # an older recording (residual NaN) regresses on u
    steps["residual"][:] = np.nan
    torch.testing.assert_close(intervention_dataset(steps, BOUND)["target"],
                               intervention_dataset(steps, BOUND)["u"])


def test_the_bound_biases_u_and_the_residual_target_does_not(bundle):
    """Near the bound, clip(mu + noise) averages below mu: fitting u shrinks the policy, the
    residual keeps it (the drift measured over RLIF rounds)."""
    actor, spec = load_bundle_mlp(bundle)
    steps = _noisy_own_steps(2000, spec.edit_obs.dim, mu=0.85, std=0.6)
    data = intervention_dataset(steps, BOUND)
    assert float(data["u"].mean()) < 0.72  # E[clip(0.85 + 0.6 n)] ~ 0.68
    assert abs(float(data["target"].mean()) - 0.85) < 0.03
    cfg = FinetuneConfig(method="rlif", beta=0.0, actor_data="own", steps=500, seed=0,
                         lr_actor=3e-3)
    fitted = finetune(actor, steps, BOUND, cfg).actor
    with torch.no_grad():
        out = float(fitted(data["s"]).mean())
    assert abs(out - 0.85) < 0.06, out
    no_residual = dict(steps, residual=np.full_like(steps["residual"], np.nan))
    shrunk = finetune(actor, no_residual, BOUND, cfg).actor
    with torch.no_grad():
        assert float(shrunk(data["s"]).mean()) < out - 0.1


def test_anchor_keeps_the_policy_near_its_start(bundle):
    """The trust region: the further the data pull the policy (here toward 0.85 from a random
    start near 0), the more a larger anchor holds it at the start's outputs; 0 is off."""
    actor, spec = load_bundle_mlp(bundle)
    steps = _noisy_own_steps(1000, spec.edit_obs.dim, mu=0.85, std=0.6)
    s = intervention_dataset(steps, BOUND)["s"]
    with torch.no_grad():
        y0 = actor(s)
    drift = {}
    for w in (0.0, 10.0):
        cfg = FinetuneConfig(method="rlif", beta=0.0, actor_data="own", steps=300, seed=0,
                             lr_actor=3e-3, anchor=w)
        fitted = finetune(actor, steps, BOUND, cfg).actor
        with torch.no_grad():
            drift[w] = float((fitted(s) - y0).abs().mean())
    assert drift[0.0] > 0.5 and drift[10.0] < 0.25 * drift[0.0], drift
    with pytest.raises(ValueError, match="anchor must be a finite number >= 0"):
        FinetuneConfig(anchor=-1.0)


class _Const(torch.nn.Module):
    """An actor whose raw output is ``value`` everywhere (beyond the bound if asked)."""

    def __init__(self, value: float) -> None:
        super().__init__()
        self.value = value

    def forward(self, s: torch.Tensor) -> torch.Tensor:
        return torch.full((len(s), 1), self.value)


class _Bowl(torch.nn.Module):
    """``Q(s, u) = -(u - peak)^2`` with ``peak`` = the state's first element."""

    def forward(self, s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return -((u[:, 0] - s[:, 0]) ** 2)


def test_greedy_targets_take_the_best_grid_action_only_past_the_threshold():
    """Start at 0; the critic peaks at 0.5 (gain 0.25) in one state, at 0.1 (gain 0.01) in
    the other: with threshold 0.05 only the first changes, to exactly the grid's 0.5; the
    second keeps the start's raw output. A start beyond the bound keeps its raw value."""
    s = torch.tensor([[0.5, 0.0], [0.1, 0.0]])
    targets, changed = greedy_targets(_Const(0.0), _Bowl(), s, threshold=0.05, grid=21)
    assert changed.tolist() == [True, False]
    assert targets[:, 0].tolist() == pytest.approx([0.5, 0.0])
    targets, changed = greedy_targets(_Const(1.7), _Bowl(), s, threshold=10.0, grid=21)
    assert not changed.any() and targets[:, 0].tolist() == pytest.approx([1.7, 1.7])


def test_rlif_greedy_extraction_moves_away_from_the_intervened_action_unless_unsure(bundle):
    """On the synthetic recording (+0.6 always draws a takeover) the greedy step moves the
    policy's mean output down; with a margin no Q gap clears, it changes no state and the
    policy stays at its start."""
    torch.manual_seed(0)
    actor, spec = load_bundle_mlp(bundle)
    steps = _steps(synthetic_ticks(spec.edit_obs.dim))
    s = intervention_dataset(steps, BOUND)["s"]
    with torch.no_grad():
        y0 = actor(s)
    moved = finetune(actor, steps, BOUND, FinetuneConfig(steps=300, batch=128, seed=0,
                                                         extract="greedy", margin=0.5,
                                                         lr_actor=3e-3, hidden=(32, 32)))
    assert moved.stats["greedy_changed"] > 0.3, moved.stats
    kept = finetune(actor, steps, BOUND, FinetuneConfig(steps=300, batch=128, seed=0,
                                                        extract="greedy", margin=1e6,
                                                        lr_actor=3e-3, hidden=(32, 32)))
    assert kept.stats["greedy_changed"] == 0.0
    with torch.no_grad():
        assert float(moved.actor(s).mean()) < float(y0.mean()) - 0.1
        assert float((kept.actor(s) - y0).abs().mean()) < 0.05
    with pytest.raises(ValueError, match="margin must be a finite number >= 0"):
        FinetuneConfig(margin=-1.0)
    with pytest.raises(ValueError, match="grid must be >= 2"):
        FinetuneConfig(grid=1)


class _Shifted(_Bowl):
    """``Q(s, u) = -(u - peak)^2`` with the peak at the state's second element."""

    def forward(self, s: torch.Tensor, u: torch.Tensor) -> torch.Tensor:
        return -((u[:, 0] - s[:, 1]) ** 2)


def test_greedy_targets_with_critics_that_disagree_keep_the_start():
    """Two critics: in the first state both peak at 0.5 (the change is made); in the second
    one peaks at 0.5 and the other at the start's 0 (their mean's best, 0.2, loses under the
    second: no change). ``critics > 1`` is refused for the other extractions."""
    s = torch.tensor([[0.5, 0.5], [0.5, 0.0]])
    targets, changed = greedy_targets(_Const(0.0), [_Bowl(), _Shifted()], s, threshold=0.01,
                                      grid=21)
    assert changed.tolist() == [True, False]
    assert targets[:, 0].tolist() == pytest.approx([0.5, 0.0])
    with pytest.raises(ValueError, match="critics > 1 is used only by extract 'greedy'"):
        FinetuneConfig(critics=3)
    with pytest.raises(ValueError, match="critics must be >= 1"):
        FinetuneConfig(extract="greedy", critics=0)


def _region_steps(n: int = 4000, d: int = 4, own_in_region: float = 0.03,
                  seed: int = 0) -> dict[str, np.ndarray]:
    """The ``rlif-region-flip`` experiment in miniature. The region is ``s[0] > 0.5`` (about 30 % of
    the states); there a push below 0 draws a takeover on the next step (reward -1), a push above 0
    does not; outside it the action does not matter. The operator covers the region (a random +-0.8,
    bad to copy half the time), the policy holds only ``own_in_region`` of it; the policy's own
    steps play N(0, 0.3) outside and the start's wrong -0.5 (+ noise) inside."""
    rng = np.random.default_rng(seed)
    s = rng.standard_normal((n, d)).astype(np.float32)
    region = s[:, 0] > 0.5
    operator = region & (rng.random(n) > own_in_region)
    u = np.where(operator, rng.choice([-0.8, 0.8], n),
                 np.where(region, -0.5 + 0.3 * rng.standard_normal(n),
                          0.3 * rng.standard_normal(n))).clip(-1, 1).astype(np.float32)
    start = np.append(False, region[:-1] & (u[:-1] < 0))  # the next step starts a takeover
    return _recording(s, u[:, None], u[:, None], operator, start, length=20)


def _fit(net: torch.nn.Module, s: torch.Tensor, y: torch.Tensor, steps: int = 400) -> None:
    opt = torch.optim.Adam(net.parameters(), lr=1e-2)
    for _ in range(steps):
        loss = ((net(s) - y) ** 2).mean()
        opt.zero_grad()
        loss.backward()
        opt.step()


def test_greedy_repairs_an_operator_covered_region_that_own_steps_awr_cannot():
    """The order the ``rlif-region-flip`` experiment measured: a start that pushes the wrong way
    (-0.5) in a region the operator covers. Own-steps AWR has ~3 % of the region to reweight and
    leaves the push negative there; the greedy step, using the critic on every state, turns it
    positive and leaves the rest (where no action beats another) within 0.1 of the start."""
    from edgerl.policies.bc_planner import elu_mlp

    torch.manual_seed(0)
    steps = _region_steps()
    s = torch.as_tensor(steps["edit_obs"])
    region = s[:, 0] > 0.5
    actor = elu_mlp(4, (32, 32), 1)
    _fit(actor, s, torch.where(region, -0.5, 0.0)[:, None])
    with torch.no_grad():
        y0 = actor(s)[:, 0]
    assert float(y0[region].mean()) < -0.4
    common = dict(steps=600, batch=256, seed=0, hidden=(64, 64), lr_actor=3e-3)
    own = finetune(actor, steps, BOUND, FinetuneConfig(actor_data="own", **common)).actor
    greedy = finetune(actor, steps, BOUND,
                      FinetuneConfig(extract="greedy", margin=2.0, **common)).actor
    with torch.no_grad():
        y_own, y_greedy = own(s)[:, 0], greedy(s)[:, 0]
    assert float(y_own[region].mean()) < 0.0, float(y_own[region].mean())
    assert float(y_greedy[region].mean()) > 0.2, float(y_greedy[region].mean())
    assert float((y_greedy - y0)[~region].abs().mean()) < 0.1
