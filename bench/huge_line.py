"""Peak memory of refusing a JSONL shard with one huge line (issue: hostile input).

    .venv/bin/python bench/huge_line.py [--mb 600] [--lineage PATH] [--workdir DIR]

Writes a shard of one ordinary record and then one record whose text is `--mb` MiB of
ASCII (plain and gzip), and runs `lineage ingest corpus` on each in a fresh process (the
console script given by `--lineage`, default this checkout's), recording its exit code,
its one-line error, wall time and peak resident memory (the child's rusage, as
`/usr/bin/time` reports it). Results go to bench/out/huge_line.json.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def write_shard(path: Path, mb: int) -> None:
    chunk = b"x" * (1 << 20)
    opener = gzip.open if path.name.endswith(".gz") else open
    with opener(path, "wb") as out:  # type: ignore[operator]
        out.write(b'{"text": "an ordinary record"}\n{"text": "')
        for _ in range(mb):
            out.write(chunk)
        out.write(b'"}\n')


def run(lineage: str, store: Path, shard: Path) -> dict[str, object]:
    """One ingest in a fresh process, reaped with wait4 for its own peak memory."""
    errors = shard.with_suffix(".stderr")
    started = time.perf_counter()
    with open(errors, "wb") as err:
        child = subprocess.Popen([lineage, "--store", str(store), "ingest", "corpus",
                                  str(shard), "--corpus", "huge"],
                                 stdout=subprocess.DEVNULL, stderr=err)
        _, status, usage = os.wait4(child.pid, 0)
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    return {"exit": child.returncode, "seconds": round(time.perf_counter() - started, 2),
            "peak_rss_mb": round(usage.ru_maxrss / 1024, 1),
            "stderr": errors.read_text(errors="replace").strip()[:200]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--mb", type=int, default=600)
    parser.add_argument("--lineage", default=str(REPO / ".venv" / "bin" / "lineage"))
    parser.add_argument("--workdir", type=Path, default=None)
    args = parser.parse_args()
    work = Path(args.workdir or tempfile.mkdtemp(prefix="lineage-huge-line-"))
    work.mkdir(parents=True, exist_ok=True)
    results = {"mb": args.mb, "lineage": args.lineage, "runs": {}}
    try:
        for name in ("huge.jsonl", "huge.jsonl.gz"):
            shard = work / name
            write_shard(shard, args.mb)
            store = work / f"store-{name}"
            subprocess.run([args.lineage, "--store", str(store), "init"], check=True,
                           capture_output=True)
            results["runs"][name] = run(args.lineage, store, shard)  # type: ignore[index]
            print(name, json.dumps(results["runs"][name]))  # type: ignore[index]
    finally:
        if args.workdir is None:
            shutil.rmtree(work, ignore_errors=True)
    out = REPO / "bench" / "out"
    out.mkdir(exist_ok=True)
    (out / "huge_line.json").write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    main()
