"""Demo stage ``export``: the trained run to a bundle, with every parity check."""

from __future__ import annotations

import time
from pathlib import Path

from edgerl.apps.demo.config import DemoError, StageResult

__all__ = ["stage_export"]


def stage_export(run_dir: Path, bundle_dir: Path, seed: int) -> StageResult:
    """Export the run to a bundle; parity failure raises :class:`DemoError`."""
    from edgerl.export.bundle import collect_parity_inputs, export_bundle
    from edgerl.export.onnx_export import ExportError
    from edgerl.policies.runs import load_policy

    t0 = time.perf_counter()
    pol = load_policy(run_dir)
    env = pol.make_env(64, seed=seed)
    try:
        obs = collect_parity_inputs(pol.actor.input_dim, env=env, n_recorded=1000,
                                    n_random=1000, seed=seed, action_low=pol.spec.action.low,
                                    action_high=pol.spec.action.high)
    finally:
        env.close()
    try:
        report = export_bundle(pol.actor, pol.spec, bundle_dir, obs, planner=pol.planner)
    except ExportError as exc:
        raise DemoError(f"export parity failed: {exc}") from exc
    if not report.ok:
        raise DemoError(f"export parity failed: {report.rows()}")
    worst = max(p.max_abs_err for p in report.parity.values())
    data = {"bundle": str(bundle_dir), "ok": report.ok, "files": sorted(report.spec.files),
            "parity": {k: {"max_abs_err": p.max_abs_err, "ok": p.ok}
                       for k, p in report.parity.items()}}
    text = f"{len(report.parity)} parity checks ok, max abs err {worst:.1e}"
    return StageResult("export + parity", True, text, time.perf_counter() - t0, data)
