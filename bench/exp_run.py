"""`lineage exp run` overhead: a command that writes a lot, run directly and under lineage
(live pass-through, BLAKE3, zstd into the store), with lineage's peak memory.

    .venv/bin/python bench/exp_run.py [--runs 3] [--mib 256] [--max-log SIZE] [--workdir DIR]

`--max-log` is passed to `exp run` (default: its own, 64 MiB a stream; `none` keeps all).

Results go to bench/out/exp_run.json.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
from safetensors.numpy import save_file

REPO = Path(__file__).resolve().parents[1]
LINEAGE = [sys.executable, "-m", "lineage.cli"]


def commands(mib: int) -> dict[str, list[str]]:
    lines = mib * 2**20 // 9  # `seq` lines average a little over 8 bytes here
    return {
        "text (seq)": ["seq", "1", str(lines)],
        "random bytes": ["head", "-c", str(mib * 2**20), "/dev/urandom"],
    }


def measure(argv: list[str]) -> tuple[float, int]:
    """Wall time, and the peak RSS (KiB) of the largest process waited for: run in a fresh
    interpreter so the figure is this command's alone."""
    probe = ("import resource, subprocess, sys, time; t = time.perf_counter(); "
             "subprocess.run(sys.argv[1:], stdout=subprocess.DEVNULL, check=True); "
             "print(time.perf_counter() - t, "
             "resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss)")
    out = subprocess.run([sys.executable, "-c", probe, *argv], capture_output=True,
                         text=True, check=True).stdout.split()
    return float(out[0]), int(out[1])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--mib", type=int, default=256)
    parser.add_argument("--max-log", default=None)
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = args.workdir or Path(tempfile.mkdtemp(prefix="lineage-bench-exp-"))
    weights = work / "weights"
    weights.mkdir(parents=True, exist_ok=True)
    save_file({"w": np.zeros(16, np.float32)}, str(weights / "model.safetensors"))
    store = work / "store"
    subprocess.run([*LINEAGE, "--store", str(store), "init"], check=True, capture_output=True)
    results = {}
    for label, argv in commands(args.mib).items():
        direct = [measure(argv) for _ in range(args.runs)]
        cap = ["--max-log", args.max_log] if args.max_log else []
        under = [measure([*LINEAGE, "--store", str(store), "exp", "run", "--weights",
                          str(weights), "--revision", "bench", *cap, "--", *argv])
                 for _ in range(args.runs)]
        results[label] = {
            "direct_s": statistics.median(t for t, _ in direct),
            "lineage_s": statistics.median(t for t, _ in under),
            "lineage_peak_rss_mib": round(max(r for _, r in under) / 1024, 1),
            "runs": args.runs, "mib": args.mib, "max_log": args.max_log or "default",
        }
        print(label, results[label], flush=True)
    logs = sum(p.stat().st_size for p in (store / "logs").iterdir())
    results["stored_logs_mib"] = round(logs / 2**20, 1)
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "exp_run.json").write_text(json.dumps(results, indent=2))
    print(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
