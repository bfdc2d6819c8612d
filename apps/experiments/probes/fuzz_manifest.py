"""Fuzz the bundle manifest loader: only named ``BundleError`` subclasses may come out.

Writes a small valid bundle (``manifest.json``, a hashed ``policy.onnx`` stand-in of random
bytes, a passed ``parity.json``) into a scratch directory (``/dev/shm`` when present), then
feeds ``--n`` mutated manifests through :func:`edgerl.runtime.bundle_check.verify_bundle` (the
runtime's full manifest path: strict parse, schema, semantic bounds, paths, sha256, closed set,
parity; ``check_onnx`` off: the ONNX checks are tested on real models in tests/runtime).

Mutations (one or two per input, seeded): byte flips, byte insert/delete, truncation,
non-UTF-8 bytes, type swaps of a random field, deep nesting (up to 200,000 levels), huge or
non-finite numbers, deleted keys, duplicate keys, ``files`` entries that leave the bundle
(``../``, absolute, a symlink out).

Outcome of each input: ``loaded`` (still a valid manifest), a ``BundleError`` subclass
(counted by name), or a crash (any other exception: its type, message and the input's seed
are printed and the input saved under ``--crash-dir``). Prints one JSON summary line.

    python -m edgerl.apps.experiments.probes.fuzz_manifest --n 1000000 --seed 0
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import random
import sys
import tempfile
import time
import traceback
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from edgerl.contract.bundle_errors import BundleError
from edgerl.contract.edit_obs import EditObsConfig
from edgerl.contract.spec import (
    ActionSpec,
    ChunkSpec,
    ObservationSpec,
    PolicySpec,
    sha256_file,
)
from edgerl.runtime.bundle_check import verify_bundle

SWAPS: list[Any] = [None, True, 0, -1, 1e308, -1e-308, 2**70, "", "x" * 300, [], {}, [1, 2],
                    {"a": 1}, "NaN", -0.0, 1000.0, -1000.0, 1e9]
RAW_NUMBERS = [b"1e400", b"-1e400", b"NaN", b"Infinity", b"-Infinity", b"9" * 5000,
               b"-" + b"9" * 30, b"1e-400", b"0x10", b"01"]
ESCAPES = ["../outside.bin", "/etc/hostname", "link_out.bin", "a/../../b", "", ".",
           "C:\\x", "dir/./x", "policy.onnx\0", "\\\\server\\share"]


@dataclass
class FuzzResult:
    """Counts of one fuzz run."""

    n: int = 0
    seconds: float = 0.0
    cpu_seconds: float = 0.0
    outcomes: Counter = field(default_factory=Counter)
    crashes: list[dict[str, Any]] = field(default_factory=list)

    def summary(self) -> dict[str, Any]:
        return {"inputs": self.n, "seconds": round(self.seconds, 1),
                "cpu_seconds": round(self.cpu_seconds, 1),
                "rate_per_s": round(self.n / self.seconds, 1) if self.seconds else None,
                "rate_per_cpu_s": round(self.n / self.cpu_seconds, 1)
                if self.cpu_seconds else None,
                "crashes": len(self.crashes), "outcomes": dict(self.outcomes.most_common()),
                "first_crashes": self.crashes[:5]}


def write_seed_bundle(path: Path) -> bytes:
    """A valid bundle in ``path``; returns its manifest bytes."""
    path.mkdir(parents=True, exist_ok=True)
    (path / "policy.onnx").write_bytes(os.urandom(256))  # hashed only (check_onnx off)
    (path / "parity.json").write_text(json.dumps({"ok": True, "parity": {
        "policy_onnx": {"ok": True, "max_abs_err": 1e-7}}}))
    outside = path.parent / "outside.bin"
    outside.write_bytes(b"outside")
    if not (path / "link_out.bin").exists():
        os.symlink(outside, path / "link_out.bin")
    o, a = 6, 2
    spec = PolicySpec(
        task="fuzz", method="edit", control_hz=100.0,
        observation=ObservationSpec(names=[f"o{i}" for i in range(o)], units=["1"] * o,
                                    mean=[0.0] * o, std=[1.0] * o),
        action=ActionSpec(names=["a0", "a1"], units=["N", "N"], low=[-1.0] * a,
                          high=[1.0] * a, max_rate=[5.0] * a),
        chunk=ChunkSpec(horizon=10, dt_s=0.01, period_s=0.05, expected_latency_s=0.02),
        edit_obs=EditObsConfig(obs_dim=o, action_dim=a), residual_bound=0.2,
        files={n: sha256_file(path / n) for n in ("policy.onnx", "parity.json")},
        extra={"run": {"seed": 0, "metrics": [1.0, 2.0]}})
    data = spec.to_json().encode()
    (path / "manifest.json").write_bytes(data)
    verify_bundle(path)  # the seed itself must load
    return data


def _paths(doc: Any, prefix: tuple = ()) -> list[tuple]:
    out = [prefix]
    if isinstance(doc, dict):
        for k, v in doc.items():
            out += _paths(v, prefix + (k,))
    elif isinstance(doc, list):
        for i, v in enumerate(doc):
            out += _paths(v, prefix + (i,))
    return out


def _set(doc: Any, path: tuple, value: Any) -> Any:
    if not path:
        return value
    node = doc
    for key in path[:-1]:
        node = node[key]
    node[path[-1]] = value
    return doc


def mutate(seed_bytes: bytes, seed_doc: dict, rng: random.Random) -> bytes:
    """One mutated manifest."""
    kind = rng.randrange(10)
    if kind <= 2:  # byte-level: flips, insert/delete, truncate, non-UTF-8
        data = bytearray(seed_bytes)
        for _ in range(rng.randint(1, 8)):
            op = rng.randrange(4)
            i = rng.randrange(len(data)) if data else 0
            if op == 0 and data:
                data[i] ^= 1 << rng.randrange(8)
            elif op == 1:
                data[i:i] = bytes([rng.randrange(256)])
            elif op == 2 and data:
                del data[i]
            else:
                data[i:i] = rng.choice([b"\xff", b"\xc3", b"\xed\xa0\x80", b"\x00"])
        if rng.random() < 0.1:
            data = data[:rng.randrange(len(data) + 1)]
        return bytes(data)
    doc = json.loads(seed_bytes)
    if kind <= 5:  # type swaps / deletions on random fields
        for _ in range(rng.randint(1, 3)):
            path = rng.choice(_paths(doc)[1:])
            if rng.random() < 0.2 and isinstance(path[-1], str):
                parent = doc
                for key in path[:-1]:
                    parent = parent[key]
                parent.pop(path[-1], None)
                continue
            doc = _set(doc, path, copy.deepcopy(rng.choice(SWAPS)))
        return json.dumps(doc).encode()
    if kind == 6:  # deep nesting
        depth = rng.choice([33, 100, 1000, 5000, 200_000])
        path = rng.choice(_paths(doc)[1:])
        text = json.dumps(_set(doc, path, "@@DEEP@@"))
        return text.replace('"@@DEEP@@"', "[" * depth + "]" * depth).encode()
    if kind == 7:  # huge / non-finite numbers, written raw
        path = rng.choice(_paths(doc)[1:])
        text = json.dumps(_set(doc, path, "@@NUM@@")).encode()
        return text.replace(b'"@@NUM@@"', rng.choice(RAW_NUMBERS))
    if kind == 8:  # files entries that try to leave the bundle
        name = rng.choice(ESCAPES)
        digest = rng.choice([doc["files"]["policy.onnx"], "0" * 64, "zz"])
        doc["files"][name] = digest
        return json.dumps(doc).encode()
    text = json.dumps(doc)  # duplicate keys
    key = rng.choice(["files", "control_hz", "action", "task"])
    return text.replace("{", f'{{"{key}": {json.dumps(doc.get(key))}, ', 1).encode()


def run_fuzz(n: int, seed: int = 0, workdir: Path | None = None,
             crash_dir: Path | None = None, progress_every: int = 0) -> FuzzResult:
    """Feed ``n`` mutated manifests through ``verify_bundle``; returns the counts (progress
    to stderr every ``progress_every`` inputs when > 0)."""
    base = Path(tempfile.mkdtemp(prefix="fuzz_manifest_", dir=workdir))
    bundle = base / "bundle"
    seed_bytes = write_seed_bundle(bundle)
    seed_doc = json.loads(seed_bytes)
    manifest = bundle / "manifest.json"
    rng = random.Random(seed)
    result = FuzzResult()
    t0, c0 = time.perf_counter(), time.process_time()
    for i in range(n):
        if progress_every and i and i % progress_every == 0:
            print(f"fuzz_manifest: {i}/{n} in {time.perf_counter() - t0:.0f} s, crashes "
                  f"{len(result.crashes)}", file=sys.stderr, flush=True)
        data = mutate(seed_bytes, seed_doc, rng)
        manifest.write_bytes(data)
        try:
            verify_bundle(bundle, pubkey="", check_signature=False)
            result.outcomes["loaded"] += 1
        except BundleError as exc:
            result.outcomes[type(exc).__name__] += 1
        except Exception as exc:  # a crash is what the fuzzer looks for
            result.outcomes["CRASH:" + type(exc).__name__] += 1
            crash = {"input": i, "seed": seed, "error": type(exc).__name__,
                     "message": str(exc)[:200],
                     "where": traceback.format_exc().splitlines()[-3:-1]}
            result.crashes.append(crash)
            if crash_dir is not None:
                crash_dir.mkdir(parents=True, exist_ok=True)
                (crash_dir / f"crash_{seed}_{i}.json").write_bytes(data)
    result.n = n
    result.seconds = time.perf_counter() - t0
    result.cpu_seconds = time.process_time() - c0
    for p in sorted(base.rglob("*"), reverse=True):
        p.unlink() if p.is_file() or p.is_symlink() else p.rmdir()
    base.rmdir()
    return result


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--n", type=int, default=100_000, help="mutated manifests (default 1e5)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--crash-dir", type=Path, default=None, help="save crashing inputs here")
    p.add_argument("--progress", type=int, default=50_000, help="progress line every N inputs")
    args = p.parse_args(argv)
    shm = Path("/dev/shm")
    load0 = os.getloadavg()
    res = run_fuzz(args.n, args.seed, shm if shm.is_dir() else None, args.crash_dir,
                   args.progress)
    out = res.summary()
    out["loadavg_start"], out["loadavg_end"] = load0, os.getloadavg()
    print(json.dumps(out))
    return 1 if res.crashes else 0


if __name__ == "__main__":
    sys.exit(main())
