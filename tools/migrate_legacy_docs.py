"""One-off migration: the hand-written sections of docs/results.md, docs/benchmarks.md and
docs/results_full_obs.md (as git holds them at :data:`legacy_git.LEGACY`) into the experiment
store: each section becomes an experiment's notes (``notes/<name>.md``), each of its tables a
set of results rows (``results/<name>--tables.json``: one row per cell, the table's rendering
kept; ``{{table:ID}}`` marks its place in the notes), with the provenance of the commit that
added the section; an experiment without a config gets one (a record: its commands are in its
notes). The text is then edited by hand in the store (what the sections said about sessions
and issues becomes experiment names and dates).

Run from the repository root: ``python tools/migrate_legacy_docs.py``.
"""

from __future__ import annotations

import re
import sys
from typing import Any

from legacy_git import introduced, load_range, relative, show
from migrate_legacy_results import STORE, prov, write

from edgerl.apps.experiments.report.tables import parse_tables

R, B, F = "docs/results.md", "docs/benchmarks.md", "docs/results_full_obs.md"
#: (doc, a text the section's first line holds, experiment, question, title, status)
SECTIONS: list[tuple[str, str, str, str, str, str]] = [
    (R, "## Notes (read before quoting)", "planner-matters-grid", "planner-matters",
     "The planner-matters grid: the edit policy against its controls on five tasks",
     "planner matters on cartpole_goal, ball_goal and driving; ball_balance misses "
     "edit >= 0.9 x nodelay; on arm_reach the planner alone suffices"),
    (R, "## Measured latency into training", "measured-latency-retrain", "latency-model",
     "Measure the graph's latency, retrain on it, redeploy (cartpole, ROS 2)",
     "the measured-model bundle scores as well as the nominal one (9 of 10 in both runs)"),
    (R, "grids (2026-12-01, 2-core VM", "planner-matters-more-tasks", "planner-matters",
     "More tasks: ball_goal, driving at 300 iterations, gym InvertedPendulum",
     "ball_goal passes all three checks; on gym without a split the planner does not matter"),
    (R, "driving rerun (2026-12-01 03:38", "planner-matters-driving-rerun", "planner-matters",
     "driving rerun at 300 iterations on the asynchronous scheduler's code",
     "driving passes all three checks"),
    (R, "a learned planning-budget gate", "gate-sim-roads", "planning-gate",
     "A learned planning-budget gate in the sim, two roads", "the gate ties the best fixed "
     "budget; it does not beat it"),
    (R, "the planning-budget gate in the runtime", "gate-runtime-hil",
     "planning-gate", "The gate in the runtime through the HIL (one gate seed, six episodes)",
     "the gate's choices reach the planner; six episodes are too few to call a win"),
    (R, "RLIF: learning from operator interventions", "rlif-uniform-weaken", "rlif", "", ""),
    (R, "### Operators whose corrections should", "rlif-bad-to-copy-operators", "rlif", "", ""),
    (R, "RLIF with a start that is bad only in part", "rlif-region-flip-one-round", "rlif", "", ""),
    (R, "**Control: the same region-flip starts", "rlif-region-flip-good-operator", "rlif", "",
     ""),
    (R, "RLIF with exploration noise and several rounds", "rlif-region-flip-noise-rounds",
     "rlif", "", ""),
    (R, "**Step 1 run (", "rlif-region-flip-all-steps", "rlif", "", ""),
    (R, "the gate on a chicanes road", "gate-chicanes-price", "planning-gate",
     "The gate on a chicanes road with a compute price", "not met: the gate loses to the "
     "heuristic tuned on separate episodes"),
    (R, "a categorical gate head, and the oracle margin", "gate-oracle-margin", "planning-gate",
     "A categorical gate head, and the oracle margin of the driving scenarios",
     "the head was not the cause; no state-dependent choice beats the age heuristic there"),
    (R, "a calm-road scenario with rare kicks", "gate-calm-kicks", "planning-gate",
     "A calm road with rare kicks: a real oracle margin, and the gate trained on it",
     "the sampled gate beats the tuned heuristic on 2 of 3 seeds (200 iterations); the greedy "
     "gate fails"),
    (R, "the `calm_kicks` gate through the HIL runtime, sampled", "gate-hil-calm-kicks",
     "planning-gate",
     "The calm_kicks gate through the HIL runtime, sampled",
     "with the sim's committed prefix the sim result reproduces through the HIL: not a clear "
     "win (+6.5 over 3 seeds, one seed -22)"),
    (R, "the gate through the HIL with the sim's committed prefix", "gate-hil-paired-first-look",
     "planning-gate", "", ""),
    (R, "the gate through the HIL, a second look", "gate-hil-paired-second-look",
     "planning-gate", "", ""),
    (R, "the gate through the HIL, the third and last look", "gate-hil-paired-third-look",
     "planning-gate", "", ""),
    (R, "RLIF with the bad-to-copy operator and the noisy own-steps chain",
     "rlif-region-flip-startled-operator",
     "rlif", "", ""),
    (R, "RLIF with an operator screened to rescue", "rlif-region-flip-screened-operator",
     "rlif", "", ""),
    (R, "the same run with the actor's target unbiased", "rlif-region-flip-unbiased-target",
     "rlif", "", ""),
    (R, "the unbiased chain with a trust region", "rlif-region-flip-trust-region", "rlif", "", ""),
    (R, "the 14c chain from a weaker start", "rlif-region-flip-weaker-start", "rlif", "", ""),
    (R, "RLIF with the critic's greedy step on every recorded state", "rlif-region-flip-greedy",
     "rlif", "", ""),
    (R, "greedy refit from the start each round", "rlif-region-flip-greedy-from-start",
     "rlif", "", ""),
    (R, "15b's chain for five rounds", "rlif-region-flip-greedy-five-rounds", "rlif", "", ""),
    (F, "## Acceptance (D >= 100 ms)", "planner-matters-full-obs", "planner-matters",
     "The first grid, with the full observation (superseded: the edit policy read the goal)",
     "superseded: without an information split the planner does not matter"),
    (B, "## Summary on an idle machine", "make-bench-idle", "runtime-timing",
     "The headline benchmarks on an idle machine (make bench)", "every headline limit met "
     "(1 kHz bounds with the loop on SCHED_FIFO)"),
    (B, "## Ratios to each path's limit", "ratios-first-runs", "runtime-timing",
     "Each path as a ratio to its limit measured in the same run: the first runs",
     "met at load ~5; the sim rows not on a quiet machine"),
    (B, "### The edit loop's jitter and tick cost", "edit-loop-gil-hold", "runtime-timing",
     "The edit loop's jitter: the GIL held through the spin window", "loop/jitter_p99 met in "
     "3 of 3; loop/miss_rate in 2 of 3"),
    (B, "### `loop/miss_rate` judged on counts", "loop-miss-rate-counts", "runtime-timing",
     "loop/miss_rate judged on counts; the hil/rtt_p99 row", "loop/miss_rate met in 9 of 11 "
     "runs, 2 significantly above: not reliably met"),
    (B, "**Where a tick's time went.**", "edit-tick-cost", "runtime-timing",
     "Where a tick's time went, and the tick made cheaper", "step p50 142-162 us -> 44-73 us"),
    (B, "the ratios on a quiet machine", "ratios-quiet-machine",
     "runtime-timing", "The ratios on a quiet machine, and where the loop's misses come from",
     "the sim rows and loop/miss_rate are not met on a quiet machine"),
    (B, "the sim rows -- a same-state reference", "sim-same-state-reference", "sim-throughput",
     "The sim rows against a same-state reference, and arm_reach's Python cut",
     "arm_push and ball_balance met; arm_reach 0.70-0.71 (>= 0.75)"),
    (B, "every row in one run, twice, quiet", "ratios-every-row", "runtime-timing",
     "Every row in one run, twice, on a quiet machine; the two ROS 2 rows",
     "every row with a target met except sim/arm_reach"),
    (B, "arm_reach's task logic compiled", "sim-arm-reach-kernel",
     "sim-throughput", "", ""),
    (B, "### Time to 0.95 training success", "time-to-solve", "training-speed",
     "Time to 0.95 training success: the tuned CPU defaults against the baseline",
     "cartpole and ball_balance solve faster with their tuned defaults"),
    (B, "cartpole retuned", "cartpole-retune", "training-speed",
     "cartpole retuned: 64 envs and 64x64 networks", "cartpole's defaults changed"),
    (B, "## Simulation throughput", "sim-throughput-reference", "sim-throughput",
     "Simulation throughput (edgerl bench sim)", "measured"),
    (B, "## Training", "training-throughput", "training-speed", "Training throughput",
     "measured"),
    (B, "## Export parity", "export-parity", "export-parity",
     "Export parity and exporter comparison", "every exported network within tolerance"),
    (B, "## Runtime loop", "runtime-loop", "runtime-timing",
     "The runtime loop (edgerl bench loop)", "measured"),
    (B, "## Planner latency", "planner-latency", "planner-latency",
     "Planner latency (edgerl bench planner)", "measured"),
    (B, "## ROS 2 end-to-end", "ros2-e2e", "ros2-latency", "ROS 2 end to end (edgerl deploy)",
     "measured"),
    (B, "## Serial / HIL", "serial-hil", "serial-hil", "Serial link and HIL (edgerl bench "
     "serial, edgerl hil)", "measured"),
    (B, "## GPU", "gpu-check", "gpu", "GPU check", "measured"),
    (B, "## Demo", "demo-run", "demo", "The demo (make demo, edgerl demo)", "measured"),
]


def sections() -> list[tuple[tuple, str]]:
    """Each catalogue entry with its text (up to the next entry of the same doc, or the end)."""
    out = []
    for doc in (R, B, F):
        text = show(doc)
        entries = [e for e in SECTIONS if e[0] == doc]
        starts = []
        for e in entries:
            hits = [m.start() + 1 for m in re.finditer(r"\n(#{2,3} |\*\*)[^\n]*", text)
                    if e[1] in m.group(0)]
            assert len(hits) == 1, (e[1], len(hits))
            starts.append(hits[0])
        order = sorted(zip(starts, entries), key=lambda x: x[0])
        for k, (start, e) in enumerate(order):
            end = order[k + 1][0] if k + 1 < len(order) else len(text)
            out.append((e, text[start:end]))
    return out


def first_command(text: str) -> str:
    """The first fenced code block's lines (comments dropped), else the first quoted command."""
    m = re.search(r"```\n(.*?)```", text, flags=re.S)
    if m:
        lines = [re.sub(r"\s+#.*$", "", x).rstrip() for x in m.group(1).splitlines()]
        return "\n".join(x for x in lines if x.strip())
    m = re.search(r"`((?:edgerl|python|\.venv/bin/python|bash|make)\s[^`]+)`", text)
    return m.group(1) if m else ""


def toml_for(name: str, question: str, title: str, status: str, date: str) -> str:
    esc = title.replace('"', '\\"'), status.replace('"', '\\"')
    return (f'[experiment]\nname = "{name}"\nquestion = "{question}"\ntitle = "{esc[0]}"\n'
            f'date = "{date}"\nstatus = "{esc[1]}"\n')


def migrate_section(entry: tuple, text: str) -> None:
    doc, marker, name, question, title, status = entry
    sha, date = introduced(text.split("\n", 1)[0], doc)
    body, tables = parse_tables(text)
    folder = STORE / question
    (folder / "notes").mkdir(parents=True, exist_ok=True)
    notes = folder / "notes" / f"{name}.md"
    notes.write_text(relative(body).rstrip() + "\n")
    if tables:
        rows: list[dict[str, Any]] = [r for t in tables for r in t]
        cmd = first_command(text) or f"(as the notes of {name} describe)"
        write(question, name, rows, prov(cmd, sha, date, load_range(text)), part="tables",
              seeds=[], source=f"{doc} (the tables of its section)")
    config = folder / f"{name}.toml"
    if not config.exists():
        config.write_text(toml_for(name, question, title or name, status or "recorded",
                                   date[:10]))


#: numbers the README quotes from docs outside the store: (experiment, question, metric, text as
#: quoted, the README text that dates it, the doc it comes from)
QUOTES = [
    ("deploy-trigger", "ros2-latency", "setup", "50 and 200 Hz, state trigger, SCHED_FIFO (3 "
     "runs each)", "p99 0.54-0.76 ms", "docs/ros2.md"),
    ("deploy-trigger", "ros2-latency", "compose_e2e_p99", "0.54-0.76 ms", "p99 0.54-0.76 ms",
     "docs/ros2.md"),
    ("deploy-trigger", "ros2-latency", "separate_e2e_p99", "1.6-3.6 ms", "p99 0.54-0.76 ms",
     "docs/ros2.md"),
    ("deploy-trigger", "ros2-latency", "rclpy_roundtrip_p50", "0.8-1.6 ms", "p99 0.54-0.76 ms",
     "docs/ros2.md"),
    ("export-parity", "export-parity", "parity_tests_max_abs_error", "5e-7",
     "≤ 3.4e-6 on the demo", "docs/export.md"),
    ("export-parity", "export-parity", "demo_bundle_max_abs_error", "3.4e-6",
     "≤ 3.4e-6 on the demo", "docs/export.md"),
    ("export-parity", "export-parity", "tolerance", "1e-5", "≤ 3.4e-6 on the demo",
     "docs/export.md"),
    ("serial-hil", "serial-hil", "cmd_rtt_idle", "p50 78 µs, p99 122 µs",
     "p50 78 µs, p99 122 µs", "docs/firmware.md"),
    ("serial-hil", "serial-hil", "cmd_rtt_loaded_p99", "6.7 ms", "p50 78 µs, p99 122 µs",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "corruption_episodes", "5/5", "5/5 episodes; every corrupted",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "hil_rtt_ratio_host", "0.35-0.99", "0.35-0.99 (host)",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "hil_rtt_ratio_qemu", "0.55-1.31", "0.35-0.99 (host)",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "within_2x", "10 of 10", "0.35-0.99 (host)",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "under_load", "23 of 30", "0.35-0.99 (host)",
     "docs/firmware.md"),
    ("serial-hil", "serial-hil", "watchdog_delivery_delay", "44-250 µs",
     "44-250 µs at SCHED_FIFO", "docs/firmware.md"),
    ("planner-latency", "planner-latency", "held_out_paraphrases", "100 %",
     "ONNX vs torch cosine 1.2e-7", "docs/planner.md"),
    ("planner-latency", "planner-latency", "onnx_vs_torch_cosine", "1.2e-7",
     "ONNX vs torch cosine 1.2e-7", "docs/planner.md"),
]


#: the command the quoting doc gives for a number, where it gives one
COMMANDS = {
    **dict.fromkeys(("setup", "compose_e2e_p99", "separate_e2e_p99", "rclpy_roundtrip_p50"),
                    "benchmarks/deploy_trigger.sh OUT 8"),
    **dict.fromkeys(("parity_tests_max_abs_error", "demo_bundle_max_abs_error", "tolerance"),
                    "python benchmarks/export_parity.py"),
    "cmd_rtt_idle": "edgerl bench serial --count 5000",
    "cmd_rtt_loaded_p99": "edgerl bench serial --count 5000",
    "corruption_episodes": "edgerl hil --faults corrupt=0.01,seed=0 --episodes 5 --json",
    **dict.fromkeys(("hil_rtt_ratio_host", "hil_rtt_ratio_qemu", "within_2x", "under_load"),
                    "python benchmarks/hil_rt_ratio.py --runs 5 --rt-priority 10"),
}


def readme_quotes() -> None:
    """The README's numbers measured outside the store, as ``--quoted`` results files (the
    commit that put each into the README; its row says which doc measured it)."""
    groups: dict[tuple[str, str], list[tuple]] = {}
    for q in QUOTES:
        groups.setdefault((q[0], q[1]), []).append(q)
    for (name, question), quotes in groups.items():
        rows, first = [], None
        for _n, _q, metric, value, anchor, doc in quotes:
            sha, date = introduced(anchor, "README.md")
            p = prov(COMMANDS.get(metric, f"(quoted in README.md from {doc})"), sha, date, None)
            first = first or p
            same = (p.commit, p.command) == (first.commit, first.command)
            rows.append({"source": doc, "metric": metric, "value": value,
                         **({} if same else {"provenance": p.to_dict()})})
        write(question, name, rows, first, part="quoted", seeds=[],
              source="README.md (the numbers it quotes)")


def main() -> None:
    readme_quotes()
    for entry, text in sections():
        migrate_section(entry, text)
        sys.stdout.write(entry[2] + "\n")


if __name__ == "__main__":
    main()
