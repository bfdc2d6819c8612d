"""``--write-latency-model FILE``: planner delays measured by a run, written as a latency model
file for ``edgerl train --latency-model`` (``edgerl hil`` measures them on the host side,
``edgerl deploy`` from its recording)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from edgerl.apps.cli.errors import CliError

__all__ = ["write_latency_model"]


def write_latency_model(bundle: Path, latencies_s: Sequence[float], source: str,
                        out: Path) -> dict[str, Any]:
    """Measure ``latencies_s`` (planner delays, s) at ``bundle``'s control rate and period,
    write the latency model file ``out`` (``source`` names the measuring run: ``hil``,
    ``deploy``) and return its summary: file, samples, p50 / p99 (ms), delay distribution
    (probability per control step). ``CliError`` when there is nothing to measure."""
    from edgerl.contract.spec import load_bundle_manifest
    from edgerl.runtime.planners.latency_record import measure_latency, save_latency_file

    spec = load_bundle_manifest(bundle)
    try:
        measured = measure_latency(latencies_s, spec.control_hz, spec.timing.period_steps,
                                   source)
    except ValueError as exc:
        raise CliError(f"--write-latency-model: {exc}") from None
    save_latency_file(measured, out)
    return {"file": str(out), "samples": measured.samples, "p50_ms": measured.p50_ms,
            "p99_ms": measured.p99_ms,
            "delay_distribution": measured.latency.delay_distribution}
