"""Print the table of the ``deploy_trigger`` driver's output folder: deploy e2e beside the bare
rclpy round trip at the same pace, and node tick compute beside `bench loop`'s tick compute from
the same run (ratio; the reference runs before and after each deploy, so its own spread shows),
with the load each ran under. ``bench_median_p50_us`` / ``node_over_bench_median``: the median over
every reference run of the row (REFS before and REFS after the deploy), the denominator least
moved by one reference run's minute; none is dropped.

Usage: python -m edgerl.apps.experiments.probes.deploy_trigger_table OUT_DIR [--json]
"""

from __future__ import annotations

import json
import statistics
import sys
from pathlib import Path


def _round(x: float | None) -> int | None:
    return None if x is None or x != x else round(x)


def _ms(us: float | None) -> float | None:
    return None if us is None or us != us else round(us / 1e3, 2)


def _ratio(a: float | None, b: float | None) -> float | None:
    return None if not a or not b or a != a or b != b else round(a / b, 2)


def _references(out: Path, tag: str) -> list[dict]:
    """Every ``bench loop`` reference of a row: benchpre[K]_TAG (before), bench_TAG and
    benchpostK_TAG (after), in run order."""
    pre, post = [], []
    for k in range(1, 100):
        before = out / f"benchpre{'' if k == 1 else k}_{tag}.json"
        after = out / (f"bench_{tag}.json" if k == 1 else f"benchpost{k}_{tag}.json")
        if not (before.is_file() or after.is_file()):
            break
        pre += [json.loads(before.read_text())] if before.is_file() else []
        post += [json.loads(after.read_text())] if after.is_file() else []
    return pre + post


def rows(out: Path) -> list[dict]:
    """One row per deploy_*.json with its bench_*.json partner."""
    table = []
    for dep in sorted(out.glob("deploy_*.json")):
        tag = dep.stem[len("deploy_"):]
        bench = json.loads((out / f"bench_{tag}.json").read_text())
        pre_file = out / f"benchpre_{tag}.json"
        pre = json.loads(pre_file.read_text()) if pre_file.is_file() else {}
        d = json.loads(dep.read_text())
        load = (out / f"load_{tag}.txt").read_text().split("load:")[-1].split()
        b50 = bench.get("tick_compute_p50_us")
        refs = [r["tick_compute_p50_us"] for r in _references(out, tag)]
        mid = statistics.median(refs) if refs else None
        hz = tag.split("_")[0]
        rt_file = out / f"roundtrip_{hz}.json"
        floor = json.loads(rt_file.read_text()) if rt_file.is_file() else {}
        table.append({
            "config": tag, "load1": float(load[0]),
            "rclpy_rtt_p50_ms": _ms(floor.get("rtt_p50_us")),
            "rclpy_rtt_p99_ms": _ms(floor.get("rtt_p99_us")),
            "cmd_rate_hz": round(d["cmd_rate_hz"], 1),
            "e2e_p50_ms": round(d["e2e_latency_p50_us"] / 1e3, 2),
            "e2e_p99_ms": round(d["e2e_latency_p99_us"] / 1e3, 2),
            "node_tick_p50_us": round(d["edit_tick_compute_p50_us"]),
            "node_publish_p50_us": _round(d.get("edit_publish_p50_us")),
            "node_policy_p50_us": _round(d.get("edit_tick_policy_p50_us")),
            "bench_tick_p50_us": _round(b50),
            "bench_before_p50_us": _round(pre.get("tick_compute_p50_us")),
            "bench_refs": len(refs),
            "bench_median_p50_us": _round(mid),
            "node_over_bench_median": _ratio(d["edit_tick_compute_p50_us"], mid),
            "node_over_bench": _ratio(d["edit_tick_compute_p50_us"], b50),
            "node_over_bench_before": _ratio(d["edit_tick_compute_p50_us"],
                                             pre.get("tick_compute_p50_us")),
            "policy_over_bench": _ratio(d.get("edit_tick_policy_p50_us"), b50),
            "rt_applied": d.get("edit_rt_priority_applied"),
            "inline": d.get("edit_inline_tick"),
        })
    return table


def main(argv: list[str]) -> int:
    table = rows(Path(argv[0]))
    if "--json" in argv:
        print(json.dumps(table, indent=1))
        return 0
    keys = list(table[0]) if table else []
    print("| " + " | ".join(keys) + " |")
    print("|" + "---|" * len(keys))
    for r in table:
        print("| " + " | ".join(str(r[k]) for k in keys) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
