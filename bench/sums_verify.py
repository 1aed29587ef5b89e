"""SHA256SUMS benchmark: `lineage verify --sums LIST DIR` of a folder of many small files,
end to end (the console script in a fresh process, its --json answer written out), and its
parts in process: reading the list, checking it against the folder, the folder model.

    .venv/bin/python bench/sums_verify.py [--files 30000 300000] [--runs 3] [--workdir DIR]

The folder holds N files of a few bytes in sub-folders of 1,000 (a data set's shards, a
checkpoint's many small tensors), the list names each once, as `sha256sum` writes it. Small
files make the per-entry cost visible: hashing the bytes is a small part of it. The console
script and `sha256sum -c` run in turn, and each run's ratio is kept (the machine may be
shared: the median ratio of paired runs moves least). `verify_sums` reads every file, as a
caller without a folder model does; `verify_sums_after_read_folder` hashes the small files
the folder model read whole, as `verify` does. Results go to bench/out/sums_verify.json.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from runs import timed  # bench/ is on sys.path when these scripts run

REPO = Path(__file__).resolve().parents[1]


def folder_with_list(root: Path, files: int) -> tuple[Path, Path]:
    folder, sums = root / f"files-{files}", root / f"SHA256SUMS-{files}"
    if sums.exists():
        return folder, sums
    lines = []
    for i in range(files):
        sub = folder / f"shard-{i // 1000:04d}"
        if i % 1000 == 0:
            sub.mkdir(parents=True, exist_ok=True)
        data = f"record {i}\n".encode()
        (sub / f"part-{i:07d}.txt").write_bytes(data)
        lines.append(f"{hashlib.sha256(data).hexdigest()}  {sub.name}/part-{i:07d}.txt\n")
    sums.write_text("".join(lines))
    return folder, sums


def end_to_end(folder: Path, sums: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "lineage.cli", "verify", "--sums", str(sums),
                           str(folder), "--json"], capture_output=True, check=False)
    answer = json.loads(done.stdout)
    # no weights: the list is the verdict
    assert done.returncode == 0 and answer["checksums"]["ok"], done.stderr
    assert answer["structure"]["warnings"][0]["rule"] == "no-weights"


def measure(folder: Path, sums: Path, files: int, runs: int) -> dict[str, object]:
    from lineage.diligence.verify import verify_folder
    from lineage.formats.folder import read_folder
    from lineage.formats.sha256sums import read_sums, verify_sums

    entries = read_sums(sums)
    contents = read_folder(folder).contents
    return {
        "files": files, "list_bytes": sums.stat().st_size,
        **against_sha256sum(folder, sums, runs),
        "verify_folder": timed(lambda: verify_folder(folder, sums=sums), runs),
        "read_sums": timed(lambda: read_sums(sums), runs),
        "read_folder": timed(lambda: read_folder(folder), runs),
        "verify_sums": timed(lambda: verify_sums(folder, entries, list_path=sums), runs),
        "verify_sums_after_read_folder": timed(lambda: verify_sums(
            folder, entries, list_path=sums, contents=contents), runs),
    }


def against_sha256sum(folder: Path, sums: Path, runs: int) -> dict[str, object]:
    """The console script and `sha256sum -c` (the floor: one read of each file in C) run
    in turn, A B A B ..., so each ratio compares runs made while the machine was alike."""
    ours: list[float] = []
    floor: list[float] = []
    for _ in range(runs):
        ours.append(seconds(lambda: end_to_end(folder, sums)))
        floor.append(seconds(lambda: subprocess.run(
            ["sha256sum", "-c", "--quiet", str(sums)], cwd=folder, check=True)))
    ratios = [a / b for a, b in zip(ours, floor, strict=True)]
    return {"cli_verify_json": summary(ours), "sha256sum_c": summary(floor),
            "ratio_to_sha256sum": {"runs": [round(r, 2) for r in ratios],
                                   "median": round(statistics.median(ratios), 2)}}


def seconds(call: Callable[[], object]) -> float:
    started = time.perf_counter()
    call()
    return time.perf_counter() - started


def summary(values: list[float]) -> dict[str, object]:
    return {"runs_s": [round(v, 3) for v in values],
            "median_s": round(statistics.median(values), 3), "min_s": round(min(values), 3)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, nargs="+", default=[30_000, 300_000])
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--workdir", type=Path, default=Path("/tmp/lineage-bench-sums"))
    args = parser.parse_args()
    args.workdir.mkdir(parents=True, exist_ok=True)
    results: dict[str, object] = {}
    for files in args.files:
        started = time.perf_counter()
        folder, sums = folder_with_list(args.workdir, files)
        print(f"{files:,} files ready in {time.perf_counter() - started:.1f} s", file=sys.stderr)
        results[f"verify_sums_{files}"] = measure(folder, sums, files, args.runs)
        print(json.dumps(results[f"verify_sums_{files}"]), file=sys.stderr)
    out = REPO / "bench" / "out" / "sums_verify.json"
    out.parent.mkdir(exist_ok=True)
    out.write_text(json.dumps(results, indent=1) + "\n")
    print(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
