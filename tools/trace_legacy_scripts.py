"""Trace what a legacy experiment run script ran, from its text at a git revision.

The run scripts that used to live in ``benchmarks/`` (shell scripts around
``benchmarks/rlif_experiment.py``, ``rlif_reeval.py``, ``gate_hil_compare.py`` ...) are now
declared configs of the drivers in ``edgerl.apps.experiments``. To check that a config still
issues what its script ran, this tool runs the script as it is in git, in a scratch folder, with
stand-ins for every program it calls: the Python interpreter logs each ``python -m edgerl.apps
VERB ...`` as ``edgerl VERB ...`` and answers with a stand-in JSON object; the three Python
tools above are run for real (their own code, from the same revision) with their subprocesses
and their in-process steps (weakening a bundle, counting BC targets) logged instead of run;
``cp`` and ``mkdir`` act; ``date``, ``uptime``, ``sleep``, ``git`` and ``taskset`` are logged or
ignored. Seeds that a script ran in parallel (``&``) run one after another here.

The normalised log (one step a line: ``edgerl ...``, ``cp ...``, ``weaken-region ...``,
``bc-targets ...``, ``git checkout ...``, ``python ...``) is what
``tests/apps/experiments/test_legacy_scripts.py`` compares a config's ``--dry-run`` with.

Each experiment config that replaced a script names it in its ``[legacy]`` table (``script``
or ``line``, and ``args``, ``env``, ``precreate``: the files the script expected to exist when
it ran; or a list of such invocations, ``[[legacy.runs]]``, run one after another);
``--configs`` traces every one of them into ``legacy/<name>.commands`` beside it.

Usage (repo root)::

    python tools/trace_legacy_scripts.py --configs experiments [--commit REV]

    python tools/trace_legacy_scripts.py --commit REV --script benchmarks/rlif13/run13.sh \\
        [--arg A ...] [--env K=V ...] [--precreate PATH ...] [--out FILE]
    python tools/trace_legacy_scripts.py --commit REV \\
        --line 'python benchmarks/rlif_experiment.py ...'
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

#: an interpreter named by an absolute path into one machine's checkout (the old scripts had one)
MACHINE_PY = re.compile(r"(?<![\w.$])(?:/[\w.-]+)+/\.venv/bin/python")
EXPANDED = ("rlif_experiment.py", "rlif_reeval.py", "gate_hil_compare.py")

#: the stand-in interpreter: logs, answers, and runs the three tools with logged subprocesses
STUB = r'''#!__REAL_PY__
import io, json, os, runpy, shlex, subprocess, sys, importlib.util
from pathlib import Path
LOG = os.environ["TRACE_LOG"]; ROOT = os.environ["TRACE_ROOT"]
PREFIX = os.environ.get("TRACE_PREFIX", "")
FAKE = {"hil": {"success": 0.5, "steps": 100, "operator_takeovers": 1, "operator_records": {},
                "recorded_ticks": 100, "episode_returns": [1.0, 2.0],
                "episode_plan_costs": [0.0, 0.0], "return_minus_cost_mean": 1.5,
                "gate_decided": {"keep": 1}, "plan_cost": 0.0},
        "finetune": {"method": "stub", "recordings": []},
        "bench": {"deadline_misses": 0, "skipped_ticks": 0, "max_late_us": 0.0,
                  "tick_compute_p50_us": 0.0}}

def rel(p):
    p = str(p)
    return os.path.relpath(p, ROOT) if p.startswith(ROOT) else p

def redirect():
    try:
        target = os.readlink("/proc/self/fd/1")
    except OSError:
        return ""
    if not target.startswith(ROOT) or not os.path.isfile(target):
        return ""
    flags = 0
    for line in open("/proc/self/fdinfo/1"):
        if line.startswith("flags:"):
            flags = int(line.split()[1], 8)
    return (" >> " if flags & os.O_APPEND else " > ") + rel(target)

def log(text, out=""):
    with open(LOG, "a") as fh:
        fh.write(json.dumps((PREFIX + " " if PREFIX else "") + text + out) + "\n")

def fake_cli(args):
    """The stand-in answer; the files the command names as its outputs are made."""
    for flag in ("--out", "--record", "--json-out", "--write-latency-model"):
        if flag in args[:-1]:
            target = Path(args[args.index(flag) + 1])
            if flag == "--out":
                target.mkdir(parents=True, exist_ok=True)
                (target / "manifest.json").write_text("{}")
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text("{}")
    verb = args[0] if args else ""
    return json.dumps(FAKE.get(verb, {}))

def edgerl_line(args):
    return "edgerl " + shlex.join([rel(a) for a in args])

class Proc:
    def __init__(self, out):
        self.returncode, self.stdout, self.stderr = 0, out, ""

def fake_run(cmd, *a, **k):
    cmd = [str(c) for c in cmd]
    prefix = []
    while cmd and cmd[0] == "nice":
        prefix, cmd = prefix + cmd[:3], cmd[3:]
    pre = " ".join(prefix) + " " if prefix else ""
    if cmd[1:3] == ["-m", "edgerl.apps"]:
        log(pre + edgerl_line(cmd[3:]))
        return Proc(fake_cli(cmd[3:]))
    log(pre + "python " + shlex.join([rel(c) for c in cmd[1:]]))
    return Proc("{}")

def load_tool(path):
    name = Path(path).stem
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    sys.modules[name] = mod
    spec.loader.exec_module(mod)
    mod.subprocess.run = fake_run
    if name == "rlif_experiment":
        def weaken_region(base, out, region, obs_rec, seed):
            log("weaken-region " + shlex.join(["--base", rel(base), "--out", rel(out),
                "--region", region, "--recording", rel(obs_rec), "--seed", str(seed)]))
            Path(out).mkdir(parents=True, exist_ok=True)
            return {"region_fraction": 0.1}
        def weaken(base, out, shrink, noise, seed):
            log("weaken " + shlex.join(["--base", rel(base), "--out", rel(out), "--shrink",
                str(shrink), "--noise", str(noise), "--seed", str(seed)]))
            Path(out).mkdir(parents=True, exist_ok=True)
        def bc_targets(recs, base):
            log("bc-targets " + shlex.join(["--base", rel(base), "--recordings",
                *[rel(r) for r in recs]]))
            return {"override_steps": 1, "sign_agrees_with_base": 0.5, "mse_to_base": 1.0,
                    "mean_u": 0.0, "mean_abs_u": 0.0, "at_bound": 0.0, "base_mean_u": 0.0}
        mod._weaken_region, mod._weaken, mod._bc_targets = weaken_region, weaken, bc_targets
    return mod

sys.path.insert(0, os.path.join(ROOT, "benchmarks"))
args = sys.argv[1:]
out = redirect()
if args[:2] == ["-m", "edgerl.apps"]:
    log(edgerl_line(args[2:]), out)
    if "--json" in args:
        print(fake_cli(args[2:]))
elif args[:1] == ["-c"]:
    log("python -c " + shlex.quote(args[1]), out)
    if not sys.stdin.isatty():
        data = sys.stdin.read()
        sys.stdin = io.StringIO(data)
    try:
        exec(compile(args[1], "<-c>", "exec"), {"__name__": "__main__"})
    except BaseException:
        pass
elif args[:1] == ["-"]:
    code = sys.stdin.read()
    for name in ("rlif_experiment",):
        load_tool(os.path.join(ROOT, "benchmarks", name + ".py"))
    sys.argv = ["-", *args[1:]]
    exec(compile(code, "<stdin>", "exec"), {"__name__": "__main__"})
elif args and args[0].endswith(tuple(os.environ["TRACE_EXPANDED"].split(","))):
    mod = load_tool(args[0])
    sys.argv = [args[0], *args[1:]]
    try:
        mod.main()
    except SystemExit:
        pass
else:
    log("python " + shlex.join([rel(a) for a in args]), out)
'''

#: ``cp`` logs, makes a missing source (the script's inputs existed when it ran: a folder
#: with a bundle's manifest and a finished round's record, or a file), then copies
CP_SHIM = r"""echo "cp $*" | sed "s#$TRACE_ROOT/##g" >> "$TRACE_LOG"
args=("$@"); n=${#args[@]}; rec=0
for ((i = 0; i < n - 1; i++)); do
  a=${args[$i]}
  if [ "$a" = "-r" ]; then rec=1; continue; fi
  if [ ! -e "$a" ]; then
    if [ $rec = 1 ]; then
      /bin/mkdir -p "$a"; echo '{}' > "$a/manifest.json"; echo '{}' > "$a/round.json"
    else /bin/mkdir -p "$(dirname "$a")"; echo '{}' > "$a"; fi
  fi
done
exec /bin/cp "$@"
"""

SHIMS = {
    # logged, then run for real
    "cp": CP_SHIM,
    # run for real, not logged
    "mkdir": 'exec /bin/mkdir "$@"',
    # a prefix the stub writes in front of what it logs
    "nice": 'n=$2; shift 2; TRACE_PREFIX="${TRACE_PREFIX:+$TRACE_PREFIX }nice -n $n" exec "$@"',
    "taskset": 'cpus=$2; shift 2; TRACE_PREFIX="taskset -c $cpus" exec "$@"',
    "git": 'echo "git $*" >> "$TRACE_LOG"; exit 0',
    "date": 'echo 00:00:00',
    "uptime": 'exit 0',
    "sleep": 'exit 0',
    "tail": 'exit 0',
}


def write_exe(path: Path, text: str) -> None:
    path.write_text(text)
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)


def sequential(script: str) -> str:
    """The script with its background jobs run in the foreground, the machine's interpreter
    path replaced by the stand-in's."""
    text = MACHINE_PY.sub("$TRACE_PY", script)
    return re.sub(r"(?<![&>|<])[ \t]&(?=[ \t]|$)", " ;", text, flags=re.M)


#: kept unless a rule below drops them
DROP = (re.compile(r"^(nice -n \d+ )?python -$"), re.compile(r"^git (diff|status)\b"))


def keep(line: str) -> bool:
    """Whether a raw log line is a step of the record (see the module docstring)."""
    if any(rx.search(line) for rx in DROP):
        return False
    m = re.match(r"^python -c (.*?)( >>? \S+)?$", line, flags=re.S)
    if m:
        code = shlex.split(m.group(1))[0]
        if "sys.stdin" in code:
            return False  # parses the output piped into it: bookkeeping, not a step
        writes = bool(m.group(2)) or "write" in code
        return writes or "edgerl" in code or "tests.helpers" in code
    return True


def trace(commit: str, script: str | None, line: str | None, args: list[str],
          env: dict[str, str], precreate: list[str], root: Path) -> list[str]:
    with tempfile.TemporaryDirectory(prefix="legacy-trace-") as tmp:
        t = Path(tmp)
        archive = subprocess.run(["git", "archive", commit, "benchmarks"], cwd=root,
                                 capture_output=True, check=True).stdout
        subprocess.run(["tar", "-x", "-C", str(t)], input=archive, check=True)
        for sh in (t / "benchmarks").rglob("*.sh"):  # nested scripts run one job at a time too
            sh.write_text(sequential(sh.read_text()))
        shims = t / ".shims"
        shims.mkdir()
        stub = shims / "python"
        write_exe(stub, STUB.replace("__REAL_PY__", sys.executable))
        for name in ("python3",):
            write_exe(shims / name, f'#!/bin/sh\nexec "{stub}" "$@"\n')
        for name, body in SHIMS.items():
            write_exe(shims / name, f"#!/bin/bash\n{body}\n")
        (t / ".venv/bin").mkdir(parents=True)
        write_exe(t / ".venv/bin/python", f'#!/bin/sh\nexec "{stub}" "$@"\n')
        for p in precreate:
            p, _, content = p.partition("=")
            target = t / p
            if p.endswith("/"):
                target.mkdir(parents=True, exist_ok=True)
            else:
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_text(content or "{}")
        if script is not None:
            cmd = ["bash", str(t / script), *args]
        else:
            assert line is not None
            (t / "line.sh").write_text("#!/bin/bash\n" + sequential(line) + "\n")
            cmd = ["bash", str(t / "line.sh")]
        log = t / ".trace.log"
        log.write_text("")
        full_env = {**os.environ, **env, "PATH": f"{shims}:{os.environ['PATH']}",
                    "TRACE_LOG": str(log), "TRACE_ROOT": str(t), "TRACE_PY": str(stub),
                    "TRACE_EXPANDED": ",".join(EXPANDED)}
        subprocess.run(cmd, cwd=t, env=full_env, stdin=subprocess.DEVNULL,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, timeout=600)
        raw = [json.loads(x) if x.startswith('"') else x
               for x in log.read_text().splitlines() if x.strip()]
    return [x.replace("\n", "\\n") for x in raw if keep(x)]


#: the last revision holding the legacy scripts (benchmarks/ before they became configs)
LEGACY_COMMIT = "915e233d9f58ef2f8603445e42834e954219216c"


def trace_configs(store: Path, commit: str, root: Path) -> list[Path]:
    """Trace the ``[legacy]`` invocation of every config under ``store``; the files written."""
    import tomllib

    written = []
    for cfg in sorted(store.glob("*/*.toml")):
        legacy = tomllib.loads(cfg.read_text()).get("legacy")
        if not legacy:
            continue
        runs = legacy.get("runs") or [legacy]
        lines, sources = [], []
        for inv in runs:
            if not (inv.get("script") or inv.get("line")):
                continue
            lines += trace(inv.get("commit", commit), inv.get("script"), inv.get("line"),
                           [str(a) for a in inv.get("args", [])],
                           {k: str(v) for k, v in inv.get("env", {}).items()},
                           list(inv.get("precreate", [])), root)
            env = " ".join(f"{k}={v}" for k, v in inv.get("env", {}).items())
            sources.append((env + " " if env else "") + (
                inv.get("script") and " ".join([inv["script"], *map(str, inv.get("args", []))])
                or inv["line"]))
        if not sources:
            continue
        head = [f"# what ran, traced from the scripts at {commit[:12]} (one step a line):"]
        head += [f"#   {src}" for src in sources]
        head += ["# regenerate: python tools/trace_legacy_scripts.py --configs experiments"]
        out = cfg.parent / "legacy" / f"{cfg.stem}.commands"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text("\n".join(head + lines) + "\n")
        written.append(out)
    return written


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--commit", default=LEGACY_COMMIT,
                   help="the git revision the scripts are read at")
    src = p.add_mutually_exclusive_group(required=True)
    src.add_argument("--configs", type=Path, help="trace every config's [legacy] invocation")
    src.add_argument("--script", help="the script's path at that revision")
    src.add_argument("--line", help="a one-line command (a documented invocation)")
    p.add_argument("--arg", action="append", default=[], help="the script's arguments")
    p.add_argument("--env", action="append", default=[], metavar="K=V")
    p.add_argument("--precreate", action="append", default=[], metavar="PATH",
                   help="a file (or folder, ending in /) the script expects to exist; "
                        "PATH=TEXT gives the file's content")
    p.add_argument("--out", type=Path, help="write the trace here (default: print)")
    a = p.parse_args()
    if a.configs:
        for path in trace_configs(a.configs, a.commit, Path.cwd()):
            sys.stdout.write(f"{path}\n")
        return 0
    env = dict(kv.split("=", 1) for kv in a.env)
    lines = trace(a.commit, a.script, a.line, a.arg, env, a.precreate, Path.cwd())
    text = "\n".join(lines) + "\n"
    if a.out:
        a.out.parent.mkdir(parents=True, exist_ok=True)
        a.out.write_text(text)
    else:
        sys.stdout.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
